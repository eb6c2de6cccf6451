"""A study's results file (``results/NAME.json``): read it, and add to it from many processes at once.

The file holds one record per finished run, keyed by what the run trains (``spec.record_key``), the
``sessions`` that trained them (one line per call) and the runs that ``failed``. Several processes may
write one file at once: two ``python -m lab study`` calls on one folder, two cluster nodes that share a
home folder. Each of them adds to the file with :func:`add_results`, which

1. takes an exclusive lock on ``.NAME.json.lock`` beside the file (``fcntl.flock``: it holds across
   processes, and the kernel drops it when its holder dies, however it dies);
2. reads the file again under the lock, so that what the others wrote since is there;
3. merges this writer's records by key, its session lines by id and its failed runs into it
   (:func:`merge_results`): two records of one key that measured different numbers are an error naming
   both, never a silent overwrite; an identical record (its timings aside) is the same run, kept once;
4. writes the whole file atomically (:mod:`lab.core.files`): a reader, or a writer killed mid-write,
   leaves the old file or the new one, never a part of one.

On NFS, ``flock`` locks across machines only on a mount with locking (NFSv4, or NFSv3 with lockd; not a
``nolock`` or ``local_lock=flock`` mount, where each machine would hold its own lock and writers could
drop each other's runs again). ``python -m lab study merge`` (:func:`merge_files`) is the other way:
each node writes its own folder, and the parts are merged afterwards.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path
from typing import Any, Iterator, Sequence

from ...core.files import write_text_atomic
from .spec import record_key

try:
    import fcntl
except ImportError:  # Windows: no flock; one writer per file there
    fcntl = None

# How, when and where a run ran, not what it measured: two records of one key may differ here (the same
# run trained twice, or on another machine) and are still one run. The configs too: the key is the hash of
# what they train, so records of one key train one config; the rest of a config says where and how it ran,
# or states a default that an older record leaves out.
RAN: frozenset[str] = frozenset({
    "key", "study", "method", "params", "seed", "shared_from", "seconds", "train_seconds", "train_cpu_seconds",
    "seconds_per_step", "seconds_per_step_late", "load_before", "load_after", "started", "finished", "provenance",
    "threads", "device", "accelerator", "curve_every", "config", "trained_config"})


# The measured numbers of a record: each, where present, a finite number (a NaN rendered a verdict: "+nan pt").
METRICS = ("R@1", "R@2", "R@4", "R@8", "mAP@R", "mAP", "gap_heldout", "gap_train_probe")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_record(key: str, rec: Any, where: str) -> None:
    """ValueError, one line naming the record and the field, unless ``rec`` is a run's record: a mapping with
    a method (text), a seed (an integer >= 0), a config (a mapping, where present) and finite metrics."""
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: record {key} is a {type(rec).__name__}, not a run's record (a mapping)")
    name = f"{where}: record {key} ({str(rec.get('method'))[:40]}, seed {str(rec.get('seed'))[:20]})"
    if not isinstance(rec.get("method"), str):
        raise ValueError(f"{name}: its method is {str(rec.get('method'))[:40]!r}, not a name")
    seed = rec.get("seed")
    if not (isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0):
        raise ValueError(f"{name}: its seed is {str(seed)[:20]!r}, not an integer >= 0")
    if "config" in rec and not isinstance(rec["config"], dict):
        raise ValueError(f"{name}: its config is a {type(rec['config']).__name__}, not a mapping")
    for field in METRICS:
        if field in rec and not _number(rec[field]):
            raise ValueError(f"{name}: {field} is {str(rec[field])[:40]}, not a finite number")


def check_file(data: dict[str, Any], where: str) -> None:
    """ValueError, one line, unless the file's sessions are a list of mappings and its failed runs a mapping."""
    sessions, failed = data.get("sessions", []), data.get("failed", {})
    if not (isinstance(sessions, list) and all(isinstance(s, dict) for s in sessions)):
        raise ValueError(f"{where}: 'sessions' is {json.dumps(sessions)[:40]}, not a list of session lines")
    if not (isinstance(failed, dict) and all(isinstance(f, dict) for f in failed.values())):
        raise ValueError(f"{where}: 'failed' is {json.dumps(failed)[:40]}, not a mapping of failed runs")


class ResultsConflict(ValueError):
    """Two records of one run disagree on what it measured (or two files on quick / full mode)."""


def empty_results(study: str) -> dict[str, Any]:
    return {"study": study, "mode": None, "runs": {}, "sessions": []}


def load_results(path: Path) -> dict[str, Any]:
    """The raw-results file (an empty one if it does not exist yet), its runs keyed by what they train:
    each record's key is computed again from its own config (``record_key``), so a record stays found
    whatever key the code that wrote it used."""
    path = Path(path)
    if not path.exists():
        return empty_results(path.stem)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not a results file ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("runs", {}), dict):
        raise ValueError(f"{path}: not a results file (no mapping of runs)")
    if "runs" in data:  # a study's file (the pilot's holds a curve instead): checked record by record
        check_file(data, str(path))
        for key, rec in data["runs"].items():
            check_record(key, rec, str(path))
    runs: dict[str, Any] = {}
    for key, rec in data.get("runs", {}).items():
        key = record_key(rec) if isinstance(rec, dict) and "config" in rec else key
        if key in runs:
            raise ValueError(f"{path}: two records of one run (key {key}): {runs[key].get('method')}, "
                             f"seed {runs[key].get('seed')}; remove one")
        runs[key] = {**rec, "key": key} if isinstance(rec, dict) else rec
    if "runs" in data:
        data["runs"] = runs
    return data


