"""Process-wide switches read from the environment, in one place.

``LAB_FAST=1`` (fast mode) shrinks training runs and sample sizes so a notebook or the dashboard
answers in seconds on 2 CPU cores (the tests set it); without it runs are sized for the docs'
figures. ``RANKLAB_THREADS`` sets the dashboard's torch threads.
"""
from __future__ import annotations

import os

FAST_ENV = "LAB_FAST"
THREADS_ENV = "RANKLAB_THREADS"


def fast_mode() -> bool:
    """True when ``LAB_FAST`` is set to anything but "", "0", "false", "no"."""
    return os.environ.get(FAST_ENV, "").strip().lower() not in ("", "0", "false", "no")


def dashboard_threads(default: int = 1) -> int:
    """Torch threads of the dashboard's training (``RANKLAB_THREADS``; one per session leaves a core
    to the server and the browser on a 2-core machine). A malformed value falls back to ``default``."""
    try:
        return max(1, int(os.environ.get(THREADS_ENV, default)))
    except ValueError:
        return default
