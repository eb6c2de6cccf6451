"""Every interactive figure of the notebooks: name -> (builder, slider spec).

The notebooks call ``explore(*INTERACTIVE[name])``; the tests drive each builder at the min,
mid and max of each of its sliders; the dashboard lists them, captioned by ``caption(name)``.
"""
from __future__ import annotations

from typing import Callable

from .binning import (APQ_SLIDERS, BINNING_SLIDERS, TRADEOFF_SLIDERS, plot_apq_scatter, plot_bin_tradeoff,
                      plot_soft_binning)
from .controls import Slider
from .decomposability_toys import CALIBRATION_SLIDERS, JUXTAPOSED_SLIDERS, plot_calibration_bounds, plot_juxtaposed
from .gradient_flow import FLOW_SLIDERS, plot_gradient_flow, plot_recall_gradient_flow
from .hierarchical_ap import LADA_SLIDERS, plot_lada
from .recall_at_k import SURROGATE_STEP_SLIDERS, plot_recall_surrogate
from .surrogates import DELTA_SLIDERS, SURROGATE_SLIDERS, plot_delta_choice, plot_surrogates

INTERACTIVE: dict[str, tuple[Callable, dict[str, Slider]]] = {
    "surrogates": (plot_surrogates, SURROGATE_SLIDERS),
    "delta_choice": (plot_delta_choice, DELTA_SLIDERS),
    "gradient_flow": (plot_gradient_flow, FLOW_SLIDERS),
    "juxtaposed": (plot_juxtaposed, JUXTAPOSED_SLIDERS),
    "calibration_bounds": (plot_calibration_bounds, CALIBRATION_SLIDERS),
    "soft_binning": (plot_soft_binning, BINNING_SLIDERS),
    "bin_tradeoff": (plot_bin_tradeoff, TRADEOFF_SLIDERS),
    "apq_scatter": (plot_apq_scatter, APQ_SLIDERS),
    "lada": (plot_lada, LADA_SLIDERS),
    "recall_surrogate": (plot_recall_surrogate, SURROGATE_STEP_SLIDERS),
    "recall_gradient_flow": (plot_recall_gradient_flow, FLOW_SLIDERS),
}


def caption(name: str) -> str:
    """The one-line caption of an interactive figure, shown to students: the first paragraph of
    its builder's docstring, which is therefore plain prose (no code names or markup)."""
    if name not in INTERACTIVE:
        raise ValueError(f"name must be one of {list(INTERACTIVE)}, got {name!r}")
    doc = (INTERACTIVE[name][0].__doc__ or "").strip()
    return " ".join(doc.split("\n\n")[0].split())
