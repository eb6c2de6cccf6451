"""What a check hands back: its result or a failure written for the student, and the helpers that
format the numbers and locate the student's line in a traceback."""
from __future__ import annotations

import os
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
from torch import Tensor

_HERE = os.path.dirname(os.path.abspath(__file__))
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float64: dict(rtol=1e-6, atol=1e-9)}
GRAD_TOL = dict(rtol=1e-5, atol=1e-7)


@dataclass
class CheckResult:
    topic: str
    function: str
    cases: int
    seed: int
    gradients: bool
    printed: bool = field(default=False, repr=False, compare=False)

    def __str__(self) -> str:
        grad = ", gradients included" if self.gradients else ""
        return (f"check_{self.topic} passed: {self.function} matches the reference on {self.cases} cases "
                f"(seed {self.seed}){grad}.")

    def _ipython_display_(self) -> None:
        """A notebook cell ending with a check shows its line once, not the line and then this object."""
        if not self.printed:
            print(f"✓ {self}")


class CheckFailure(AssertionError):
    """An AssertionError whose message is written for the student."""


class NotImplementedYet(CheckFailure, NotImplementedError):
    """The student's function still raises NotImplementedError: a failed check and a TODO at once."""


# ------------------------------------------------------------------------------ utilities
def close(a: Tensor, b: Tensor, dtype: torch.dtype, tol: Optional[dict] = None) -> Tensor:
    """Elementwise closeness with NaN == NaN and inf == inf, computed in float64."""
    tol = tol or TOL.get(dtype, TOL[torch.float32])
    return torch.isclose(a.detach().double(), b.detach().double(), equal_nan=True, **tol)


def fmt(x: Any) -> str:
    x = float(x)
    return f"{x:.6g}" if x == x else "nan"


def fn_name(fn: Callable) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def student_frame(exc: BaseException) -> tuple[str, str]:
    """(where, code) of the last traceback line outside the grader and torch: where the student's code broke."""
    remote = getattr(exc, "student_frame", None)  # an exception rebuilt from the student's process (lab.grading.wire)
    if isinstance(remote, tuple):
        return remote
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith((_HERE, "<frozen ")) and f"{os.sep}torch{os.sep}" not in f.filename]
    if not frames:
        return "", ""
    f = frames[-1]
    return f"{os.path.basename(f.filename)}, line {f.lineno}, in {f.name}", (f.line or "").strip()


def crash_hint(exc: BaseException, signature: str) -> str:
    """A hint for a crash inside the student's function, called as ``signature``."""
    text = str(exc)
    if isinstance(exc, TypeError) and ("argument" in text or "positional" in text):
        return f"\nThe checker calls your function positionally as {signature}."
    if "heaviside" in text or "derivative for" in text:
        return "\ntorch.heaviside has no gradient: write the exact step as a comparison, (t >= 0).to(t.dtype)."
    if "inplace" in text or "in-place" in text:
        return "\nAn in-place operation broke autograd: build new tensors (torch.where, masked_fill) instead."
    return ""
