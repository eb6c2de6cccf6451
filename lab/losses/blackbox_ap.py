"""BlackBox AP (Rolinek et al., CVPR 2020): exact ranks forward, blackbox differentiation backward."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..core.checks import check_reduction, check_scores
from ..core.hparams import LAMBDA_VAL, MARGIN, declare
from .base import RankLoss, reduce


def descending_ranks(scores: Tensor) -> Tensor:
    """1-based rank of every item when each row is sorted by decreasing score (ties by index)."""
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    positions = torch.arange(1, scores.shape[1] + 1, device=scores.device, dtype=scores.dtype)
    return torch.empty_like(scores).scatter_(1, order, positions.expand_as(scores).contiguous())


class BlackBoxRank(torch.autograd.Function):
    """Normalised ranks r(s) / N as a combinatorial solver: r(s) = argmin_pi <s, pi> over permutations.

    Backward (Vlastelica et al., ICLR 2020): with g = dL/dr, re-rank the perturbed scores
    s' = s + lambda * g and return -(r(s) - r(s')) / lambda, the gradient of a piecewise-
    linear interpolation of L(r(s)). It uses g, so a loss weight or an AMP scale reaches the
    scores; loss * c with lambda / c gives exactly gradient * c. Ranks are divided by N as in
    the authors' code, so ``lambda_val`` keeps their meaning whatever the batch size.
    """

    @staticmethod
    def forward(ctx, scores: Tensor, lambda_val: float) -> Tensor:
        ranks = descending_ranks(scores) / scores.shape[1]
        ctx.save_for_backward(scores, ranks)
        ctx.lambda_val = lambda_val
        return ranks

    @staticmethod
    def backward(ctx, grad_ranks: Tensor) -> tuple[Tensor, None]:
        scores, ranks = ctx.saved_tensors
        perturbed = descending_ranks(scores + ctx.lambda_val * grad_ranks) / scores.shape[1]
        return -(ranks - perturbed) / ctx.lambda_val, None


def blackbox_ap(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    lambda_val: float = LAMBDA_VAL.default,
    margin: float = MARGIN.default,
) -> Tensor:
    """1 - AP computed from blackbox ranks. scores, targets, mask: (Q, N).

    The positives' scores are lowered by ``margin`` before ranking (the robustness margin of
    Rolinek et al.; their code draws a random half-normal shift of positives and negatives,
    we use a fixed one so the loss is reproducible). rank(k) among all items goes through
    ``BlackBoxRank``; rank^+(k) among positives is exact and carries no gradient, as in the
    authors' code. Memory O(Q * N).
    Reference: ``tests/reference.py::ap_loop`` (forward); the backward's loops are in tests/test_losses_blackbox.py.
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    LAMBDA_VAL.check(lambda_val)
    MARGIN.check(margin)
    pos = targets & mask
    shifted = scores - margin * pos.to(scores.dtype)
    # Ignored items (and, for rank^+, negatives) sink to the bottom and get no gradient.
    rank_all = BlackBoxRank.apply(shifted.masked_fill(~mask, float("-inf")), lambda_val)
    with torch.no_grad():
        rank_pos = descending_ranks(shifted.masked_fill(~pos, float("-inf"))) / scores.shape[1]
    precision = torch.where(pos, rank_pos / rank_all, torch.zeros_like(rank_all))
    ap = precision.sum(1) / pos.sum(1).clamp_min(1).to(scores.dtype)
    return reduce(1.0 - ap, pos.any(1), reduction)


class BlackBoxAP(RankLoss):
    """Embedding-level BlackBox AP, the blackbox baseline of ROADMAP Table 1."""

    functional = staticmethod(blackbox_ap)
    declared = declare(LAMBDA_VAL, MARGIN)

    def __init__(self, lambda_val: float = LAMBDA_VAL.default, margin: float = MARGIN.default, *,
                 include_self: bool = False, reduction: str = "mean") -> None:
        super().__init__()
        self.save_hparams(locals())
