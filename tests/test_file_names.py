"""One file name per concept: no two modules of the package, the app or the benchmarks share a file
name, so that a traceback or an editor's tab names one file (review 2026-11: hparams.py, checks.py,
dashboard.py, ... each named two different things)."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("lab", "app_pages", "bench")
# lab/cli.py (`python -m lab`) and lab/studies/cli.py (`python -m lab study`): both are the command
# line of their package; left as they are while those packages are reworked elsewhere.
KNOWN = {"cli.py"}


def shared_names(paths: list[Path]) -> dict[str, list[str]]:
    """{file name: its paths} for the names more than one path has (package dunder files aside)."""
    by_name = defaultdict(list)
    for path in paths:
        if not (path.name.startswith("__") and path.name.endswith("__.py")):
            by_name[path.name].append(path.relative_to(ROOT).as_posix())
    return {name: sorted(places) for name, places in by_name.items() if len(places) > 1}


def test_no_two_modules_share_a_file_name():
    paths = [p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py") if ".ipynb_checkpoints" not in p.parts]
    shared = {name: places for name, places in shared_names(paths).items() if name not in KNOWN}
    assert not shared, f"file names used twice (rename one side by what it holds): {shared}"


def test_the_check_sees_a_shared_name():
    paths = [ROOT / "lab" / "viz" / "retrieval.py", ROOT / "lab" / "metrics" / "retrieval.py",
             ROOT / "lab" / "__init__.py", ROOT / "lab" / "core" / "__init__.py"]
    assert shared_names(paths) == {"retrieval.py": ["lab/metrics/retrieval.py", "lab/viz/retrieval.py"]}
