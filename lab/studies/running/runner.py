"""Train a study's missing runs through :class:`lab.train.Trainer` into its resumable raw-results file.

``results/NAME.json`` holds one record per finished run, added after each run (under the file's lock,
merged into what other writers added meanwhile, written atomically: :mod:`.results_file`), so an
interrupted study loses at most the runs in flight, a second call skips what is done, and two calls on one
folder at once keep each other's runs. :func:`run_studies` is two steps: :func:`plan` (what is missing,
and what another study's file already holds) and :func:`train` (train it, run by run).
A run another study already trained (same config, same key) is copied from that study's file.
Runs go to ``jobs`` worker processes of ``threads`` torch threads each: on 2 busy cores,
two 1-thread processes get much more done than one 2-thread process (the OpenMP threads of
one process wait on each other when other jobs take the cores).
"""
from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
import os
import platform
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from ...core.provenance import provenance
from ...data import build_dataset
from ...experiments.runs import heldout_gap
from ...train import Trainer, TrainConfig
from .results_file import add_results, load_results
from .spec import RunSpec, study_runs

RETRIEVAL = ("R@1", "R@2", "R@4", "R@8", "mAP@R", "mAP")
# A run's own failure (NonFiniteLossError is a RuntimeError): listed under "failed", retried by the next call.
FAILURES = (ArithmeticError, RuntimeError, ValueError)


def execute(spec: RunSpec, threads: int = 1, device: Optional[str] = None, session: Optional[str] = None,
            curve_every: int = 0) -> dict[str, Any]:
    """Train one run for its steps, evaluate it on the held-out classes; the raw record, with its
    provenance (code version, libraries, device, threads, start and end, the ``session`` that trained
    it). ``device`` overrides the config's (it is not part of the run's key: the same run, elsewhere).
    ``curve_every`` > 0 also evaluates it every that many steps (and at step 0) on the same split, into
    the record's ``curve`` (the pilot's point format): evaluating does not move a run
    (tests/test_study_provenance.py), so the curve costs evaluations, not another run."""
    torch.set_num_threads(threads)
    cfg = TrainConfig.from_dict({**spec.config, **({"device": device} if device else {})})
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    # Read before training: the code that trains the run is the code on disk when it starts.
    origin = {**provenance(cfg.device, threads, run_datasets(cfg)), "session": session}
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    trainer = Trainer(cfg)
    curve: list[dict[str, Any]] = []
    if curve_every > 0:
        curve.append(curve_point(trainer, 0.0))
        eval_wall = eval_cpu = 0.0  # evaluations are not training time
        while trainer.step_count < cfg.steps:
            chunk = time.perf_counter()
            trainer.step(min(curve_every, cfg.steps - trainer.step_count))
            seconds = time.perf_counter() - chunk
            before_wall, before_cpu = time.perf_counter(), time.process_time()
            curve.append(curve_point(trainer, seconds))
            eval_wall += time.perf_counter() - before_wall
            eval_cpu += time.process_time() - before_cpu
        train_wall = time.perf_counter() - wall - eval_wall
        train_cpu = time.process_time() - cpu - eval_cpu
    else:
        trainer.step(cfg.steps)
        train_wall, train_cpu = time.perf_counter() - wall, time.process_time() - cpu
    result = trainer.evaluate()
    gap = heldout_gap(trainer, cfg.eval_max_items)
    steps = [r["seconds_per_step"] for r in trainer.history if r.get("kind") == "train"]
    gpu = torch.cuda.get_device_name(torch.device(cfg.device)) if str(cfg.device).startswith("cuda") else None
    return {
        "key": spec.key, "study": spec.study, "method": spec.method, "seed": spec.seed, "params": spec.params,
        "loss": cfg.loss, "loss_kwargs": dict(cfg.loss_kwargs), "batch_size": cfg.batch_size, "steps": cfg.steps,
        **{k: float(result[k]) for k in RETRIEVAL if k in result}, "num_queries": int(result["num_queries"]),
        "gap_train_probe": float(result["decomposability_gap"]), "gap_heldout": gap,
        "train_seconds": train_wall, "train_cpu_seconds": train_cpu,
        "seconds_per_step": sum(steps) / len(steps), "steps_per_epoch": trainer.steps_per_epoch,
        # The second half: past the warm-up of a memory run and the first epoch's glyph rendering.
        "seconds_per_step_late": sum(steps[len(steps) // 2:]) / len(steps[len(steps) // 2:]),
        "seconds": time.perf_counter() - wall, "threads": threads, "device": cfg.device,
        **({"accelerator": gpu} if gpu else {}), "load_before": load,
        "load_after": os.getloadavg()[0], "config": spec.config, "trained_config": cfg.to_dict(),
        "started": started, "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "provenance": origin,
        **({"curve": curve, "curve_every": curve_every} if curve else {}),
    }


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


def _worker_init(threads: int) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))


