"""The calibration (decomposability) loss L_calibr. of ROADMAP Eq. 7 (L_DG, SupRank Eq. 7)."""
from __future__ import annotations

from typing import Any, Mapping, Optional

import torch
from torch import Tensor

from ..core.checks import check_reduction, check_scores
from ..core.hparams import CAL_ALPHA, CAL_BETA, declare
from .base import RankLoss, reduce
from .engine import row_chunks, with_gradient


def check_thresholds(alpha: float, beta: float) -> None:
    CAL_ALPHA.check(alpha)
    CAL_BETA.check(beta)
    check_order(alpha, beta)


def alpha_above_beta(hparams: Mapping[str, Any]) -> None:
    """The rule of every loss with L_calibr. (``RankLoss.rules``): the thresholds in order, over their ranges."""
    check_order(hparams["alpha"], hparams["beta"])


def check_order(alpha: float, beta: float) -> None:
    if not alpha > beta:
        raise ValueError(f"alpha must be larger than beta (positives above alpha, negatives below beta), "
                         f"got alpha={alpha!r}, beta={beta!r}")


def calibration(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    alpha: float = CAL_ALPHA.default,
    beta: float = CAL_BETA.default,
) -> Tensor:
    """Per query: mean over positives of [alpha - s]_+ plus mean over negatives of [s - beta]_+.

    scores, targets, mask: (Q, N). Pushes positive scores above alpha and negative scores
    below beta in every batch, which bounds the decomposability gap (ROADMAP Eq. 9).
    A query without negatives gets only the positive term.
    Reference: ``tests/reference.py::calibration_loop``.
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    check_thresholds(alpha, beta)
    need_grad = torch.is_grad_enabled() and scores.requires_grad
    losses, has_pos = scores.new_empty(scores.shape[0]), torch.empty_like(targets[:, 0])
    grad = torch.empty_like(scores) if need_grad else None
    with torch.no_grad():
        for rows in row_chunks(*scores.shape, scores.device):  # a few passes over each chunk
            s, valid = scores[rows], mask[rows]
            pos = targets[rows] & valid
            count_pos = pos.sum(1, keepdim=True)
            inv_pos = 1.0 / count_pos.clamp_min(1).to(s.dtype)
            inv_neg = 1.0 / (valid.sum(1, keepdim=True) - count_pos).clamp_min(1).to(s.dtype)
            # One hinge and one signed weight per item, few passes over the chunk: alpha - s with weight
            # -1/|P| for a positive, s - beta with +1/|N| for a negative, weight 0 for an ignored item.
            hinge = torch.where(pos, alpha - s, s - beta).clamp_min_(0)
            slope = torch.where(pos, -inv_pos, torch.where(valid, inv_neg, 0.0))
            losses[rows] = (hinge * slope.abs()).sum(1)
            has_pos[rows] = count_pos.squeeze(1) > 0
            if need_grad:
                # The hinges' slopes, 0 on the hinge itself as autograd's relu has it.
                grad[rows] = slope.masked_fill_(hinge == 0, 0.0)
    if need_grad:
        losses = with_gradient(scores, losses, grad)
    return reduce(losses, has_pos, reduction)


class CalibrationLoss(RankLoss):
    """Embedding-level calibration loss L_calibr. (ROADMAP Eq. 7)."""

    functional = staticmethod(calibration)
    declared = declare(CAL_ALPHA, CAL_BETA)
    rules = (alpha_above_beta,)

    def __init__(self, alpha: float = CAL_ALPHA.default, beta: float = CAL_BETA.default, *, include_self: bool = False,
                 reduction: str = "mean") -> None:
        super().__init__()
        self.save_hparams(locals())
