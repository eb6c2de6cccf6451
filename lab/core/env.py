"""Process-wide switches read from the environment, in one place.

``LAB_FAST=1`` (fast mode) shrinks training runs and sample sizes so a notebook or the dashboard
answers in seconds on 2 CPU cores (the tests set it); without it runs are sized for the docs'
figures. ``RANKLAB_THREADS`` sets the dashboard's torch threads.

Importing it (every loss and metric does, through :mod:`lab.core`) also makes a forked child
compute with one torch thread (:func:`one_thread_after_fork`).
"""
from __future__ import annotations

import os
import sys

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


def one_thread_after_fork() -> None:
    """In a forked child: torch on one thread.

    Once the parent has run a multi-threaded torch op, torch's bundled OpenMP runtime holds a team
    of threads that the child does not have; the child's next parallel region (a plain matmul,
    ``torch.searchsorted`` inside ``retrieval_metrics``) then waits for them forever. With one
    thread torch runs no parallel region. Done here, in the fork hook, while the child has a single
    thread: setting the count later, from several threads at once, re-creates torch's pool
    unsafely ("Invalid thread pool!", see lab/metrics/counting.py). A child that wants more
    threads sets them itself, knowing the risk; ``spawn`` starts clean.
    """
    torch = sys.modules.get("torch")  # a child of a process that never imported torch needs nothing
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=one_thread_after_fork)
