"""The student's process: imports the submission and calls its functions for the grader. Nothing here scores.

    python -m lab.grading.student_server --assignment NAME [--memory BYTES ...]   --requests FD --answers FD

Started by :mod:`lab.grading.remote`, in the sandbox (:mod:`lab.grading.sandbox`), in a copy of the
student's files (the working directory). It sets its limits, imports the assignment's modules, says
which graded functions exist, then answers the grader's requests (:mod:`lab.grading.wire` frames):
``call`` (run a function on the given arguments: its output, or its exception, and the arguments it
modified in place), ``grad`` (the vector-Jacobian product of an earlier call's output) and ``forget``.
Whatever the student's code does here (patch the checks, print, exit, hang) can only change the
answers it sends back: the checks, the reference values, the score and the feedback are the grader's.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, Optional

from .sandbox import Limits
from .wire import WireError, decode, describe_exception, encode, receive, send



LAB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the lab package, as the sandbox sees it


def traced_call(fn: Callable, args: list, seen: set[str]) -> Any:
    """``fn(*args)``, adding the lab functions it runs to ``seen`` (``module.function``, at most 50), also when it
    raises: the integrity signal. Only Python-level calls into the ``lab`` package count, and the student's code
    could hide them: a signal, not a proof."""

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and len(seen) < 50:
            path = frame.f_code.co_filename
            if path.startswith(LAB + os.sep):
                module = "lab." + os.path.splitext(path[len(LAB) + 1:])[0].replace(os.sep, ".")
                seen.add(f"{module}.{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        return fn(*args)
    finally:
        sys.setprofile(None)


def _exception(exc: BaseException) -> dict[str, Any]:
    from .feedback import student_frame

    return describe_exception(exc, *student_frame(exc))


def _functions(ns: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """For each graded name: its __name__ when it is callable, else its type and repr (the check says why)."""
    out = {}
    for name in names:
        if name in ns:
            value = ns[name]
            out[name] = {"callable": True, "name": str(getattr(value, "__name__", name))} if callable(value) \
                else {"callable": False, "value": encode(value, [])}
    return out


class Server:
    def __init__(self, functions: dict[str, Callable]) -> None:
        self.functions = functions
        self.graphs: dict[int, tuple[Any, list]] = {}  # call id -> (output, the inputs that require grad)

    def call(self, req: dict, arrays: list[bytes]) -> tuple[dict, list[bytes]]:
        import torch

        args = [decode(d, arrays) for d in req["args"]]
        for i in req.get("grad_args", []):
            args[i].requires_grad_()
        before = [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in args]
        anomaly = torch.autograd.detect_anomaly(check_nan=True) if req.get("anomaly") else nullcontext()
        out_arrays: list[bytes] = []
        seen: set[str] = set()
        try:
            with warnings.catch_warnings(), anomaly:
                warnings.simplefilter("ignore")
                out = traced_call(self.functions[req["function"]], args, seen)
        except BaseException as exc:  # noqa: B036 -- the student's exception is an answer, sent to the grader
            return {"error": _exception(exc), "lab_calls": sorted(seen)}, []
        modified = {str(i): encode(a.detach(), out_arrays) for i, (a, b) in enumerate(zip(args, before))
                    if b is not None and not _same(a.detach(), b)}
        answer = {"output": encode(out, out_arrays), "modified": modified, "lab_calls": sorted(seen)}
        if isinstance(out, torch.Tensor) and out.requires_grad:
            self.graphs[req["id"]] = (out, [args[i] for i in req.get("grad_args", [])])
        return answer, out_arrays

    def grad(self, req: dict, arrays: list[bytes]) -> tuple[dict, list[bytes]]:
        import torch

        if req["id"] not in self.graphs:
            return {"error": describe_exception(RuntimeError("no such call"), "", "")}, []
        out, inputs = self.graphs[req["id"]]
        grad_output = decode(req["grad_output"], arrays).to(out.dtype)
        anomaly = torch.autograd.detect_anomaly(check_nan=True) if req.get("anomaly") else nullcontext()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with anomaly:
                    grads = torch.autograd.grad(out, inputs, grad_output, allow_unused=True, retain_graph=True)
            except BaseException as exc:  # noqa: B036 -- a failing backward is the student's answer too
                return {"error": _exception(exc), "warnings": [str(w.message)[:20_000] for w in caught]}, []
        out_arrays: list[bytes] = []
        return {"grads": [None if g is None else encode(g, out_arrays) for g in grads]}, out_arrays


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN included (a NaN the student's code was given is not a modification)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(((a == b) | (a.isnan() & b.isnan()) if a.is_floating_point() else (a == b)).all())


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.grading.student_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", required=True)
    parser.add_argument("--requests", type=int, required=True, help="file descriptor: the grader's requests")
    parser.add_argument("--answers", type=int, required=True, help="file descriptor: the answers")
    parser.add_argument("--memory", type=int, default=Limits.memory)
    parser.add_argument("--processes", type=int, default=Limits.processes)
    parser.add_argument("--file-size", type=int, default=Limits.file_size)
    parser.add_argument("--cpu-seconds", type=int, default=Limits.cpu_seconds)
    args = parser.parse_args(argv)
    Limits(args.memory, args.processes, args.file_size, args.cpu_seconds).apply()
    import torch

    torch.set_num_threads(1)  # tiny tensors; and threads count against the process limit
    from .assignments import ASSIGNMENTS
    from .submission import import_modules

    assignment = ASSIGNMENTS[args.assignment]
    names = [t.function for t in assignment.tests]
    send(args.answers, {"event": "ready"})
    try:
        ns = import_modules(Path.cwd(), assignment)
    except BaseException as exc:  # noqa: B036 -- a module that raises or exits at import: the grader says so
        send(args.answers, {"event": "import_failed", "error": _exception(exc)})
        return
    send(args.answers, {"event": "imported", "functions": _functions(ns, names)})
    server = Server({n: ns[n] for n in names if n in ns and callable(ns[n])})
    while True:
        req, arrays = receive(args.requests)
        if req.get("op") == "forget":
            server.graphs.clear()
            continue
        answer, out = (server.call if req.get("op") == "call" else server.grad)(req, arrays)
        send(args.answers, {"id": req.get("id"), **answer}, out)


if __name__ == "__main__":
    try:
        main()
    except WireError:  # the grader closed the channel: grading is over
        pass
    os._exit(0)  # no atexit handlers or finalizers of the student's: the grader has all it needs
