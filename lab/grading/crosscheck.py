"""Cross-check an nbgrader course's autograded scores: gradebook, grade-all, the notebooks' own claims, the hand-ins.

    python -m lab.grading.crosscheck ASSIGNMENT [--course .] [-o crosscheck/ASSIGNMENT/grades.csv]
                                     [--timeout 120] [--jobs 1]

After ``python -m lab.grading.autograde``, every student is flagged (and the command exits 1) whose
- gradebook score on the autograded cells differs from a fresh ``python -m lab.grading.grade`` of the same hand-in
  (someone edited the gradebook, or the hand-in changed since it was graded);
- notebook, run by itself in its sandbox, passed tests its code fails by the trusted checks (a cell that patches
  the checks: the autograde record's ``claimed`` above its ``trusted``);
- hand-in changed after its collect (``ranklab_autograde/handins.json``): nothing a student's code runs in can
  write the course folder, so a change was made by someone else.
Written answers are not compared (both leave them to you).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

from .assignments import ASSIGNMENTS, Assignment
from .course_records import Handins, changes, load_outcomes
from .grade import batch_of, grade
from .grade_sheet import Sheet, natural_key
from .handin import fingerprint
from .names import shown

TOLERANCE = 1e-9  # points are sums of small integers; only float noise may differ


def nbgrader_scores(course: Path, assignment: Assignment) -> dict[str, float]:
    """Each student's nbgrader score on the autograded test cells, from ``course``/gradebook.db."""
    from nbgrader.api import Gradebook

    db = Path(course) / "gradebook.db"
    if not db.is_file():
        raise FileNotFoundError(f"no {db}: run python -m lab.grading.autograde first (or pass --course)")
    tests = {f"cell-{t.cell}" for t in assignment.tests}
    out = {}
    with Gradebook(f"sqlite:///{db}") as gb:
        for sub in gb.assignment_submissions(assignment.name):
            out[sub.student.id] = sum(g.score or 0.0 for nb in sub.notebooks for g in nb.grades if g.name in tests)
    return out


def grade_all_scores(course: Path, assignment: Assignment, output: Path, timeout: float, jobs: int) -> dict[str, float]:
    """grade-all on nbgrader's ``submitted/STUDENT/ASSIGNMENT/`` folders, read where they are (no link made)."""
    submitted = Path(course) / "submitted"
    if not any(submitted.glob(f"*/{assignment.name}")):
        raise FileNotFoundError(f"no submission in {submitted}/*/{assignment.name}")
    # grade-all always starts over here (submissions change between autogrades), but never over the outputs of
    # another batch, such as the instructor's own grades.csv given as --output: Sheet refuses those.
    Sheet(output, output.with_name(f"{output.stem}_totals.csv"), output.with_name(f"{output.stem}_feedback"),
          batch_of(submitted, assignment.name))
    results = grade(submitted, output, assignment=assignment.name, timeout=timeout, jobs=jobs, regrade=True)
    return {r.student: r.points for r in results}


def integrity(course: Path, assignment: Assignment) -> dict[str, list[str]]:
    """{student: why to look} from the autograde records and the hand-ins as they are now."""
    course = Path(course)
    out: dict[str, list[str]] = {}
    for student, outcome in load_outcomes(course, assignment.name).items():
        claimed = {k: v for k, v in outcome.get("claimed", {}).items() if v is not None}
        trusted = outcome.get("trusted", {})
        above = [k for k, v in claimed.items() if v > trusted.get(k, 0.0) + TOLERANCE]
        if above:
            out.setdefault(student, []).append(
                f"its notebook's own run passes {', '.join(sorted(above))} (claims {sum(claimed.values()):g}), which "
                f"its code fails ({sum(trusted.values()):g}): a cell changed what the tests check")
        for key in ("changed_since_collect", "changed_during_grading"):
            if outcome.get(key):
                out.setdefault(student, []).append(f"hand-in {key.replace('_', ' ')}: {', '.join(outcome[key])}")
    handins = Handins(course)
    for folder in sorted((course / "submitted").glob(f"*/{assignment.name}")):
        student = folder.parent.name
        recorded = handins.recorded(assignment.name, student)
        if recorded is not None:
            now = changes(recorded, fingerprint(folder))
            if now:
                out.setdefault(student, []).append(f"hand-in changed since its collect (by someone else: no student "
                                                   f"code can write it): {', '.join(now)}")
    return out


def compare(nbgrader: dict[str, float], grade_all: dict[str, float],
            reasons: Optional[dict[str, list[str]]] = None) -> list[tuple[str, Optional[float], Optional[float], list]]:
    """(student, nbgrader, grade-all, why flagged) for every student of either, in natural order; flagged when the
    two scores differ (or only one exists), or for each of ``reasons``."""
    reasons = reasons or {}
    rows = []
    for student in sorted(set(nbgrader) | set(grade_all) | set(reasons), key=natural_key):
        nb, ga = nbgrader.get(student), grade_all.get(student)
        why = list(reasons.get(student, []))
        if nb is not None and (ga is None or abs(nb - ga) > TOLERANCE):
            why.insert(0, "HIGHER in nbgrader" if ga is None or nb > ga else "LOWER in nbgrader")
        rows.append((student, nb, ga, why))
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
                                                                          args.jobs), integrity(args.course, a))
    except (OSError, ValueError) as exc:
        parser.exit(2, f"crosscheck: {exc}\n")
    show = lambda x: "-" if x is None else f"{x:g}"  # noqa: E731
    print(f"{'student':20s} {'nbgrader':>9s} {'grade-all':>9s}")
    for student, nb, ga, why in rows:
        print(f"{shown(student, 40):20s} {show(nb):>9s} {show(ga):>9s}" + ("  " + "; ".join(why) + ": check it"
                                                                             if why else ""))
    flagged = [r[0] for r in rows if r[3]]
    print(f"{len(flagged)} of {len(rows)} students flagged; grade-all's sheet: {output}")
    if flagged:
        parser.exit(1)


if __name__ == "__main__":
    main()
