"""The trusted side of an nbgrader autograde: prepare a hand-in's notebook, read back the sandbox's run as data,
and write the scores into the course's gradebook.

nbgrader runs a student's notebook in one kernel with the test cells and takes a test's score from the
kernel's own outputs (no error: full marks), and the kernel can write the gradebook and the course folder.
Here the work is split as nbgrader's issue #483 (and draft PR #970) proposed: **sanitize** (nbgrader's own
``ClearOutput`` and ``OverwriteCells`` against the instructor's gradebook, in this process: data only),
**execute in isolation** (:mod:`lab.grading.run_notebook` in a sandbox that holds a copy of this student's
hand-in and nothing else, hidden tests removed), **record on the trusted side**: the autograded test cells
get the points of :mod:`lab.grading.grade` (the checks run here, the student's functions in a sandbox),
the written answers nbgrader's rule (an unchanged answer: 0, else graded by hand), and manual scores are
never written. What the kernel's own run said is kept only as a signal (``claimed``).
"""
from __future__ import annotations

import copy
from typing import Any, Optional

import nbformat

MAX_EXECUTED = 50 * 2**20  # bytes of an executed notebook read back from the sandbox
MAX_OUTPUTS = 20 * 2**20  # bytes of the kernel's outputs copied into the autograded notebook
NO_RESPONSE = "No response."


def resources(db_url: str, assignment: str, notebook: str) -> dict[str, Any]:
    return {"nbgrader": {"db_url": db_url, "assignment": assignment, "notebook": notebook}}


def sanitize(nb: nbformat.NotebookNode, db_url: str, assignment: str, notebook: str) -> nbformat.NotebookNode:
    """The hand-in as nbgrader's autograde sanitizes it: outputs cleared, every graded and locked cell's
    metadata (points) and locked source restored from the instructor's gradebook."""
    from nbgrader.preprocessors import ClearOutput, OverwriteCells

    nb = copy.deepcopy(nb)
    res = resources(db_url, assignment, notebook)
    nb, _ = ClearOutput().preprocess(nb, res)
    nb, _ = OverwriteCells().preprocess(nb, res)
    return nb


def for_kernel(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The copy the student's kernel runs: the hidden tests removed (it scores nothing; they stay here)."""
    from nbgrader.preprocessors import ClearHiddenTests

    nb, _ = ClearHiddenTests().preprocess(copy.deepcopy(nb), {})
    return nb


def read_executed(data: bytes, expected: nbformat.NotebookNode) -> Optional[nbformat.NotebookNode]:
    """The sandbox's executed notebook, if it is a valid notebook of the same cells as ``expected`` (what was
    sent): anything else (too large, not JSON, other cells) is None, and no output of it is used."""
    if len(data) > MAX_EXECUTED:
        return None
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
        nbformat.validate(nb)
    except Exception:  # noqa: BLE001 -- any failure to read untrusted data means: nothing from it
        return None
    same = len(nb.cells) == len(expected.cells) and all(
        a.cell_type == b.cell_type and a.source == b.source for a, b in zip(nb.cells, expected.cells))
    return nb if same else None


def _grade_id(cell: nbformat.NotebookNode) -> Optional[str]:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def claimed(executed: Optional[nbformat.NotebookNode], tests: dict[str, float]) -> dict[str, Optional[float]]:
    """{grade_id: the points the kernel's own run would have given} by nbgrader's rule (no error output and no
    stderr: full marks), for each autograded test cell; None where the run says nothing."""
    out: dict[str, Optional[float]] = {g: None for g in tests}
    for cell in executed.cells if executed is not None else []:
        g = _grade_id(cell)
        if g in tests and cell.cell_type == "code":
            kinds = [(o.get("output_type"), o.get("name")) for o in cell.get("outputs", [])]
            bad = any(kind == "error" or (kind, name) == ("stream", "stderr") for kind, name in kinds)
            out[g] = 0.0 if bad else tests[g]
    return out


def autograded(sanitized: nbformat.NotebookNode, executed: Optional[nbformat.NotebookNode],
               results: dict[str, tuple[str, str]]) -> nbformat.NotebookNode:
    """The notebook the instructor grades by hand (``autograded/``): the sanitized hand-in; each autograded test
    cell's output is the trusted grader's result (an error output when it failed, so that nbgrader's own rule
    reads the trusted score from it); the other code cells get the kernel's outputs (its figures), bounded."""
    nb = copy.deepcopy(sanitized)
    budget = MAX_OUTPUTS
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        g = _grade_id(cell)
        if g in results:
            status, message = results[g]
            cell.outputs = ([nbformat.v4.new_output("stream", name="stdout", text="RankLab grader: passed\n")]
                            if status == "passed" else
                            [nbformat.v4.new_output("error", ename=f"RankLab grader: {status}",
                                                    evalue=message.split("\n\n")[0][:2000],
                                                    traceback=message[:20_000].splitlines())])
        elif executed is not None:
            outputs = executed.cells[i].get("outputs", [])
            size = len(nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=outputs)])))
            if size <= budget:
                cell.outputs, budget = copy.deepcopy(outputs), budget - size
    nbformat.validate(nb)
    return nb


def write_scores(db_url: str, assignment: str, student: str, stamp: str,
                 notebooks: dict[str, Optional[nbformat.NotebookNode]], trusted: dict[str, float]) -> None:
    """Record one student's autograde in the gradebook, as nbgrader's autograde would with the trusted points:
    the student and the submission (with its timestamp), for each autograded test cell its ``auto_score``, for
    each written answer nbgrader's rule (unchanged: 0 and "No response."; else left to the grader), for a
    notebook not handed in 0 everywhere. ``manual_score`` is never written. ``notebooks``: {notebook id: the
    sanitized hand-in, or None when it is missing}."""
    from nbgrader.api import Gradebook
    from nbgrader.utils import compute_checksum, determine_grade, is_grade, is_solution, is_task

    with Gradebook(db_url) as gb:
        gb.update_or_create_student(student)
        try:
            submission = gb.update_or_create_submission(assignment, student, **({"timestamp": stamp} if stamp else {}))
        except ValueError:  # a timestamp nbgrader cannot parse: the submission without it
            submission = gb.update_or_create_submission(assignment, student)
        for nb_record in submission.notebooks:
            nb = notebooks.get(nb_record.name)
            cells = {} if nb is None else {_grade_id(c): c for c in nb.cells if _grade_id(c)}
            for grade in nb_record.grades:
                cell = cells.get(grade.name)
                if nb is None:
                    grade.auto_score, grade.needs_manual_grade = 0, False
                    continue
                if grade.name in trusted:
                    grade.auto_score = trusted[grade.name]
                elif cell is not None and is_grade(cell):
                    grade.auto_score = determine_grade(cell)[0]
                else:
                    grade.auto_score = None
                grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
            for comment in nb_record.comments:
                cell = cells.get(comment.name)
                unchanged = (cell is not None and is_solution(cell) and not is_task(cell)
                             and cell.metadata.nbgrader.get("checksum") == compute_checksum(cell))
                comment.auto_comment = NO_RESPONSE if unchanged else None
        gb.db.commit()
