"""A study call's line in each results file it trains runs of (its ``sessions``), and its records as runs end.

Every executor records through :class:`Session`: the local pool and the in-process loop as each run ends, the
submitit driver as each job ends (one writer, the driver, whatever the number of jobs).
"""
from __future__ import annotations

import os
import platform
import secrets
import sys
import time
from typing import Any, Optional

from .results_file import add_results
from .spec import RunSpec


class Session:
    """This call's line in each file it trains runs of, written at its start and updated run by run: a call
    killed part-way (a session's end) keeps its line, "stopped", with what it finished until then."""

    def __init__(self, todo: Any, command: str, jobs: int, threads: int) -> None:
        """``todo``: the call's :class:`.runner.Plan` (its files, what it adds to them, the runs it wants)."""
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


def _as_run_of(spec: RunSpec, rec: dict[str, Any]) -> dict[str, Any]:
    """A record of the same config, labelled as ``spec``'s study sees it (method, varied params)."""
    origin = rec.get("shared_from", rec["study"])
    out = {**rec, "study": spec.study, "method": spec.method, "params": spec.params, "seed": spec.seed}
    out.pop("shared_from", None)
    if origin != spec.study:
        out["shared_from"] = origin
    return out
