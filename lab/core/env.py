"""Process-wide switches read from the environment, in one place: every variable the project
reads is named here, with the function that reads it.

- ``RANKLAB_FAST=1``: fast mode shrinks training runs and sample sizes so a notebook or the
  dashboard answers in seconds on 2 CPU cores (the tests set it). Its old name ``LAB_FAST`` is
  still read, when ``RANKLAB_FAST`` is unset or empty: the new name wins when both are set;
- ``RANKLAB_THREADS``: the dashboard's torch threads;
- ``RANKLAB_WORKERS``, ``RANKLAB_RUNS_PER_WORKER``: the dashboard's training processes, and the sessions
  each trains at once (:mod:`lab.dashboard.pool`);
- ``RANKLAB_MEMORY_BUDGET``: the losses' and metrics' working memory (:mod:`lab.core.budget`);
- ``RANKLAB_FUSED``: the fused Triton kernels, auto / 0 / 1 (:mod:`lab.losses`' engine);
- ``RANKLAB_DATA``, ``RANKLAB_CACHE``: where disk datasets are looked for, where glyphs are cached;
- ``RANKLAB_SUBMISSION``: the submission the autograder grades;
- ``RANKLAB_REPRODUCTION_CACHE``: the app's store of reproduction results;
- ``RANKLAB_APP_DATA``: the disk datasets and folders a dashboard server offers (:mod:`lab.dashboard.served`);
- ``RANKLAB_APP_MAX_PARAMS``: the most parameters a model a dashboard server builds may have (same module);
- ``RANKLAB_APP_SESSION_MEMORY``: the memory one dashboard session's runs may ask for (same module);
- ``HF_HUB_OFFLINE`` and the proxy variables: whether pretrained weights are fetched;
- torchrun's ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``;
- SLURM's job variables and ``CUDA_VISIBLE_DEVICES``: where a study's run ran (:func:`scheduler_variables`).

It also holds the guard for torch's process-wide thread count (:func:`torch_threads`). Importing
it (every loss and metric does, through :mod:`lab.core`) makes a forked child compute with one
torch thread (:func:`one_thread_after_fork`).
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Iterator, Optional

FAST_ENV = "RANKLAB_FAST"
FAST_ENV_OLD = "LAB_FAST"  # accepted as an alias: one prefix for every variable, old scripts still work
THREADS_ENV = "RANKLAB_THREADS"
WORKERS_ENV = "RANKLAB_WORKERS"
RUNS_PER_WORKER_ENV = "RANKLAB_RUNS_PER_WORKER"
WORKER_NICE_ENV = "RANKLAB_WORKER_NICE"
BUDGET_ENV = "RANKLAB_MEMORY_BUDGET"
FUSED_ENV = "RANKLAB_FUSED"
DATA_ENV = "RANKLAB_DATA"
CACHE_ENV = "RANKLAB_CACHE"
SUBMISSION_ENV = "RANKLAB_SUBMISSION"
REPRODUCTION_CACHE_ENV = "RANKLAB_REPRODUCTION_CACHE"
APP_DATA_ENV = "RANKLAB_APP_DATA"
APP_MAX_PARAMS_ENV = "RANKLAB_APP_MAX_PARAMS"
APP_MAX_PARAMS = 100_000_000  # vit_base and convnext_base (86-88 M) train; the 0.8-4.3 B giants do not
APP_SESSION_MEMORY_ENV = "RANKLAB_APP_SESSION_MEMORY"
HUB_OFFLINE_ENV = "HF_HUB_OFFLINE"
PROXY_ENVS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
_FALSE = ("", "0", "false", "no")


def _text(name: str) -> Optional[str]:
    """The variable's value, stripped; None when it is unset or empty."""
    return os.environ.get(name, "").strip() or None


def scheduler_variables(names: tuple[str, ...]) -> dict[str, str]:
    """{name: value} of those of ``names`` (SLURM's job variables, ``CUDA_VISIBLE_DEVICES``) set in this
    process's environment; a run's record says where it ran with them (:func:`lab.core.provenance.where_it_ran`)."""
    return {name: os.environ[name] for name in names if name in os.environ}


