"""ROADMAP (Eq. 2): (1 - lambda) * Sup-AP + lambda * calibration."""
from __future__ import annotations

from typing import Optional

from torch import Tensor

from ..core.hparams import CAL_ALPHA, CAL_BETA, DELTA, LAM, RHO, TAU, declare
from .base import RankLoss
from .calibration import alpha_above_beta
from .rod import rod_calibrated
from .sup_ap import sup_ap


def roadmap(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    lam: float = LAM.default,
    tau: float = TAU.default,
    rho: float = RHO.default,
    delta: float = DELTA.default,
    alpha: float = CAL_ALPHA.default,
    beta: float = CAL_BETA.default,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """L_ROADMAP = (1 - lam) * L_SupAP + lam * L_calibr. (ROADMAP Eq. 2). scores etc. (Q, N).
    Reference: ``tests/reference.py::sup_ap_loop`` and ``calibration_loop``, mixed.
    """
    return rod_calibrated(sup_ap, scores, targets, mask=mask, reduction=reduction, lam=lam, alpha=alpha, beta=beta,
                          tau=tau, rho=rho, delta=delta, chunk_size=chunk_size)


class ROADMAP(RankLoss):
    """Embedding-level ROADMAP loss with the paper's defaults (Sec. 4)."""

    functional = staticmethod(roadmap)
    declared = declare(LAM, TAU, RHO, DELTA, CAL_ALPHA, CAL_BETA)
    rules = (alpha_above_beta,)

    def __init__(self, lam: float = LAM.default, tau: float = TAU.default, rho: float = RHO.default,
                 delta: float = DELTA.default, alpha: float = CAL_ALPHA.default, beta: float = CAL_BETA.default, *,
                 include_self: bool = False, reduction: str = "mean", chunk_size: Optional[int] = None) -> None:
        super().__init__()
        self.save_hparams(locals())
