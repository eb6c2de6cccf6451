"""Admit runs trained elsewhere into a study's results file, only after checking each is the planned run.

A record from another machine or clone (``../shared/power/``, a cluster node) joins ``results/`` only if

1. its key, computed again from its own config (``spec.record_key``), is the key of a run the study plans
   (``study_runs``) and the key it carries;
2. its config is that planned run's config, field for field;
3. its provenance names a commit that this clone's history holds and that is an ancestor of the code reading
   it (HEAD), with no uncommitted change to ``lab/`` (``dirty`` false);
4. it trained with 1 torch thread on the CPU, as every stored run of the study did (the thread count is part
   of a run's bits);
5. its metrics are finite numbers;
6. the results file does not hold that run yet.

:func:`problems` lists what fails for one record (an empty list: admitted); :func:`admit` merges a file's
records with the locked writer (:func:`.results_file.add_results`) only if every record passes, else raises
one line naming the first problem and writes nothing. The session lines that the admitted records name (their
``provenance.session``) come with them, so the page knows the call that trained each (its ``--jobs``); the
source's other session lines stay out.

    python -m lab.studies.running.admit ../shared/power/roadmap-seeds-7-9-afb24c8.json --seeds 15
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
from pathlib import Path
from typing import Any, Sequence

from .paths import RESULTS, ROOT
from .replay import MissingHistory, resolve
from .results_file import add_results, load_results
from .spec import RunSpec, record_key, study_runs

METRICS = ("R@1", "R@2", "R@4", "R@8", "mAP", "mAP@R", "gap_heldout", "gap_train_probe")


def is_ancestor(commit: str, of: str = "HEAD", repo: Path = ROOT) -> bool:
    """Whether ``commit`` is ``of`` or one of its ancestors in ``repo``'s history."""
    done = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", commit, of], capture_output=True)
    return done.returncode == 0


def problems(record: dict[str, Any], planned: Sequence[RunSpec], have: Sequence[str], repo: Path = ROOT
             ) -> list[str]:
    """What keeps ``record`` out of a results file holding the keys ``have``, for a study planning ``planned``."""
    name = f"{record.get('method')} seed {record.get('seed')}"
    out = []
    try:
        key = record_key(record)
    except (KeyError, TypeError, ValueError) as e:
        return [f"{name}: its config does not give a key ({e})"]
    spec = next((s for s in planned if s.key == key), None)
    if spec is None:
        out.append(f"{name}: key {key} (from its config) is no planned run of the study")
    elif (spec.method, spec.seed) != (record.get("method"), record.get("seed")):
        out.append(f"{name}: key {key} is the planned run {spec.method} seed {spec.seed}")
    if record.get("key") != key:
        out.append(f"{name}: carries key {record.get('key')}, its config gives {key}")
    if spec is not None and record.get("config") != spec.config:
        diff = sorted(k for k in set(spec.config) | set(record.get("config", {}))
                      if record.get("config", {}).get(k) != spec.config.get(k))
        out.append(f"{name}: config differs from the planned run's in {', '.join(diff)}")
    origin = record.get("provenance") or {}
    commit = origin.get("commit")
    if not commit:
        out.append(f"{name}: records no commit")
    else:
        try:
            resolve(commit, repo)
        except MissingHistory as e:
            out.append(f"{name}: {e}")
        else:
            if not is_ancestor(commit, "HEAD", repo):
                out.append(f"{name}: commit {commit[:7]} is not an ancestor of the analysis code (HEAD)")
    if origin.get("dirty") is not False:
        out.append(f"{name}: dirty is {origin.get('dirty')!r} (uncommitted changes to lab/ or unknown)")
    for field, want in (("threads", 1), ("device", "cpu")):
        got = {record.get(field), origin.get(field)}
        if got != {want}:
            out.append(f"{name}: {field} {sorted(map(str, got))}, the study's runs have {want}")
    bad = [m for m in METRICS if not isinstance(record.get(m), (int, float)) or not math.isfinite(record[m])]
    if bad:
        out.append(f"{name}: metrics not finite: {', '.join(bad)}")
    if key in have:
        out.append(f"{name}: the results file already holds run {key}")
    return out


def admit(source: Path, into: Path, study: str = "methods", protocol: str = "v2", seeds: int = 15,
          repo: Path = ROOT) -> list[str]:
    """Merge every record of the results file ``source`` into ``into`` (under its lock) if each passes
    :func:`problems`; the admitted keys. Nothing is written when one fails: ValueError naming it."""
    part = json.loads(Path(source).read_text())
    planned = study_runs(study, False, seeds, protocol, planned=True)  # ROD-R@k's declared runs too
    have = list(load_results(into).get("runs", {}))
    found = [p for rec in part.get("runs", {}).values() for p in problems(rec, planned, have, repo)]
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ValueError(f"{source}: not admitted: {found[0]}{more}")
    if part.get("study") != study or part.get("mode") != "full":
        raise ValueError(f"{source}: not admitted: a full-mode file of study {study} is needed")
    named = {(rec.get("provenance") or {}).get("session") for rec in part["runs"].values()}
    lines = [line for line in part.get("sessions", []) if line.get("id") in named]
    add_results(into, {"study": study, "mode": "full", "sessions": lines, "runs": part["runs"]})
    return sorted(part["runs"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m lab.studies.running.admit", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("--into", type=Path, default=RESULTS / "v2" / "methods.json")
    parser.add_argument("--study", default="methods")
    parser.add_argument("--protocol", default="v2")
    parser.add_argument("--seeds", type=int, default=15)
    args = parser.parse_args()
    try:
        keys = admit(args.source, args.into, args.study, args.protocol, args.seeds)
    except ValueError as e:
        parser.exit(1, f"admit: {e}\n")
    print(f"admitted {len(keys)} runs into {args.into}: {', '.join(keys)}")
