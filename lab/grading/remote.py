"""The grader's side of the student's process: start it (sandboxed), and stand-ins for its functions.

:class:`StudentProcess` starts :mod:`lab.grading.student_server` under bubblewrap (or, with
``sandbox=False``, as a plain child in its own session), waits for the import, and kills it from
outside: on a test's deadline and at the end. :class:`RemoteFunction` is what the test cells see in
place of the student's function: calling it sends the arguments, and returns the student's output
as a tensor whose backward asks the student's process for the vector-Jacobian product. The checks,
the references, the comparison and the feedback all run here, in the grader.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import signal
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any, Optional

import torch

from .assignments import ASSIGNMENTS
from .cgroup import Cgroup
from .launch import python_module
from .sandbox import Limits, bwrap_command, start
from .names import printable
from .wire import Budget, WireError, decode, encode, rebuild_exception, receive, send

STARTUP_BYTES = 2**20  # the start-up messages: names and small values, no arrays
ANSWER_FACTOR, ANSWER_SLACK = 4, 2**20  # an answer may hold 4x the call's input arrays, plus 1 MiB


class TestTimeout(BaseException):
    """The current test ran past its deadline (its student process was killed); student code cannot catch it."""

    __test__ = False


class StudentProcessEnded(BaseException):
    """The student's process ended, or sent garbage, during a test."""


