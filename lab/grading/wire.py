"""The messages between the grader and the student's process: JSON headers and ``.npy`` arrays, no pickle.

A frame is ``<8-byte length><JSON header>`` followed by one ``<8-byte length><.npy bytes>`` per array
the header counts. Arrays are read with ``allow_pickle=False`` and values are rebuilt only as tensors,
numpy arrays, numbers, strings, None, lists and tuples, so nothing the student's process sends can
carry code. The grader reads with a deadline and a size bound: a student that hangs, floods or sends
garbage costs its own test, never the grader (see :mod:`lab.grading.remote`).
"""
from __future__ import annotations

import builtins
import io
import json
import math
import os
import select
import struct
import time
from typing import Any, Optional

import numpy as np
import torch

from .names import printable

MAX_FRAME = 256 * 2**20  # bytes; the checks' inputs and outputs are a few kB
MAX_HEADER = 4 * 2**20  # bytes of one JSON header the grader reads
MAX_ARRAYS = 64  # arrays in one message: a call's output and the arguments it changed
_LEN = struct.Struct("<Q")
_DEPTH, _ITEMS, _REPR, _TEXT = 4, 256, 300, 10_000  # bounds on what a value may nest, hold, show, say


class WireError(Exception):
    """The other side ended, sent something malformed, or missed its deadline."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason  # "ended", "malformed" or "deadline"


class Budget:
    """What decoding one answer may still cost the grader: bytes of decoded arrays (each leaf counted, also
    when many leaves name the same array) and time (the test's deadline)."""

    def __init__(self, nbytes: int, deadline: float = float("inf")) -> None:
        self.limit, self.left, self.deadline = nbytes, nbytes, deadline

    def spend(self, nbytes: int) -> None:
        if time.monotonic() > self.deadline:
            raise WireError("the student's process did not answer in time", "deadline")
        self.left -= nbytes
        if self.left < 0:
            raise WireError(f"an answer that decodes to more than {self.limit} bytes (what this call can return)",
                            "malformed")


# ------------------------------------------------------------------------------------------ values
def encode(value: Any, arrays: list[bytes], depth: int = 0) -> dict[str, Any]:
    """A JSON-able description of ``value``; tensors and numpy arrays go to ``arrays`` as .npy bytes."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        data = t.float() if t.dtype == torch.bfloat16 else t.resolve_conj().resolve_neg()
        return {"kind": "tensor", "dtype": str(t.dtype).removeprefix("torch."), "array": _npy(data.numpy(), arrays),
                "requires_grad": bool(value.requires_grad)}
    if isinstance(value, np.ndarray) and value.dtype != object:
        return {"kind": "ndarray", "array": _npy(value, arrays)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"kind": "json", "value": value if not isinstance(value, str) else value[:10_000]}
    if isinstance(value, (list, tuple)) and depth < _DEPTH and len(value) <= _ITEMS:
        return {"kind": type(value).__name__, "items": [encode(v, arrays, depth + 1) for v in value]}
    return {"kind": "opaque", "type": type(value).__name__[:100], "repr": _safe_repr(value)}


def decode(desc: dict[str, Any], arrays: list[bytes], budget: Optional[Budget] = None, depth: int = 0) -> Any:
    """The value ``encode`` described, within ``budget`` (the grader's side); anything else is a WireError."""
    budget = budget or Budget(1 << 62)
    budget.spend(0)  # the deadline, once per value
    kind = desc.get("kind")
    if kind == "tensor":
        dtype = getattr(torch, str(desc["dtype"]), None)
        if not isinstance(dtype, torch.dtype):
            raise WireError(f"unknown tensor dtype {printable(desc['dtype'], 50)!r}", "malformed")
        return torch.from_numpy(_array(arrays, desc["array"], budget).copy()).to(dtype)
    if kind == "ndarray":
        return _array(arrays, desc["array"], budget)
    if kind == "json":
        value = desc["value"]
        if not (value is None or isinstance(value, (bool, int, float, str))):
            raise WireError("a JSON value that is not a number, string or null", "malformed")
        return value[:_TEXT] if isinstance(value, str) else value
    if kind in ("list", "tuple") and depth < _DEPTH:
        items = [decode(d, arrays, budget, depth + 1) for d in desc["items"][:_ITEMS]]
        return items if kind == "list" else tuple(items)
    if kind == "opaque":
        return opaque(printable(desc["type"], 100), printable(desc["repr"], _REPR))
    raise WireError(f"unknown value kind {printable(kind, 50)!r}", "malformed")


def opaque(type_name: str, text: str) -> Any:
    """A stand-in for a value that cannot cross (a module, a custom object): its type's name and repr."""
    cls = type(type_name if type_name.isidentifier() else "object", (), {"__repr__": lambda self: text})
    return cls()


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)[:_REPR]
    except Exception:  # a student's __repr__ may raise: the type is enough
        return f"<{type(value).__name__}>"


def _npy(array: np.ndarray, arrays: list[bytes]) -> int:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)  # not ascontiguousarray: it makes a 0-d array 1-d
    arrays.append(buf.getvalue())
    return len(arrays) - 1


