"""The embedding-level call, RankLab's and pytorch-metric-learning's (PML), resolved to one form.

RankLab's call: ``loss(embeddings, labels, ref_embeddings=None, ref_labels=None, mask=None)``, the references
and the mask by keyword. PML's call, which its trainers (``MetricLossOnly``), ``MultipleLosses``,
``CrossBatchMemory`` and ``DistributedLossWrapper`` make: ``loss(embeddings, labels, indices_tuple, ref_emb,
ref_labels)``, positionally. Every embedding-level loss takes both::

    forward(embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None, *, ref_embeddings=None,
            mask=None)

``ref_emb`` and ``ref_embeddings`` are one argument under two names (PML's and ours).

Which comparisons a miner's ``indices_tuple`` keeps. A rank loss ranks, for each query (a row of the
scores), the items of the reference set (its columns; the batch itself without references). A miner's tuple
keeps only the (anchor, item) entries it names and masks every other one:

- pairs ``(a1, p, a2, n)``: the entries ``(a1[i], p[i])`` and ``(a2[j], n[j])``;
- triplets ``(a, p, n)``: the entries ``(a[i], p[i])`` and ``(a[i], n[i])``.

So a query's list is the union of the items mined with it as anchor, ranked among themselves; a query with
no mined positive gets loss 0 and is left out of the mean. Which items are positives still comes from the
labels (PML's miners mine a positive as a same-label item, so the two agree). The tuple and an explicit
``mask`` combine: an entry counts when both keep it. Without references the query itself stays masked.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional, Sequence

import torch
from torch import Tensor

from ..core.checks import as_bool, check_embeddings

PAIRS = ("anchors1", "positives", "anchors2", "negatives")
TRIPLETS = ("anchors", "positives", "negatives")


def _index_tensor(i: int, name: str, x: Any, size: int, device: torch.device) -> Tensor:
    """``x``, a miner's 1-D integer index tensor into a set of ``size`` rows, on ``device``."""
    if not isinstance(x, Tensor) or x.dim() != 1 or x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        got = f"dtype {x.dtype}, shape {tuple(x.shape)}" if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"indices_tuple[{i}] ({name}) must be a 1-D integer tensor of indices, got {got}")
    if x.numel() and (int(x.min()) < 0 or int(x.max()) >= size):
        raise ValueError(f"indices_tuple[{i}] ({name}) must hold indices in [0, {size}), got values in "
                         f"[{int(x.min())}, {int(x.max())}]")
    return x.to(device=device, dtype=torch.long)


def mined_mask(indices_tuple: Sequence[Tensor], num_queries: int, num_refs: int, device: torch.device) -> Tensor:
    """The (num_queries, num_refs) bool mask that keeps the entries a miner's tuple names (module docstring)."""
    if not isinstance(indices_tuple, (tuple, list)) or len(indices_tuple) not in (3, 4):
        got = f"a {type(indices_tuple).__name__} of {len(indices_tuple)}" if isinstance(
            indices_tuple, (tuple, list)) else type(indices_tuple).__name__
        raise ValueError("indices_tuple must be a miner's output, (anchors, positives, negatives) or (anchors1, "
                         f"positives, anchors2, negatives), or None; got {got}")
    names = TRIPLETS if len(indices_tuple) == 3 else PAIRS
    sizes = [num_refs if name in ("positives", "negatives") else num_queries for name in names]
    idx = [_index_tensor(i, name, x, size, device)
           for i, (name, x, size) in enumerate(zip(names, indices_tuple, sizes))]
    if len(idx) == 3:
        a, p, n = idx
        a1, a2 = a, a
        if not len(a) == len(p) == len(n):
            raise ValueError(f"indices_tuple's anchors, positives and negatives must have one length, got "
                             f"{len(a)}, {len(p)}, {len(n)}")
    else:
        a1, p, a2, n = idx
        if len(a1) != len(p) or len(a2) != len(n):
            raise ValueError(f"indices_tuple's anchors1 and positives ({len(a1)}, {len(p)}) and anchors2 and negatives "
                             f"({len(a2)}, {len(n)}) must have pairwise equal lengths")
    mask = torch.zeros(num_queries, num_refs, dtype=torch.bool, device=device)
    mask[a1, p] = True
    mask[a2, n] = True
    return mask


def on_device(x: Optional[Tensor], device: torch.device) -> Optional[Tensor]:
    """Labels on the embeddings' device, as PML's losses do it: its trainers keep labels on the CPU while the
    model runs on a GPU. Only real tensors move (a meta tensor has no values to copy: the checks name it)."""
    if isinstance(x, Tensor) and x.device != device and not x.is_meta and device.type != "meta":
        return x.to(device)
    return x


def resolve_call(embeddings: Tensor, labels: Tensor, indices_tuple: Any, ref_emb: Optional[Tensor],
                 ref_labels: Optional[Tensor], ref_embeddings: Optional[Tensor], mask: Optional[Tensor]
                 ) -> tuple[Tensor, Optional[Tensor], Optional[Tensor], Optional[Tensor]]:
    """(labels, ref_embeddings, ref_labels, mask) of either call, the miner's tuple turned into the mask."""
    if isinstance(indices_tuple, Tensor):
        # The positional call RankLab documented before PML's order: loss(embeddings, labels, refs, ref_labels).
        # A tensor is never a miner's output (a tuple), so the old call is recognised, not guessed.
        if ref_embeddings is not None or ref_labels is not None:
            raise ValueError("indices_tuple is a tensor: pass the references as ref_emb=... (or ref_embeddings=...) "
                             "and ref_labels=..., and indices_tuple as a miner's tuple or None")
        # stacklevel: resolve_call < forward < nn.Module's two call frames < the caller's line.
        warnings.warn("loss(embeddings, labels, ref_embeddings, ref_labels) by position is deprecated: the third "
                      "argument is now pytorch-metric-learning's indices_tuple; pass ref_embeddings=..., "
                      "ref_labels=... by keyword", DeprecationWarning, stacklevel=5)
        indices_tuple, ref_embeddings, ref_labels, ref_emb = None, indices_tuple, ref_emb, None
    if ref_emb is not None and ref_embeddings is not None:
        raise ValueError("give ref_emb or ref_embeddings (one argument: pytorch-metric-learning's name and "
                         "RankLab's), not both")
    refs = ref_emb if ref_emb is not None else ref_embeddings
    device = embeddings.device if isinstance(embeddings, Tensor) else torch.device("cpu")
    labels, ref_labels = on_device(labels, device), on_device(ref_labels, device)
    if indices_tuple is not None:
        check_embeddings("embeddings", embeddings)
        if refs is not None:
            check_embeddings("ref_emb", refs)
        shape = (embeddings.shape[0], (embeddings if refs is None else refs).shape[0])
        mined = mined_mask(indices_tuple, *shape, device)
        mask = mined if mask is None else as_bool("mask", mask, torch.Size(shape), device) & mined
    return labels, refs, ref_labels, mask
