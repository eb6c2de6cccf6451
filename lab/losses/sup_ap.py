"""Sup-AP (ROADMAP Eq. 5, SupRank Eq. 11): exact rank^+, SupRank's H^- on negatives."""
from __future__ import annotations

from typing import Optional

from torch import Tensor

from ..core.checks import check_reduction, check_scores
from ..core.hparams import DELTA, RHO, TAU, declare
from ..core.steps import check_h_minus
from .base import RankLoss, reduce
from .engine import Block, mean_over_positives, per_query


def sup_ranks(b: Block, tau: float, rho: float, delta: float) -> tuple[Tensor, Tensor]:
    """(rank^+, rank^-_s) of each positive, both (c, P) (ROADMAP Eq. 3 and 5).

    rank^+ counts positives with s_j >= s_k (k itself included) with the exact step and no
    gradient: its gradient would push positives down (ROADMAP Sec. 3.1). rank^-_s sums H^-
    over negatives and carries all the gradient.
    """
    rank_pos = b.count_at_least(b.positives())
    rank_neg = b.h_minus_sums(b.negatives(), tau, rho, delta)
    return rank_pos, rank_neg


def sup_ap(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    tau: float = TAU.default,
    rho: float = RHO.default,
    delta: float = DELTA.default,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - Sup-AP. scores, targets, mask: (Q, N). Scalar, or (Q,) with reduction="none".

    Sup-AP = mean over positives k of rank^+(k) / (rank^+(k) + rank^-_s(k)). Because
    H^- >= H, the loss is an upper bound of the exact AP loss 1 - AP (ROADMAP Sec. 3.1).
    Reference: ``tests/reference.py::sup_ap_loop``.
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    check_h_minus(tau, rho, delta)

    def block_loss(b: Block) -> Tensor:
        rank_pos, rank_neg = sup_ranks(b, tau, rho, delta)
        # clamp only matters on padding rows (0 / 0); real positives have rank^+ >= 1.
        return 1.0 - mean_over_positives(rank_pos / (rank_pos + rank_neg).clamp_min(1.0), b)

    losses = per_query(block_loss, scores, targets, mask, chunk_size)
    return reduce(losses, (targets & mask).any(1), reduction)


class SupAP(RankLoss):
    """Embedding-level Sup-AP (ROADMAP without the calibration term)."""

    functional = staticmethod(sup_ap)
    declared = declare(TAU, RHO, DELTA)

    def __init__(self, tau: float = TAU.default, rho: float = RHO.default, delta: float = DELTA.default, *,
                 include_self: bool = False, reduction: str = "mean", chunk_size: Optional[int] = None) -> None:
        super().__init__()
        self.save_hparams(locals())
