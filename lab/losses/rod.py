"""ROD losses (SupRank Eq. 2): (1 - lambda) * rank loss + lambda * decomposability loss.

``RODLoss`` combines any embedding-level rank loss with any decomposability loss: the
calibration loss L_DG (Eq. 7) or the proxy loss L_DG* (Eq. 8). The named classes are the
papers' instances with the proxy loss and SupRank's lambda = 0.1 (Sec. VII-A4; HAPPIER's
configuration weighs 0.9 / 0.1): HAPPIER (Eq. 22), ROD-NDCG (Eq. 25), ROADMAP with L_DG*.
"""
from __future__ import annotations

from typing import Callable, Optional

from torch import Tensor, nn

from ..core.checks import check_reduction, check_scores
from ..core.hparams import DELTA, ETA, HAP_ALPHA, LAM, RHO, TAU, declare
from .base import RankLoss, reduce
from .calls import resolve_call
from .calibration import calibration
from .proxy import ProxyDecompositionLoss
from .sup_ap import SupAP
from .sup_hap import SupHAP
from .sup_ndcg import SupNDCG


def rod_mix(rank: Tensor, decomposability: Tensor, lam: float) -> Tensor:
    """(1 - lam) * rank + lam * decomposability: SupRank Eq. 2 (ROADMAP Eq. 2, ROD-R@k Eq. 17,
    HAPPIER Eq. 22, ROD-NDCG Eq. 25 are instances). Same shapes in, same shape out."""
    return (1 - lam) * rank + lam * decomposability


def rod_calibrated(rank_loss: Callable[..., Tensor], scores: Tensor, targets: Tensor, *, mask: Optional[Tensor],
                   reduction: str, lam: float, alpha: float, beta: float, **rank_kwargs) -> Tensor:
    """Score level: ``rod_mix`` of ``rank_loss`` and the calibration loss L_DG (ROADMAP Eq. 7), query by
    query, then reduced. scores, targets, mask (Q, N); ``rank_kwargs`` go to ``rank_loss``."""
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    LAM.check(lam)
    rank_term = rank_loss(scores, targets, mask=mask, reduction="none", **rank_kwargs)
    calib_term = calibration(scores, targets, mask=mask, reduction="none", alpha=alpha, beta=beta)
    return reduce(rod_mix(rank_term, calib_term, lam), (targets & mask).any(1), reduction)


class RODLoss(RankLoss):
    """(1 - lam) * rank_loss + lam * decomposability_loss, both called as ``loss(embeddings, labels, ...)``.

    The learnable parameters of either part (e.g. proxies) are this module's parameters. Both
    parts must use the same reduction: two scalars, or two (B,) vectors.
    """

    functional = None  # embedding level only: a decomposability loss may need the embeddings
    declared = declare(LAM)

    def __init__(self, rank_loss: nn.Module, decomposability_loss: nn.Module, lam: float = LAM.default) -> None:
        super().__init__()
        for name, part in (("rank_loss", rank_loss), ("decomposability_loss", decomposability_loss)):
            if not isinstance(part, nn.Module):
                raise ValueError(f"{name} must be an nn.Module (e.g. SupAP(), CalibrationLoss()), got "
                                 f"{type(part).__name__}")
        LAM.check(lam)
        self.rank_loss, self.decomposability_loss, self.lam = rank_loss, decomposability_loss, lam
        self.hparams = {"lam": lam}
        self.include_self = False
        self.needs_num_classes = any(getattr(m, "needs_num_classes", False) for m in (rank_loss, decomposability_loss))

    def forward(self, embeddings: Tensor, labels: Tensor, indices_tuple: Optional[tuple[Tensor, ...]] = None,
                ref_emb: Optional[Tensor] = None, ref_labels: Optional[Tensor] = None, *,
                ref_embeddings: Optional[Tensor] = None, mask: Optional[Tensor] = None) -> Tensor:
        # Either call (RankLab's or pytorch-metric-learning's) resolved once; the parts get RankLab's keywords,
        # so any module with the documented signature (embeddings, labels, ref_embeddings=, ref_labels=, mask=) fits.
        labels, refs, ref_labels, mask = resolve_call(embeddings, labels, indices_tuple, ref_emb, ref_labels,
                                                      ref_embeddings, mask)
        parts = {"ref_embeddings": refs, "ref_labels": ref_labels, "mask": mask}
        rank = self.rank_loss(embeddings, labels, **parts)
        decomposability = self.decomposability_loss(embeddings, labels, **parts)
        if rank.shape != decomposability.shape:
            raise ValueError(f"rank_loss gives shape {tuple(rank.shape)} but decomposability_loss gives "
                             f"{tuple(decomposability.shape)}: build both with the same reduction")
        return rod_mix(rank, decomposability, self.lam)


