"""What sending a study's runs as submitit jobs costs, against the local pool (``python -m bench.cluster_overhead``).

The same quick study (``methods --quick``: 4 runs, 2 at a time) trained from scratch three ways, interleaved over
``--rounds`` rounds: the local executor's pool (``--jobs 2``), submitit's local executor (a process per run, at
most 2 at once) and submitit on a real one-node SLURM cluster (bench/slurm.py: started here as root, a job array
of 4 tasks, 1 CPU each). The wall time of each whole call; the overhead per run is (a submitit call's wall time -
the pool's in the same round) / 4, the median over rounds. Writes the "cluster overhead" section of
docs/benchmarks.md (``--no-write``: print it).
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.measure import cpu_model, load_average, publish
from lab.studies.running import runner
from lab.studies.running.cluster import ClusterConfig

ROOT = Path(__file__).resolve().parents[1]
MODES = ("local pool (--jobs 2)", "submitit, local executor", "submitit, SLURM array")


def one_call(mode: str, out: Path) -> tuple[float, list[dict]]:
    """(wall seconds, the records) of the quick methods study trained into the empty folder ``out``."""
    start = time.perf_counter()
    if mode == MODES[0]:
        data = runner.run_studies(["methods"], out, quick=True, jobs=2, log=lambda _: None)
    else:
        backend = "local" if mode == MODES[1] else "slurm"
        cluster = ClusterConfig(backend=backend, array_parallelism=2, poll_seconds=0.5, time=30)
        data = runner.run_studies(["methods"], out, quick=True, executor="submitit", cluster=cluster,
                                  log=lambda _: None)
    return time.perf_counter() - start, list(data["methods"]["runs"].values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print the section instead of writing it")
    args = parser.parse_args()
    from bench.slurm import Slurm, unavailable

    if unavailable():
        raise SystemExit(f"bench.cluster_overhead: {unavailable()}")
    os.environ["PYTHONPATH"] = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"  # the jobs import lab
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    walls: dict[str, list[float]] = {m: [] for m in MODES}
    runs: dict[str, list[float]] = {m: [] for m in MODES}
    loads = [load_average()]
    with Slurm() as cluster, tempfile.TemporaryDirectory(prefix="ranklab_bench_cluster_") as tmp:
        os.environ.update(cluster.env)
        for r in range(args.rounds):
            for mode in (MODES if r % 2 == 0 else MODES[::-1]):
                wall, records = one_call(mode, Path(tmp) / f"{r}-{MODES.index(mode)}")
                assert len(records) == 4, (mode, len(records))
                walls[mode].append(wall)
                runs[mode].extend(rec["seconds"] for rec in records)
            loads.append(load_average())
        started = cluster.started
    pool = walls[MODES[0]]
    rows = []
    for mode in MODES:
        extra = [(w - p) / 4 for w, p in zip(walls[mode], pool)]
        rows.append(f"| {mode} | {statistics.median(walls[mode]):.1f} | {statistics.median(runs[mode]):.1f} | "
                    + ("—" if mode == MODES[0] else f"{statistics.median(extra):+.1f} ({min(extra):+.1f} … "
                                                    f"{max(extra):+.1f})") + " |")
    text = f"""## Cluster overhead (`python -m bench.cluster_overhead`)

The quick study `methods --quick` (4 runs of 3 steps, 2 at a time) trained from scratch three ways, interleaved
over {args.rounds} rounds: the local executor's process pool, submitit's local executor (a process per run) and
submitit on a real one-node SLURM cluster (Debian's slurm-wlm 22.05, started for the benchmark in
{started:.1f} s; a job array, 1 CPU per task). Wall seconds of the whole call (median), the run time inside each
run (its record's `seconds`, median), and the overhead per run against the pool of the same round (median, min …
max). A quick run takes a few seconds: the overhead is nearly all starting a Python that imports torch per
run (the pool starts one per worker), plus submitit's pickles and polling (every 0.5 s) and, on SLURM, sbatch and
srun. A real run of the papers' tables takes hours on a GPU: a few seconds per run do not count there. CPU:
{cpu_model()}; load average {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores, shared with other
engineers' tests and a training job (the timings scatter with it).

| executor | call, s | a run's own time, s | overhead per run vs the pool, s |
|---|---|---|---|
""" + "\n".join(rows)
    publish("cluster overhead", text, args.no_write)


if __name__ == "__main__":
    main()
