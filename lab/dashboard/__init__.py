"""The dashboard's logic without Streamlit: what ``app.py`` lays out.

Modules: ``sliders`` (loss hyper-parameter widgets from the loss classes), ``settings`` (widget
values, bounds, validation, TrainConfig), ``urlstate`` (settings in the URL), ``session`` (one or
two stepwise trainers and their Start / Pause / Step / Reset), ``worker`` (the thread that trains a
running session), ``pool``, ``host``, ``remote_session`` and ``gate`` (the server's training processes, a
session trained in one of them, and where its page's Pause meets the steps), ``datasets`` (data
built once per process), ``view`` (the copy of a session a page draws), ``session_registry``
(sessions by page id: a browser reload finds its run), ``heldout`` (held-out embeddings: neighbours,
similarities, per-query AP, projections), ``reproduction`` (the Reproduction view's table rows and
its cache of what the studies' verdicts derive from results/), ``class_server``, ``class_pages`` and
``class_page`` (the class page: the training view as one small HTML page, ``make class``). Figures:
:mod:`lab.viz.dashboard_figures`.
"""
from .sliders import calibration_thresholds, loss_defaults, loss_sliders, slider_options
from .settings import Settings, escape_markdown, run_labels, to_configs, validate
from .session import Run, TrainingSession
from .urlstate import from_query, to_query



def new_session(configs, labels, target_steps: int, steps_per_tick: int, eval_every: int, ask: int = 0):
    """A page's session: trained by the server's worker processes (:mod:`lab.dashboard.pool`), holding
    ``ask`` bytes of their memory (``pool.NoMemory`` when they cannot now), or in a thread of this process
    when there are none (``RANKLAB_WORKERS=0``)."""
    from .pool import server_pool
    from .remote_session import RemoteSession

    pool = server_pool()
    if pool is None:
        return TrainingSession(configs, labels, target_steps, steps_per_tick, eval_every)
    return RemoteSession(pool.start(), configs, labels, target_steps, steps_per_tick, eval_every, ask)


__all__ = ["new_session", "Settings", "validate", "escape_markdown", "to_configs", "run_labels", "loss_sliders",
           "loss_defaults", "slider_options", "calibration_thresholds", "TrainingSession", "Run", "to_query",
           "from_query"]
