"""The check functions: ``check_<topic>(student_fn)`` -> CheckResult, or an AssertionError that teaches.

Student signatures (called positionally; tensors as in the rest of the lab: ``scores`` (Q, N)
similarities, ``targets`` (Q, N) bool, ``mask`` (Q, N) bool with False = ignored item):

========================  ========================================================  ======================
check                     student function                                          returns
========================  ========================================================  ======================
check_h_minus             h_minus(t, tau, rho, delta)                               like t (any shape)
check_smooth_ap           smooth_ap(scores, targets, mask, tau)                     (Q,) 1 - SmoothAP
check_sup_ap              sup_ap(scores, targets, mask, tau, rho, delta)            (Q,) 1 - Sup-AP
check_calibration         calibration(scores, targets, mask, alpha, beta)           (Q,) L_calibr.
check_soft_histogram      soft_histogram(values, centres, width, weights)           (Q, L) soft counts
check_fast_ap             fast_ap(scores, targets, mask, num_bins)                  (Q,) 1 - FastAP
check_average_precision   average_precision(scores, targets, mask)                  (Q,) AP
check_map_at_r            map_at_r(scores, targets, mask)                           (Q,) mAP@R
check_recall_at_k         recall_at_k(scores, targets, mask, k)                     (Q,) 1.0 / 0.0
========================  ========================================================  ======================

Losses return 0 for a query without positive; metrics return NaN for it. Outputs keep the
dtype of the inputs; losses (and h_minus, soft_histogram) must be differentiable.
"""
from __future__ import annotations

import warnings
from typing import Callable

from ..losses import functional as LF
from ..metrics import average_precision, map_at_r, recall_at_k
from ..ranking import h_minus, soft_histogram
from .engine import CheckResult, Topic, run_check
from .mistakes_histograms import FAST_AP, SOFT_HISTOGRAM
from .mistakes_losses import CALIBRATION, H_MINUS, SMOOTH_AP, SUP_AP
from .mistakes_metrics import AVERAGE_PRECISION, MAP_AT_R, RECALL_AT_K


def _quiet(metric: Callable) -> Callable:
    """The lab's metrics warn about queries without positive; the cases have them on purpose."""
    def run(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return metric(*args, **kwargs)
    return run


TOPICS: dict[str, Topic] = {t.name: t for t in [
    Topic("h_minus", "h_minus(t, tau, rho, delta)", "H⁻ applied elementwise, same shape as t",
          lambda t, tau, rho, delta: h_minus(t, tau, rho, delta), "elementwise", H_MINUS, signs="increasing"),
    Topic("smooth_ap", "smooth_ap(scores, targets, mask, tau)", "1 − SmoothAP per query, 0 without positive",
          lambda s, t, m, tau: LF.smooth_ap(s, t, mask=m, reduction="none", tau=tau), "per_query", SMOOTH_AP,
          signs="neg"),
    Topic("sup_ap", "sup_ap(scores, targets, mask, tau, rho, delta)", "1 − Sup-AP per query, 0 without positive",
          lambda s, t, m, tau, rho, delta: LF.sup_ap(s, t, mask=m, reduction="none", tau=tau, rho=rho, delta=delta),
          "per_query", SUP_AP, signs="both"),
    Topic("calibration", "calibration(scores, targets, mask, alpha, beta)",
          "the calibration loss per query, 0 without positive",
          lambda s, t, m, alpha, beta: LF.calibration(s, t, mask=m, reduction="none", alpha=alpha, beta=beta),
          "per_query", CALIBRATION, signs="both"),
    Topic("soft_histogram", "soft_histogram(values, centres, width, weights)", "soft counts, one row per query",
          soft_histogram, "histogram", SOFT_HISTOGRAM),
    Topic("fast_ap", "fast_ap(scores, targets, mask, num_bins)", "1 − FastAP per query, 0 without positive",
          lambda s, t, m, num_bins: LF.fast_ap(s, t, mask=m, reduction="none", num_bins=num_bins), "per_query",
          FAST_AP, signs="neg"),
    Topic("average_precision", "average_precision(scores, targets, mask)", "AP per query, NaN without positive",
          _quiet(average_precision), "per_query", AVERAGE_PRECISION, differentiable=False, metric=True),
    Topic("map_at_r", "map_at_r(scores, targets, mask)", "mAP@R per query, NaN without positive",
          _quiet(map_at_r), "per_query", MAP_AT_R, differentiable=False, metric=True),
    Topic("recall_at_k", "recall_at_k(scores, targets, mask, k)", "1.0 or 0.0 per query, NaN without positive",
          _quiet(lambda s, t, m, k: recall_at_k(s, t, m, k=k)), "per_query", RECALL_AT_K,
          differentiable=False, metric=True),
]}


def _check(topic: str, what: str) -> Callable[..., CheckResult]:
    """The public ``check_<topic>`` function: same signature for every topic, own name and docstring."""
    spec = TOPICS[topic]

    def check(student_fn: Callable, *, seed: int = 0, verbose: bool = True) -> CheckResult:
        __tracebackhide__ = True
        return run_check(spec, student_fn, seed, verbose)

    check.__name__ = check.__qualname__ = f"check_{topic}"
    check.__doc__ = (f"Check the student's {what}.\n\nThe student function is called as {spec.signature} and "
                     f"returns {spec.returns}. Raises an AssertionError that explains the first problem and "
                     f"names a case (rebuild it with get_case({topic!r}, name)); ``seed`` picks other random "
                     f"cases; returns a CheckResult.")
    return check


check_h_minus = _check("h_minus", "H⁻ of ROADMAP Eq. 4 (values at and around 0 and δ, any shape, gradients)")
check_smooth_ap = _check("smooth_ap", "1 − SmoothAP per query (a sigmoid for every comparison), values and gradients")
check_sup_ap = _check("sup_ap", "1 − Sup-AP per query (ROADMAP Eq. 5: exact rank⁺, H⁻ on negatives), values and "
                      "gradients")
check_calibration = _check("calibration", "calibration loss of ROADMAP Eq. 7 per query, values and gradients")
check_soft_histogram = _check("soft_histogram", "triangular soft binning (FastAP supp. C.1), values and gradients")
check_fast_ap = _check("fast_ap", "1 − FastAP per query (Eq. 14 on d = 2 − 2s, num_bins + 1 centres on [0, 4])")
check_average_precision = _check("average_precision", "exact AP per query (ROADMAP Eq. 1, pessimistic ties)")
check_map_at_r = _check("map_at_r", "mAP@R per query (ROADMAP supp. Eq. 11)")
check_recall_at_k = _check("recall_at_k", "R@k per query (ROADMAP supp. Eq. 10: a positive in the top k)")

CHECKS: dict[str, Callable[..., CheckResult]] = {f"check_{name}": globals()[f"check_{name}"] for name in TOPICS}
