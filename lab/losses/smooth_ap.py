"""SmoothAP (Brown et al., ECCV 2020): every Heaviside of the AP replaced by a sigmoid."""
from __future__ import annotations

from typing import Optional

from torch import Tensor

from ..core.checks import check_reduction, check_scores
from ..core.hparams import TAU, declare
from .base import RankLoss, reduce
from .engine import Block, mean_over_positives, per_query


def smooth_ap(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    tau: float = TAU.default,
    exact_rank_pos: bool = False,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - SmoothAP. scores, targets, mask: (Q, N). Returns a scalar, or (Q,) with reduction="none".

    rank(k) = 1 + sum_{j != k} sigma((s_j - s_k) / tau) and the same sum over positives for
    rank^+(k); AP = mean over positives of rank^+(k) / rank(k) (ROADMAP Eq. 1 with H = sigma).
    ``exact_rank_pos=True`` keeps the exact step for positive-positive comparisons: the
    intermediate loss of ROADMAP supp. Fig. 8a (no more opposite gradients on positives, but
    still vanishing ones). Time O(Q * P * N), memory bounded per chunk of queries (``engine``).
    Reference: ``tests/reference.py::smooth_ap_loop``.
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    TAU.check(tau)

    def block_loss(b: Block) -> Tensor:
        if exact_rank_pos:
            rank_pos = b.count_at_least(b.positives())  # k itself: H(0) = 1
            rank_all = rank_pos + b.sigmoid_sums(b.negatives(), tau)
        else:
            # The item k itself contributes sigma(0) = 0.5 to both sums; "1 + sum_{j != k}" = 0.5 + sum_j.
            rank_all = 0.5 + b.sigmoid_sums(b.all_items(), tau)
            rank_pos = 0.5 + b.sigmoid_sums(b.positives(), tau)
        # clamp only matters on padding columns (0 / 0 with the exact rank^+); real positives have rank >= 1.
        return 1.0 - mean_over_positives(rank_pos / rank_all.clamp_min(0.5), b)

    losses = per_query(block_loss, scores, targets, mask, chunk_size)
    return reduce(losses, (targets & mask).any(1), reduction)


class SmoothAP(RankLoss):
    """Embedding-level SmoothAP. ``include_self=True`` counts the query as its own positive,
    as the reference implementation does (it optimises a different, inflated AP)."""

    functional = staticmethod(smooth_ap)
    declared = declare(TAU)

    def __init__(self, tau: float = TAU.default, exact_rank_pos: bool = False, *, include_self: bool = False,
                 reduction: str = "mean", chunk_size: Optional[int] = None) -> None:
        super().__init__()
        self.save_hparams(locals())
