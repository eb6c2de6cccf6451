"""torch.distributed: 2 CPU processes (gloo) on halves of the global batch == 1 process on it all.

Embeddings are all-gathered with gradient, every rank computes the loss of the global batch,
DDP averages: the gradients, the parameters after the step and the memory must match.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
WORKER = "tests.ddp_worker"  # run as a module from the repository root, so that it imports lab and tests


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    single = subprocess.run([sys.executable, "-m", WORKER, str(out)], env=env, cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert single.returncode == 0, single.stderr[-3000:]
    ddp = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "--module", WORKER, str(out)], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    return {name: torch.load(out / f"{name}.pt") for name in ("single", "rank0", "rank1")}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["plain", "staged"])
@pytest.mark.parametrize("rank", ["rank0", "rank1"])
def test_two_ranks_match_one_process_on_the_global_batch(runs, mode, rank):
    single, ddp = runs["single"][mode], runs[rank][mode]
    assert single["world_size"] == 1 and ddp["world_size"] == 2
    assert ddp["loss"] == pytest.approx(single["loss"], rel=1e-5)
    assert single["grads"].keys() == ddp["grads"].keys()
    for name, grad in single["grads"].items():
        torch.testing.assert_close(ddp["grads"][name], grad, rtol=1e-4, atol=1e-7, msg=name)
    for name, param in single["params"].items():
        torch.testing.assert_close(ddp["params"][name], param, rtol=0, atol=2e-5, msg=name)
    for a, b in zip(single["memory"], ddp["memory"]):  # every rank holds the global batch
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
