"""Graded relevance from hierarchical labels (SupRank Sec. V), shared by losses and metrics.

Labels are (B, L) integers, finest level first (column 0), or (B,) for L = 1. For a query q
and an item k, the *semantic level* l in [0, L] is given by the deepest label column they
share: l = L - i for the first column i with equal labels, 0 if none (SupRank's partition
Omega^(0..L): Omega^(L) same fine class, Omega^(0) = negatives). For labels that form a
tree (equal at column i implies equal at every coarser column) l is the number of columns
shared. The relevance of k is then a function of l and of how many items share each level:

* ``"hap"`` Eq. 20: rel = (l / L)^alpha / |Omega^(l)| (H-AP, HAPPIER);
* ``"wap"`` Property 1 (Appendix B-B3): rel = sum_{p <= l} w_p / |Omega^(+,p)|, with which
  H-AP equals the weighted sum of the per-level APs, sum_l w_l AP^(l);
* ``"ndcg"`` Sec. V-B: rel = 2^l - 1.

Level sizes |Omega^(l)| count the items of the query's retrieval set, i.e. those the mask keeps.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch
from torch import Tensor

from .checks import as_bool, check_scores, check_tensor

RELEVANCE_KINDS = ("hap", "wap", "ndcg")


# --------------------------------------------------------------------------- levels
def num_levels(labels: Tensor) -> int:
    """L: 1 for (B,) labels, the number of columns for (B, L) labels."""
    return 1 if labels.dim() == 1 else labels.shape[1]


def shared_levels(labels: Tensor, ref_labels: Tensor, items: Optional[Tensor] = None) -> Tensor:
    """Semantic level l in [0, L] of every (query, item) pair -> (Q, N) long.

    labels (Q,) or (Q, L); ref_labels (N,) or (N, L). ``items`` (Q, M), optional: for each
    query, the indices of the reference items to compare with (result (Q, M)).
    Memory O(Q * N): one label column at a time.
    """
    for name, x in (("labels", labels), ("ref_labels", ref_labels)):
        if not isinstance(x, Tensor) or x.dim() not in (1, 2) or x.is_floating_point() or x.dtype == torch.bool:
            raise ValueError(f"{name} must be a (B,) or (B, L) integer tensor, got "
                             f"{getattr(x, 'dtype', type(x).__name__)} {tuple(getattr(x, 'shape', ()))}")
    if num_levels(labels) != num_levels(ref_labels):
        raise ValueError(f"labels have L={num_levels(labels)} levels but ref_labels have L={num_levels(ref_labels)}; "
                         "give both the same label columns")
    q = labels.view(len(labels), -1)
    r = ref_labels.view(len(ref_labels), -1).to(q.device)
    num = q.shape[1]
    levels = torch.zeros((), dtype=torch.long, device=q.device)
    for column in reversed(range(num)):  # coarsest first, so the deepest shared column wins
        ref_column = r[:, column][None, :] if items is None else r[:, column][items]
        levels = torch.where(ref_column == q[:, column, None], num - column, levels)
    return levels


def _check_levels(levels: Tensor, num: Optional[int], mask: Optional[Tensor]) -> Tensor:
    """Validate (Q, N) integer levels in [0, num]; return the bool mask (all True if None)."""
    if not isinstance(levels, Tensor) or levels.dim() != 2 or levels.is_floating_point() or levels.dtype == torch.bool:
        raise ValueError(f"levels must be a (Q, N) integer tensor, got {getattr(levels, 'shape', levels)!r}")
    if num is not None and not (isinstance(num, int) and num >= 1):
        raise ValueError(f"num_levels must be an integer >= 1, got {num!r}")
    if bool((levels < 0).any()) or (num is not None and bool((levels > num).any())):
        raise ValueError(f"levels must lie in [0, {num if num is not None else 'L'}]")
    return torch.ones(levels.shape, dtype=torch.bool, device=levels.device) if mask is None else \
        as_bool("mask", mask, levels.shape, levels.device)


def level_sizes(levels: Tensor, num: int, mask: Tensor) -> Tensor:
    """(Q, L + 1): |Omega^(l)| per query, counting the items the mask keeps."""
    counts = torch.zeros(len(levels), num + 1, device=levels.device)
    return counts.scatter_add_(1, levels.long(), mask.float())


# ------------------------------------------------------------------------ relevance
def check_alpha(alpha: float) -> None:
    if not (isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")


def check_relevance_kind(kind: str, alpha: float, weights: Optional[Sequence[float]], name: str = "kind") -> None:
    """Validate a relevance recipe; the number of levels of ``weights`` is checked when labels arrive."""
    if kind not in RELEVANCE_KINDS:
        raise ValueError(f"{name} must be one of {RELEVANCE_KINDS}, got {kind!r}")
    check_alpha(alpha)
    if weights is not None:
        check_level_weights(weights, len(weights))


def hap_relevance(levels: Tensor, num: int, mask: Optional[Tensor] = None, alpha: float = 1.0) -> Tensor:
    """Eq. 20: rel = (l / L)^alpha / |Omega^(l)|; 0 for l = 0 and for masked items. -> (Q, N) float32."""
    mask = _check_levels(levels, num, mask)
    check_alpha(alpha)
    weight = (torch.arange(num + 1, device=levels.device, dtype=torch.float32) / num) ** alpha
    weight[0] = 0.0  # negatives, also for alpha = 0
    table = weight / level_sizes(levels, num, mask).clamp_min(1)
    return table.gather(1, levels.long()) * mask


def check_level_weights(weights: Optional[Sequence[float]], num: int) -> Tensor:
    """Property 1's weights, indexed like the label columns (0 = finest); default uniform 1/L."""
    if weights is None:
        return torch.full((num,), 1.0 / num)
    try:
        w = torch.as_tensor([float(x) for x in weights], dtype=torch.float64)
    except (TypeError, ValueError):
        raise ValueError(f"weights must be a sequence of numbers, got {weights!r}") from None
    if w.shape != (num,) or not bool(torch.isfinite(w).all()) or bool((w < 0).any()) or abs(float(w.sum()) - 1) > 1e-6:
        raise ValueError(f"weights must be {num} numbers >= 0 summing to 1 (one per label level), got {weights!r}")
    return w.float()