def save_results(path: Path, data: dict[str, Any]) -> None:
    """Replace the whole file with ``data``, atomically, with the mode a plain open() gives (the shared
    writer, not mkstemp's owner-only 0o600). For a file that one process owns, or under
    :func:`results_lock`; a study's runs are added with :func:`add_results`."""
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def lock_path(path: Path) -> Path:
    path = Path(path)
    return path.parent / f".{path.name}.lock"


@contextlib.contextmanager
def results_lock(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of the results file ``path`` (waiting for the holder, if any). The lock
    file stays: removing it would let a waiter lock a file that a newcomer no longer sees."""
    if fcntl is None:
        yield
        return
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor of the file releases the lock


def add_results(path: Path, part: dict[str, Any]) -> dict[str, Any]:
    """Merge ``part`` (this writer's records, session lines, failed runs) into the file ``path`` as it is
    now, under its lock, and write it atomically; returns what the file holds then. A writer may send all
    it has added so far at each call: a record already there, unchanged, is kept as it is."""
    path = Path(path)
    with results_lock(path):
        merged = merge_results(load_results(path), part, str(path))
        save_results(path, merged)
    return merged


def _measured(field: str, value: Any) -> Any:
    """What a record's field says about the run: a curve without its timings."""
    if field == "curve" and isinstance(value, list):
        return [{k: v for k, v in p.items() if not k.endswith("_seconds")} if isinstance(p, dict) else p
                for p in value]
    return value


def _run(rec: dict[str, Any]) -> str:
    return f"{rec.get('method')}, seed {rec.get('seed')}"


def same_run(old: dict[str, Any], new: dict[str, Any], key: str, where: str = "") -> dict[str, Any]:
    """The record to keep of two records of one run ``key``: ``old``, or ``new`` where only it holds a
    learning curve. Any measured field both hold with different values: ResultsConflict naming both."""
    for field in sorted((set(old) & set(new)) - RAN):
        if _measured(field, old[field]) != _measured(field, new[field]):
            a, b = (json.dumps(_measured(field, r[field]), sort_keys=True) for r in (old, new))
            a, b = (s if len(s) <= 80 else s[:77] + "..." for s in (a, b))
            raise ResultsConflict(
                f"{where + ': ' if where else ''}two records of one run (key {key}) differ in {field}: "
                f"{_run(old)} has {a}, {_run(new)} has {b}; keep one of them (or train it again)")
    return new if "curve" in new and "curve" not in old else old


def _progress(line: dict[str, Any]) -> tuple:
    return line.get("finished", ""), line.get("trained", 0), line.get("elapsed_seconds", 0)


def _sessions(old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per call: a call's line (by id) as last updated; a line without an id, once."""
    out = list(old)
    for line in new:
        same = [i for i, o in enumerate(out) if ("id" in line and o.get("id") == line["id"]) or o == line]
        if not same:
            out.append(line)
        else:  # the same call: its writer updates its line run by run; the new line on a tie (its last update)
            out[same[0]] = max(line, out[same[0]], key=_progress)
    return out


def merge_results(into: dict[str, Any], part: dict[str, Any], where: str = "") -> dict[str, Any]:
    """``into`` with ``part`` merged in (neither is changed): runs by key (:func:`same_run`), session lines
    (:func:`_sessions`), failed runs by key (the part's the later; a run recorded is no longer failed)."""
    modes = {d.get("mode") for d in (into, part) if d.get("runs") and d.get("mode") is not None}
    if len(modes) > 1:
        raise ResultsConflict(f"{where + ': ' if where else ''}quick-mode and full-mode results do not mix: "
                              "write each mode to its own folder (--out DIR)")
    out = {**part, **into}  # fields of either (e.g. study), into's first
    # A file's mode is its runs': an empty file takes the writer's.
    keep = into.get("mode") is not None and (into.get("runs") or part.get("mode") is None)
    out["mode"] = into.get("mode") if keep else part.get("mode")
    runs = dict(into.get("runs", {}))
    for key, rec in part.get("runs", {}).items():
        runs[key] = same_run(runs[key], rec, key, where) if key in runs else rec
    out["runs"] = runs
    out["sessions"] = _sessions(into.get("sessions", []), part.get("sessions", []))
    failed = {**into.get("failed", {}), **part.get("failed", {})}
    if failed or "failed" in into or "failed" in part:
        out["failed"] = {k: v for k, v in failed.items() if k not in runs}
    return out


def merge_files(parts: Sequence[Path], out: Path) -> dict[Path, tuple[int, int]]:
    """``python -m lab study merge PARTS... --out DIR``: the results files ``parts`` (each node's, say) and
    ``out/NAME.json`` (NAME: each part's study) merged by key into ``out/NAME.json``. Every file is merged
    before any is written, so a conflict (:func:`same_run`) writes nothing. Returns {file written:
    (runs before, runs after)}."""
    by_file: dict[Path, list[Path]] = {}
    for part in map(Path, parts):
        if not part.is_file():
            raise ValueError(f"merge: part {part} is not a file (give results files, e.g. node1/methods.json)")
        data = load_results(part)
        if "runs" not in data or not data.get("study"):
            raise ValueError(f"merge: {part} is not a study's results file (no study and runs)")
        by_file.setdefault(Path(out) / f"{data['study']}.json", []).append(part)
    with contextlib.ExitStack() as stack:
        for target in sorted(by_file):  # always in this order: two merges never wait on each other
            stack.enter_context(results_lock(target))
        merged, counts = {}, {}
        for target, sources in by_file.items():
            data = load_results(target)
            before = len(data["runs"])
            for source in sources:
                data = merge_results(data, load_results(source), f"{source} into {target}")
            merged[target], counts[target] = data, (before, len(data["runs"]))
        for target, data in merged.items():
            save_results(target, data)
    return counts
