"""Step functions and their smooth surrogates (ROADMAP Eq. 3-4, SupRank Eq. 3-5): the public face
of :mod:`lab.core.steps`, where they are defined.

Every rank loss in the lab counts, for a positive k of a query, how many items j score above
it: ``rank(k) = 1 + sum_j H(s_j - s_k)``. The functions below are the choices of H.
"""
from .core.checks import check_positive
from .core.steps import STEPS, check_h_minus, default_delta, h_minus, heaviside, histogram_ap, sigmoid, soft_histogram

__all__ = ["heaviside", "sigmoid", "h_minus", "default_delta", "soft_histogram", "histogram_ap", "check_h_minus",
           "check_positive", "STEPS"]
