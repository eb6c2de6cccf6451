"""The course assignments: which files a student hands in, which check grades which function, and the
weight table — the points of every graded cell of the notebook (by cell id).

Kept in the package (not read from ``assignments/``) because ``collect`` and the hidden
tests run where only the student's folder and an installed ``lab`` exist (Colab, JupyterHub).
``generate`` writes the points into the nbgrader metadata; ``grade`` scores with them.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AutogradedCell:
    """A test cell: the self-check of one function plus its hidden tests, scored all or nothing."""

    cell: str  # the notebook cell's id
    function: str  # the student's function, in the assignment's modules
    check: str  # the check_<topic> of lab.grading that grades it
    points: float


@dataclass(frozen=True)
class Assignment:
    name: str
    notebook: str
    modules: tuple[str, ...]
    tests: tuple[AutogradedCell, ...]
    written: tuple[tuple[str, float], ...]  # (markdown answer cell id, points), graded by hand

    @property
    def checks(self) -> tuple[tuple[str, str], ...]:
        """(function, check) of every autograded cell."""
        return tuple((t.function, t.check) for t in self.tests)

    @property
    def points(self) -> dict[str, float]:
        """The weight table: points of every graded cell, autograded and written."""
        return {**{t.cell: t.points for t in self.tests}, **dict(self.written)}

    @property
    def autograded_points(self) -> float:
        return sum(t.points for t in self.tests)


def _tests(*rows: tuple[str, str, float]) -> tuple[AutogradedCell, ...]:
    return tuple(AutogradedCell(cell, function, f"check_{function}", points) for cell, function, points in rows)


ASSIGNMENTS: dict[str, Assignment] = {a.name: a for a in [
    Assignment("01_rank_surrogates_and_sup_ap", "rank_surrogates.ipynb", ("surrogates.py",),
               _tests(("ap-check", "average_precision", 2), ("h-check", "h_minus", 2),
                      ("smooth-check", "smooth_ap", 2), ("sup-check", "sup_ap", 3)),
               (("a1", 1), ("a2", 1), ("a4", 2), ("written-answer", 4))),
    Assignment("02_decomposability_and_calibration", "calibration.ipynb", ("decomposability.py",),
               _tests(("recall-check", "recall_at_k", 2), ("mapr-check", "map_at_r", 2),
                      ("calibration-check", "calibration", 3)),
               (("a1", 1), ("a3", 2), ("written-answer", 4))),
    Assignment("03_histogram_losses_and_bin_width", "bin_width.ipynb", ("histograms.py",),
               _tests(("hist-check", "soft_histogram", 3), ("fast-check", "fast_ap", 4)),
               (("a1", 1), ("a2", 2), ("a3", 2), ("written-answer", 4))),
]}


def find_assignment(folder_name: str, files: set[str]) -> Assignment:
    """The assignment a student folder belongs to: by folder name, else by the files it holds."""
    if folder_name in ASSIGNMENTS:
        return ASSIGNMENTS[folder_name]
    matches = [a for a in ASSIGNMENTS.values() if a.notebook in files or set(a.modules) <= files]
    if len(matches) == 1:
        return matches[0]
    raise ValueError(f"cannot tell which assignment {folder_name!r} is; pass --assignment, "
                     f"one of {sorted(ASSIGNMENTS)}")
