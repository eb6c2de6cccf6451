"""What a check knows about one topic, in one record: the student signature, the reference, the
inputs the cases are built from, and the catalogue of known mistakes with the feedback each earns.

``lab.grading.topics`` holds the records; everything else in the package reads them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Optional

from .cases import Case, Family, build_cases


class Mistake(NamedTuple):
    """A known wrong implementation (with the student signature) and the message it earns."""

    key: str
    message: str
    fn: Callable


@dataclass(frozen=True)
class Topic:
    """One graded function: ``check_<name>`` compares a student's version with ``reference``."""

    name: str
    signature: str  # the student signature, e.g. "sup_ap(scores, targets, mask, tau, rho, delta)"
    returns: str  # what it returns, in words
    about: str  # one line for the check's docstring, with the paper's equation
    reference: Callable
    families: tuple[Family, ...]  # the inputs of the cases (lab.grading.cases)
    params: tuple[dict[str, Any], ...]  # hyper-parameters, cycled over the families and dtypes
    output: str  # "per_query" (Q,), "elementwise" (like arg 0) or "histogram" (Q, L)
    mistakes: tuple[Mistake, ...] = ()
    differentiable: bool = True
    metric: bool = False  # NaN (not 0) for queries without positive
    # Gradient directions: "neg" d loss/d s >= 0 on negatives, "both" also <= 0 on positives,
    # "increasing" d out/d t >= 0 everywhere (a step surrogate).
    signs: Optional[str] = None

    def cases(self, seed: int = 0) -> list[Case]:
        """Every case of this topic, built deterministically from ``seed``."""
        return build_cases(self.name, self.families, self.params, self.reference, seed)

    def case(self, name: str) -> Case:
        """The case called ``name`` (e.g. ``"ties-f32-s0"``), as a failure message names it."""
        try:
            seed = int(name.rsplit("-s", 1)[1])
        except (IndexError, ValueError):
            raise ValueError(f"case names look like 'ties-f32-s0', got {name!r}") from None
        found = {c.name: c for c in self.cases(seed)}
        if name not in found:
            raise ValueError(f"no case {name!r} for {self.name!r}; available: {list(found)}")
        return found[name]
