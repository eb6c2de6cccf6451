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
import os
import select
import struct
import time
from typing import Any, Optional

import numpy as np
import torch

MAX_FRAME = 256 * 2**20  # bytes; the checks' inputs and outputs are a few kB
_LEN = struct.Struct("<Q")
_DEPTH, _ITEMS, _REPR = 4, 256, 300  # bounds on what a returned value may nest, hold, show


class WireError(Exception):
    """The other side ended, sent something malformed, or missed its deadline."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason  # "ended", "malformed" or "deadline"


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


def decode(desc: dict[str, Any], arrays: list[bytes], depth: int = 0) -> Any:
    """The value ``encode`` described; anything else is a WireError."""
    kind = desc.get("kind")
    if kind == "tensor":
        dtype = getattr(torch, str(desc["dtype"]), None)
        if not isinstance(dtype, torch.dtype):
            raise WireError(f"unknown tensor dtype {desc['dtype']!r}", "malformed")
        return torch.from_numpy(_array(arrays, desc["array"]).copy()).to(dtype)
    if kind == "ndarray":
        return _array(arrays, desc["array"])
    if kind == "json":
        if not (desc["value"] is None or isinstance(desc["value"], (bool, int, float, str))):
            raise WireError("a JSON value that is not a number, string or null", "malformed")
        return desc["value"]
    if kind in ("list", "tuple") and depth < _DEPTH:
        items = [decode(d, arrays, depth + 1) for d in desc["items"][:_ITEMS]]
        return items if kind == "list" else tuple(items)
    if kind == "opaque":
        return opaque(str(desc["type"]), str(desc["repr"]))
    raise WireError(f"unknown value kind {kind!r}", "malformed")


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


def _array(arrays: list[bytes], index: Any) -> np.ndarray:
    if not isinstance(index, int) or not 0 <= index < len(arrays):
        raise WireError(f"array index {index!r} out of range", "malformed")
    try:
        return np.load(io.BytesIO(arrays[index]), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise WireError(f"not a plain .npy array ({exc})", "malformed") from None


# ------------------------------------------------------------------------------ student exceptions
def describe_exception(exc: BaseException, where: str, code: str) -> dict[str, Any]:
    """What the grader needs to rebuild the student's exception: type, message, base, the student's line."""
    desc = {"type": type(exc).__name__, "message": str(exc)[:5000], "where": where, "code": code,
            "base": "Exception" if isinstance(exc, Exception) else "BaseException"}
    if isinstance(exc, SystemExit):
        desc["exit_code"] = exc.code if isinstance(exc.code, (int, str, type(None))) else repr(exc.code)
    return desc


def rebuild_exception(desc: dict[str, Any]) -> BaseException:
    """The student's exception, rebuilt in the grader: a builtin of that name, else a class named like it."""
    name, message = str(desc.get("type", "Exception")), str(desc.get("message", ""))
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
    exc.student_frame = (str(desc.get("where", "")), str(desc.get("code", "")))  # read by feedback.student_frame
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


def receive(fd: int, deadline: Optional[float] = None) -> tuple[dict[str, Any], list[bytes]]:
    """Read one frame: (header, arrays)."""
    head = _read(fd, _size(_read(fd, _LEN.size, deadline)), deadline)
    try:
        header = json.loads(head)
        count = int(header.pop("arrays"))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise WireError("a message that is not a JSON header", "malformed") from None
    if not 0 <= count <= 4 * _ITEMS:
        raise WireError(f"{count} arrays in one message", "malformed")
    return header, [_read(fd, _size(_read(fd, _LEN.size, deadline)), deadline) for _ in range(count)]


def _size(raw: bytes) -> int:
    (n,) = _LEN.unpack(raw)
    if n > MAX_FRAME:
        raise WireError(f"a message of {n} bytes (at most {MAX_FRAME})", "malformed")
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
