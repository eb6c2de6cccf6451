"""ROADMAP (Eq. 2): (1 - lambda) * Sup-AP + lambda * calibration."""
from __future__ import annotations

from typing import Optional

from torch import Tensor

from .base import RankLoss, check_reduction, check_scores, check_unit_interval, reduce
from .calibration import calibration
from .sup_ap import sup_ap


def roadmap(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    lam: float = 0.5,
    tau: float = 0.01,
    rho: float = 100.0,
    delta: float = 0.05,
    alpha: float = 0.9,
    beta: float = 0.6,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """L_ROADMAP = (1 - lam) * L_SupAP + lam * L_calibr. (ROADMAP Eq. 2). scores etc. (Q, N)."""
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    check_unit_interval("lam", lam)
    rank_term = sup_ap(scores, targets, mask=mask, reduction="none", tau=tau, rho=rho, delta=delta,
                       chunk_size=chunk_size)
    calib_term = calibration(scores, targets, mask=mask, reduction="none", alpha=alpha, beta=beta)
    return reduce((1 - lam) * rank_term + lam * calib_term, (targets & mask).any(1), reduction)


class ROADMAP(RankLoss):
    """Embedding-level ROADMAP loss with the paper's defaults (Sec. 4)."""

    functional = staticmethod(roadmap)
    hparam_ranges = {"lam": (0.0, 1.0), "tau": (1e-3, 1.0), "rho": (0.0, 1e4), "delta": (0.0, 0.5),
                     "alpha": (-1.0, 1.0), "beta": (-1.0, 1.0)}

    def __init__(self, lam: float = 0.5, tau: float = 0.01, rho: float = 100.0, delta: float = 0.05,
                 alpha: float = 0.9, beta: float = 0.6, *, include_self: bool = False, reduction: str = "mean",
                 chunk_size: Optional[int] = None) -> None:
        super().__init__()
        self.save_hparams(locals())
