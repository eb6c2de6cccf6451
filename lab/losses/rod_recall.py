"""ROD-R@k (SupRank Eq. 17): (1 - lambda) * Sup-R@k + lambda * L_DG (the calibration loss, Eq. 7)."""
from __future__ import annotations

from typing import Optional, Sequence

from torch import Tensor

from ..core.checks import check_ks
from ..core.hparams import CAL_ALPHA, CAL_BETA, DELTA, LAM, RHO, TAU, TAU_STAR, declare
from .base import RankLoss
from .calibration import alpha_above_beta
from .recall import DEFAULT_KS, ks_rule, sup_recall
from .rod import rod_calibrated


def rod_recall(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    lam: float = LAM.default,
    tau: float = TAU.default,
    rho: float = RHO.default,
    delta: float = DELTA.default,
    tau_star: float = TAU_STAR.default,
    ks: Sequence[int] = DEFAULT_KS,
    alpha: float = CAL_ALPHA.default,
    beta: float = CAL_BETA.default,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """L_ROD-R@k = (1 - lam) * L_Sup-R@k + lam * L_DG (Eq. 17). scores, targets, mask: (Q, N).

    With the proxy decomposability loss L_DG* instead (Tab. II), use
    ``RODLoss(SupRecall(), ProxyDecompositionLoss(num_classes, embed_dim), lam=0.1)``.
    Reference: ``tests/reference_graded.py::sup_recall_loop`` and ``tests/reference.py::calibration_loop``, mixed.
    """
    return rod_calibrated(sup_recall, scores, targets, mask=mask, reduction=reduction, lam=lam, alpha=alpha, beta=beta,
                          tau=tau, rho=rho, delta=delta, tau_star=tau_star, ks=ks, chunk_size=chunk_size)


class RODRecall(RankLoss):
    """Embedding-level ROD-R@k with the pair-based L_DG (Eq. 17); lam = 0.5 as ROADMAP with L_DG."""

    functional = staticmethod(rod_recall)
    declared = declare(LAM, TAU, RHO, DELTA, TAU_STAR, CAL_ALPHA, CAL_BETA)
    rules = (alpha_above_beta, ks_rule)

    def __init__(self, lam: float = LAM.default, tau: float = TAU.default, rho: float = RHO.default,
                 delta: float = DELTA.default, tau_star: float = TAU_STAR.default, ks: Sequence[int] = DEFAULT_KS,
                 alpha: float = CAL_ALPHA.default, beta: float = CAL_BETA.default, *,
                 include_self: bool = False, reduction: str = "mean", chunk_size: Optional[int] = None) -> None:
        super().__init__()
        ks = check_ks(ks)
        self.save_hparams(locals())
