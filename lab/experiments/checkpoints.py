"""The models the notebooks train for their illustrations, shipped as small checkpoints (issue 36, N-6).

Notebook 04's ROADMAP model (also notebook 02's, section 5) and notebook 05's SmoothAP and HAPPIER
models take 1-3 minutes each to train on 2 CPU cores: a class would wait. They are trained once by

    python -m lab.experiments.checkpoints make          # ~5 min on 2 cores, all three
    python -m lab.experiments.checkpoints check         # the recipe test, a few seconds

and stored in ``lab/data/checkpoints/NAME.pt`` (the model's weights in float32, ~1 MB each; no
optimizer state: the notebooks only evaluate them). A notebook's full-mode run
(:func:`lab.experiments.runs.trained_model`) loads the checkpoint whose recipe is that run's
config, unless the notebook sets ``RETRAIN = True`` (then it trains live, as before).

A checkpoint holds its recipe's config, the weights after the recipe's steps, the evaluation
:func:`lab.experiments.runs.train_and_evaluate` gave them when they were made, and a fingerprint:
the loss of each of the first ``FINGERPRINT_STEPS`` steps and the sha256 of the weights after
them. :func:`check` re-trains those steps from today's recipe and code and compares: a change
of the loss, the sampler, the data or the model that would make a retrained model differ from
the shipped one fails it (tests/test_notebook_checkpoints.py). Files are written atomically with
their sha256 and verified when read (:func:`lab.train.checkpoint.save_checkpoint`,
:func:`~lab.train.checkpoint.load_checkpoint`).
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

from . import shipped
from .hierarchical_runs import FULL_HIERARCHY
from .runs import notebook_config, run_threads, train_with_text_progress
from .shipped import CHECKPOINT_DIR, FORMAT, path_of

# name -> (loss, TrainConfig overrides of the full-mode run settings): the notebooks' trained runs.
RECIPES: dict[str, tuple[str, dict[str, Any]]] = {
    "roadmap": ("roadmap", {}),  # notebook 04 sections 2-3, notebook 02 section 5
    "hierarchical_smooth_ap": ("smooth_ap", dict(FULL_HIERARCHY)),  # notebook 05 sections 5-6
    "hierarchical_happier": ("happier", dict(FULL_HIERARCHY)),
}
FINGERPRINT_STEPS = 3
# The recorded losses must agree to these relative tolerances on another CPU: the first step's to float
# rounding (vector kernels may round differently), the later ones looser, because the exact rank step of the
# Sup-AP family turns a last-bit difference of a score into a flipped comparison (measured on two "AMD EPYC"
# machines: the first loss within 1e-7, the third within 1.2e-4; a changed recipe moves them by 1e-2 and
# more). On the torch version and processor (model and vector features) that made the file: the weights bitwise.
FIRST_LOSS_RTOL = 1e-5
LOSS_RTOL = 1e-3


def recipe_config(name: str):
    """The full-mode :class:`lab.train.TrainConfig` of recipe ``name`` (as a notebook builds it)."""
    if name not in RECIPES:
        raise ValueError(f"unknown checkpoint {name!r}; choose one of: {', '.join(RECIPES)}")
    loss, overrides = RECIPES[name]
    return notebook_config(loss, None, False, **overrides)


def recipe_of(config) -> Optional[str]:
    """The name of the recipe whose config is ``config`` (a TrainConfig), or None."""
    from ..train.runtime import resolve_amp

    wanted = resolve_amp(config)[0].to_dict()  # amp "auto" as the Trainer resolves it (a trainer's config is)
    return next((n for n in RECIPES if resolve_amp(recipe_config(n))[0].to_dict() == wanted), None)


# The vector features that choose a CPU's float kernels: two processors of one model name may differ here.
KERNEL_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_tile")


def _processor() -> str:
    """The processor as far as floating-point results go: its model name, family and model numbers, and
    the vector features of KERNEL_FLAGS it has ("AMD EPYC" alone named two machines that round differently)."""
    try:
        fields: dict[str, str] = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
        if "model name" in fields:
            flags = set(fields.get("flags", "").split())
            return (f"{fields['model name']} (family {fields.get('cpu family', '?')}, model {fields.get('model', '?')};"
                    f" {' '.join(f for f in KERNEL_FLAGS if f in flags) or 'no vector flags'})")
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _commit() -> str:
    try:
        root = Path(__file__).resolve().parents[2]
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "") if head.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def first_steps(config, steps: int = FINGERPRINT_STEPS):
    """(trainer, fingerprint) after the first ``steps`` steps of ``config`` from scratch, one
    torch thread (:data:`lab.experiments.runs.RUN_THREADS`): {"steps", "losses", "digest"}."""
    import torch

    from ..train import Trainer
    from ..train.checkpoint import state_digest

    with run_threads():
        trainer = Trainer(config)
        losses = [float(trainer.step()["loss"]) for _ in range(steps)]
    return trainer, {"steps": steps, "losses": losses, "digest": state_digest(trainer.model.state_dict()),
                     "torch": str(torch.__version__), "processor": _processor()}


def make(name: str, folder: Optional[Path] = None) -> Path:
    """Train recipe ``name`` from scratch (its fingerprint on the way), evaluate it as
    :func:`lab.experiments.runs.train_and_evaluate` does, and write it atomically."""
    import torch

    from ..train.checkpoint import save_checkpoint
    from .runs import evaluate_trainer

    config = recipe_config(name)
    start = time.perf_counter()
    trainer, fingerprint = first_steps(config)
    with run_threads():
        train_with_text_progress(trainer, config.steps, progress=True)
    trainer.train_seconds = time.perf_counter() - start
    metrics = json.loads(json.dumps(evaluate_trainer(trainer)))  # plain floats: the file holds no pickled objects
    state = {"format": FORMAT, "name": name, "config": trainer.config.to_dict(), "step": trainer.step_count,
             "model": {k: v.detach().cpu().clone() for k, v in trainer.model.state_dict().items()},
             "fingerprint": fingerprint, "metrics": metrics,
             "made": {"command": f"python -m lab.experiments.checkpoints make {name}", "commit": _commit(),
                      "torch": str(torch.__version__), "threads": torch.get_num_threads(), "processor": _processor(),
                      "train_seconds": round(trainer.train_seconds, 1), "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                               time.gmtime())}}
    return save_checkpoint(state, path_of(name, folder), keep_previous=False)


def read(name: str, folder: Optional[Path] = None) -> dict[str, Any]:
    """The shipped checkpoint of recipe ``name``, its sha256 verified (:func:`lab.experiments.shipped.read`)."""
    return shipped.read(path_of(name, folder))


def load_trainer(config, folder: Optional[Path] = None):
    """A :class:`lab.train.Trainer` of ``config`` holding the shipped weights trained with it, or None."""
    from ..train import Trainer

    found = shipped.find(config, folder)
    if found is None:
        return None
    with run_threads():
        trainer = Trainer(config)
    return shipped.load_into(trainer, *found)


def check(name: str, folder: Optional[Path] = None) -> dict[str, Any]:
    """Re-train the first steps of recipe ``name`` with today's code and compare them with the
    shipped fingerprint: {"name", "config", "losses", "bitwise"} (each True when it agrees;
    ``bitwise`` None when this torch or processor is not the one that made the file)."""
    from ..train import TrainConfig

    state = read(name, folder)
    stored = state["fingerprint"]
    config_same = recipe_of(TrainConfig.from_dict(state["config"])) == name
    _, now = first_steps(recipe_config(name), stored["steps"])
    losses_same = len(now["losses"]) == len(stored["losses"]) and all(
        math.isclose(a, b, rel_tol=FIRST_LOSS_RTOL if i == 0 else LOSS_RTOL)
        for i, (a, b) in enumerate(zip(now["losses"], stored["losses"])))
    same_machine = (now["torch"], now["processor"]) == (stored["torch"], stored["processor"])
    return {"name": name, "config": config_same, "losses": losses_same, "stored_losses": stored["losses"],
            "losses_now": now["losses"], "bitwise": (now["digest"] == stored["digest"]) if same_machine else None}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.experiments.checkpoints", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("make", "check"), help="make: train and write; check: the recipe test")
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"default all: {', '.join(RECIPES)}")
    parser.add_argument("--folder", type=Path, default=None, help=f"default {CHECKPOINT_DIR}")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in RECIPES]
    if unknown:
        parser.error(f"unknown checkpoint(s) {', '.join(unknown)}; choose from: {', '.join(RECIPES)}")
    failed = False
    for name in args.names or list(RECIPES):
        if args.action == "make":
            path = make(name, args.folder)
            print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KB)", flush=True)
        else:
            result = check(name, args.folder)
            ok = result["config"] and result["losses"] and result["bitwise"] is not False
            failed |= not ok
            print(f"{name}: {'same recipe' if ok else 'DIFFERS'} (config {result['config']}, first losses "
                  f"{result['losses']}, weights bitwise {result['bitwise']})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
