"""The graded topics, one record each: student signature, reference, case inputs, mistakes catalogue.

Adding a topic: a ``Topic`` record here (its mistakes in a ``mistakes_*`` module), and its
``check_<name>`` line in :mod:`lab.grading.topic_checks` and ``lab/grading/__init__.py``.
Student signatures (called positionally; ``scores`` (Q, N) similarities, ``targets`` (Q, N)
bool, ``mask`` (Q, N) bool with False = ignored item): see ``signature`` and ``returns`` below.
Losses return 0 for a query without positive; metrics return NaN for it. Outputs keep the
dtype of the inputs; losses (and h_minus, soft_histogram) must be differentiable.
"""
from __future__ import annotations

import warnings
from typing import Callable

from ..losses import functional as LF
from ..metrics import average_precision, map_at_r, recall_at_k
from ..ranking import h_minus, soft_histogram
from .cases import HISTOGRAM_FAMILIES, SCORE_FAMILIES, STEP_FAMILIES, Case
from .mistakes_histograms import FAST_AP, SOFT_HISTOGRAM
from .mistakes_losses import CALIBRATION, H_MINUS, SMOOTH_AP, SUP_AP
from .mistakes_metrics import AVERAGE_PRECISION, MAP_AT_R, RECALL_AT_K
from .topic import Topic


def _quiet(metric: Callable) -> Callable:
    """The lab's metrics warn about queries without positive; the cases have them on purpose."""
    def run(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return metric(*args, **kwargs)
    return run


# Hyper-parameters: the paper's defaults first (the "extreme" cases always use them), then settings
# where the surrogates differ visibly from the exact step (large tau) and a flat linear branch.
_SUP_PARAMS = (dict(tau=0.01, rho=100.0, delta=0.05), dict(tau=0.05, rho=10.0, delta=0.1),
               dict(tau=0.1, rho=1.0, delta=0.2))

TOPICS: dict[str, Topic] = {t.name: t for t in [
    Topic("h_minus", "h_minus(t, tau, rho, delta)", "H⁻ applied elementwise, same shape as t",
          "H⁻ of ROADMAP Eq. 4 (values at and around 0 and δ, any shape, gradients)",
          lambda t, tau, rho, delta: h_minus(t, tau, rho, delta), STEP_FAMILIES,
          (dict(tau=0.01, rho=100.0, delta=0.05), dict(tau=0.05, rho=10.0, delta=0.1),
           dict(tau=0.1, rho=1.0, delta=0.3)),
          "elementwise", tuple(H_MINUS), signs="increasing"),
    Topic("smooth_ap", "smooth_ap(scores, targets, mask, tau)", "1 − SmoothAP per query, 0 without positive",
          "1 − SmoothAP per query (a sigmoid for every comparison), values and gradients",
          lambda s, t, m, tau: LF.smooth_ap(s, t, mask=m, reduction="none", tau=tau), SCORE_FAMILIES,
          (dict(tau=0.01), dict(tau=0.05), dict(tau=0.2)), "per_query", tuple(SMOOTH_AP), signs="neg"),
    Topic("sup_ap", "sup_ap(scores, targets, mask, tau, rho, delta)", "1 − Sup-AP per query, 0 without positive",
          "1 − Sup-AP per query (ROADMAP Eq. 5: exact rank⁺, H⁻ on negatives), values and gradients",
          lambda s, t, m, tau, rho, delta: LF.sup_ap(s, t, mask=m, reduction="none", tau=tau, rho=rho, delta=delta),
          SCORE_FAMILIES, _SUP_PARAMS, "per_query", tuple(SUP_AP), signs="both"),
    Topic("calibration", "calibration(scores, targets, mask, alpha, beta)",
          "the calibration loss per query, 0 without positive",
          "calibration loss of ROADMAP Eq. 7 per query, values and gradients",
          lambda s, t, m, alpha, beta: LF.calibration(s, t, mask=m, reduction="none", alpha=alpha, beta=beta),
          SCORE_FAMILIES, (dict(alpha=0.9, beta=0.6), dict(alpha=0.5, beta=0.1), dict(alpha=0.2, beta=-0.3)),
          "per_query", tuple(CALIBRATION), signs="both"),
    Topic("soft_histogram", "soft_histogram(values, centres, width, weights)", "soft counts, one row per query",
          "triangular soft binning (FastAP supp. C.1), values and gradients",
          soft_histogram, HISTOGRAM_FAMILIES, ({},), "histogram", tuple(SOFT_HISTOGRAM)),
    Topic("fast_ap", "fast_ap(scores, targets, mask, num_bins)", "1 − FastAP per query, 0 without positive",
          "1 − FastAP per query (Eq. 14 on d = 2 − 2s, num_bins + 1 centres on [0, 4])",
          lambda s, t, m, num_bins: LF.fast_ap(s, t, mask=m, reduction="none", num_bins=num_bins), SCORE_FAMILIES,
          (dict(num_bins=10), dict(num_bins=4), dict(num_bins=25)), "per_query", tuple(FAST_AP), signs="neg"),
    Topic("average_precision", "average_precision(scores, targets, mask)", "AP per query, NaN without positive",
          "exact AP per query (ROADMAP Eq. 1, pessimistic ties)", _quiet(average_precision), SCORE_FAMILIES, ({},),
          "per_query", tuple(AVERAGE_PRECISION), differentiable=False, metric=True),
    Topic("map_at_r", "map_at_r(scores, targets, mask)", "mAP@R per query, NaN without positive",
          "mAP@R per query (ROADMAP supp. Eq. 11)", _quiet(map_at_r), SCORE_FAMILIES, ({},),
          "per_query", tuple(MAP_AT_R), differentiable=False, metric=True),
    Topic("recall_at_k", "recall_at_k(scores, targets, mask, k)", "1.0 or 0.0 per query, NaN without positive",
          "R@k per query (ROADMAP supp. Eq. 10: a positive in the top k)",
          _quiet(lambda s, t, m, k: recall_at_k(s, t, m, k=k)), SCORE_FAMILIES,
          (dict(k=1), dict(k=2), dict(k=4), dict(k=8)), "per_query", tuple(RECALL_AT_K),
          differentiable=False, metric=True),
]}


def find_topic(name: str) -> Topic:
    """The record of ``name``; a ValueError lists the topics otherwise."""
    if name not in TOPICS:
        raise ValueError(f"unknown topic {name!r}; choose one of {sorted(TOPICS)}")
    return TOPICS[name]


def cases(topic: str, seed: int = 0) -> list[Case]:
    """All cases of a check, built deterministically from ``seed``."""
    return find_topic(topic).cases(seed)


def get_case(topic: str, name: str) -> Case:
    """The case called ``name`` (e.g. ``"ties-f32-s0"``) of a topic, as named in a failure message."""
    return find_topic(topic).case(name)
