"""Protocol v2's pilot (``python -m lab study pilot``): the learning curve of the papers' best loss that fixes
the protocol's number of steps, by the plateau rule of :func:`.spec.plateau_step`, into ``results/v2/pilot.json``.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from ...core.provenance import provenance
from ...train import Trainer, TrainConfig
from .results_file import load_results, save_results
from .execution import curve_point, run_datasets
from .spec import PILOT, PILOT_EVERY, config_key, plateau_step, record_key


def run_pilot(out: Path, config: Optional[dict[str, Any]] = None, every: int = PILOT_EVERY, threads: int = 1,
              log: Callable[[str], None] = print, device: Optional[str] = None) -> dict[str, Any]:
    """Protocol v2's pilot: one run of ``config`` (default ``PILOT``), evaluated on its test split every
    ``every`` steps, into ``out/pilot.json``: the learning curve and the plateau step of
    ``plateau_step``; it stops once the rule answers, at the latest after the config's steps.
    Resumable: the file is rewritten after each evaluation, and the run continues from its checkpoint
    (``out/pilot-checkpoint.pt``, not kept in git) on the same trajectory, also with more steps."""
    torch.set_num_threads(threads)
    config = dict(config or PILOT)
    out = Path(out)
    path, checkpoint = out / "pilot.json", out / "pilot-checkpoint.pt"
    data = load_results(path)
    if _trajectory(data.get("config")) != _trajectory(config):  # another pilot: start over
        data = {"study": "pilot", "curve": []}
    data.update(key=config_key(config), config=config, every=every)  # a longer pilot continues its curve
    cfg = TrainConfig.from_dict({**config, **({"device": device} if device else {})})
    trainer = Trainer(cfg)
    if data["curve"] and checkpoint.exists():
        trainer.resume(checkpoint)
        data["curve"] = [p for p in data["curve"] if p["step"] <= trainer.step_count]
    elif data["curve"]:
        data["curve"], data["provenance"] = [], []  # evaluations without their checkpoint: start over
    # The code of each call that extended the curve, with the step it started from.
    data.setdefault("provenance", []).append({**provenance(cfg.device, threads, run_datasets(cfg)),
                                                "from_step": trainer.step_count})
    if not data["curve"]:
        data["curve"].append(curve_point(trainer, 0.0))
    while trainer.step_count < cfg.steps and data.get("plateau_step") is None:  # until the rule answers
        start = time.perf_counter()
        trainer.step(min(every, cfg.steps - trainer.step_count))
        seconds = time.perf_counter() - start
        trainer.save(checkpoint)
        data["curve"].append(curve_point(trainer, seconds))
        curve = [(p["step"], p["mAP@R"]) for p in data["curve"]]
        data["plateau_step"] = plateau_step(curve)
        save_results(path, data)
        point = data["curve"][-1]
        log(f"pilot: step {point['step']}: R@1 {point['R@1']:.3f} mAP@R {point['mAP@R']:.3f}"
            + (f" (plateau from step {data['plateau_step']})" if data["plateau_step"] is not None else ""))
    save_results(path, data)
    return data


def _trajectory(config: Optional[dict[str, Any]]) -> Optional[str]:
    """The pilot's key without its length: at a constant learning rate the first s steps of a longer
    pilot are the shorter one's, so a longer pilot resumes the curve instead of starting over."""
    if config is None:
        return None
    constant = config.get("scheduler", "none") == "none" and not config.get("warmup_steps")
    # record_key: a stored pilot's omitted fields hold the defaults of its day (amp "none", now "auto")
    return record_key({"config": {**config, "steps": 1} if constant else config})
