"""Train a study's missing runs through :class:`lab.train.Trainer` into its resumable raw-results file.

``results/NAME.json`` holds one record per finished run, added after each run (under the file's lock,
merged into what other writers added meanwhile, written atomically: :mod:`.results_file`), so an
interrupted study loses at most the runs in flight, a second call skips what is done, and two calls on one
folder at once keep each other's runs. :func:`run_studies` is two steps: :func:`plan` (what is missing,
and what another study's file already holds) and :func:`train` (train it, run by run).
A run another study already trained (same config, same key) is copied from that study's file.
Runs go to ``jobs`` worker processes of ``threads`` torch threads each (:mod:`.local_pool`; one GPU each on a
node with several): on 2 busy cores, two 1-thread processes get much more done than one 2-thread process (the
OpenMP threads of one process wait on each other when other jobs take the cores). Or, ``executor="submitit"``,
one job per run (:mod:`.submitit_runs`: a SLURM array, requeued on preemption), this process recording them as
they end. ``shard`` = (i, n) trains part i of the call's runs (:func:`shard_keys`), for an sbatch array of one's
own; paper-scale studies (:mod:`.paper_studies`) plan and train as the glyph studies do.
"""
from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from ...core.extras import require
from .execution import FAILURES, curve_point, execute
from .local_pool import device_queue, pool_execute, worker_init
from .results_file import add_results, load_results
from .recording import Session, _as_run_of
from .paper_studies import runs_of
from .spec import PLANNED_METHODS, RunSpec, Seeds, missing_runs, seeds_text

if TYPE_CHECKING:
    from .cluster import ClusterConfig

EXECUTORS = ("local", "submitit")
__all__ = ["execute", "curve_point", "run_studies", "plan", "train", "missing_runs"]

def _known(out: Path) -> dict[str, dict]:
    """Every finished record in ``out``'s raw files, by key (a shared run is trained once)."""
    known: dict[str, dict] = {}
    for path in sorted(out.glob("*.json")):
        try:
            known.update(load_results(path).get("runs", {}))
        except (ValueError, OSError, KeyError, TypeError):
            continue  # not a results file: the run is simply trained again
    return known


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


def shard_keys(specs: list[RunSpec], shard: tuple[int, int]) -> set[str]:
    """The keys part ``i`` of ``n`` (``--shard I/N``) trains: the distinct keys of ``specs`` (every run the call
    names, done or not: each part computes the same split), sorted, every n-th from the i-th."""
    i, n = shard
    return set(sorted({s.key for s in specs})[i::n])


def parse_shard(text: str) -> tuple[int, int]:
    """``--shard I/N``: part I (0 <= I < N) of N; one line naming the flag otherwise."""
    part, slash, count = text.partition("/")
    try:
        i, n = int(part), int(count)
    except ValueError:
        i, n = -1, 0
    if not slash or not 0 <= i < n:
        raise ValueError(f"--shard expects I/N with 0 <= I < N (e.g. --shard $SLURM_ARRAY_TASK_ID/4), got {text!r}")
    return i, n


def plan(names: list[str], out: Path, quick: bool = False, seeds: Seeds = None, protocol: str = "v1",
         methods: Optional[list[str]] = None, shard: Optional[tuple[int, int]] = None,
         base: Optional[Path] = None) -> Plan:
    """What is missing: each study's runs (of ``methods`` only, if given; of part ``shard`` = (i, n) only, if
    given: :func:`shard_keys`) that its file lacks, each copied from another study's file of ``out`` that holds
    it (same key), else wanted for training. ``base``: a paper-scale study's recipe (``paper_studies``)."""
    out, mode = Path(out), ("quick" if quick else "full")
    paths = {n: out / f"{n}.json" for n in names}
    datas = {n: load_results(p) for n, p in paths.items()}
    for n, data in datas.items():
        if data["runs"] and data.get("mode") not in (None, mode):
            raise ValueError(f"{paths[n]} holds {data['mode']}-mode results; write {mode}-mode runs elsewhere "
                             f"(--out DIR)")
    # Study 1's declared runs (spec.PLANNED_METHODS) are trained only when --methods names them.
    pool = {n: runs_of(n, quick, seeds, protocol, base, planned=True) for n in names}
    if methods is not None:
        offered = sorted({s.method for specs in pool.values() for s in specs})
        unknown = [m for m in methods if m not in offered]
        if unknown:
            raise ValueError(f"methods: unknown method {unknown[0]!r} for {', '.join(names)}; choose from: "
                             f"{', '.join(offered)}")
    known = _known(out)
    mine: dict[str, dict[str, Any]] = {n: {"study": n, "mode": mode, "runs": {}, "sessions": []} for n in names}
    wanted: dict[str, list[RunSpec]] = {}
    chosen = (lambda m: m in methods) if methods is not None else (lambda m: m not in PLANNED_METHODS)
    named = {n: [s for s in pool[n] if chosen(s.method)] for n in names}
    share = shard_keys([s for specs in named.values() for s in specs], shard) if shard else None
    for n in names:
        for spec in named[n]:
            if spec.key in datas[n]["runs"] or (share is not None and spec.key not in share):
                continue
            if spec.key in known:
                mine[n]["runs"][spec.key] = _as_run_of(spec, known[spec.key])
            else:
                wanted.setdefault(spec.key, []).append(spec)
    return Plan(list(names), paths, datas, mine, wanted)


