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
from .blackbox_ap import BlackBoxAP
from .calibration import CalibrationLoss
from .fast_ap import FastAP
from .proxy import ProxyDecompositionLoss
from .recall import SmoothRecall, SupRecall
from .loss_registry import BUILD_ARGS, LOSSES, build_loss, check_loss_kwargs, loss_kwargs_of
from .roadmap import ROADMAP
from .rod import HAPPIER, RODNDCG, ROADMAPProxy, RODLoss
from .rod_recall import RODRecall
from .smooth_ap import SmoothAP
from .soft_bin_ap import SoftBinAP
from .sup_ap import SupAP
from .sup_hap import SupHAP
from .sup_ndcg import SupNDCG

__all__ = ["functional", "RankLoss", "LOSSES", "build_loss", "loss_kwargs_of", "check_loss_kwargs",
           "UnknownHyperParameterError", "RODLoss", "HierarchicalRankLoss", "build_relevance", "memory_budget",
           "set_memory_budget",
           *[cls.__name__ for cls in LOSSES.values()]]
