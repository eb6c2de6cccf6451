"""The course assignments: which files a student hands in and which check grades which function.

Kept in the package (not read from ``assignments/``) because ``collect`` and the hidden
tests run where only the student's folder and an installed ``lab`` exist (Colab, JupyterHub).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Assignment:
    name: str
    notebook: str
    modules: tuple[str, ...]
    checks: tuple[tuple[str, str], ...]  # (function in the modules, check in lab.grading)


ASSIGNMENTS: dict[str, Assignment] = {a.name: a for a in [
    Assignment("01_rank_surrogates_and_sup_ap", "rank_surrogates.ipynb", ("surrogates.py",),
               (("average_precision", "check_average_precision"), ("h_minus", "check_h_minus"),
                ("smooth_ap", "check_smooth_ap"), ("sup_ap", "check_sup_ap"))),
    Assignment("02_decomposability_and_calibration", "calibration.ipynb", ("decomposability.py",),
               (("map_at_r", "check_map_at_r"), ("recall_at_k", "check_recall_at_k"),
                ("calibration", "check_calibration"))),
    Assignment("03_histogram_losses_and_bin_width", "bin_width.ipynb", ("histograms.py",),
               (("soft_histogram", "check_soft_histogram"), ("fast_ap", "check_fast_ap"))),
]}


def find_assignment(folder_name: str, files: set[str]) -> Assignment:
    """The assignment a student folder belongs to: by folder name, else by the files it holds."""
    if folder_name in ASSIGNMENTS:
        return ASSIGNMENTS[folder_name]
    matches = [a for a in ASSIGNMENTS.values() if a.notebook in files or set(a.modules) <= files]
    if len(matches) == 1:
        return matches[0]
    raise ValueError(f"cannot tell which assignment {folder_name!r} is; pass --assignment, one of {sorted(ASSIGNMENTS)}")
