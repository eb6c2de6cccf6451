"""The local executor's worker processes (``--jobs N``), and the device each one trains on.

``--device cuda`` on a node with several GPUs gives each worker a GPU of its own, round-robin over
``torch.cuda.device_count()`` (worker i: ``cuda:{i mod count}``), so that ``--jobs 4`` on 4 GPUs trains 4 runs
at once, one per GPU, where every worker once went to GPU 0. A device that names its GPU (``cuda:1``), or
one GPU, or the CPU: every worker gets the device as given. The device is not part of a run's key: the same
runs, on other GPUs.
"""
from __future__ import annotations

import os
import queue
import re
from typing import Any, Optional

import torch

from .execution import execute
from .spec import RunSpec

_WORKER_DEVICE: Optional[str] = None  # this worker process's own GPU, set by worker_init


def check_device(device: Optional[str], here: bool = True) -> None:
    """``--device`` refused in one line before anything is written: it must be cpu, or cuda (cuda:N) where this
    machine has CUDA (torch.cuda.is_available()). ``here`` False (jobs that train on a cluster's nodes, not on
    this machine): only its form is checked, the nodes have the GPUs."""
    if device is None:
        return
    count = torch.cuda.device_count() if here and torch.cuda.is_available() else 0
    cuda = ", cuda" + (f", cuda:0..cuda:{count - 1}" if count > 1 else "") if count else ""
    form = device == "cpu" or re.fullmatch(r"cuda(:\d+)?", device)
    if form and (device == "cpu" or not here or (count and int(device.partition(":")[2] or 0) < count)):
        return
    why = "" if form else "not a device it takes; "
    if form and not count:
        why = "CUDA is not available on this machine (torch.cuda.is_available() is False); "
    elif form:
        why = f"this machine has {count} CUDA device{'s' if count > 1 else ''}; "
    raise ValueError(f"--device {device!r}: {why}accepted here: cpu{cuda}")


def worker_devices(device: Optional[str], jobs: int) -> list[Optional[str]]:
    """The device of each of ``jobs`` workers: ``cuda`` spread round-robin over this node's GPUs when it has
    more than one; else ``device`` as given (None: the study's own) for every worker."""
    count = torch.cuda.device_count() if device == "cuda" else 0
    if count > 1:
        return [f"cuda:{i % count}" for i in range(jobs)]
    return [device] * jobs


def device_queue(ctx: Any, device: Optional[str], jobs: int) -> Any:
    """A queue of :func:`worker_devices`, from which each new worker takes its own (``ctx``: the pool's
    multiprocessing context)."""
    devices = ctx.Queue()
    for d in worker_devices(device, jobs):
        devices.put(d)
    return devices


def worker_init(threads: int, devices: Any = None) -> None:
    """A pool worker's start: its OpenMP threads, and its device (the next one in ``devices``)."""
    global _WORKER_DEVICE
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    if devices is not None:
        try:
            _WORKER_DEVICE = devices.get(timeout=10)
        except queue.Empty:  # a worker started to replace one that died: the study's device
            _WORKER_DEVICE = None


def worker_device(device: Optional[str] = None) -> Optional[str]:
    """The device a run gets in this worker: its own GPU when the pool gave it one, else ``device``."""
    return _WORKER_DEVICE if _WORKER_DEVICE is not None else device


def pool_execute(spec: RunSpec, threads: int, device: Optional[str], session: Optional[str] = None,
                 curve_every: int = 0) -> dict[str, Any]:
    """:func:`.execution.execute` in a pool worker, on the worker's own device."""
    return execute(spec, threads, worker_device(device), session=session, curve_every=curve_every)