def wap_relevance(levels: Tensor, num: int, mask: Optional[Tensor] = None,
                  weights: Optional[Sequence[float]] = None) -> Tensor:
    """Property 1: rel(l) = sum_{p=1..l} w_p / |Omega^(+,p)|, Omega^(+,p) = items of level >= p. -> (Q, N).

    ``weights[i]`` weighs the AP at label column i (0 = finest), i.e. paper level p = L - i.
    """
    mask = _check_levels(levels, num, mask)
    w = check_level_weights(weights, num).to(levels.device).flip(0)  # w[p - 1] for p = 1..L
    at_least = level_sizes(levels, num, mask).flip(1).cumsum(1).flip(1)[:, 1:]  # |Omega^(+,p)|, p = 1..L
    table = torch.cat([torch.zeros_like(at_least[:, :1]), (w / at_least.clamp_min(1)).cumsum(1)], 1)
    return table.gather(1, levels.long()) * mask


def ndcg_relevance(levels: Tensor, mask: Optional[Tensor] = None) -> Tensor:
    """Sec. V-B: rel = 2^l - 1 (0 for negatives and masked items). -> (Q, N) float32."""
    mask = _check_levels(levels, None, mask)
    return (2.0 ** levels.float() - 1.0) * mask


def build_relevance(labels: Tensor, ref_labels: Tensor, mask: Optional[Tensor] = None, kind: str = "hap",
                    alpha: float = 1.0, weights: Optional[Sequence[float]] = None) -> Tensor:
    """(Q, N) relevance of every reference item to every query, from (hierarchical) labels.

    kind: ``"hap"`` (Eq. 20, uses ``alpha``), ``"wap"`` (Property 1, uses ``weights``) or
    ``"ndcg"`` (2^l - 1). Binary labels (L = 1) give the binary case: rel > 0 iff same class.
    """
    check_relevance_kind(kind, alpha, weights)
    levels = shared_levels(labels, ref_labels)
    num = num_levels(labels)
    if kind == "hap":
        return hap_relevance(levels, num, mask, alpha)
    if kind == "wap":
        return wap_relevance(levels, num, mask, weights)
    return ndcg_relevance(levels, mask)


# ------------------------------------------------------------------------ score level
def check_relevance(scores: Tensor, relevance: Tensor, mask: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """Validate graded inputs; return (float scores, relevance in the scores' dtype, bool mask).

    relevance (Q, N): finite numbers >= 0 (bool or integer tensors are read as 0/1 or levels);
    > 0 marks the positives. Masked items get relevance 0.
    """
    check_tensor("relevance", relevance)
    if isinstance(scores, Tensor) and relevance.shape != scores.shape:
        raise ValueError(f"relevance must have the shape of scores {tuple(scores.shape)}, got {tuple(relevance.shape)}")
    if relevance.is_complex():
        raise ValueError(f"relevance must be real, got dtype {relevance.dtype}")
    rel = relevance.detach()
    if rel.is_floating_point() and not bool(torch.isfinite(rel).all()):
        raise ValueError("relevance contains NaN or infinity")
    if bool((rel < 0).any()):
        raise ValueError(f"relevance must be >= 0 (0 = negative), got a minimum of {float(rel.min())}")
    scores, _, mask = check_scores(scores, rel > 0, mask)
    return scores, rel.to(scores.dtype) * mask, mask


def ideal_dcg(relevance: Tensor) -> Tensor:
    """iDCG (Eq. 23): DCG of the items sorted by decreasing relevance, positions 1, 2, ... -> (Q,)."""
    ideal = relevance.sort(1, descending=True).values
    positions = torch.arange(2, relevance.shape[1] + 2, device=relevance.device, dtype=relevance.dtype)
    return (ideal / torch.log2(positions)).sum(1)
