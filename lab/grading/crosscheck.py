"""Cross-check nbgrader's autograded scores with ``python -m lab.grading.grade`` on the same submissions.

    python -m lab.grading.crosscheck ASSIGNMENT [--course .] [-o crosscheck/ASSIGNMENT/grades.csv]
                                     [--timeout 120] [--jobs 1]

nbgrader runs a student's whole notebook in one kernel, so a student's cell can redefine or patch
what a later test cell calls (a check function, torch.isclose) and earn points its module does not
deserve. grade-all imports only the student's modules and runs the test cells itself. Every student
whose nbgrader score on the autograded cells (from the course's gradebook) is higher than grade-all's
is flagged; the command then exits 1. Written answers are not compared (both leave them to you).
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Optional

from .assignments import ASSIGNMENTS, Assignment
from .grade import batch_of, grade
from .grade_sheet import Sheet, natural_key

TOLERANCE = 1e-9  # points are sums of small integers; only float noise may differ


def nbgrader_scores(course: Path, assignment: Assignment) -> dict[str, float]:
    """Each student's nbgrader score on the autograded test cells, from ``course``/gradebook.db."""
    from nbgrader.api import Gradebook

    db = Path(course) / "gradebook.db"
    if not db.is_file():
        raise FileNotFoundError(f"no {db}: run nbgrader autograde first (or pass --course)")
    tests = {f"cell-{t.cell}" for t in assignment.tests}
    out = {}
    with Gradebook(f"sqlite:///{db}") as gb:
        for sub in gb.assignment_submissions(assignment.name):
            out[sub.student.id] = sum(g.score or 0.0 for nb in sub.notebooks for g in nb.grades if g.name in tests)
    return out


def grade_all_scores(course: Path, assignment: Assignment, output: Path, timeout: float, jobs: int) -> dict[str, float]:
    """grade-all on nbgrader's submitted/STUDENT/ASSIGNMENT/ folders (a folder of links, one per student)."""
    links = output.parent / "submissions"
    shutil.rmtree(links, ignore_errors=True)
    links.mkdir(parents=True)
    for folder in sorted(Path(course).glob(f"submitted/*/{assignment.name}")):
        (links / folder.parent.name).symlink_to(folder.resolve(), target_is_directory=True)
    if not any(links.iterdir()):
        raise FileNotFoundError(f"no submission in {Path(course) / 'submitted'}/*/{assignment.name}")
    # grade-all always starts over here (submissions change between autogrades), but never over the outputs of
    # another batch, such as the instructor's own grades.csv given as --output: Sheet refuses those.
    Sheet(output, output.with_name(f"{output.stem}_totals.csv"), output.with_name(f"{output.stem}_feedback"),
          batch_of(links, assignment.name))
    results = grade(links, output, assignment=assignment.name, timeout=timeout, jobs=jobs, regrade=True)
    return {r.student: r.points for r in results}


def compare(nbgrader: dict[str, float],
            grade_all: dict[str, float]) -> list[tuple[str, Optional[float], Optional[float], bool]]:
    """(student, nbgrader, grade-all, flagged) for every student of either; flagged: nbgrader's is higher,
    or nbgrader has a score that grade-all could not compute."""
    rows = []
    for student in sorted(set(nbgrader) | set(grade_all), key=natural_key):
        nb, ga = nbgrader.get(student), grade_all.get(student)
        rows.append((student, nb, ga, nb is not None and (ga is None or nb > ga + TOLERANCE)))
    return rows


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.grading.crosscheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("assignment", choices=sorted(ASSIGNMENTS))
    parser.add_argument("--course", type=Path, default=Path("."), help="the nbgrader course folder (default: .)")
    parser.add_argument("-o", "--output", type=Path, help="grade-all's sheet (default: "
                        "COURSE/crosscheck/ASSIGNMENT/grades.csv, rewritten on every run)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per test for grade-all (default 120)")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once (default 1)")
    args = parser.parse_args(argv)
    a = ASSIGNMENTS[args.assignment]
    output = args.output or args.course / "crosscheck" / a.name / "grades.csv"
    try:
        rows = compare(nbgrader_scores(args.course, a), grade_all_scores(args.course, a, output, args.timeout,
                                                                          args.jobs))
    except (OSError, ValueError) as exc:
        parser.exit(2, f"crosscheck: {exc}\n")
    show = lambda x: "-" if x is None else f"{x:g}"  # noqa: E731
    print(f"{'student':20s} {'nbgrader':>9s} {'grade-all':>9s}")
    for student, nb, ga, flagged in rows:
        print(f"{student:20s} {show(nb):>9s} {show(ga):>9s}" + ("  HIGHER in nbgrader: check it" if flagged else ""))
    flagged = [r[0] for r in rows if r[3]]
    print(f"{len(flagged)} of {len(rows)} students flagged; grade-all's sheet: {output}")
    if flagged:
        parser.exit(1)


if __name__ == "__main__":
    main()