def _known(out: Path) -> dict[str, dict]:
    """Every finished record in ``out``'s raw files, by key (a shared run is trained once)."""
    known: dict[str, dict] = {}
    for path in sorted(out.glob("*.json")):
        try:
            known.update(load_results(path).get("runs", {}))
        except (ValueError, OSError, KeyError, TypeError):
            continue  # not a results file: the run is simply trained again
    return known


def _as_run_of(spec: RunSpec, rec: dict[str, Any]) -> dict[str, Any]:
    """A record of the same config, labelled as ``spec``'s study sees it (method, varied params)."""
    origin = rec.get("shared_from", rec["study"])
    out = {**rec, "study": spec.study, "method": spec.method, "params": spec.params, "seed": spec.seed}
    out.pop("shared_from", None)
    if origin != spec.study:
        out["shared_from"] = origin
    return out


def missing_runs(name: str, data: dict[str, Any], quick: bool = False, seeds: Optional[int] = None,
                 protocol: str = "v1") -> list[RunSpec]:
    """The runs of study ``name`` that ``data`` (its raw results) does not hold yet."""
    return [s for s in study_runs(name, quick, seeds, protocol) if s.key not in data.get("runs", {})]


@dataclass
class Plan:
    """What one call of :func:`run_studies` does: for each study its file, what the file held when the call
    began (``datas``, then what each write left there) and what this call adds to it (``mine``: the runs
    copied from another study's file, then those it trains, its session line, its failed runs; never the
    file itself, which other writers add to meanwhile); ``wanted``: {key: the specs, one per study, that
    need that run trained}."""

    names: list[str]
    paths: dict[str, Path]
    datas: dict[str, dict[str, Any]]
    mine: dict[str, dict[str, Any]]
    wanted: dict[str, list[RunSpec]]

    def to_train(self, name: str) -> int:
        return sum(1 for specs in self.wanted.values() for s in specs if s.study == name)


def plan(names: list[str], out: Path, quick: bool = False, seeds: Optional[int] = None, protocol: str = "v1",
         methods: Optional[list[str]] = None) -> Plan:
    """What is missing: each study's runs (of ``methods`` only, if given) that its file lacks, each copied
    from another study's file of ``out`` that holds it (same key), else wanted for training."""
    out, mode = Path(out), ("quick" if quick else "full")
    paths = {n: out / f"{n}.json" for n in names}
    datas = {n: load_results(p) for n, p in paths.items()}
    for n, data in datas.items():
        if data["runs"] and data.get("mode") not in (None, mode):
            raise ValueError(f"{paths[n]} holds {data['mode']}-mode results; write {mode}-mode runs elsewhere "
                             f"(--out DIR)")
    if methods is not None:
        offered = sorted({s.method for n in names for s in study_runs(n, quick, seeds, protocol)})
        unknown = [m for m in methods if m not in offered]
        if unknown:
            raise ValueError(f"methods: unknown method {unknown[0]!r} for {', '.join(names)}; choose from: "
                             f"{', '.join(offered)}")
    known = _known(out)
    mine: dict[str, dict[str, Any]] = {n: {"study": n, "mode": mode, "runs": {}, "sessions": []} for n in names}
    wanted: dict[str, list[RunSpec]] = {}
    for n in names:
        for spec in study_runs(n, quick, seeds, protocol):
            if (methods is not None and spec.method not in methods) or spec.key in datas[n]["runs"]:
                continue
            if spec.key in known:
                mine[n]["runs"][spec.key] = _as_run_of(spec, known[spec.key])
            else:
                wanted.setdefault(spec.key, []).append(spec)
    return Plan(list(names), paths, datas, mine, wanted)