def _array(arrays: list[bytes], index: Any, budget: Budget) -> np.ndarray:
    """One array, paid for from ``budget`` by the size its header declares before anything is allocated."""
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(arrays):
        raise WireError(f"array index {printable(index, 50)!r} out of range", "malformed")
    buf = io.BytesIO(arrays[index])
    try:
        read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}.get(np.lib.format.read_magic(buf))
        if read_header is None:
            raise ValueError("an .npy format version other than 1.0 or 2.0")
        shape, _, dtype = read_header(buf, max_header_size=10_000)
        declared = dtype.itemsize * math.prod(shape)
        if declared > len(arrays[index]):  # a header that promises more data than came
            raise ValueError(f"its header declares {declared} bytes, {len(arrays[index])} came")
        budget.spend(declared)
        buf.seek(0)
        return np.load(buf, allow_pickle=False)
    except (ValueError, OSError, EOFError, TypeError, OverflowError) as exc:
        raise WireError(f"not a plain .npy array ({printable(exc, 200)})", "malformed") from None


# ------------------------------------------------------------------------------ student exceptions
def describe_exception(exc: BaseException, where: str, code: str) -> dict[str, Any]:
    """What the grader needs to rebuild the student's exception: type, message, base, the student's line."""
    desc = {"type": type(exc).__name__, "message": str(exc)[:5000], "where": where, "code": code,
            "base": "Exception" if isinstance(exc, Exception) else "BaseException"}
    if isinstance(exc, SystemExit):
        code = exc.code if isinstance(exc.code, (int, type(None))) else printable(exc.code if isinstance(exc.code, str)
                                                                                   else _safe_repr(exc.code), 300)
        desc["exit_code"] = code
    return desc


def rebuild_exception(desc: dict[str, Any]) -> BaseException:
    """The student's exception, rebuilt in the grader: a builtin of that name, else a class named like it."""
    name, message = printable(desc.get("type", "Exception"), 100), printable(desc.get("message", ""), 5000)
    if name == "SystemExit":
        exc: BaseException = SystemExit(desc.get("exit_code"))
    else:
        cls = getattr(builtins, name, None)
        base = Exception if desc.get("base") == "Exception" else BaseException
        if not (isinstance(cls, type) and issubclass(cls, base) and issubclass(cls, Exception) == (base is Exception)):
            cls = type(name if name.isidentifier() else "StudentError", (base,), {})
        try:
            exc = cls(message)
        except Exception:  # a builtin with another constructor (UnicodeDecodeError): keep the name and message
            exc = type(name, (base,), {})(message)
    exc.student_frame = (printable(desc.get("where", ""), 300), printable(desc.get("code", ""), 300))  # feedback
    return exc


# ---------------------------------------------------------------------------------------- frames
def send(fd: int, header: dict[str, Any], arrays: list[bytes] = (), deadline: Optional[float] = None) -> None:
    """Write one frame; with a deadline (the grader's side) a reader that stops reading cannot block us."""
    head = json.dumps({**header, "arrays": len(arrays)}).encode()
    parts = [_LEN.pack(len(head)), head] + [p for a in arrays for p in (_LEN.pack(len(a)), a)]
    data = memoryview(b"".join(parts))
    while data:
        if deadline is not None:
            _wait(fd, select.POLLOUT, deadline)
        try:
            n = os.write(fd, data)
        except BlockingIOError:
            continue
        except (BrokenPipeError, OSError) as exc:
            raise WireError(f"the student's process stopped reading ({exc.strerror or exc})", "ended") from None
        data = data[n:]


def receive(fd: int, deadline: Optional[float] = None,
            max_bytes: Optional[int] = None) -> tuple[dict[str, Any], list[bytes]]:
    """Read one frame: (header, arrays). ``max_bytes`` (the grader's side): the most its arrays may hold in all,
    and its header is at most MAX_HEADER; each length is checked before its bytes are read."""
    head = _read(fd, _size(_read(fd, _LEN.size, deadline), MAX_HEADER if max_bytes is not None else MAX_FRAME),
                 deadline)
    try:
        header = json.loads(head)
        count = int(header.pop("arrays"))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError):
        raise WireError("a message that is not a JSON header", "malformed") from None
    if not 0 <= count <= MAX_ARRAYS:
        raise WireError(f"{count} arrays in one message (at most {MAX_ARRAYS})", "malformed")
    arrays, left = [], MAX_FRAME * MAX_ARRAYS if max_bytes is None else max_bytes
    for _ in range(count):
        n = _size(_read(fd, _LEN.size, deadline), min(MAX_FRAME, left))
        arrays.append(_read(fd, n, deadline))
        left -= n
    return header, arrays


def _size(raw: bytes, limit: int = MAX_FRAME) -> int:
    (n,) = _LEN.unpack(raw)
    if n > limit:
        raise WireError(f"a message part of {n} bytes (at most {limit} here)", "malformed")
    return n


def _read(fd: int, n: int, deadline: Optional[float]) -> bytes:
    chunks, left = [], n
    while left:
        if deadline is not None:
            _wait(fd, select.POLLIN, deadline)
        try:
            chunk = os.read(fd, min(left, 2**20))
        except BlockingIOError:
            continue
        if not chunk:
            raise WireError("the student's process ended", "ended")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _wait(fd: int, event: int, deadline: float) -> None:
    poller = select.poll()
    poller.register(fd, event)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WireError("the student's process did not answer in time", "deadline")
        if poller.poll(min(left, 1.0) * 1000):
            return
