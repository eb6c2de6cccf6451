"""The loss engine: the layer under every rank loss, which reads like its paper on top of it.

A loss file states its equation as a function of one ``Block`` (a chunk of queries, its positives
and the sums over items of a step surrogate) and hands it to ``per_query``. Below that line sit:

* ``plan``  which path and how big, decided once per call (``plan.plan_for`` -> a frozen ``Plan``;
  ``plan.cpu_sized()`` runs the CPU's engine on any device);
* ``blocks``  the block loop: ``per_query``, ``Block``, ``Items``, ``with_gradient``;
* ``pair_sums``  the PyTorch tiles of the sums, the reference of
* ``fused_sums``  the same sums as fused Triton kernels (CUDA; Triton's interpreter in the tests);
* ``histograms``  FastAP's and SoftBinAP's soft histograms, with the kernels of ``fused_histograms``.

The engine imports ``lab.core`` and itself, never a loss (``tests/test_layers.py``).
"""
from .blocks import Block, Items, mean_over_positives, per_query, row_chunks, with_gradient
from .histograms import binned_ap_loss
from .plan import Plan, cpu_sized, plan_for

__all__ = ["Block", "Items", "per_query", "mean_over_positives", "with_gradient", "row_chunks", "binned_ap_loss",
           "Plan", "plan_for", "cpu_sized"]
