"""Rank losses, embedding level: ``loss = LossClass(**hparams)(embeddings, labels)``.

The score-level forms live in :mod:`lab.losses.functional`. One loss per file; the three other
files are shared machinery: ``base`` (the ``nn.Module`` bases and the reduction over queries),
``engine`` (the chunked (query, positive, item) blocks) and ``functional`` (the score-level names).
Input checks, step surrogates and graded relevance come from :mod:`lab.core`.
"""
from __future__ import annotations

from typing import Optional

from ..core.relevance import build_relevance
from . import functional
from .base import HierarchicalRankLoss, RankLoss
from .blackbox_ap import BlackBoxAP
from .calibration import CalibrationLoss
from .fast_ap import FastAP
from .proxy import ProxyDecompositionLoss
from .recall import SmoothRecall, SupRecall
from .roadmap import ROADMAP
from .rod import HAPPIER, RODNDCG, ROADMAPProxy, RODLoss
from .rod_recall import RODRecall
from .smooth_ap import SmoothAP
from .soft_bin_ap import SoftBinAP
from .sup_ap import SupAP
from .sup_hap import SupHAP
from .sup_ndcg import SupNDCG

LOSSES: dict[str, type[RankLoss]] = {
    "smooth_ap": SmoothAP,
    "sup_ap": SupAP,
    "calibration": CalibrationLoss,
    "roadmap": ROADMAP,
    "fast_ap": FastAP,
    "soft_bin_ap": SoftBinAP,
    "blackbox_ap": BlackBoxAP,
    # Recall@k (SupRank Sec. IV-B) and hierarchical (Sec. V) losses. Classes with
    # ``needs_num_classes = True`` take ``num_classes`` and ``embed_dim`` (learnable proxies).
    "smooth_recall": SmoothRecall,
    "sup_recall": SupRecall,
    "rod_recall": RODRecall,
    "sup_hap": SupHAP,
    "happier": HAPPIER,
    "sup_ndcg": SupNDCG,
    "rod_ndcg": RODNDCG,
    "roadmap_proxy": ROADMAPProxy,
    "proxy_dg": ProxyDecompositionLoss,
}


def build_loss(name: str, *, num_classes: Optional[int] = None, embed_dim: Optional[int] = None,
               **hparams) -> RankLoss:
    """The loss registered as ``name`` (see ``LOSSES``), built with ``hparams``.

    ``num_classes`` (training classes) and ``embed_dim`` are passed on to the losses with
    learnable proxies (``needs_num_classes``) and ignored by the others, so a caller can
    always give them.
    """
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose one of: {', '.join(sorted(LOSSES))}")
    cls = LOSSES[name]
    if cls.needs_num_classes:
        if num_classes is None or embed_dim is None:
            raise ValueError(f"loss {name!r} has one learnable proxy per class: pass num_classes and embed_dim")
        hparams = {"num_classes": num_classes, "embed_dim": embed_dim, **hparams}
    return cls(**hparams)


__all__ = ["functional", "RankLoss", "LOSSES", "build_loss", "RODLoss", "HierarchicalRankLoss", "build_relevance",
           *[cls.__name__ for cls in LOSSES.values()]]
