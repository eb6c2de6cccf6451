"""The loss registry: a name (a config's ``loss``, a flag, a study) -> its class, the keywords it
accepts, and those keywords checked and converted from YAML/CLI text (``check_loss_kwargs``)."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from ..core.convert import to_type
from .base import RankLoss, constructor_parameters, renamed, unknown_hparams_error
from .blackbox_ap import BlackBoxAP
from .calibration import CalibrationLoss
from .fast_ap import FastAP
from .proxy import ProxyDecompositionLoss
from .recall import SmoothRecall, SupRecall
from .roadmap import ROADMAP
from .rod import HAPPIER, RODNDCG, ROADMAPProxy
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
    range (``LossClass.declared``) or breaks one of the class's ``rules`` (ROADMAP's alpha > beta), raises a
    ``ValueError`` naming the range and the meaning: the values returned are the ones ``build_loss`` trusts.
    """
    accepted = loss_kwargs_of(name)
    kwargs = renamed(_loss_class(name), dict(kwargs))
    unknown = [k for k in kwargs if k not in accepted]
    if unknown:
        raise unknown_hparams_error(f"loss {name!r}", unknown, accepted)
    cls = LOSSES[name]
    params = constructor_parameters(cls)
    out = {k: to_type(f"hyper-parameter {k!r} of loss {name!r}", v, params[k].annotation) for k, v in kwargs.items()}
    try:  # the class's own check (ranges, then its rules), over the defaults where a value is not given
        cls.check_hparams({**accepted, **out})
    except ValueError as e:
        raise ValueError(f"for loss {name!r}, {e}") from None
    return out


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
