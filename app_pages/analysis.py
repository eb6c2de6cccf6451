"""The views of the held-out images: retrievals, embedding maps, score distributions.

They draw from each run's held-out snapshot, which follows training at the evaluation pace while
running and exactly when paused. The query is a row of that (fixed) subset, shared by all views
and both runs, kept in ``st.session_state["query_row"]``. A figure is built once per snapshot
and choice (``paced_figure``): the live panel reruns every second while the snapshot changes at
every evaluation, and the CPU it would spend redrawing is the training's and the Pause click's.
"""
from __future__ import annotations

import functools
import random

import streamlit as st

from lab.dashboard import TrainingSession, calibration_thresholds, escape_markdown
from lab.dashboard.heldout import (describe_item, neighbours, pair_similarities, per_query_ap, project,
                                   selected_row, thumbnail)
from lab.viz.dashboard_figures import (plot_ap_histograms, plot_embedding_map, plot_retrieval_strip,
                                       plot_score_histograms, score_caption)

from .widgets import paced_figure

QUERY_KEY, K_KEY = "query_row", "k"


def _snapshots(session: TrainingSession):
    """Each run's held-out snapshot; [] (and a line saying so) while a training process computes them.
    Live: the training refreshes them at every evaluation (a tick may overshoot it)."""
    lag = session.eval_every + session.steps_per_tick if session.running else 0
    found = session.snapshots(lag)
    if not found:
        st.info("Computing the held-out embeddings in a training process…")
    return found


def _clamp_query(size: int) -> int:
    row = int(st.session_state.get(QUERY_KEY, 0))
    if not 0 <= row < size:
        row = 0
    st.session_state[QUERY_KEY] = row  # before the widget exists: allowed
    return row


def _random_query(size: int) -> None:
    # Its own generator: the global one belongs to the training thread (its augmentations).
    st.session_state[QUERY_KEY] = random.Random().randrange(size)


def _strip(dataset, label: str, h, row: int, k: int):
    found = neighbours(h, row, k)
    images = [thumbnail(dataset, h.items[r]) for r in found["rows"]]
    title = f"{label} at step {h.step}: top {len(images)} of {len(h) - 1}"
    return plot_retrieval_strip(thumbnail(dataset, h.items[row]), images, found["scores"], found["levels"], title)


def _strips(session: TrainingSession, snapshots, row: int) -> None:
    k = int(st.session_state.get(K_KEY, 8))
    dataset = session.test_set()
    for run, h in snapshots:
        key = f"strip_{run.label}"
        fig = paced_figure(key, (h, row, k), session.running,
                           functools.partial(_strip, dataset, run.label, h, row, k))
        st.plotly_chart(fig, key=key)


def retrievals_view(session: TrainingSession) -> None:
    snapshots = _snapshots(session)
    if not snapshots:
        return
    size = len(snapshots[0][1])
    _clamp_query(size)
    left, mid, right = st.columns([2, 2, 1])
    left.number_input(f"Query (row of the {size} held-out images)", 0, size - 1, step=1, key=QUERY_KEY)
    mid.slider("Neighbours shown (k)", 1, 16, 8, key=K_KEY)
    right.button("Random query", on_click=_random_query, args=(size,), width="stretch")
    row = int(st.session_state[QUERY_KEY])
    h = snapshots[0][1]
    st.caption(f"Query: {escape_markdown(describe_item(session.test_set(), h.labels[row]))}. "
               "Frames: green = same class, orange = same coarse class, red = other.")
    _strips(session, snapshots, row)


def _on_pick(chart_key: str) -> None:
    row = selected_row(st.session_state.get(chart_key))
    if row is not None:
        st.session_state[QUERY_KEY] = row


def embeddings_view(session: TrainingSession) -> None:
    snapshots = _snapshots(session)
    if not snapshots:
        return
    size = len(snapshots[0][1])
    row = _clamp_query(size)
    dataset = session.test_set()
    hierarchical = snapshots[0][1].labels.shape[1] > 1
    c1, c2, c3 = st.columns([1, 1, 1])
    method = c1.segmented_control("Projection", ["PCA", "t-SNE"], default="PCA", key="projection")
    colour = c2.segmented_control("Colour by", ["class", "coarse class"] if hierarchical else ["class"],
                                  default="coarse class" if hierarchical else "class", key="colour")
    if method == "t-SNE" and c3.button("Compute t-SNE now", help="A few seconds; kept for this step"):
        for run, h in snapshots:
            run.projections[("tsne", h.step)] = project(h, "tsne", run.config.seed)
    level = 1 if colour == "coarse class" else 0
    names = dataset.coarse_names if level else dataset.class_names
    columns = st.columns(len(snapshots))
    for col, (run, h) in zip(columns, snapshots):
        with col:
            points, title = _points(run, h, method)
            if points is None:
                st.info(f"{run.label}: no t-SNE yet: press 'Compute t-SNE now' (kept per training step).")
                continue
            k = int(st.session_state.get(K_KEY, 8))
            key = f"map_{run.label}"
            draw = functools.partial(_map, dataset, run.label, h, points, level, names, title, row, k, method)
            fig = paced_figure(key, (h, title, level, row, k), session.running, draw)
            st.plotly_chart(fig, key=key, on_select=functools.partial(_on_pick, key), selection_mode="points")
    thumb, text = st.columns([1, 6])
    thumb.image(thumbnail(dataset, snapshots[0][1].items[row], 96), caption=f"row {row}")
    text.markdown("**Selected query** (click a point to change it): "
                  + escape_markdown(describe_item(dataset, snapshots[0][1].labels[row])))  # a glyph may be ` or *
    _strips(session, snapshots, row)


def _map(dataset, label: str, h, points, level: int, names, title: str, row: int, k: int, method: str):
    hover = [describe_item(dataset, h.labels[r]) for r in range(len(h))]
    fig = plot_embedding_map(points, h.labels[:, level].tolist(), names, hover, title, selected=row,
                             neighbours=neighbours(h, row, k))
    fig.update_layout(uirevision=f"{label}-{method}")  # keep zoom while training redraws
    return fig


def _points(run, h, method: str):
    if method != "t-SNE":
        return project(h, "pca"), f"{run.label}: PCA at step {h.step}"
    steps = sorted(s for (m, s) in run.projections if m == "tsne")
    if not steps:
        return None, ""
    latest = steps[-1]
    note = "" if latest == h.step else f" (model now at step {h.step}: recompute)"
    return run.projections[("tsne", latest)], f"{run.label}: t-SNE at step {latest}{note}"


def _score_figures(snapshots):
    samples, thresholds, aps = {}, {}, {}
    for run, h in snapshots:
        samples[run.label] = pair_similarities(h, seed=run.config.seed)
        thresholds[run.label] = calibration_thresholds(run.config.loss, run.config.loss_kwargs)
        aps[run.label] = per_query_ap(h)
    return plot_score_histograms(samples, thresholds), plot_ap_histograms(aps), score_caption(thresholds)


def scores_view(session: TrainingSession) -> None:
    snapshots = _snapshots(session)
    if not snapshots:
        return
    version = tuple(h for _, h in snapshots)  # snapshots compare by identity: a new model, a new snapshot
    scores, aps, caption = paced_figure("scores", version, session.running,
                                        functools.partial(_score_figures, snapshots))
    st.caption(caption)  # of the losses shown: solid lines are a loss's own thresholds, dashed ROADMAP's
    st.plotly_chart(scores, key="scores")
    st.plotly_chart(aps, key="aps")


VIEWS = {"Retrievals": retrievals_view, "Embeddings": embeddings_view, "Scores": scores_view}
