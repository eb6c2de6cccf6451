"""``--executor submitit``: one job per run (a SLURM job array, or processes here), and one driver that writes.

The driver (the ``python -m lab study`` process) submits the runs :func:`.runner.plan` wants as
:class:`.cluster_job.RunJob` jobs: on SLURM one array (``sbatch --array``, at most ``array_parallelism`` tasks at
once, one GPU each for a CUDA study), locally at most ``array_parallelism`` processes at a time (each on its own
GPU, round-robin, where there are several). It then polls them, and records each run as its job ends, through
the same session and locked results file as the local pool: the jobs themselves write no results file. A line
per finished run, and one per requeue, say how far the study has got. A job that ends without a result (killed,
its node lost, not requeued) is no run's failure: it is left for the next call, which resumes it from its
checkpoint when it has one.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Optional

from .cluster import ClusterConfig, make_executor
from .spec import RunSpec

# How long a job may be out of SLURM's queue with no result file before it counts as ended without one: the
# result of a job that just ended may take this long to appear on a shared file system.
GONE_SECONDS = 60.0


def train_as_jobs(runs: list[RunSpec], record: Callable[..., None], cluster: ClusterConfig, work: Path,
                  threads: int, device: Optional[str], session: str, curve_every: int,
                  log: Callable[[str], None] = print) -> int:
    """Train ``runs`` as submitit jobs (see the module), each recorded with ``record(key, rec, error)`` as it
    ends; ``work``: the folder of their checkpoints (``work/KEY``) and of submitit's files (``work/submitit``).
    Returns the number of runs whose job ended without a result."""
    executor = make_executor(cluster, work / "submitit", device, threads)  # first: one line without submitit
    import torch
    from submitit.core.utils import FailedJobError, UncompletedJobError

    from .cluster_job import RunJob

    backend = cluster.resolved_backend()
    jobs = {spec.key: RunJob(spec, threads, device, session, curve_every, str(work / spec.key)) for spec in runs}
    waiting = list(runs)
    running: dict[Any, RunSpec] = {}
    gpus = torch.cuda.device_count() if backend == "local" and cluster.gpus(device) == 1 else 0
    if backend == "slurm":  # one array: the scheduler runs array_parallelism of its tasks at once
        running = dict(zip(executor.submit_array([jobs[s.key] for s in waiting]), waiting))
        waiting = []
        first = next(iter(running)).job_id.split("_")[0]
        log(f"  submitted {len(runs)} runs as SLURM array job {first} (at most {cluster.array_parallelism} at "
            f"once; logs in {work / 'submitit'})")
    else:
        log(f"  running {len(runs)} runs as submitit's local jobs, at most {cluster.array_parallelism} at once "
            f"(logs in {work / 'submitit'})")
    done = broken = slot = 0
    vanished = _Vanished()
    seen = {spec.key: len(_stops(work / spec.key)) for spec in runs}  # stops logged (or a past call's), per run
    while waiting or running:
        while waiting and len(running) < cluster.array_parallelism:  # local: start jobs as slots free up
            spec = waiting.pop(0)
            if gpus > 1:  # each job its own GPU, round-robin (submitit's local jobs all see GPU 0 otherwise)
                executor.update_parameters(visible_gpus=[slot % gpus])
            slot += 1
            running[executor.submit(jobs[spec.key])] = spec
        for spec in running.values():  # a line as a job stops and is requeued (its progress file gains a stop)
            stops = _stops(work / spec.key)
            if len(stops) > seen.get(spec.key, 0):
                seen[spec.key] = len(stops)
                log(f"  {spec.study}: {spec.setting}, seed {spec.seed}: stopped at step {stops[-1]['step']} on "
                    f"{stops[-1].get('host', '?')}, checkpointed; requeued")
        finished = [job for job in running if job.paths.result_pickle.exists() or job.done()]
        gone = vanished.check([job for job in running if job not in finished]) if backend == "slurm" else []
        for job in finished + gone:
            spec = running.pop(job)
            what = f"{spec.study}: {spec.setting}, seed {spec.seed}"
            try:
                if job in gone:
                    raise UncompletedJobError(f"it left SLURM's queue {GONE_SECONDS:.0f} s ago and wrote none")
                out = _result(job)
            except (UncompletedJobError, FailedJobError) as e:
                broken += 1
                last = [line for line in str(e).splitlines() if line.strip()]
                log(f"  {what}: job {job.job_id} ended without a result ({last[-1].strip() if last else e}); "
                    "left for the next call")
                continue
            done += 1
            if "error" in out:
                record(spec.key, None, out["error"])
            else:
                record(spec.key, out["record"])
                shutil.rmtree(work / spec.key, ignore_errors=True)  # its checkpoint: the run is recorded
            stops = out.get("record", {}).get("provenance", {}).get("stopped_at", [])
            log(f"  [{done + broken}/{len(runs)}] job {job.job_id} done"
                + (f" (stopped and requeued at step{'s' if len(stops) > 1 else ''} "
                   f"{', '.join(str(s['step']) for s in stops)})" if stops else "")
                + f"; {len(running)} running or queued, {len(waiting)} to submit")
        if waiting or running:
            time.sleep(cluster.poll_seconds)
    if broken:
        log(f"  {broken} runs' jobs ended without a result: left for the next call (it resumes those that saved "
            "a checkpoint)")
    return broken


class _Vanished:
    """The jobs that left SLURM's queue without a result. Without SLURM's accounting (``sacct``), submitit cannot
    learn that a job failed: its state stays UNKNOWN, which submitit counts as not done, and the driver waited
    for ever (a requeued job SLURM would not start, "Job credential revoked", did so). A job that ``squeue`` has
    not listed for ``GONE_SECONDS`` and whose result file is still missing has ended without one."""

    def __init__(self) -> None:
        self.since: dict[str, float] = {}

    def check(self, jobs: list[Any]) -> list[Any]:
        queued = _queued()
        if queued is None:  # squeue not answering: nothing is declared gone
            return []
        now, gone = time.monotonic(), []
        for job in jobs:
            if job.job_id in queued or job.paths.result_pickle.exists():
                self.since.pop(job.job_id, None)
            elif now - self.since.setdefault(job.job_id, now) >= GONE_SECONDS:
                gone.append(job)
        return gone


def _queued() -> Optional[set[str]]:
    """The ids of this user's jobs SLURM holds (pending, running, completing, requeued), one per array task;
    None when squeue fails."""
    try:
        done = subprocess.run(["squeue", "-h", "-r", "--me", "-o", "%i"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return set(done.stdout.split()) if done.returncode == 0 else None


def _stops(work: Path) -> list[dict[str, Any]]:
    """The stops a run's progress file lists (none before its first checkpoint)."""
    try:
        return json.loads((work / "progress.json").read_text()).get("stops", [])
    except (OSError, ValueError):
        return []


def _result(job: Any) -> dict[str, Any]:
    """A finished job's result, read as soon as its result file is there (submitit's local jobs are "done" only
    once their process has exited, seconds later: a Python that loaded torch takes a while to shut down); its
    error, or why it has none, as submitit raises them."""
    from submitit.core.utils import pickle_load

    if job.paths.result_pickle.exists():
        outcome, value = pickle_load(job.paths.result_pickle)
        if outcome == "success":
            return value
    return job.result()
