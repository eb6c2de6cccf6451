"""bench/tf32.py: the effect of emulated TF32 on a loss, and the section it writes."""
from __future__ import annotations

import torch

from bench import tf32


def test_tf32_moves_a_loss_a_little_and_its_gradient_in_the_same_direction():
    r = tf32.loss_effect("smooth_ap", 64)
    assert r["value"] != r["value_tf32"]  # the emulation reaches the loss's products
    assert 0 < r["value_rel"] < 1e-3 and 0 < r["grad_rel"] < 0.1


def test_the_section_quotes_the_gpu_measurement_as_such():
    losses = [tf32.loss_effect("fast_ap", 32)]
    run = {"R@1": 0.5, "mAP@R": 0.2, "loss": 0.4}
    training = {"steps": 2, "eval_items": 100, "float32": run, "tf32": {**run, "R@1": 0.51},
                "weights_apart": 1e-3}
    text = tf32.markdown(losses, training, 5.0)
    assert "emulated on CPU" in text and tf32.GPU_NOTE in text
    assert "| fast_ap |" in text and "| TF32 (emulated) | 0.510 |" in text
    assert torch.cuda.is_available() or "NVIDIA" not in text.split(tf32.GPU_NOTE)[1]  # no other GPU figure