class StudentProcess:
    """One running student_server, with the deadline of the current test."""

    def __init__(self, assignment: str, folder: Path, log: Path, limits: Limits, sandbox: bool = True) -> None:
        self.assignment, self.folder, self.log, self.limits, self.sandbox = assignment, folder, log, limits, sandbox
        self.graded = [t.function for t in ASSIGNMENTS[assignment].tests]
        self.deadline = float("inf")
        self.proc: Optional[subprocess.Popen] = None
        self.group: Optional[Cgroup] = None  # the sandbox's control group: all its memory, all its processes
        self.oom_killed = 0  # processes the kernel killed for memory in the groups of this submission
        self.lab_calls: dict[str, set[str]] = {}  # graded function -> lab code its calls ran (an integrity signal)
        self.ids = itertools.count()
        self.functions: dict[str, Any] = {}

    # ------------------------------------------------------------------------------ life
    def start(self, startup_s: float, import_s: float) -> Optional[dict]:
        """Start and import the submission: None, or the description of the import's failure."""
        self.oom_killed = 0
        req_r, self.requests = os.pipe()
        self.answers, ans_w = os.pipe()
        argv = python_module("lab.grading.student_server", "--assignment", self.assignment, "--requests",
                             str(req_r), "--answers", str(ans_w), *self.limits.args())
        files = sorted(p for p in self.folder.iterdir() if p.is_file() and not p.is_symlink())
        with open(self.log, "ab") as log:
            # Its own session: killing its process group reaches all it started that did not setsid.
            if self.sandbox:  # bwrap's --die-with-parent: it goes when this process goes; start() closes the fds
                cmd, fds = bwrap_command(argv, files, self.limits)
                self.proc, self.group = start(cmd, [req_r, ans_w, *fds], self.limits, stdin=subprocess.DEVNULL,
                                              stdout=log, stderr=subprocess.STDOUT)
            else:
                try:
                    self.proc = subprocess.Popen(argv, cwd=self.folder, env={**os.environ, "OMP_NUM_THREADS": "1"},
                                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                 pass_fds=(req_r, ans_w), start_new_session=True,
                                                 preexec_fn=_die_with_parent)
                finally:
                    os.close(req_r)
                    os.close(ans_w)
        os.set_blocking(self.requests, False)
        os.set_blocking(self.answers, False)
        for event, seconds in (("ready", startup_s), ("imported", import_s)):
            try:
                answer, arrays = receive(self.answers, time.monotonic() + seconds, STARTUP_BYTES)
            except WireError as exc:
                why = f"it did not finish within {seconds:g} s" if exc.reason == "deadline" else self._gone(exc)
                self.kill()
                return {"type": "", "message": why, "where": "", "code": ""}
            if answer.get("event") == "import_failed":
                self.kill()
                return answer.get("error") or {}
        self.functions = {}
        offered = answer.get("functions", {})
        for name in self.graded:  # the graded names only: nothing else of the student's reaches the test cells
            info = offered.get(name) if isinstance(offered, dict) else None
            if not isinstance(info, dict):
                continue
            try:
                self.functions[name] = (RemoteFunction(self, name, printable(info.get("name"), 100) or name)
                                        if info.get("callable") else
                                        decode(info.get("value", {"kind": "json", "value": None}), [],
                                               Budget(STARTUP_BYTES, time.monotonic() + import_s)))
            except (WireError, TypeError, KeyError, AttributeError) as exc:
                self.kill()
                return {"type": "", "message": self.ended(f"{type(exc).__name__}: {exc}"), "where": "", "code": ""}
        return None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL to its process group: bwrap goes, and with its PID namespace's init everything inside."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._release_group()
        for fd in (self.requests, self.answers):
            try:
                os.close(fd)
            except OSError:
                pass
        self.requests = self.answers = -1

    def _release_group(self) -> None:
        """Once the sandbox is gone: count the kernel's kills for memory in its group, then remove the group."""
        if self.group is not None:
            self.oom_killed += self.group.oom_kills()
            self.group.remove()
            self.group = None

    def close(self) -> None:
        """The end of grading: close its requests so that it exits on its own, then kill whatever is left."""
        if self.alive:
            os.close(self.requests)
            self.requests = -1
            try:
                self.proc.wait(2)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def _gone(self, exc: WireError) -> str:
        """Why the channel broke: a process that closed it is given a moment to end, to name its signal."""
        if exc.reason == "ended" and self.proc is not None:
            try:
                self.proc.wait(2)
            except subprocess.TimeoutExpired:
                pass
        return self.ended(str(exc))

    def ended(self, detail: str = "") -> str:
        """Why the process is gone, for the student."""
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
            return f"the grading process of your code sent an answer the grader cannot read ({detail})"
        code = self.proc.returncode if self.proc else None
        sig = -code if code and code < 0 else code - 128 if code and code > 128 and self.sandbox else 0
        self._release_group()
        if self.oom_killed:
            gb = self.limits.memory / 2**30
            return (f"the grading process ran out of memory: your code used more than its {gb:g}"
                    " GB (heap, shared memory, files in /tmp or /dev/shm, and every process it started count) and "
                    "was killed")
        if sig:
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
            return (f"the grading process was killed by {name} during this test (a crash in native code, or out "
                    "of memory)")
        return (f"the grading process ended (exit status {code}) during this test: does your code call os._exit() "
                "or crash the interpreter?")

    # ---------------------------------------------------------------------------- calls
    def request(self, header: dict[str, Any], arrays: list[bytes]) -> tuple[dict, list[bytes], Budget]:
        """Send a call and wait for its answer: (header, arrays, the budget left for decoding them). What an
        answer may hold is bounded by what the call sent (``ANSWER_FACTOR`` times its arrays, plus
        ``ANSWER_SLACK``), in bytes received and again in bytes decoded, all before the test's deadline."""
        if not self.alive:
            raise StudentProcessEnded(self.ended())
        limit = ANSWER_FACTOR * sum(map(len, arrays)) + ANSWER_SLACK
        try:
            send(self.requests, header, arrays, self.deadline)
            while True:
                answer, out = receive(self.answers, self.deadline, limit)
                if answer.get("id") == header.get("id"):  # an answer forged ahead of time is skipped
                    return answer, out, Budget(limit, self.deadline)
        except WireError as exc:
            if exc.reason == "deadline":
                self.kill()
                raise TestTimeout() from None
            raise StudentProcessEnded(self._gone(exc)) from None

    def note_lab_calls(self, function: str, calls: Any) -> None:
        """Record what lab code the student's process says a call of ``function`` ran (its own report: a
        signal for the instructor, not a proof; bounded)."""
        if isinstance(calls, list):
            seen = self.lab_calls.setdefault(function, set())
            seen.update(printable(c, 120) for c in calls[:50] if isinstance(c, str) and len(seen) < 50)

    def forget(self) -> None:
        """The graphs of the test that ended are no longer needed."""
        if self.alive:
            try:
                send(self.requests, {"op": "forget"}, [], time.monotonic() + 5)
            except WireError:
                pass