def _command(names: list[str], quick: bool, seeds: Seeds, jobs: int, protocol: str,
             methods: Optional[list[str]], curve_every: int, shard: Optional[tuple[int, int]] = None,
             executor: str = "local", base: Optional[Path] = None) -> str:
    """The call as typed, for its session line."""
    return " ".join(["python -m lab study", *names] + (["--quick"] if quick else []) +
                    ([f"--protocol {protocol}"] if protocol != "v1" else [])
                    + ([f"--jobs {jobs}"] if executor == "local" else [f"--executor {executor}"])
                    + ([f"--seeds {seeds_text(seeds)}"] if seeds is not None else [])
                    + ([f"--methods {','.join(methods)}"] if methods is not None else [])
                    + ([f"--shard {shard[0]}/{shard[1]}"] if shard else [])
                    + ([f"--base {base}"] if base is not None else [])
                    + ([f"--curve-every {curve_every}"] if curve_every else []))


def run_studies(names: list[str], out: Path, quick: bool = False, seeds: Seeds = None, jobs: int = 1,
                threads: int = 1, log: Callable[[str], None] = print, protocol: str = "v1",
                device: Optional[str] = None, methods: Optional[list[str]] = None, curve_every: int = 0,
                shard: Optional[tuple[int, int]] = None, executor: str = "local",
                cluster: Optional["ClusterConfig"] = None, base: Optional[Path] = None) -> dict[str, dict[str, Any]]:
    """Train every missing run of the studies ``names`` under ``protocol`` into ``out/NAME.json``, study by
    study in that order and seed by seed, each config once whichever studies need it; a run that fails
    (e.g. diverges) is listed under "failed" and retried by the next call. ``methods``: train only the runs
    of these methods (a power plan's losses), the others stay missing. ``shard`` = (i, n): only part i of n
    (:func:`shard_keys`). ``executor``: "local" (``jobs`` processes here) or "submitit" (one job per run,
    ``cluster`` its parameters: :mod:`.cluster`). ``base``: a paper-scale study's recipe (:mod:`.paper_studies`).
    ``curve_every``: see ``execute``. Returns {name: the file's data}."""
    if executor not in EXECUTORS:
        raise ValueError(f"--executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if executor == "submitit":  # before anything is written: without submitit, one line naming the extra
        require("python -m lab study --executor submitit")
    todo = plan(names, out, quick, seeds, protocol, methods, shard, base)
    for n in names:
        todo.datas[n] = add_results(todo.paths[n], todo.mine[n])
        log(f"{n}: {len(runs_of(n, quick, seeds, protocol, base))} runs, {todo.to_train(n)} to train"
            + (f" (methods {', '.join(methods)})" if methods is not None else "")
            + (f" (shard {shard[0]}/{shard[1]})" if shard else ""))
    command = _command(names, quick, seeds, jobs, protocol, methods, curve_every, shard, executor, base)
    return train(todo, command, jobs, threads, log, device, curve_every, executor, cluster)


def train(todo: Plan, command: str, jobs: int = 1, threads: int = 1, log: Callable[[str], None] = print,
          device: Optional[str] = None, curve_every: int = 0, executor: str = "local",
          cluster: Optional["ClusterConfig"] = None) -> dict[str, dict[str, Any]]:
    """Train it: every run ``todo`` wants, in ``jobs`` processes here or one submitit job each, each into its
    studies' files as it ends (see :func:`run_studies`); ``command`` names the call in its session line.
    Returns {name: the file's data}."""
    if executor == "submitit":
        from .cluster import ClusterConfig

        cluster = cluster or ClusterConfig()
    session = Session(todo, command, cluster.array_parallelism if executor == "submitit" else jobs, threads)

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
    broken = 0  # runs a broken worker pool (or a job that ended without its result) left unfinished
    if executor == "submitit" and runs:
        from .submitit_runs import train_as_jobs

        broken = train_as_jobs(runs, record, cluster, work_folder(todo), threads, device, session.id, curve_every,
                               log)
    elif jobs <= 1 or len(runs) <= 1:
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


def work_folder(todo: Plan) -> Path:
    """Where the jobs of a call keep their runs' checkpoints while they train (``.work/KEY/`` beside the results
    files: on the cluster's shared folder, so that a run requeued onto another node resumes there)."""
    return next(iter(todo.paths.values())).parent / ".work"


def _train_in_pool(runs: list[RunSpec], record: Callable[..., None], jobs: int, threads: int,
                   device: Optional[str], session: str, curve_every: int) -> int:
    """``runs`` in ``jobs`` worker processes (each on its own GPU where ``device`` is ``cuda`` on a node with
    several: :mod:`.local_pool`), each recorded as it ends; the number a broken pool left."""
    broken = 0
    # spawn: a forked child would inherit the parent's torch thread pools in an unknown state.
    ctx = multiprocessing.get_context("spawn")
    devices = device_queue(ctx, device, jobs)
    with futures.ProcessPoolExecutor(jobs, mp_context=ctx, initializer=worker_init,
                                     initargs=(threads, devices)) as pool:
        running = {pool.submit(pool_execute, spec, threads, device, session=session, curve_every=curve_every):
                   spec.key for spec in runs}
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
