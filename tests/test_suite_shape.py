"""The test suite as a codebase (issue 47, items 6-7): each notebook runs once, no comment states a test count
that drifts, and bench/ and tests/ are tied one way only (tests import bench, never the reverse)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from tests._imports import all_imports

ROOT = Path(__file__).resolve().parents[1]


def test_each_notebook_is_executed_once():
    # nbmake ran notebooks/ and tests/test_notebook_widgets.py's fixture ran them again, cell by cell to the end
    # (NotebookClient without allow_errors: a cell's error fails it, as nbmake would).
    line = re.search(r"^testpaths = (\[.*\])$", (ROOT / "pyproject.toml").read_text(), re.M)  # tomllib: 3.11+
    testpaths = ast.literal_eval(line.group(1))
    assert "notebooks" not in testpaths and "assignments" in testpaths and "tests" in testpaths
    from tests import test_notebook_widgets as widgets

    assert widgets.NOTEBOOKS == sorted((ROOT / "notebooks").glob("*.ipynb")) and widgets.NOTEBOOKS
    assert "allow_errors" not in (ROOT / "tests" / "test_notebook_widgets.py").read_text()


def test_no_comment_states_a_test_count_that_drifts():
    # The Makefile and README said 1,983 tests for make test-fast when it was 2,172.
    for name in ("Makefile", "README.md"):
        counts = re.findall(r"\b\d{1,3}(?:,\d{3})+ tests\b", (ROOT / name).read_text())
        assert counts == [], f"{name} states {counts}: `pytest --collect-only -q` counts them"


def test_bench_imports_no_test_module():
    wrong = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "bench").rglob("*.py")
                   if any(m.split(".")[0] == "tests" for m in all_imports(p)))
    assert wrong == [], f"bench/ imports tests/ (the helpers both use live in bench/): {wrong}"


def _pytest_line(target: str, *variables: str, env: dict | None = None) -> list[str]:
    import shlex
    import subprocess

    done = subprocess.run(["make", "-n", target, "PYTEST_ARGS=", *variables], cwd=ROOT, capture_output=True,
                          text=True, check=True, env=env)
    line = next(ln for ln in done.stdout.splitlines() if " -m pytest " in ln)
    return shlex.split(line.split("||")[0])


def test_make_test_spreads_whole_files_over_the_cores():
    # make test ran serially: one of 2 cores idled through most of the suite (review 2026-11b, section 4). One
    # worker per core, and a whole file to one worker, so a module fixture (the hostile batch, a notebook's run,
    # an nbgrader course) is built once, not once per worker that draws one of its tests.
    import os

    cores = str(len(os.sched_getaffinity(0)))
    # On CI, nproc said 1 where os.cpu_count said 2 and the suite ran on one worker. nproc also obeys
    # OMP_NUM_THREADS (a CI may set it to 1 for BLAS): the Makefile leaves it out; the affinity mask still counts.
    for env in (dict(os.environ), dict(os.environ, OMP_NUM_THREADS="1", OMP_THREAD_LIMIT="1")):
        for target in ("test", "test-fast"):
            args = _pytest_line(target, env=env)
            assert args[args.index("-n") + 1] == cores, (target, env.get("OMP_NUM_THREADS"), args)
            assert args[args.index("--dist") + 1] == "loadfile", (target, args)
            assert "--no-loadscope-reorder" in args, (target, args)  # files go out in conftest.py's order
    serial = _pytest_line("test", "TEST_WORKERS=0")
    assert serial[serial.index("-n") + 1] == "0"
    extras = re.search(r"^dev = \[(.*?)\]$", (ROOT / "pyproject.toml").read_text(), re.M | re.S).group(1)
    assert '"pytest-xdist' in extras  # make setup installs it from the project's own files


def test_the_heaviest_files_are_collected_first_and_each_keeps_its_order():
    # Sorted by test count (xdist's default), the browser files started last and one worker ran the suite's last
    # 4 minutes alone. conftest.py puts its list of heavy files first; a name there that is no file is a typo.
    import types

    import conftest

    assert all((ROOT / "tests" / name).is_file() for name in conftest.HEAVY_FIRST)
    assert len(set(conftest.HEAVY_FIRST)) == len(conftest.HEAVY_FIRST)
    item = lambda name, i: types.SimpleNamespace(path=ROOT / "tests" / name, i=i)  # noqa: E731
    items = [item("test_a.py", 0), item(conftest.HEAVY_FIRST[1], 1), item("test_a.py", 2),
             item(conftest.HEAVY_FIRST[0], 3), item(conftest.HEAVY_FIRST[1], 4)]
    conftest.pytest_collection_modifyitems(items)
    assert [(x.path.name, x.i) for x in items] == [(conftest.HEAVY_FIRST[0], 3), (conftest.HEAVY_FIRST[1], 1),
                                                   (conftest.HEAVY_FIRST[1], 4), ("test_a.py", 0), ("test_a.py", 2)]