def fast_mode() -> bool:
    """True when ``RANKLAB_FAST`` (else, when it is unset or empty, ``LAB_FAST``) is set to anything but
    "", "0", "false", "no". ``RANKLAB_FAST=0 LAB_FAST=1`` is full mode: the new name decides."""
    return (_text(FAST_ENV) or _text(FAST_ENV_OLD) or "").lower() not in _FALSE


def dashboard_threads(default: int = 1) -> int:
    """Torch threads of the dashboard's training (``RANKLAB_THREADS``; one per session leaves a core
    to the server and the browser on a 2-core machine). A malformed value falls back to ``default``."""
    try:
        return max(1, int(os.environ.get(THREADS_ENV, default)))
    except ValueError:
        return default


def usable_cores() -> int:
    """The cores this process may run on (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _count(name: str, default: int, minimum: int) -> int:
    try:
        return max(minimum, int(_text(name) or default))
    except ValueError:
        return default


def dashboard_workers() -> int:
    """``RANKLAB_WORKERS``: the dashboard's training processes (default: one per usable core; 0: the page's
    own process trains, in threads). A malformed value falls back to the default."""
    return _count(WORKERS_ENV, usable_cores(), 0)


def runs_per_worker(default: int = 3) -> int:
    """``RANKLAB_RUNS_PER_WORKER``: the sessions one training process trains at once (the others queue)."""
    return _count(RUNS_PER_WORKER_ENV, default, 1)


def worker_nice(default: int = 10) -> int:
    """``RANKLAB_WORKER_NICE``: how many nice levels the dashboard's training processes run below the page
    (0-19; default 10: a click never waits behind a step). Heavy work at the page's priority beside a class
    starves workers 10 levels below it (bench/class_load.py --load 8: no step in minutes); 0 shares the CPU
    evenly. Another value: ValueError naming the variable and the accepted values."""
    text = _text(WORKER_NICE_ENV)
    if text is None:
        return default
    if not (text.isascii() and text.isdigit() and int(text) <= 19):
        raise ValueError(f"{WORKER_NICE_ENV}={text!r}: the training processes' nice levels below the page, "
                         "a whole number from 0 to 19 (default 10)")
    return int(text)


def app_data_text() -> str:
    """``RANKLAB_APP_DATA`` as written ("" when unset), parsed by :func:`lab.dashboard.served.offered`."""
    return _text(APP_DATA_ENV) or ""


def app_max_params() -> int:
    """``RANKLAB_APP_MAX_PARAMS``: the most parameters a model the dashboard builds may have, a whole number,
    or millions with an M (``25M``); default :data:`APP_MAX_PARAMS`. A page, or a link, naming any timm model
    made the server build it: convnext_xxlarge's 843 M parameters with their gradients and Adam's moments are
    13.5 GB, a class server's memory for one student. Another value: ValueError naming the variable."""
    text = _text(APP_MAX_PARAMS_ENV)
    if text is None:
        return APP_MAX_PARAMS
    digits, millions = (text[:-1], True) if text[-1:] in ("M", "m") else (text, False)
    if not (digits.isascii() and digits.isdigit() and int(digits) > 0):
        raise ValueError(f"{APP_MAX_PARAMS_ENV}={text!r}: the most parameters a dashboard model may have, a whole "
                         f"number above 0, or millions with an M (e.g. 25M; default {APP_MAX_PARAMS // 10**6}M)")
    return int(digits) * (10**6 if millions else 1)


def app_session_memory_text() -> Optional[str]:
    """``RANKLAB_APP_SESSION_MEMORY`` as written ('2GB'; None when unset), parsed by
    :func:`lab.dashboard.served.session_memory` with the losses' budget parser."""
    return _text(APP_SESSION_MEMORY_ENV)


