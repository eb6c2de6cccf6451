"""Replay the first steps of a stored study run with the code that trained it and with today's: does
today's code still train the same run, bit for bit?

A stored run (``results/v2/*.json``) is only worth comparing with a new one if today's code trains its
config as the code of then did. This module trains a run's first ``steps`` steps from its stored
``config`` in a fresh Python process whose ``lab`` is a given checkout: a clean export of a commit
(``git archive``, so uncommitted changes play no part) or today's tree. The child uses only what both
sides share (``TrainConfig.from_dict``, ``Trainer(cfg).step(n)``, the model's ``state_dict``), one torch
thread on the CPU as the study's runs were trained (``lab.studies.running.runner.execute``), and prints a sha256
of the weights and every step's loss, so a difference names the first step it shows in.

tests/test_study_replay.py runs it for runs of protocol v2's study 1 at :data:`TRAINED_AT`.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from ...core.provenance import cpu_features
from .paths import RESULTS, ROOT

# The code that trained protocol v2's seed-0 runs of study 1 (started 2026-11-25 14:45-17:30, by their
# "finished" minus "seconds"; those runs record no commit). eb7e669 was HEAD then; lab/'s training code
# (train, losses, core, data, models) is the same from the pilot's commit 19daea8 until 4e0c22f
# (2026-11-26 04:18), so every run of study 1 finished before 4e0c22f was trained by this code.
# tests/test_study_replay.py checks that span against git's history and the records.
TRAINED_AT = "eb7e669"
NEXT_TRAINING_CHANGE = "4e0c22f"
# What TRAINED_AT's code trained, recorded once per machine kind (``python -m lab.studies.running.replay --write``)
# for a clone without the history (a shallow one): comparable only on the same torch and CPU kind (``machine()``).
FINGERPRINT = RESULTS / "v2" / "replay_fingerprint.json"
TRAINING_CODE = ("lab/train", "lab/losses", "lab/core", "lab/data", "lab/models", "lab/__init__.py")

# Runs in the child: only what the stored runs' code and today's both have. The run's own config,
# steps included (a schedule may read them); ``step(n)`` trains its first n steps.
CHILD = """
import hashlib, json, sys
import torch
torch.set_num_threads(1)
from lab.train import Trainer, TrainConfig
job = json.loads(sys.argv[1])
out = []
for config in job["configs"]:
    trainer = Trainer(TrainConfig.from_dict({**config, "device": "cpu"}))
    trainer.step(job["steps"])
    digest = hashlib.sha256()
    for name, tensor in sorted(trainer.model.state_dict().items()):
        digest.update(name.encode() + str(tensor.dtype).encode() + str(tuple(tensor.shape)).encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    losses = [r["loss"].hex() for r in trainer.history if r.get("kind") == "train"]
    out.append({"weights_sha256": digest.hexdigest(), "losses": losses})
print(json.dumps(out))
"""


class MissingHistory(RuntimeError):
    """The git history a replay needs is not there (no git, not a repository, a shallow clone)."""


def _git(*args: str, repo: Path = ROOT) -> str:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise MissingHistory("git is not installed: the replay needs git and the repository's history") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise MissingHistory(f"git {' '.join(args)} failed in {repo}: {last}")
    return done.stdout.strip()


def resolve(commit: str, repo: Path = ROOT) -> str:
    """The full hash of ``commit``; :class:`MissingHistory` naming it where this clone lacks it."""
    if _git("rev-parse", "--is-shallow-repository", repo=repo) == "true":
        raise MissingHistory(f"{repo} is a shallow clone: commit {commit} (the code that trained the stored runs) "
                             "is not in its history; fetch it with `git fetch --unshallow`")
    try:
        return _git("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", repo=repo)
    except MissingHistory:
        raise MissingHistory(f"commit {commit} (the code that trained the stored runs) is not in {repo}'s "
                             "history") from None


def export_lab(commit: str, folder: Path, repo: Path = ROOT) -> Path:
    """Write ``commit``'s ``lab`` package (its committed files only) into ``folder``; ``folder``."""
    full = resolve(commit, repo)
    with tempfile.TemporaryFile() as tar:
        done = subprocess.run(["git", "-C", str(repo), "archive", full, "lab"], stdout=tar, stderr=subprocess.PIPE)
        if done.returncode != 0:
            raise MissingHistory(f"git archive {commit} failed: {done.stderr.decode().strip()}")
        tar.seek(0)
        tarfile.open(fileobj=tar).extractall(folder, filter="data")
    return folder


def train_first_steps(checkout: Path, configs: Sequence[dict[str, Any]], steps: int) -> subprocess.Popen:
    """Start a process training each of ``configs``' first ``steps`` steps with ``checkout``'s lab (one
    torch thread, CPU, offline); :func:`collect` reads its result. Started, not awaited: two run at once."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1"}
    job = json.dumps({"configs": list(configs), "steps": steps})
    # cwd is the checkout: the child's sys.path[0] ('') must hold no other lab than PYTHONPATH's.
    return subprocess.Popen([sys.executable, "-c", CHILD, job], cwd=checkout, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def collect(process: subprocess.Popen, timeout: float = 600) -> list[dict[str, Any]]:
    """The child's result: per config, its weights' sha256 and every step's loss (as float.hex)."""
    out, err = process.communicate(timeout=timeout)
    if process.returncode != 0:
        raise RuntimeError(f"the replay process failed (exit {process.returncode}): {err.strip()[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def first_difference(then: Sequence[str], now: Sequence[str]) -> str:
    """Where two runs' per-step losses part: 'step k: a vs b', or that they agree."""
    for step, (a, b) in enumerate(zip(then, now), start=1):
        if a != b:
            return f"step {step}'s loss {float.fromhex(a)!r} vs {float.fromhex(b)!r}"
    return "every step's loss the same (the weights differ after them)" if len(then) == len(now) else \
        f"{len(then)} vs {len(now)} steps recorded"


def machine() -> dict[str, Optional[str]]:
    """What a CPU run's bits depend on besides the code: torch's version and the vector units it may use (torch's
    capability and the CPU's own flags: two machines both "AVX512" to torch trained different bits)."""
    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cpu_features": cpu_features(), "machine": platform.machine()}


def write_fingerprint(configs: dict[str, dict[str, Any]], steps: int, path: Path = FINGERPRINT) -> dict[str, Any]:
    """Train ``configs`` ({name: config})' first ``steps`` steps at TRAINED_AT (needs the history) and store
    their weights' sha256 and losses with this ``machine()``, written atomically. The fingerprints of other
    machines stay (one per machine: a CPU kind trains its own bits); this machine's replaces its old one."""
    with tempfile.TemporaryDirectory() as tmp:
        then = collect(train_first_steps(export_lab(TRAINED_AT, Path(tmp)), list(configs.values()), steps))
    here = {"machine": machine(),
            "runs": {name: {"config": config, **result} for (name, config), result in zip(configs.items(), then)}}
    kept = [f for f in read_fingerprint(path)["fingerprints"] if f["machine"] != here["machine"]] \
        if path.exists() else []
    data = {"commit": resolve(TRAINED_AT), "steps": steps, "fingerprints": kept + [here]}
    tmp_path = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp_path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp_path, path)
    return here


def read_fingerprint(path: Path = FINGERPRINT) -> dict[str, Any]:
    """The stored fingerprints ({"commit", "steps", "fingerprints": [{"machine", "runs"}, ...]}); a one-line
    ValueError naming the file if it is not one."""
    try:
        data = json.loads(path.read_text())
        assert data["steps"] >= 1 and data["fingerprints"]
        assert all(isinstance(f["runs"], dict) and isinstance(f["machine"], dict) for f in data["fingerprints"])
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as e:
        raise ValueError(f"{path}: not a replay fingerprint ({type(e).__name__}: {e})") from None
    return data


def fingerprint_for(data: dict[str, Any], exact: bool) -> Optional[dict[str, Any]]:
    """The stored fingerprint of this machine's kind: the one whose machine is ``machine()``, else (``exact``
    False) one whose machine names fewer fields, all equal here (recorded before ``cpu_features`` existed: it
    may be another CPU kind's, so only a clone without the history falls back on it); None if none."""
    here = machine()
    for f in data["fingerprints"]:
        if f["machine"] == here:
            return f
    if exact:
        return None
    return next((f for f in data["fingerprints"] if all(here.get(k) == v for k, v in f["machine"].items())), None)


if __name__ == "__main__":  # python -m lab.studies.running.replay --write: record TRAINED_AT's first steps
    parser = argparse.ArgumentParser(prog="python -m lab.studies.running.replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"(re)write {FINGERPRINT.relative_to(ROOT)}")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--methods", default="ROADMAP,FastAP", help="seed-0 runs of results/v2/methods.json")
    args = parser.parse_args()
    if args.write:
        runs = json.loads((RESULTS / "v2" / "methods.json").read_text())["runs"].values()
        wanted = args.methods.split(",")
        chosen = {r["method"]: r["config"] for r in runs if r["seed"] == 0 and r["method"] in wanted}
        missing = sorted(set(wanted) - set(chosen))
        if missing:
            parser.error(f"--methods: no seed-0 run of {missing[0]!r} in results/v2/methods.json")
        print(json.dumps(write_fingerprint(dict(sorted(chosen.items())), args.steps)["machine"]))
