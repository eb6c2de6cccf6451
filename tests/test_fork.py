"""A forked child computes after its parent ran multi-threaded torch ops (issue 34, defect 11):
torch's OpenMP team does not survive the fork, and the child waited for it forever."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHILD_SECONDS = 60  # a child needs about a second; one that has not exited by then is stuck
DRIVER = r"""
import os, signal, sys, time
import torch
torch.set_num_threads(2)  # two OpenMP threads even on a one-core machine: the team the child lacks
from lab.losses import build_loss
from lab.metrics import retrieval_metrics

g = torch.Generator().manual_seed(0)
emb = torch.nn.functional.normalize(torch.randn(3000, 16, generator=g), dim=1)
labels = torch.arange(3000) // 5
retrieval_metrics(emb, labels)  # the parent's multi-threaded work
x = torch.rand(2_000_000, generator=g)
torch.searchsorted(torch.sort(x).values, x)
loss = build_loss("smooth_ap")

def child(what):
    if what == "metrics":
        ok = 0 <= retrieval_metrics(emb[:600], labels[:600])["R@1"] <= 1
    else:
        ok = bool(torch.isfinite(loss(emb[:256], labels[:256])))
    os._exit(0 if ok else 1)

for what in ("metrics", "loss"):
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            child(what)
        deadline = time.monotonic() + float(sys.argv[1])
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                print(what, "exit", os.waitstatus_to_exitcode(status), flush=True)
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                print(what, "hung", flush=True)
                sys.exit(0)
            time.sleep(0.02)
"""


@pytest.mark.slow
def test_retrieval_metrics_and_a_loss_return_in_a_forked_child():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OMP_NUM_THREADS", None)  # one OpenMP thread would hide the bug
    done = subprocess.run([sys.executable, "-c", DRIVER, str(CHILD_SECONDS)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=12 * CHILD_SECONDS)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["metrics exit 0"] * 3 + ["loss exit 0"] * 3, done.stderr[-3000:]


def test_the_fork_hook_sets_one_thread_only_in_the_child():
    import torch

    import lab.core  # noqa: F401  (registers the hook, as every loss and metric does)

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        pid = os.fork()
        if pid == 0:
            os._exit(torch.get_num_threads())
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 1
        assert torch.get_num_threads() == 2  # the parent keeps its threads
    finally:
        torch.set_num_threads(before)