def _command(names: list[str], quick: bool, seeds: Optional[int], jobs: int, protocol: str,
             methods: Optional[list[str]], curve_every: int) -> str:
    """The call as typed, for its session line."""
    return " ".join(["python -m lab study", *names] + (["--quick"] if quick else []) +
                    ([f"--protocol {protocol}"] if protocol != "v1" else []) + [f"--jobs {jobs}"]
                    + ([f"--seeds {seeds}"] if seeds is not None else [])
                    + ([f"--methods {','.join(methods)}"] if methods is not None else [])
                    + ([f"--curve-every {curve_every}"] if curve_every else []))


def run_studies(names: list[str], out: Path, quick: bool = False, seeds: Optional[int] = None, jobs: int = 1,
                threads: int = 1, log: Callable[[str], None] = print, protocol: str = "v1",
                device: Optional[str] = None, methods: Optional[list[str]] = None,
                curve_every: int = 0) -> dict[str, dict[str, Any]]:
    """Train every missing run of the studies ``names`` under ``protocol`` into ``out/NAME.json``, study by
    study in that order and seed by seed, each config once whichever studies need it; a run that fails
    (e.g. diverges) is listed under "failed" and retried by the next call. ``methods``: train only the runs
    of these methods (a power plan's losses), the others stay missing. ``curve_every``: see ``execute``.
    Returns {name: the file's data}."""
    todo = plan(names, out, quick, seeds, protocol, methods)
    for n in names:
        todo.datas[n] = add_results(todo.paths[n], todo.mine[n])
        log(f"{n}: {len(study_runs(n, quick, seeds, protocol))} runs, {todo.to_train(n)} to train"
            + (f" (methods {', '.join(methods)})" if methods is not None else ""))
    command = _command(names, quick, seeds, jobs, protocol, methods, curve_every)
    return train(todo, command, jobs, threads, log, device, curve_every)


class _Session:
    """This call's line in each file it trains runs of, written at its start and updated run by run: a call
    killed part-way (a session's end) keeps its line, "stopped", with what it finished until then."""

    def __init__(self, todo: Plan, command: str, jobs: int, threads: int) -> None:
        # Names this call in each record it trains, and its line in each file (merged by it): unique also for
        # two calls in one process within a second, or two machines' processes of one pid.
        self.id = f"{time.strftime('%Y-%m-%dT%H:%M:%S')}-{os.getpid()}-{secrets.token_hex(3)}"
        self.todo, self.start = todo, time.perf_counter()
        machine = f"{platform.machine()}, {os.cpu_count()} cores, python {sys.version.split()[0]}"
        self.lines = {n: {"id": self.id, "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "trained": 0, "jobs": jobs,
                          "threads": threads, "elapsed_seconds": 0.0, "command": command, "stopped": True,
                          "machine": machine} for n in todo.names if todo.to_train(n)}
        for n, line in self.lines.items():
            todo.mine[n]["sessions"].append(line)
            self.write(n)

    def write(self, name: str) -> None:
        self.todo.datas[name] = add_results(self.todo.paths[name], self.todo.mine[name])

    def update(self, name: str, **changes: Any) -> None:
        self.lines[name].update(finished=time.strftime("%Y-%m-%d %H:%M:%S"),
                                elapsed_seconds=round(time.perf_counter() - self.start, 1), **changes)

    def record(self, key: str, rec: Optional[dict[str, Any]], error: str = "") -> None:
        """A run finished (``rec``) or failed (``error``): into each study's file that wanted it."""
        for spec in self.todo.wanted[key]:
            part = self.todo.mine[spec.study]
            # runs this call finished (not those it set out to train)
            self.update(spec.study, trained=self.lines[spec.study]["trained"] + (rec is not None))
            if rec is None:
                part.setdefault("failed", {})[key] = {"method": spec.method, "params": spec.params,
                                                      "seed": spec.seed, "error": error}
            else:  # the file drops its "failed" entry of a run it records
                part["runs"][key] = _as_run_of(spec, rec)
                part.get("failed", {}).pop(key, None)
            self.write(spec.study)

    def end(self, stopped: bool) -> None:
        for n in self.lines:
            self.update(n, stopped=stopped)
            self.write(n)


