"""Automatic grading with feedback that teaches: check functions, reproducible cases, assignment tools.

``check_<topic>(student_fn)`` compares a student's function with the lab's reference on
many cases (sizes, ties, single-sample classes, queries without positive, extreme scores,
float32 and float64), checks its gradients, and raises an ``AssertionError`` that says what is
wrong in the student's terms and names the case (``get_case(topic, name)`` rebuilds it).
One record per topic (signature, reference, cases, mistakes): :mod:`lab.grading.topics`.
Assignment tools: ``python -m lab.grading.generate`` (student versions, hidden tests, nbgrader
source), ``python -m lab.grading.collect`` (pack a submission) and ``python -m lab.grading.grade``
(a folder of submissions -> a grade sheet).
"""
from .cases import Case
from .topic_checks import (CHECKS, check_average_precision, check_calibration, check_fast_ap, check_h_minus,
                     check_map_at_r, check_recall_at_k, check_smooth_ap, check_soft_histogram, check_sup_ap)
from .feedback import CheckFailure, CheckResult, NotImplementedYet
from .topics import TOPICS, cases, get_case

__all__ = ["Case", "cases", "get_case", "CHECKS", "TOPICS", "CheckFailure", "CheckResult", "NotImplementedYet",
           "check_h_minus", "check_smooth_ap", "check_sup_ap", "check_calibration", "check_soft_histogram",
           "check_fast_ap", "check_average_precision", "check_map_at_r", "check_recall_at_k"]
