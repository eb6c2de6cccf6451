"""Rank losses, embedding level: ``loss = LossClass(**hparams)(embeddings, labels)``.

The score-level forms live in :mod:`lab.losses.functional`. Each top-level file is one loss (or one
family), except ``base`` (the ``nn.Module`` bases and the reduction over queries), ``functional`` (the
score-level names) and ``loss_registry`` (the loss names, ``build_loss`` and the checking of a config's
``loss_kwargs``). The engine the losses stand on is the subpackage
:mod:`lab.losses.engine` (plan, block loop, pair sums, fused kernels, histograms); it never imports
a loss. Input checks, step surrogates and graded relevance come from :mod:`lab.core`.
"""
from __future__ import annotations

from ..core.budget import memory_budget, set_memory_budget
from ..core.relevance import build_relevance
from . import functional
from .base import HierarchicalRankLoss, RankLoss, UnknownHyperParameterError
# The loss classes are this package's API: __all__ takes their names from LOSSES, which pyflakes cannot see.
from .blackbox_ap import BlackBoxAP  # noqa: F401
from .calibration import CalibrationLoss  # noqa: F401
from .fast_ap import FastAP  # noqa: F401
from .proxy import ProxyDecompositionLoss  # noqa: F401
from .recall import SmoothRecall, SupRecall  # noqa: F401
from .loss_registry import LOSSES, build_loss, check_loss_kwargs, loss_kwargs_of
from .roadmap import ROADMAP  # noqa: F401
from .rod import HAPPIER, RODNDCG, ROADMAPProxy, RODLoss  # noqa: F401
from .rod_recall import RODRecall  # noqa: F401
from .smooth_ap import SmoothAP  # noqa: F401
from .soft_bin_ap import SoftBinAP  # noqa: F401
from .sup_ap import SupAP  # noqa: F401
from .sup_hap import SupHAP  # noqa: F401
from .sup_ndcg import SupNDCG  # noqa: F401

__all__ = ["functional", "RankLoss", "LOSSES", "build_loss", "loss_kwargs_of", "check_loss_kwargs",
           "UnknownHyperParameterError", "RODLoss", "HierarchicalRankLoss", "build_relevance", "memory_budget",
           "set_memory_budget",
           *[cls.__name__ for cls in LOSSES.values()]]