def train(todo: Plan, command: str, jobs: int = 1, threads: int = 1, log: Callable[[str], None] = print,
          device: Optional[str] = None, curve_every: int = 0) -> dict[str, dict[str, Any]]:
    """Train it: every run ``todo`` wants, in ``jobs`` processes, each into its studies' files as it ends (see
    :func:`run_studies`); ``command`` names the call in its session line. Returns {name: the file's data}."""
    session = _Session(todo, command, jobs, threads)

    def record(key: str, rec: Optional[dict[str, Any]], error: str = "") -> None:
        session.record(key, rec, error)
        spec = todo.wanted[key][0]
        what = f"{spec.study}: {spec.setting}, seed {spec.seed}"
        log(f"  {what}: FAILED: {error}" if rec is None else
            f"  {what}: R@1 {rec['R@1']:.3f} mAP@R {rec['mAP@R']:.3f} ({rec['seconds']:.0f} s)")

    # Study by study in the order named (a complete study is a final verdict; an interleaved call
    # finished none before its end), each seed by seed: a study cut short after k seeds holds k
    # complete, paired rows of every method. specs[0] is a run's first named study.
    runs = sorted((specs[0] for specs in todo.wanted.values()),
                  key=lambda spec: (todo.names.index(spec.study), spec.seed))
    # A run's failure is caught around execute() only: an error of record() (two writers' records of one
    # run that disagree) is not the run's, and stops the call.
    broken = 0  # runs a broken worker pool left unfinished
    if jobs <= 1 or len(runs) <= 1:
        for spec in runs:
            try:
                rec, error = execute(spec, threads, device, session=session.id, curve_every=curve_every), ""
            except FAILURES as e:
                rec, error = None, f"{type(e).__name__}: {e}"
            record(spec.key, rec, error)
    elif runs:
        broken = _train_in_pool(runs, record, jobs, threads, device, session.id, curve_every)
        if broken:
            log(f"  stopped: the worker pool broke (a worker was killed); {broken} runs not finished are "
                "left for the next call")
    session.end(stopped=broken > 0)
    return todo.datas


def _train_in_pool(runs: list[RunSpec], record: Callable[..., None], jobs: int, threads: int,
                   device: Optional[str], session: str, curve_every: int) -> int:
    """``runs`` in ``jobs`` worker processes, each recorded as it ends; the number a broken pool left."""
    broken = 0
    # spawn: a forked child would inherit the parent's torch thread pools in an unknown state.
    ctx = multiprocessing.get_context("spawn")
    with futures.ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_worker_init, initargs=(threads,)) as pool:
        running = {pool.submit(execute, spec, threads, device, session=session, curve_every=curve_every): spec.key
                   for spec in runs}
        for done in futures.as_completed(running):
            try:
                rec, error = done.result(), ""
            except futures.process.BrokenProcessPool:
                # A worker died (killed, out of memory, the study stopped): not the run's failure.
                # It stays unrecorded and the next call trains it.
                broken += 1
                continue
            except FAILURES as e:
                rec, error = None, f"{type(e).__name__}: {e}"
            record(running[done], rec, error)
    return broken