def memory_budget_text() -> Optional[str]:
    """``RANKLAB_MEMORY_BUDGET`` as written ('64MB', '2**26'), parsed by :func:`lab.core.budget.parse_budget`."""
    return _text(BUDGET_ENV)


def fused_mode() -> str:
    """``RANKLAB_FUSED``, lower case: "auto" (also when unset), "0" or "1"; another value is an error."""
    mode = (_text(FUSED_ENV) or "auto").lower()
    if mode not in ("auto", "0", "1"):
        raise ValueError(f"{FUSED_ENV} must be 'auto', '0' or '1', got {mode!r}")
    return mode


def triton_interpret() -> bool:
    """``TRITON_INTERPRET``, Triton's own switch ("1", "true", "on", "yes"), as its ``knobs`` read it: the
    kernels are built for its CPU interpreter."""
    return (_text("TRITON_INTERPRET") or "0").lower() in ("1", "true", "on", "yes")


def data_root() -> Optional[Path]:
    """``RANKLAB_DATA``: the folder under which disk datasets are looked for (None: unset)."""
    text = _text(DATA_ENV)
    return Path(text).expanduser() if text else None


def cache_dir() -> Path:
    """``RANKLAB_CACHE``, else ~/.cache/ranklab: where rendered glyph sets are cached."""
    return Path(_text(CACHE_ENV) or Path.home() / ".cache" / "ranklab")


def project_root() -> Path:
    """Where the commands that write the project's results (``python -m lab study``: results/, docs/) put them
    by default: the source checkout this package runs from (a clone, or an editable install of one), else the
    current folder. An installed package has site-packages above it, which is nobody's project folder."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / "pyproject.toml").is_file() and (here / "lab" / "__init__.py").is_file() else Path.cwd()


def submission_path() -> Optional[str]:
    """``RANKLAB_SUBMISSION``: the folder or zip the autograder grades (None: unset)."""
    return _text(SUBMISSION_ENV)


def reproduction_cache(default: Path) -> Path:
    """``RANKLAB_REPRODUCTION_CACHE``, else ``default``: the app's store of reproduction results."""
    text = _text(REPRODUCTION_CACHE_ENV)
    return Path(text) if text else default


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` set to 1 / true / yes / on: never contact the Hugging Face hub."""
    return (_text(HUB_OFFLINE_ENV) or "").lower() in ("1", "true", "yes", "on")


@contextlib.contextmanager
def hub_offline_set() -> Iterator[None]:
    """``HF_HUB_OFFLINE=1`` inside the block, then the variable as it was (set to its value, or unset)."""
    saved = os.environ.get(HUB_OFFLINE_ENV)
    os.environ[HUB_OFFLINE_ENV] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(HUB_OFFLINE_ENV, None)
        else:
            os.environ[HUB_OFFLINE_ENV] = saved


def proxy_set() -> bool:
    """An HTTPS or catch-all proxy is configured (a direct probe of the hub says nothing then)."""
    return any(_text(name) for name in PROXY_ENVS)


def local_rank() -> int:
    """torchrun's ``LOCAL_RANK`` (0 in a plain run): this process's GPU on its machine."""
    return int(os.environ.get("LOCAL_RANK", 0))


def world_size() -> int:
    """torchrun's ``WORLD_SIZE`` (1 in a plain run): the processes training together."""
    return int(os.environ.get("WORLD_SIZE", 1))


def local_world_size() -> int:
    """torchrun's ``LOCAL_WORLD_SIZE`` (1 in a plain run): the processes sharing this machine's cores."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", 1))


@contextlib.contextmanager
def torch_threads(count: Optional[int]) -> Iterator[None]:
    """torch's intra-op thread count set to ``count`` inside the block, and restored after it, also on
    an error. ``None``, or the count already in place, touches nothing: setting the count re-creates
    torch's thread pool, which is not free and, from several threads at once, not safe (see
    :func:`one_thread_after_fork`). The count is process-wide: other Python threads see it meanwhile."""
    import torch

    before = torch.get_num_threads()
    if count is None or count == before:
        yield
        return
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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
