"""Rank losses, embedding level: ``loss = LossClass(**hparams)(embeddings, labels)``.

The score-level forms live in :mod:`lab.losses.functional`. Each top-level file is one loss (or one
family), except ``base`` (the ``nn.Module`` bases and the reduction over queries) and
``functional`` (the score-level names). The engine the losses stand on is the subpackage
:mod:`lab.losses.engine` (plan, block loop, pair sums, fused kernels, histograms); it never imports
a loss. Input checks, step surrogates and graded relevance come from :mod:`lab.core`.
"""
from __future__ import annotations

import collections.abc
import typing
from typing import Any, Mapping, Optional, Union

from ..core.budget import memory_budget, set_memory_budget
from ..core.relevance import build_relevance
from . import functional
from .base import (HierarchicalRankLoss, RankLoss, UnknownHyperParameterError, constructor_parameters, renamed,
                   unknown_hparams_error)
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


# Constructor arguments that build_loss (the trainer) fills in from the data: not hyper-parameters.
BUILD_ARGS = ("num_classes", "embed_dim")


def _loss_class(name: str) -> type[RankLoss]:
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose one of: {', '.join(sorted(LOSSES))}")
    return LOSSES[name]


def loss_kwargs_of(name: str) -> dict[str, Any]:
    """{keyword: default} of what ``build_loss(name, **kwargs)`` (and a config's ``loss_kwargs``)
    accepts: the loss class's constructor keywords, without ``num_classes`` and ``embed_dim``."""
    return {k: p.default for k, p in constructor_parameters(_loss_class(name)).items() if k not in (*BUILD_ARGS, "**")}


def check_loss_kwargs(name: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` for loss ``name`` with every name checked and every value converted to the
    constructor's declared type: command-line and YAML text such as ``'1e-2'`` (PyYAML reads it
    as a string) becomes a float, ``'true'`` a bool, ``'1,2,4'`` or ``[1, 2, 4]`` a list.

    Unknown names raise :class:`UnknownHyperParameterError` (a ``ValueError``) with the accepted
    names and a close match; a value that cannot be converted, or that is outside its declared
    range (``LossClass.declared``), raises a ``ValueError`` naming the range and the meaning.
    """
    accepted = loss_kwargs_of(name)
    kwargs = renamed(_loss_class(name), dict(kwargs))
    unknown = [k for k in kwargs if k not in accepted]
    if unknown:
        raise unknown_hparams_error(f"loss {name!r}", unknown, accepted)
    cls = LOSSES[name]
    params = constructor_parameters(cls)
    out = {k: _convert(f"hyper-parameter {k!r} of loss {name!r}", v, params[k].annotation) for k, v in kwargs.items()}
    for k, v in out.items():
        if k in cls.declared:
            try:
                cls.declared[k].check(v)
            except ValueError as e:
                raise ValueError(f"for loss {name!r}, {e}") from None
    return out


_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def _convert(what: str, value: Any, kind: Any) -> Any:
    """``value`` as type ``kind`` (float, int, bool, str, Optional[X], Sequence[X]); lists stay lists
    (YAML can write them back). An annotation this does not know passes the value through."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is Union:
        if type(None) in args and (value is None or (isinstance(value, str) and value.lower() in ("none", "null"))):
            return None
        others = [a for a in args if a is not type(None)]
        return _convert(what, value, others[0]) if len(others) == 1 else value
    if origin in (collections.abc.Sequence, list, tuple):
        items = value.replace(",", " ").split() if isinstance(value, str) else \
            list(value) if isinstance(value, (list, tuple)) else [value]
        return [_convert(what, v, args[0] if args else Any) for v in items]
    try:
        if kind is float and not isinstance(value, bool) and isinstance(value, (int, float, str)):
            return float(value)
        if kind is int and not isinstance(value, bool) and isinstance(value, (int, float, str)):
            number = float(value) if not isinstance(value, int) else value
            if float(number).is_integer():
                return int(number)
        if kind is bool and (isinstance(value, bool) or str(value).lower() in _WORDS):
            return value if isinstance(value, bool) else _WORDS[str(value).lower()]
        if kind is str and isinstance(value, str):
            return value
    except (ValueError, OverflowError):
        pass
    if kind not in (float, int, bool, str):
        return value
    expected = {float: "a number", int: "an integer", bool: "true or false", str: "a string"}[kind]
    raise ValueError(f"{what} must be {expected}, got {value!r}")


def build_loss(name: str, *, num_classes: Optional[int] = None, embed_dim: Optional[int] = None,
               **hparams) -> RankLoss:
    """The loss registered as ``name`` (see ``LOSSES``), built with ``hparams``.

    ``num_classes`` (training classes) and ``embed_dim`` are passed on to the losses with
    learnable proxies (``needs_num_classes``) and ignored by the others, so a caller can
    always give them.
    """
    cls = _loss_class(name)
    hparams = renamed(cls, hparams)
    unknown = [k for k in hparams if k not in constructor_parameters(cls)]
    if unknown and "**" not in constructor_parameters(cls):  # the registry's name in the message
        raise unknown_hparams_error(f"loss {name!r}", unknown, loss_kwargs_of(name))
    if cls.needs_num_classes:
        if num_classes is None or embed_dim is None:
            raise ValueError(f"loss {name!r} has one learnable proxy per class: pass num_classes and embed_dim")
        hparams = {"num_classes": num_classes, "embed_dim": embed_dim, **hparams}
    return cls(**hparams)


__all__ = ["functional", "RankLoss", "LOSSES", "build_loss", "loss_kwargs_of", "check_loss_kwargs",
           "UnknownHyperParameterError", "RODLoss", "HierarchicalRankLoss", "build_relevance", "memory_budget",
           "set_memory_budget",
           *[cls.__name__ for cls in LOSSES.values()]]
