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

Each is built from its record in :mod:`lab.grading.topics`.
"""
from __future__ import annotations

from typing import Callable

from .check_runner import run_check
from .feedback import CheckResult
from .topic import Topic
from .topics import TOPICS


def make_check(spec: Topic) -> Callable[..., CheckResult]:
    """The public ``check_<topic>`` function: same signature for every topic, own name and docstring."""
    def check(student_fn: Callable, *, seed: int = 0, verbose: bool = True) -> CheckResult:
        __tracebackhide__ = True
        return run_check(spec, student_fn, seed, verbose)

    check.__name__ = check.__qualname__ = f"check_{spec.name}"
    check.__doc__ = (f"Check the student's {spec.about}.\n\nThe student function is called as {spec.signature} and "
                     f"returns {spec.returns}. Raises an AssertionError that explains the first problem and "
                     f"names a case (rebuild it with get_case({spec.name!r}, name)); ``seed`` picks other random "
                     f"cases; returns a CheckResult.")
    return check


CHECKS: dict[str, Callable[..., CheckResult]] = {f"check_{name}": make_check(spec) for name, spec in TOPICS.items()}

check_h_minus = CHECKS["check_h_minus"]
check_smooth_ap = CHECKS["check_smooth_ap"]
check_sup_ap = CHECKS["check_sup_ap"]
check_calibration = CHECKS["check_calibration"]
check_soft_histogram = CHECKS["check_soft_histogram"]
check_fast_ap = CHECKS["check_fast_ap"]
check_average_precision = CHECKS["check_average_precision"]
check_map_at_r = CHECKS["check_map_at_r"]
check_recall_at_k = CHECKS["check_recall_at_k"]
