"""The dashboard's logic without Streamlit: what ``app.py`` lays out.

Modules: ``sliders`` (loss hyper-parameter widgets from the loss classes), ``settings`` (widget
values, bounds, validation, TrainConfig), ``urlstate`` (settings in the URL), ``session`` (one or
two stepwise trainers and their Start / Pause / Step / Reset), ``worker`` (the thread that trains a
running session), ``view`` (the copy of a session a page draws), ``session_registry`` (sessions by
page id: a browser reload finds its run), ``heldout`` (held-out embeddings: neighbours, similarities,
per-query AP, projections), ``reproduction`` (the Reproduction view's table rows and its cache of
what the studies' verdicts derive from results/). Figures: :mod:`lab.viz.dashboard_figures`.
"""
from .sliders import calibration_thresholds, loss_defaults, loss_sliders, slider_options
from .settings import Settings, escape_markdown, run_labels, to_configs, validate
from .session import Run, TrainingSession
from .urlstate import from_query, to_query

__all__ = ["Settings", "validate", "escape_markdown", "to_configs", "run_labels", "loss_sliders", "loss_defaults",
           "slider_options", "calibration_thresholds", "TrainingSession", "Run", "to_query", "from_query"]
