"""Streamlit layout of the RankLab dashboard (``app.py``): sidebar, live panel, analysis views,
toy explorer. Logic and figures live in :mod:`lab.dashboard` and :mod:`lab.viz.dashboard_figures`."""
