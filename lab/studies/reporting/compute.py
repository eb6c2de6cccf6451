"""The page's compute paragraph: what a protocol's finished runs cost, what the runs left should cost at the
same pace, and its time on a GPU (runs trained again with ``--device cuda``, ``results/gpu/v2/``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from ..running.results_file import load_results
from ..running.spec import RunSpec
from .gpu_time import gpu_time


def compute_paragraph(datas: dict[str, dict[str, Any]], wanted: Optional[list[RunSpec]] = None,
                      gpu: Optional[list[dict[str, Any]]] = None, held: Sequence[int] = ()) -> str:
    """What a protocol's finished runs cost (wall time with 1 torch thread per run, and CPU time, summed)
    and, with ``wanted`` (its distinct runs), what the runs left should cost at the same pace; ``gpu``:
    runs of the protocol trained with ``--device cuda`` (:func:`gpu_runs`), for its time on a GPU; ``held``: seeds of
    a replication look not read yet, whose runs give no metric to the GPU comparison."""
    runs = {key: rec for data in datas.values() for key, rec in data.get("runs", {}).items()}
    if not runs:
        return ""
    wall = sum(r["seconds"] for r in runs.values()) / 3600
    cpu = sum(r.get("train_cpu_seconds", 0.0) for r in runs.values()) / 3600
    jobs = run_jobs(datas)
    by_jobs: dict[Optional[int], list[float]] = {}
    for key, r in runs.items():
        by_jobs.setdefault(jobs.get(key), []).append(r["seconds"])
    elapsed = sum(sum(v) / (j or 1) for j, v in by_jobs.items()) / 3600  # an unknown --jobs counted as 1
    counts = ", ".join(f"{len(v)} {'of an unknown --jobs, counted as 1' if j is None else f'with --jobs {j}'}"
                       for j, v in sorted(by_jobs.items(), key=lambda kv: -(kv[0] or 0)))
    text = (f"**Compute.** {len(runs)} distinct runs: {wall:.1f} h of run time summed (1 torch thread each), about "
            f"{elapsed:.1f} h of wall time with each run's time divided by the --jobs of the call that trained it "
            f"({counts}; the calls ran on 2 shared cores), of which {cpu:.1f} h of CPU time in training.")
    left = [s for s in wanted or [] if s.key not in runs]
    if left:
        more = [expected_cost(s, list(runs.values())) for s in left]
        more_wall, more_cpu = (sum(m[i] for m in more) / 3600 for i in (0, 1))
        text += (f" The {len(left)} run{'' if len(left) == 1 else 's'} left should take about {more_wall:.1f} h more "
                 f"({more_wall / 2:.1f} h of wall "
                 f"time with 2 jobs; {more_cpu:.1f} h of training CPU), each estimated from the finished runs of its "
                 f"loss and batch size: the whole protocol about {wall + more_wall:.0f} h of run time, "
                 f"{cpu + more_cpu:.0f} h of training CPU.")
    if gpu:
        shown = {k: r for k, r in runs.items() if r.get("seed") not in held}  # an unread look's runs: no metric
        return text + " " + _gpu_compute(gpu, runs, wanted or []) + "\n\n" + gpu_time(gpu, shown)
    return text + (" On a GPU the same protocol runs unchanged with `--device cuda` (the device is not part of a run's "
                   "key); its time there is not measured: no study run has been made on a GPU yet "
                   "(one seed of study 1, "
                   "`python -m lab study methods --protocol v2 --seeds 1 --device cuda --out "
                   f"results/{GPU_RESULTS} --no-render`, puts it here).")


def run_jobs(datas: dict[str, dict[str, Any]]) -> dict[str, Optional[int]]:
    """{run key: the --jobs of the call that trained it}: the session its provenance names, else (records from
    before sessions had ids) the one --jobs every id-less session line of its file gives, else None."""
    out: dict[str, Optional[int]] = {}
    for data in datas.values():
        lines = data.get("sessions", [])
        by_id = {line["id"]: line.get("jobs") for line in lines if "id" in line}
        anonymous = {line.get("jobs") for line in lines if "id" not in line}
        for key, r in data.get("runs", {}).items():
            session = (r.get("provenance") or {}).get("session")
            jobs = by_id.get(session) if session else (next(iter(anonymous)) if len(anonymous) == 1 else None)
            if out.get(key) is None:
                out[key] = jobs
    return out


GPU_RESULTS = "gpu"  # results/gpu/v2/*.json: runs of protocol v2 trained with --device cuda, for their time only


def gpu_runs(folder: Path) -> list[dict[str, Any]]:
    """The runs of every results file in ``folder`` (e.g. results/gpu/v2) that were trained on a CUDA device."""
    records = [r for path in sorted(folder.glob("*.json")) for r in load_results(path).get("runs", {}).values()]
    return list({r["key"]: r for r in records if str(r.get("device", "")).startswith("cuda")}.values())


def _gpu_compute(gpu: list[dict[str, Any]], cpu_runs: dict[str, dict[str, Any]], wanted: list[RunSpec]) -> str:
    """The GPU sentence: the runs measured there against the same runs on the CPU, and the protocol's
    distinct runs at the GPU's pace (a run not measured there: its loss's GPU seconds per step times its
    steps, plus the mean evaluation time)."""
    names = sorted({r.get("accelerator") or r["device"] for r in gpu})
    mean = sum(r["seconds"] for r in gpu) / len(gpu)
    same = [(r["seconds"], cpu_runs[r["key"]]["seconds"]) for r in gpu if r["key"] in cpu_runs]
    text = (f"On a GPU ({', '.join(names)}; `--device cuda`, the same runs, results/{GPU_RESULTS}/v2/) {len(gpu)} "
            f"run{'' if len(gpu) == 1 else 's'} took {mean:.0f} s each on average")
    if same:
        ratio = sum(c for _, c in same) / sum(g for g, _ in same)
        text += (f", {ratio:.1f}x faster" if ratio >= 1 else f", {1 / ratio:.1f}x slower") + (
            f" than the same {len(same)} on one CPU core")
    if not wanted:
        return text + "."
    evaluation = sum(r["seconds"] - r["train_seconds"] for r in gpu) / len(gpu)
    by_key = {r["key"]: r for r in gpu}
    total, scaled = 0.0, 0
    for run in wanted:
        if run.key in by_key:
            total += by_key[run.key]["seconds"]
            continue
        alike = [r for r in gpu if r["loss"] == run.config["loss"]] or gpu
        total += sum(r["seconds_per_step"] for r in alike) / len(alike) * run.config["steps"] + evaluation
        scaled += 1
    return text + (f". The protocol's {len(wanted)} distinct runs would take about {total / 3600:.1f} h there, "
                   "one at a time"
                   + (f" ({scaled} of them estimated from their loss's measured seconds per step times their "
                              "steps, assuming a step costs the same at every batch size)." if scaled else "."))


def expected_cost(run: RunSpec, finished: list[dict[str, Any]]) -> tuple[float, float]:
    """(run seconds, training CPU seconds) to expect of a run not trained yet: the mean over the
    finished runs of the same config but the seed, else of the same batch size, else of all."""
    def config(rec_or_spec: dict) -> dict:
        return {k: v for k, v in rec_or_spec.items() if k != "seed"}

    for alike in (lambda r: config(r["config"]) == config(run.config),
                  lambda r: r["config"].get("batch_size") == run.config.get("batch_size"),
                  lambda r: True):
        chosen = [r for r in finished if alike(r)]
        if chosen:
            return (sum(r["seconds"] for r in chosen) / len(chosen),
                    sum(r.get("train_cpu_seconds", 0.0) for r in chosen) / len(chosen))
    raise ValueError("finished must hold at least one run")
