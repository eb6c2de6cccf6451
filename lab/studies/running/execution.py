"""One run of a study: train it, evaluate it on the held-out classes, and return its raw record.

:func:`execute` is what every executor runs (the local pool, a submitit job, a shard of an sbatch array). Given a
``work`` folder it can be stopped and resumed: ``stop()`` is asked between steps (a job's SIGTERM or SIGUSR2,
:mod:`.cluster_job`); once it says so, the trainer's whole state goes to ``work/checkpoint.pt`` (atomic, the
trainer's own format) and what the record needs so far to ``work/progress.json``, and :class:`Preempted` is
raised. The next call with the same ``work`` folder resumes there, on the same trajectory: on the CPU the
resumed run ends with the same weights and numbers, bit for bit, as one never stopped (the trainer resumes
bitwise: tests/test_train_resume.py; the run: tests/test_study_cluster.py).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from ...core.files import write_text_atomic
from ...core.provenance import provenance, where_it_ran
from ...data import build_dataset
from ...experiments.runs import heldout_gap
from ...train import Trainer, TrainConfig
from ...train.checkpoint import state_digest
from .spec import RunSpec

RETRIEVAL = ("R@1", "R@2", "R@4", "R@8", "mAP@R", "mAP")
# A run's own failure (NonFiniteLossError is a RuntimeError): listed under "failed", retried by the next call.
FAILURES = (ArithmeticError, RuntimeError, ValueError)
STOP_EVERY = 10  # steps between two questions to ``stop``: a stop is honoured within this many steps


class Preempted(Exception):
    """The run was asked to stop and saved its state in its work folder: the next call resumes it there."""

    def __init__(self, step: int, total: int) -> None:
        self.step, self.total = step, total
        super().__init__(f"stopped at step {step} of {total}, its state saved: the next call resumes it")


def execute(spec: RunSpec, threads: int = 1, device: Optional[str] = None, session: Optional[str] = None,
            curve_every: int = 0, work: Optional[Path] = None,
            stop: Optional[Callable[[int, int], bool]] = None) -> dict[str, Any]:
    """Train one run for its steps, evaluate it on the held-out classes; the raw record, with its
    provenance (code version, libraries, device, threads, host, cluster job, start and end, the ``session``
    that trained it). ``device`` overrides the config's (it is not part of the run's key: the same run,
    elsewhere). ``curve_every`` > 0 also evaluates it every that many steps (and at step 0) on the same
    split, into the record's ``curve`` (the pilot's point format): evaluating does not move a run
    (tests/test_study_provenance.py), so the curve costs evaluations, not another run. ``work``: the folder
    this run checkpoints to when ``stop(step, total)``, asked every ``STOP_EVERY`` steps, turns true (then
    :class:`Preempted`), and every ``checkpoint_every`` steps of its config on the way, and resumes from."""
    torch.set_num_threads(threads)
    cfg = TrainConfig.from_dict({**spec.config, **({"device": device} if device else {})})
    # Read before training: the code that trains the run is the code on disk when it starts.
    origin = {**provenance(cfg.device, threads, run_datasets(cfg)), **where_it_ran(cfg.device), "session": session}
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    trainer = Trainer(cfg)
    checkpoint = Path(work) / "checkpoint.pt" if work is not None else None
    so_far = _progress(work) if checkpoint is not None and checkpoint.is_file() else {}
    if so_far:
        trainer.resume(checkpoint)
        origin["resumed_from_step"] = trainer.step_count
    started = so_far.get("started", time.strftime("%Y-%m-%d %H:%M:%S"))
    curve: list[dict[str, Any]] = [p for p in so_far.get("curve", []) if p["step"] <= trainer.step_count]
    total, eval_wall, eval_cpu, chunk = trainer.total_steps, 0.0, 0.0, 0.0
    if curve_every > 0 and not curve:
        curve.append(curve_point(trainer, 0.0))
    every = cfg.checkpoint_every if work is not None else 0  # also a checkpoint every that many steps

    def save(stopped: bool) -> None:
        _save(trainer, work, so_far, started, curve, origin, time.perf_counter() - wall - eval_wall,
              time.process_time() - cpu - eval_cpu, time.perf_counter() - wall, stopped)

    while trainer.step_count < total:
        end = min([total] + [(trainer.step_count // k + 1) * k for k in (curve_every, every) if k > 0])
        n = min(end, trainer.step_count + STOP_EVERY) - trainer.step_count if stop is not None else \
            end - trainer.step_count
        begin = time.perf_counter()
        trainer.step(n)
        chunk += time.perf_counter() - begin
        if curve_every > 0 and (trainer.step_count % curve_every == 0 or trainer.step_count == total):
            before_wall, before_cpu = time.perf_counter(), time.process_time()
            curve.append(curve_point(trainer, chunk))
            eval_wall += time.perf_counter() - before_wall
            eval_cpu += time.process_time() - before_cpu
            chunk = 0.0
        if stop is not None and trainer.step_count < total and stop(trainer.step_count, total):
            save(stopped=True)
            raise Preempted(trainer.step_count, total)
        if every > 0 and trainer.step_count % every == 0 and trainer.step_count < total:
            save(stopped=False)  # a job killed outright (SIGKILL, a node lost) resumes from here
    train_wall = so_far.get("train_seconds", 0.0) + time.perf_counter() - wall - eval_wall
    train_cpu = so_far.get("train_cpu_seconds", 0.0) + time.process_time() - cpu - eval_cpu
    result = trainer.evaluate()
    gap = heldout_gap(trainer, cfg.eval_max_items)
    steps = [r["seconds_per_step"] for r in trainer.history if r.get("kind") == "train"]
    gpu = torch.cuda.get_device_name(torch.device(cfg.device)) if str(cfg.device).startswith("cuda") else None
    if so_far.get("stops"):
        origin["stopped_at"] = so_far["stops"]  # each stop: its step, where it ran until then
    return {
        "key": spec.key, "study": spec.study, "method": spec.method, "seed": spec.seed, "params": spec.params,
        "loss": cfg.loss, "loss_kwargs": dict(cfg.loss_kwargs), "batch_size": cfg.batch_size, "steps": total,
        **{k: float(result[k]) for k in RETRIEVAL if k in result}, "num_queries": int(result["num_queries"]),
        "gap_train_probe": float(result["decomposability_gap"]), "gap_heldout": gap,
        # The trained weights (and a loss's own, e.g. proxies), bit for bit: equal runs, equal digests.
        "trained_state_sha256": state_digest({"model": trainer.model.state_dict(),
                                              "loss": trainer.loss_fn.state_dict()}),
        "train_seconds": train_wall, "train_cpu_seconds": train_cpu,
        "seconds_per_step": sum(steps) / len(steps), "steps_per_epoch": trainer.steps_per_epoch,
        # The second half: past the warm-up of a memory run and the first epoch's glyph rendering.
        "seconds_per_step_late": sum(steps[len(steps) // 2:]) / len(steps[len(steps) // 2:]),
        "seconds": so_far.get("seconds", 0.0) + time.perf_counter() - wall, "threads": threads,
        "device": cfg.device, **({"accelerator": gpu} if gpu else {}), "load_before": load,
        "load_after": os.getloadavg()[0], "config": spec.config, "trained_config": cfg.to_dict(),
        "started": started, "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "provenance": origin,
        **({"curve": curve, "curve_every": curve_every} if curve else {}),
    }


def _progress(work: Path) -> dict[str, Any]:
    """What a stopped run had recorded beside its checkpoint (its curve, its times, its stops)."""
    path = Path(work) / "progress.json"
    return json.loads(path.read_text()) if path.is_file() else {"stops": []}


def _save(trainer: Trainer, work: Path, so_far: dict[str, Any], started: str, curve: list[dict[str, Any]],
          origin: dict[str, Any], train_wall: float, train_cpu: float, seconds: float, stopped: bool) -> None:
    """The state of a run, ``stopped`` or on its way: the progress first, then the checkpoint (a kill between the
    two leaves the previous checkpoint: the resumed run cuts the newer curve at that checkpoint's step)."""
    Path(work).mkdir(parents=True, exist_ok=True)
    where = {k: origin[k] for k in ("host", "slurm_job_id", "slurm_array_task_id") if origin.get(k) is not None}
    stop = [{"step": trainer.step_count, "at": time.strftime("%Y-%m-%d %H:%M:%S"), **where}] if stopped else []
    progress = {"started": started, "curve": curve, "stops": so_far.get("stops", []) + stop,
                "train_seconds": so_far.get("train_seconds", 0.0) + train_wall,
                "train_cpu_seconds": so_far.get("train_cpu_seconds", 0.0) + train_cpu,
                "seconds": so_far.get("seconds", 0.0) + seconds}
    write_text_atomic(Path(work) / "progress.json", json.dumps(progress))
    trainer.save(Path(work) / "checkpoint.pt")


def run_datasets(cfg: TrainConfig) -> dict[str, Any]:
    """The config's train and test splits, without transforms: what :func:`lab.core.provenance.dataset_hash`
    fingerprints (built apart from the trainer's, so that hashing them touches nothing the run reads)."""
    return {split: build_dataset(cfg.dataset, split=split, root=cfg.data_root, **cfg.dataset_kwargs)
            for split in ("train", "test")}


def curve_point(trainer: Trainer, seconds: float) -> dict[str, Any]:
    """One evaluation of a learning curve (a run's or the pilot's); ``seconds``: the training time of the
    steps since the last one."""
    start = time.perf_counter()
    result = trainer.evaluate()
    return {"step": trainer.step_count, **{k: float(result[k]) for k in RETRIEVAL}, "train_seconds": seconds,
            "eval_seconds": time.perf_counter() - start, "num_queries": int(result["num_queries"])}
