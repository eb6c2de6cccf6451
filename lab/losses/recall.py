"""Recall@k surrogates: Smooth-R@k (Patel et al., CVPR 2022) and Sup-R@k (SupRank Eq. 16).

Both write TR@k = (1 / min(|P|, k)) sum over positives p of H(k - rank(p)) (SupRank Eq. 15),
replace the outer step by sigma((k - rank) / tau_star) and average over k in ``ks``. They
differ in rank(p): all sigmoids (Smooth-R@k) or SupRank's exact rank^+ plus rank^-_s with H^-.
Queries may have any number of positives: positives are padded per chunk, not per batch.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

import torch
from torch import Tensor

from ..core.checks import check_ks, check_reduction, check_scores
from ..core.hparams import DELTA, RHO, TAU, TAU_STAR, declare
from ..core.steps import check_h_minus, sigmoid
from .base import RankLoss, reduce
from .engine import Block, per_query
from .sup_ap import sup_ranks

DEFAULT_KS = (1, 2, 4, 8, 16)


def recall_loss_from_ranks(ranks: Tensor, b: Block, ks: tuple[int, ...], tau_star: float) -> Tensor:
    """1 - mean over k of sum_p sigma((k - rank(p)) / tau_star) / min(|P|, k). ranks (c, P) -> (c,).

    The soft count of positives in the top k is capped at k (as in Patel et al.'s code), so the
    estimated recall never exceeds 1 when soft ranks of tied positives are below k.
    """
    kk = torch.tensor(ks, dtype=ranks.dtype, device=ranks.device)
    soft_hits = sigmoid(kk - ranks[:, :, None], tau_star) * b.pos_valid[:, :, None]  # (c, P, K)
    hits = torch.minimum(soft_hits.sum(1), kk)  # (c, K)
    recall = hits / torch.minimum(kk, b.num_pos[:, None].to(kk.dtype)).clamp_min(1)
    return 1.0 - recall.mean(1)


def _recall_loss(scores: Tensor, targets: Tensor, mask: Optional[Tensor], reduction: str, ks: Sequence[int],
                 tau_star: float, chunk_size: Optional[int], rank_fn: Callable[[Block], Tensor]) -> Tensor:
    """Shared body of the two R@k losses; ``rank_fn`` gives the (c, P) ranks of a block's positives."""
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    TAU_STAR.check(tau_star)
    ks = check_ks(ks)
    losses = per_query(lambda b: recall_loss_from_ranks(rank_fn(b), b, ks, tau_star), scores, targets, mask, chunk_size)
    return reduce(losses, (targets & mask).any(1), reduction)


def smooth_recall(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    tau: float = TAU.default,
    tau_star: float = TAU_STAR.default,
    ks: Sequence[int] = DEFAULT_KS,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - Smooth-R@k (Patel et al.'s RS@k). scores, targets, mask: (Q, N). Scalar or (Q,).

    rank(p) = 1 + sum_{j != p} sigma((s_j - s_p) / tau) over every kept item (positives too);
    tau = 0.01 ranks, tau_star = 1 counts the positives in the top k. Memory O(Q * P * N), chunked.
    Reference: ``tests/reference_graded.py::smooth_recall_loop``.
    """
    TAU.check(tau)

    def ranks(b: Block) -> Tensor:
        return 0.5 + b.sigmoid_sums(b.all_items(), tau)  # p itself adds sigma(0) = 0.5

    return _recall_loss(scores, targets, mask, reduction, ks, tau_star, chunk_size, ranks)


def sup_recall(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    tau: float = TAU.default,
    rho: float = RHO.default,
    delta: float = DELTA.default,
    tau_star: float = TAU_STAR.default,
    ks: Sequence[int] = DEFAULT_KS,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - Sup-R@k (Eq. 16, averaged over ``ks``). scores, targets, mask: (Q, N). Scalar or (Q,).

    rank(p) = rank^+(p) (exact, no gradient) + rank^-_s(p) (H^- over negatives, Eq. 4-5): a
    negative above a positive keeps receiving gradient (slope rho) however far above it is.
    Reference: ``tests/reference_graded.py::sup_recall_loop``.
    """
    check_h_minus(tau, rho, delta)

    def ranks(b: Block) -> Tensor:
        rank_pos, rank_neg = sup_ranks(b, tau, rho, delta)
        return rank_pos + rank_neg

    return _recall_loss(scores, targets, mask, reduction, ks, tau_star, chunk_size, ranks)


def ks_rule(hparams: Mapping[str, Any]) -> None:
    """The rule of the R@k losses (``RankLoss.rules``): ks, which has no declared range, a list of k >= 1."""
    check_ks(hparams["ks"])


class SmoothRecall(RankLoss):
    """Embedding-level Smooth-R@k (Patel et al.), the sigmoid baseline of SupRank Tab. II."""

    functional = staticmethod(smooth_recall)
    declared = declare(TAU, TAU_STAR)
    rules = (ks_rule,)

    def __init__(self, tau: float = TAU.default, tau_star: float = TAU_STAR.default, ks: Sequence[int] = DEFAULT_KS, *,
                 include_self: bool = False, reduction: str = "mean", chunk_size: Optional[int] = None) -> None:
        super().__init__()
        ks = check_ks(ks)
        self.save_hparams(locals())


class SupRecall(RankLoss):
    """Embedding-level Sup-R@k (SupRank Eq. 16)."""

    functional = staticmethod(sup_recall)
    declared = declare(TAU, RHO, DELTA, TAU_STAR)
    rules = (ks_rule,)

    def __init__(self, tau: float = TAU.default, rho: float = RHO.default, delta: float = DELTA.default,
                 tau_star: float = TAU_STAR.default, ks: Sequence[int] = DEFAULT_KS, *, include_self: bool = False,
                 reduction: str = "mean",
                 chunk_size: Optional[int] = None) -> None:
        super().__init__()
        ks = check_ks(ks)
        self.save_hparams(locals())
