"""What a spawned pool worker runs in tests/test_study_cluster.py: a module of its own, so that the worker
imports the lab's pool and nothing of the test modules (importing those pulls the whole test suite's imports
into every spawned worker)."""
from __future__ import annotations

import os
import time

from lab.studies.running import local_pool


def pid_and_device(_: int) -> tuple[int, object]:
    time.sleep(0.2)  # long enough that both workers take a share of the calls
    return os.getpid(), local_pool.worker_device("cuda")