def _die_with_parent() -> None:
    """In the unsandboxed child, before exec: SIGKILL when the grading process dies (prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)


class RemoteFunction:
    """The student's function as the checks see it: same name, same outputs, gradients included."""

    def __init__(self, process: StudentProcess, key: str, name: str) -> None:
        self.process, self.key, self.__name__ = process, key, name

    def __repr__(self) -> str:
        return f"<function {self.__name__}>"

    def __call__(self, *args: Any) -> Any:
        arrays: list[bytes] = []
        grad_args = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
        anomaly = torch.is_anomaly_enabled()
        header = {"op": "call", "id": next(self.process.ids), "function": self.key, "anomaly": anomaly,
                  "args": [encode(a, arrays) for a in args], "grad_args": grad_args}
        answer, out, budget = self.process.request(header, arrays)
        self.process.note_lab_calls(self.key, answer.get("lab_calls"))
        if "error" in answer:
            raise rebuild_exception(answer["error"])
        try:
            for i, desc in answer.get("modified", {}).items():  # the check sees what the student changed in place
                with torch.no_grad():
                    args[int(i)].copy_(decode(desc, out, budget))
            value = decode(answer["output"], out, budget)
        except (KeyError, ValueError, IndexError, RuntimeError, TypeError, AttributeError, WireError) as exc:
            if isinstance(exc, WireError) and exc.reason == "deadline":
                self.process.kill()
                raise TestTimeout() from None
            raise StudentProcessEnded(self.process.ended(f"{type(exc).__name__}: {exc}")) from None
        if isinstance(value, torch.Tensor) and answer["output"].get("requires_grad"):
            if not grad_args:
                return value.requires_grad_() if value.is_floating_point() else value
            # The grader's anomaly mode would blame this node; the student's process reports its own.
            with torch.autograd.set_detect_anomaly(False):
                return _RemoteGrad.apply(self.process, header["id"], anomaly, value, *(args[i] for i in grad_args))
        return value


class _RemoteGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, process, call_id, anomaly, value, *inputs):  # noqa: ANN001, ANN205 -- autograd's signature
        ctx.process, ctx.call_id, ctx.anomaly = process, call_id, anomaly
        ctx.dtypes = [x.dtype for x in inputs]
        return value.clone()

    @staticmethod
    def backward(ctx, grad_output):  # noqa: ANN001, ANN205
        arrays: list[bytes] = []
        header = {"op": "grad", "id": ctx.call_id, "anomaly": ctx.anomaly, "grad_output": encode(grad_output, arrays)}
        answer, out, budget = ctx.process.request(header, arrays)
        if "error" in answer:
            for text in list(answer.get("warnings", []))[:20]:  # anomaly mode's forward traceback, in their files
                warnings.warn(printable(text, 20_000), stacklevel=1)
            raise rebuild_exception(answer["error"])
        try:
            grads = [None if d is None else decode(d, out, budget) for d in list(answer.get("grads", []))[:64]]
        except (KeyError, ValueError, IndexError, RuntimeError, TypeError, AttributeError, WireError) as exc:
            if isinstance(exc, WireError) and exc.reason == "deadline":
                ctx.process.kill()
                raise TestTimeout() from None
            raise StudentProcessEnded(ctx.process.ended(f"{type(exc).__name__}: {exc}")) from None
        if len(grads) != len(ctx.dtypes) or not all(g is None or isinstance(g, torch.Tensor) for g in grads):
            raise StudentProcessEnded(ctx.process.ended("gradients that are not tensors"))
        return (None, None, None, None, *(g if g is None else g.to(dt) for g, dt in zip(grads, ctx.dtypes)))
