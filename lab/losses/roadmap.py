"""ROADMAP (Eq. 2): (1 - lambda) * Sup-AP + lambda * calibration."""
from __future__ import annotations

from typing import Optional

from torch import Tensor

from .base import RankLoss
from .rod import rod_calibrated
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
    return rod_calibrated(sup_ap, scores, targets, mask=mask, reduction=reduction, lam=lam, alpha=alpha, beta=beta,
                          tau=tau, rho=rho, delta=delta, chunk_size=chunk_size)


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
