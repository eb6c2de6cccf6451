"""Input checks shared by the losses, the metrics and the data: one message per kind of bad input.

Score level: ``scores`` (Q, N) similarities (higher = closer), ``targets`` (Q, N) bool
relevance, ``mask`` (Q, N) bool (False = item ignored, e.g. the query itself). Embedding
level: ``embeddings`` (B, D) float, ``labels`` (B,) or hierarchical (B, L) integers, finest
level first. Every check raises a ``ValueError`` that names the argument and what is accepted.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional, Sequence, Union

import torch
from torch import Tensor

REDUCTIONS = ("mean", "none")


# ------------------------------------------------------------------------------ numbers
def check_positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def check_int(name: str, value, minimum: int = 1) -> int:
    """``value`` as an int (numpy integers welcome) if it is an integer >= minimum, else ValueError."""
    # bool is an int subclass: True would silently mean 1.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_chunk_size(chunk_size: Optional[int]) -> None:
    """Queries per chunk (losses and metrics): None (automatic) or an integer >= 1."""
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size must be None or an integer >= 1, got {chunk_size!r}")


def check_ks(ks: Union[int, Sequence[int]], name: str = "ks") -> tuple[int, ...]:
    """The k of R@k: one positive integer or a non-empty list of them -> a tuple."""
    values = (ks,) if isinstance(ks, int) else tuple(ks) if isinstance(ks, (list, tuple)) else None
    if not values or any(not isinstance(k, int) or isinstance(k, bool) or k < 1 for k in values):
        raise ValueError(f"{name} must be a non-empty list of positive integers (or one), got {ks!r}")
    return values


def check_reduction(reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")


# ------------------------------------------------------------------------------ tensors
def check_tensor(name: str, x: Tensor, what: str = "a torch.Tensor") -> None:
    """``x`` is a tensor that holds values: dense, not nested, not a meta tensor (checked
    before any ``.all()`` / ``.item()``, which a meta tensor cannot answer)."""
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be {what}, got {type(x).__name__}")
    if x.is_meta:
        raise ValueError(f"{name} is a meta tensor (a shape without values, e.g. built under device='meta'): "
                         f"give a tensor with data on cpu or cuda")
    if x.is_nested:
        raise ValueError(f"{name} is a nested tensor: give a dense 2-D tensor (pad, or one call per query)")
    if x.layout != torch.strided:
        raise ValueError(f"{name} must be a dense tensor, got layout {x.layout}: use .to_dense()")
    if x.is_quantized:
        raise ValueError(f"{name} is a quantized tensor: use .dequantize()")


# ------------------------------------------------------------------------------ score level
def as_bool(name: str, x: Tensor, shape: torch.Size, device: torch.device) -> Tensor:
    """``x`` as a bool tensor of ``shape`` on ``device`` (integers 0/1 accepted)."""
    check_tensor(name, x)
    if x.shape != shape:
        raise ValueError(f"{name} must have the shape of scores {tuple(shape)}, got {tuple(x.shape)}")
    if x.device != device:
        raise ValueError(f"{name} is on {x.device} but scores are on {device}; put them on one device")
    if x.dtype == torch.bool:
        return x
    if x.is_floating_point() or x.is_complex() or not ((x == 0) | (x == 1)).all():
        raise ValueError(f"{name} must be a bool tensor (or integers 0/1), got dtype {x.dtype}")
    return x.bool()


# A rank loss sums score differences over a batch (Sup-AP's H^- times rho = 1e6): scores beyond
# this overflow float32 there. Cosine similarities lie in [-1, 1]; metrics only compare scores.
LOSS_SCORE_LIMIT = 1e6


def check_scores(scores: Tensor, targets: Tensor, mask: Optional[Tensor],
                 limit: Optional[float] = LOSS_SCORE_LIMIT) -> tuple[Tensor, Tensor, Tensor]:
    """Validate score-level inputs; return (float scores, bool targets, bool mask).

    Half-precision scores are promoted to float32: a rank loss sums thousands of terms.
    ``limit``: the largest |score| accepted (None: any finite score, for the metrics).
    """
    check_tensor("scores", scores)
    if scores.dim() != 2:
        raise ValueError(f"scores must be 2-D (queries, items), got shape {tuple(scores.shape)}")
    if scores.numel() == 0:
        raise ValueError(f"scores is empty (shape {tuple(scores.shape)}): need at least one query and one item")
    if not scores.is_floating_point():
        raise ValueError(f"scores must be a floating-point tensor, got dtype {scores.dtype}")
    # NaN if any is NaN: one pass for both checks, and no |scores| copy (a (Q, N) float temporary: 10x the pass)
    low, high = torch.aminmax(scores.detach())
    largest = float(torch.maximum(-low, high))
    if not math.isfinite(largest):
        raise ValueError("scores contain NaN or infinity; check the embeddings that produced them")
    if limit is not None and largest > limit:
        raise ValueError(f"scores must lie in [-{limit:g}, {limit:g}] for a rank loss (cosine similarities are in "
                         f"[-1, 1]), got a largest |score| of {largest:g}")
    if scores.dtype in (torch.float16, torch.bfloat16):
        scores = scores.float()
    targets = as_bool("targets", targets, scores.shape, scores.device)
    mask = torch.ones_like(targets) if mask is None else as_bool("mask", mask, scores.shape, scores.device)
    return scores, targets, mask


# ------------------------------------------------------------------------------ embedding level
def check_embeddings(name: str, x: Tensor) -> None:
    check_tensor(name, x)
    if x.dim() != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D tensor (batch, dim), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be floating point, got dtype {x.dtype}")
    # Each row's largest |entry|: NaN or inf if the row holds one, 0 if the row has no direction
    # (lab.core.normalize.unit_rows needs one). One wait on the device for both checks.
    largest = x.detach().abs().amax(1)
    low, high = (float(v) for v in torch.stack(torch.aminmax(largest)).tolist())
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"{name} contain NaN or infinity (did the model diverge?)")
    if low == 0:
        raise ValueError(f"{name} has an all-zero row (row {int((largest == 0).nonzero()[0])}): a cosine needs a "
                         "direction; give rows with at least one nonzero entry")


def check_labels(name: str, labels: Tensor, size: int, device: torch.device) -> Tensor:
    """Labels are (B,) or hierarchical (B, L) integers, finest level first."""
    check_tensor(name, labels, "a torch.Tensor of integer class ids")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer tensor of class ids, got dtype {labels.dtype}")
    if labels.dim() not in (1, 2) or labels.shape[0] != size:
        raise ValueError(f"{name} must have shape ({size},) or ({size}, levels), got {tuple(labels.shape)}")
    if labels.dim() == 2 and labels.shape[1] == 0:
        raise ValueError(f"{name} has zero label levels: need at least one column")
    if labels.device != device:
        raise ValueError(f"{name} is on {labels.device} but the embeddings are on {device}")
    return labels


def check_references(embeddings: Tensor, labels: Tensor, ref_embeddings: Optional[Tensor],
                     ref_labels: Optional[Tensor], names: Sequence[str] = ("embeddings", "labels", "ref_embeddings",
                                                                         "ref_labels")
                     ) -> tuple[Tensor, Tensor, Tensor, bool]:
    """Validate queries and an optional reference set (the gallery).

    Returns (labels, ref_embeddings, ref_labels, self_retrieval): without references the
    queries retrieve from themselves. ``names`` are the caller's argument names, for the messages.
    """
    emb_name, lab_name, ref_name, ref_lab_name = names
    check_embeddings(emb_name, embeddings)
    labels = check_labels(lab_name, labels, embeddings.shape[0], embeddings.device)
    if (ref_embeddings is None) != (ref_labels is None):
        raise ValueError(f"{ref_name} and {ref_lab_name} must be given together (or neither)")
    if ref_embeddings is None:
        return labels, embeddings, labels, True
    check_embeddings(ref_name, ref_embeddings)
    if ref_embeddings.shape[1] != embeddings.shape[1]:
        raise ValueError(f"{ref_name} has dim {ref_embeddings.shape[1]} but {emb_name} has dim {embeddings.shape[1]}")
    if ref_embeddings.device != embeddings.device:
        raise ValueError(f"{ref_name} are on {ref_embeddings.device}, {emb_name} on {embeddings.device}")
    ref_labels = check_labels(ref_lab_name, ref_labels, ref_embeddings.shape[0], embeddings.device)
    levels = [1 if x.dim() == 1 else x.shape[1] for x in (labels, ref_labels)]
    if levels[0] != levels[1]:
        raise ValueError(f"{ref_lab_name} levels {tuple(ref_labels.shape)} do not match {lab_name} "
                         f"{tuple(labels.shape)}: "
                         f"{lab_name} have L={levels[0]} levels but {ref_lab_name} have L={levels[1]}")
    return labels, ref_embeddings, ref_labels, False


def fine(labels: Tensor) -> Tensor:
    """The finest label level: labels itself if (B,), column 0 if (B, L)."""
    return labels if labels.dim() == 1 else labels[:, 0]
