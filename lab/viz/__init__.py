"""Figure builders and the numbers they draw, for the notebooks, the docs and the dashboard.

Each module pairs pure computations (returning floats / lists / tensors, tested against the
papers' claims) with builders returning a plotly Figure made of Python lists (plotly 7 would
base64-encode arrays in the spec). ``render.save_png`` draws a builder's figure with
matplotlib for ``docs/figures`` (no browser needed). Interactive knobs: ``controls``.

Modules: ``surrogates`` (ROADMAP Fig. 3, 11), ``gradient_flow`` (Fig. 1a, 7-8),
``decomposability`` (Fig. 1b, 9-10, Eq. 8-9), ``binning`` (FastAP Fig. 4c, Revaud supp.
Fig. 1), ``hierarchical`` (SupRank Fig. 13-14), ``training`` (short runs with the trainer; ROADMAP
Table 2, Fig. 5), ``hierarchical_training`` (HAPPIER vs SmoothAP, SupRank Tab. IX, Fig. 9),
``retrieval`` (retrieval grids, PCA / t-SNE maps).
"""
from __future__ import annotations

import os

FAST_ENV = "LAB_FAST"


def fast_mode() -> bool:
    """True when ``LAB_FAST`` is set to anything but "", "0", "false", "no" (tests set it to 1).

    Fast mode shrinks training runs and sample sizes so a notebook runs in well under a minute
    on 2 CPU cores; without it the figures are computed at documentation quality.
    """
    return os.environ.get(FAST_ENV, "").strip().lower() not in ("", "0", "false", "no")


__all__ = ["fast_mode", "FAST_ENV"]