# SupRank Sec. VI: lam = 0.1 with the proxy-based L_DG* (ROADMAP's 0.5 is for the calibration L_DG).
PROXY_LAM = LAM.but(default=0.1)


class _ProxyROD(RODLoss):
    """A Sup-* rank loss with L_DG*; subclasses name the rank loss class."""

    needs_num_classes = True
    rank_class: type[RankLoss]
    declared = declare(PROXY_LAM, TAU, RHO, DELTA, ETA)

    def __init__(self, num_classes: int, embed_dim: int, lam: float = PROXY_LAM.default, tau: float = TAU.default,
                 rho: float = RHO.default, delta: float = DELTA.default, eta: float = ETA.default, *,
                 include_self: bool = False, reduction: str = "mean", chunk_size: Optional[int] = None,
                 **rank_hparams) -> None:
        rank = self.rank_class(tau, rho, delta, include_self=include_self, reduction=reduction,
                               chunk_size=chunk_size, **rank_hparams)
        super().__init__(rank, ProxyDecompositionLoss(num_classes, embed_dim, eta, reduction=reduction), lam)
        self.hparams = {"num_classes": num_classes, "embed_dim": embed_dim, "lam": lam, "tau": tau, "rho": rho,
                        "delta": delta, "eta": eta, **rank_hparams}


class HAPPIER(_ProxyROD):
    """HAPPIER (Eq. 22): (1 - lam) * Sup-H-AP + lam * L_DG*. ``hap_alpha`` sets Eq. 20 (> 1: HAPPIER_F).
    Reference: ``tests/reference_graded.py::sup_hap_loop`` and ``proxy_loss_loop``, mixed."""

    rank_class = SupHAP
    declared = _ProxyROD.declared + declare(HAP_ALPHA)
    renamed_hparams = SupHAP.renamed_hparams

    def __init__(self, num_classes: int, embed_dim: int, lam: float = PROXY_LAM.default, tau: float = TAU.default,
                 rho: float = RHO.default, delta: float = DELTA.default, eta: float = ETA.default,
                 hap_alpha: float = HAP_ALPHA.default, *, include_self: bool = False, reduction: str = "mean",
                 chunk_size: Optional[int] = None) -> None:
        super().__init__(num_classes, embed_dim, lam, tau, rho, delta, eta, include_self=include_self,
                         reduction=reduction, chunk_size=chunk_size, hap_alpha=hap_alpha)


class RODNDCG(_ProxyROD):
    """ROD-NDCG (Eq. 25): (1 - lam) * Sup-NDCG + lam * L_DG*.
    Reference: ``tests/reference_graded.py::sup_ndcg_loop`` and ``proxy_loss_loop``, mixed."""

    rank_class = SupNDCG


class ROADMAPProxy(_ProxyROD):
    """ROADMAP with L_DG* (SupRank Tab. II): (1 - lam) * Sup-AP + lam * L_DG*.
    Reference: ``tests/reference.py::sup_ap_loop`` and ``tests/reference_graded.py::proxy_loss_loop``, mixed."""

    rank_class = SupAP
