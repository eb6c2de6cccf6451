"""A re-run's final weights evaluated by the code that evaluated the stored run: is it the same run?

A re-run's curve may join a stored run only if the re-run is that run (``lab.studies.running.rerun_curves``).
Its numbers say so when they agree bit for bit, but the evaluation itself changed after the first v2 runs
(44a7127: two float reductions), so a re-run evaluated by today's code can differ in a last bit that says nothing about
the weights. This settles it directly: the re-run's config is trained again by the re-run's code (the same
trajectory: evaluating on the way does not move a run), its final weights are saved, and both codes
evaluate them in fresh processes, as ``lab.studies.running.runner.execute`` does (``Trainer.evaluate`` and the
held-out gap). The re-run's code must give the re-run's record bit for bit (this training is the re-run),
and the stored run's code the stored record bit for bit (the re-run's weights are the stored run's).

    python -m lab.studies.running.evaluated_then RERUNS STORED --train-at CHECKOUT --then eb7e669 --out CHECKS.json

``CHECKS`` (results/v2/rerun_checks.json) is what ``python -m lab.studies.running.rerun_curves --checked`` reads.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ...core.files import write_text_atomic
from .paths import RESULTS
from .replay import _git, export_lab, resolve

# Numbers execute() records from the evaluation: each must agree bit for bit.
EVALUATED = ("R@1", "R@2", "R@4", "R@8", "mAP", "mAP@R", "num_queries", "gap_train_probe", "gap_heldout")

# Runs in the child, with only what both codes have: train (when asked) and save the weights, or load them;
# then evaluate as the study did.
CHILD = """
import json, sys
import torch
torch.set_num_threads(1)
from lab.train import Trainer, TrainConfig
from lab.experiments.runs import heldout_gap
job = json.loads(sys.argv[1])
cfg = TrainConfig.from_dict({**job["config"], "device": "cpu"})
trainer = Trainer(cfg)
if job["train"]:
    trainer.step(cfg.steps)
    torch.save({"model": trainer.model.state_dict(), "loss": trainer.loss_fn.state_dict()}, job["weights"])
else:
    state = torch.load(job["weights"], map_location="cpu")
    trainer.model.load_state_dict(state["model"])
    trainer.loss_fn.load_state_dict(state["loss"])
result = trainer.evaluate()
out = {k: float(result[k]) for k in ("R@1", "R@2", "R@4", "R@8", "mAP", "mAP@R") if k in result}
out.update(num_queries=int(result["num_queries"]), gap_train_probe=float(result["decomposability_gap"]),
           gap_heldout=float(heldout_gap(trainer, cfg.eval_max_items)), steps=trainer.step_count)
print(json.dumps(out))
"""


def _child(checkout: Path, job: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1"}
    env.pop("RANKLAB_MEMORY_BUDGET", None)
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(job)], cwd=checkout, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the evaluation process ({checkout}) failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def evaluate_both(config: dict[str, Any], train_at: Path, then_at: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(``config`` trained for its steps by ``train_at``'s lab and evaluated by it, the same final weights
    evaluated by ``then_at``'s lab): two checkouts, each in a fresh process, one torch thread, CPU."""
    with tempfile.TemporaryDirectory() as tmp:
        weights = str(Path(tmp) / "weights.pt")
        now = _child(train_at, {"config": config, "train": True, "weights": weights})
        return now, _child(then_at, {"config": config, "train": False, "weights": weights})


def differences(want: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """One line per evaluated number that is not bit for bit the same."""
    return [f"{k}: {want.get(k)!r} vs {got.get(k)!r}" for k in EVALUATED if want.get(k) != got.get(k)]


def check(stored: dict[str, Any], rerun: dict[str, Any], train_at: Path, then: str) -> dict[str, Any]:
    """Train ``rerun``'s config with ``train_at``'s lab, evaluate the weights with it and with ``then``'s
    (a commit, exported); the check record: both evaluations, the codes, and whether each reproduced."""
    train_commit = _git("rev-parse", "HEAD", repo=train_at)
    if _git("status", "--porcelain", "--", "lab", repo=train_at):
        raise ValueError(f"--train-at {train_at}: its lab/ has uncommitted changes; give a clean checkout")
    with tempfile.TemporaryDirectory() as tmp:
        now, old = evaluate_both(rerun["config"], train_at, export_lab(then, Path(tmp) / "then"))
    return {"key": rerun["key"], "method": rerun["method"], "seed": rerun["seed"],
            "train_at": train_commit, "evaluated_then_at": resolve(then),
            "now": now, "then": old, "now_differs": differences(rerun, now), "then_differs": differences(stored, old)}


def verified(checked: dict[str, Any], stored: dict[str, Any], rerun: dict[str, Any]) -> list[str]:
    """Why ``checked`` (a :func:`check` record) does not show ``rerun`` to be ``stored``'s run; [] if it does:
    its evaluations must be of this key and equal, bit for bit, the re-run's and the stored run's numbers."""
    if checked.get("key") != stored.get("key") or rerun.get("key") != stored.get("key"):
        return [f"the check is of run {checked.get('key')}, not {stored.get('key')}"]
    commit = rerun.get("provenance", {}).get("commit")
    if checked.get("train_at") != commit:
        return [f"the check trained at {checked.get('train_at')}, the re-run at {commit}"]
    if checked["now"].get("steps") != stored.get("steps"):
        return [f"the check trained {checked['now'].get('steps')} steps, the run {stored.get('steps')}"]
    return [f"re-run's code: {d}" for d in differences(rerun, checked["now"])] + \
        [f"stored run's code: {d}" for d in differences(stored, checked["then"])]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m lab.studies.running.evaluated_then",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("reruns", type=Path)
    parser.add_argument("stored", type=Path)
    parser.add_argument("--train-at", type=Path, required=True, help="a checkout of the re-runs' commit")
    parser.add_argument("--then", default="eb7e669", help="the commit that evaluated the stored runs")
    parser.add_argument("--keys", default="", help="comma-separated keys (default: every re-run)")
    parser.add_argument("--out", type=Path, default=RESULTS / "v2" / "rerun_checks.json")
    args = parser.parse_args()
    reruns, stored = json.loads(args.reruns.read_text())["runs"], json.loads(args.stored.read_text())["runs"]
    checks = json.loads(args.out.read_text()) if args.out.exists() else {}
    for key in args.keys.split(",") if args.keys else sorted(reruns):
        record = check(stored[key], reruns[key], args.train_at, args.then)
        checks[key] = record
        print(f"{record['method']} seed {record['seed']}: re-run's code {record['now_differs'] or 'bit for bit'}; "
              f"stored run's code {record['then_differs'] or 'bit for bit'}", flush=True)
    write_text_atomic(args.out, json.dumps(checks, indent=1, sort_keys=True) + "\n")
