"""RankLab dashboard: the TensorFlow Playground of rank losses.

    streamlit run app.py --server.headless true --browser.gatherUsageStats false --server.fileWatcherType none

Pick a dataset, a model and a loss in the sidebar, press Start, and watch the loss, the batch AP,
the held-out R@1 / mAP@R and the decomposability gap move; look at retrievals, embeddings and
score distributions; compare two losses from the same seed. The address bar holds the settings
and the page's run id (``sid``): a reload finds the run again. The trainings run in the server's
worker processes (``lab.dashboard.pool``), so that every page answers at the speed of a page. This
file only lays the page out: logic in ``lab.dashboard``, figures in ``lab.viz.dashboard_figures``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before timm is imported: never wait on the hub
sys.path.insert(0, str(Path(__file__).resolve().parent))  # app_pages and lab, whatever the cwd

import streamlit as st  # noqa: E402
import torch  # noqa: E402

from app_pages import live, results, sidebar, toys  # noqa: E402
from app_pages.fragments import fragment_in_container  # noqa: E402
from lab.core.env import dashboard_threads  # noqa: E402
from lab.dashboard import escape_markdown, validate  # noqa: E402
from lab.dashboard.pool import server_pool  # noqa: E402

# Trainings run in the server's worker processes (lab.dashboard.pool: RANKLAB_WORKERS, one per core by
# default), one torch thread each; with RANKLAB_WORKERS=0 they run here, in threads, with this many.
torch.set_num_threads(dashboard_threads())
VIEWS = ["Training", "Retrievals", "Embeddings", "Scores", "Toy explorer", "Reproduction"]

st.set_page_config(page_title="RankLab", page_icon="📈", layout="wide")
# Streamlit's main column starts ~110 px down (6 rem of padding under a 3.75 rem header) and keeps
# 5 rem on each side: at a projector's 1280 x 720 that hid the held-out curves below the fold
# (issue 36, D-8). The title row now starts under the header's toolbar, and the charts get the width.
st.html("<style>[data-testid='stMainBlockContainer'] {padding: 2.5rem 1.5rem 2rem 1.5rem;} "
        "[data-testid='stHeader'] {height: 2.5rem; min-height: 2.5rem;}</style>")
with st.sidebar:
    st.title("RankLab")
    buttons = st.container()  # filled once the session matches the settings below
    settings = sidebar.settings_panel()
results.warm()  # the Reproduction view's studies, computed in the background once per server
trainers = server_pool()
if trainers is not None:
    trainers.start()  # the training processes start with the server, not on a student's first Start
errors = validate(settings)
session = sidebar.sync_session(settings, errors)  # when the workers cannot hold it now, errors say why
sidebar.sync_url(settings)
with buttons:
    sidebar.run_buttons(session, can_train=not errors)
    st.caption("The address bar holds these settings: copy it to share them.")

st.header("Rank losses, live")
if st.session_state.get("url_notes"):  # kept until dismissed: the first click must not hide them
    for note in st.session_state["url_notes"]:
        st.warning(f"Link: {escape_markdown(note)}")  # a link's text, never its Markdown
    st.button("Dismiss the link notes", key="dismiss_notes", on_click=st.session_state.pop, args=("url_notes",))
if errors:
    st.error("These settings cannot train:\n\n" + "\n".join(f"- {escape_markdown(e)}" for e in errors), icon="🚫")
view = st.segmented_control("View", VIEWS, default="Training", key="view", required=True, label_visibility="collapsed")
if session is not None and not errors and view != "Reproduction":  # its table needs the screen; it trains nothing
    live.live_panel(view)
if view == "Toy explorer":
    fragment_in_container("toys", toys.toy_explorer)
elif view == "Reproduction":
    fragment_in_container("repro", results.results_view)
