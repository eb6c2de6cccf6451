"""The short training runs behind the notebooks' experiments and the docs' trained-model figures.

A thin layer over :class:`lab.train.Trainer`: the run settings of a notebook (fast or full mode,
:func:`lab.core.env.fast_mode`), cached runs, and the papers' comparisons as lists of result rows
(``runs``: ROADMAP Table 2, Fig. 5, FastAP Fig. 4b, SupRank Tab. II; ``hierarchical_runs``: HAPPIER vs
SmoothAP, SupRank Tab. IX). The figures of those rows are drawn by :mod:`lab.viz.comparisons`.
"""
from ..core.extras import require

require("lab.experiments")  # first: a missing extra is one line naming it, not a traceback from a submodule

