"""Figure builders and the numbers they draw, for the notebooks, the docs and the dashboard.

Each module pairs pure computations (returning floats / lists / tensors, tested against the
papers' claims) with builders returning a plotly Figure made of Python lists (plotly 7 would
base64-encode arrays in the spec). ``render.save_png`` draws a builder's figure with
matplotlib for ``docs/figures`` (no browser needed). Interactive knobs: ``controls``.

Modules: ``surrogates`` (ROADMAP Fig. 3, 11), ``gradient_flow`` (Fig. 1a, 7-8),
``decomposability_toys`` (Fig. 1b, 9-10, Eq. 8-9), ``binning`` (FastAP Fig. 4c, Revaud supp.
Fig. 1), ``hierarchical_ap`` (SupRank Fig. 13-14), ``recall_at_k`` (SupRank Eq. 13-16), ``comparisons``
(trained runs' rows: ROADMAP Table 2, Fig. 5, FastAP Fig. 4b, SupRank Tab. II, IX), ``retrieval_views``
(retrieval grids, PCA / t-SNE maps, class-mean maps of SupRank Fig. 9), ``dashboard_figures`` (the
dashboard's charts), ``svg_curves`` (its live training curves, an SVG string: light for a browser). The runs
themselves are made by :mod:`lab.experiments`; this package draws what it is given and trains nothing.
"""
from ..core.extras import require

require("lab.viz")  # first: a missing extra is one line naming it, not a traceback from a submodule

