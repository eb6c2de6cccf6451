"""The calibration (decomposability) loss L_calibr. of ROADMAP Eq. 7 (L_DG, SupRank Eq. 7)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..core.checks import check_reduction, check_scores
from .base import RankLoss, reduce
from .engine import row_chunks, with_gradient


def check_thresholds(alpha: float, beta: float) -> None:
    for name, value in (("alpha", alpha), ("beta", beta)):
        if not (isinstance(value, (int, float)) and -1 <= value <= 1):
            raise ValueError(f"{name} must be a cosine similarity in [-1, 1], got {value!r}")
    if not alpha > beta:
        raise ValueError(f"alpha must be larger than beta (positives above alpha, negatives below beta), "
                         f"got alpha={alpha!r}, beta={beta!r}")


def calibration(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    alpha: float = 0.9,
    beta: float = 0.6,
) -> Tensor:
    """Per query: mean over positives of [alpha - s]_+ plus mean over negatives of [s - beta]_+.

    scores, targets, mask: (Q, N). Pushes positive scores above alpha and negative scores
    below beta in every batch, which bounds the decomposability gap (ROADMAP Eq. 9).
    A query without negatives gets only the positive term.
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    check_thresholds(alpha, beta)
    need_grad = torch.is_grad_enabled() and scores.requires_grad
    losses, has_pos = scores.new_empty(scores.shape[0]), torch.empty_like(targets[:, 0])
    grad = torch.empty_like(scores) if need_grad else None
    with torch.no_grad():
        for rows in row_chunks(*scores.shape):  # cache-sized: a few passes over each chunk
            s = scores[rows]
            # float 0/1 weights: mixed bool-float arithmetic takes a slow path on CPU.
            pos, neg = (targets[rows] & mask[rows]).to(s.dtype), (~targets[rows] & mask[rows]).to(s.dtype)
            count_pos = pos.sum(1, keepdim=True)
            num_pos, num_neg = count_pos.clamp_min(1), neg.sum(1, keepdim=True).clamp_min(1)
            losses[rows] = (((alpha - s).clamp_min(0) * pos).sum(1, keepdim=True) / num_pos
                            + ((s - beta).clamp_min(0) * neg).sum(1, keepdim=True) / num_neg).squeeze(1)
            has_pos[rows] = count_pos.squeeze(1) > 0
            if need_grad:
                # The hinges' slopes, 0 on the hinge itself as autograd's clamp_min has it.
                grad[rows] = ((s > beta).to(s.dtype).mul_(neg).div_(num_neg)
                              - (s < alpha).to(s.dtype).mul_(pos).div_(num_pos))
    if need_grad:
        losses = with_gradient(scores, losses, grad)
    return reduce(losses, has_pos, reduction)


class CalibrationLoss(RankLoss):
    """Embedding-level calibration loss L_calibr. (ROADMAP Eq. 7)."""

    functional = staticmethod(calibration)
    hparam_ranges = {"alpha": (-1.0, 1.0), "beta": (-1.0, 1.0)}

    def __init__(self, alpha: float = 0.9, beta: float = 0.6, *, include_self: bool = False,
                 reduction: str = "mean") -> None:
        super().__init__()
        self.save_hparams(locals())
