"""The assignment kit: generated student versions, hidden tests, the collect helper.

The solution notebooks themselves run under nbmake (pytest's testpaths include assignments/).
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from lab.grading import CHECKS, get_case
from lab.grading.assignments import ASSIGNMENTS
from lab.grading.collect import collect
from lab.grading.generate import generate, hand_out
from lab.grading.markers import HIDDEN, SOLUTION, regions, strip_code
from lab.grading.submission import grading_names, load_submission, verify

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "assignments"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("build")
    return {g.name: g for g in generate(SOURCE, out)}, out


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _text(path: Path) -> str:
    """A module's text, or a notebook's cell sources (the JSON would escape newlines)."""
    if path.suffix == ".ipynb":
        return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
    return path.read_text()


def _case_args(check: str):
    topic = check.removeprefix("check_")
    return get_case(topic, "self-f32-s0" if topic not in ("h_minus", "soft_histogram")
                    else ("grid-f32-s0" if topic == "h_minus" else "fastap-f32-s0")).args


# ------------------------------------------------------------------------- sources and registry
def test_registry_matches_the_assignment_folders():
    folders = {p.name for p in SOURCE.iterdir() if p.is_dir() and any(p.glob("*.ipynb"))}
    assert folders == set(ASSIGNMENTS)
    for a in ASSIGNMENTS.values():
        assert (SOURCE / a.name / a.notebook).is_file()
        cells = {c.get("id"): c for c in nbformat.read(SOURCE / a.name / a.notebook, as_version=4).cells}
        for module in a.modules:
            assert (SOURCE / a.name / module).is_file()
        for test in a.tests:  # each weighted test cell self-checks its function and holds hidden tests
            source = cells[test.cell].source
            assert f"{test.check}({test.function})" in source and HIDDEN[0] in source and test.points > 0
        for cell, points in a.written:  # each weighted written answer is a markdown solution cell
            assert cells[cell].cell_type == "markdown" and SOLUTION[0] in cells[cell].source and points > 0


def test_hidden_tests_see_everything_lab_grading_exports():
    import lab.grading

    assert set(lab.grading.__all__) | {"torch"} <= set(grading_names())


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_solution_modules_pass_their_checks(name):
    a = ASSIGNMENTS[name]
    module = _load(SOURCE / name / a.modules[0], f"solution_{name}")
    for function, check in a.checks:
        CHECKS[check](getattr(module, function), verbose=False)


@pytest.mark.parametrize("path", sorted(SOURCE.glob("*/*.ipynb")), ids=lambda p: p.parent.name)
def test_solution_notebooks_are_saved_clean(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: outputs saved in a cell"


def test_no_student_notebook_under_assignments():
    """nbmake runs every notebook under assignments/: a student version there would fail by design."""
    for path in SOURCE.rglob("*.ipynb"):
        assert SOLUTION[0] in path.read_text(), f"{path} has no solution region: a student version?"


# ------------------------------------------------------------------------------ the generator
def test_strip_code_keeps_indentation_and_names_the_function():
    source = "def f(x):\n    '''Doc.'''\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    student, stubs = strip_code(source, "m.py")
    assert stubs == ["f"]
    assert '    raise NotImplementedError("TODO: implement f() (see its docstring)")' in student
    namespace = {}
    exec(student, namespace)
    with pytest.raises(NotImplementedError, match="TODO: implement f"):
        namespace["f"](1)


@pytest.mark.parametrize("source, error", [
    ("### BEGIN SOLUTION\nx = 1\n", "is never closed"),
    ("x = 1\n### END SOLUTION\n", "without"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "nested"),
])
def test_broken_markers_are_reported_with_file_and_line(source, error):
    with pytest.raises(ValueError, match=rf"m\.py:\d+: .*{error}"):
        strip_code(source, "m.py")


def test_student_versions_hold_no_solution(generated):
    gens, out = generated
    for name, g in gens.items():
        for path in (SOURCE / name).iterdir():
            if path.suffix not in (".py", ".ipynb"):
                continue
            student, source = _text(g.student_dir / path.name), _text(path)
            assert "BEGIN SOLUTION" not in student and "HIDDEN TESTS" not in student
            lines = source.split("\n")
            for begin, end in regions(lines, SOLUTION, str(path)):
                body = "\n".join(lines[begin + 1:end]).strip()
                assert body and body not in student, f"{path.name}: a solution leaked"
        assert sorted(p.name for p in g.student_dir.iterdir()) == sorted(p.name for p in (SOURCE / name).iterdir()
                                                                       if p.suffix in (".py", ".ipynb"))
        assert (out / "nbgrader" / "source" / name / ASSIGNMENTS[name].modules[0]).read_text() == \
            (g.student_dir / ASSIGNMENTS[name].modules[0]).read_text()  # nbgrader copies .py files verbatim


def test_nbgrader_source_carries_the_weight_tables_and_keeps_the_students_modules(generated):
    from traitlets.config import Config

    gens, out = generated
    for name in gens:
        a = ASSIGNMENTS[name]
        nb = nbformat.read(out / "nbgrader" / "source" / name / a.notebook, as_version=4)
        graded = {c.id: c.metadata["nbgrader"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
        assert {cell: meta["points"] for cell, meta in graded.items()} == a.points
        assert all(meta["locked"] for cell, meta in graded.items() if cell in {t.cell for t in a.tests})
    config = Config()
    exec((out / "nbgrader" / "nbgrader_config.py").read_text(), {"get_config": lambda: config})
    assert config.Autograde.exclude_overwriting == {n: list(a.modules) for n, a in ASSIGNMENTS.items()}
    assert config.Execute.timeout >= 60


def test_student_notebooks_are_nbgraders_release_with_the_weight_tables(generated, tmp_path):
    """What students get is what nbgrader autograde needs: the graded cells' metadata and checksums, made
    by nbgrader's own generate_assignment (issue 32: without them autograde scored everyone 0)."""
    gens, out = generated
    for name, g in gens.items():
        a = ASSIGNMENTS[name]
        nb = nbformat.read(g.student_dir / a.notebook, as_version=4)
        graded = {c.id: c.metadata["nbgrader"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
        assert {cell: meta["points"] for cell, meta in graded.items()} == a.points
        assert all(meta.get("checksum") and meta["grade_id"] == f"cell-{cell}" for cell, meta in graded.items())
    g = gens["03_histogram_losses_and_bin_width"]
    collect(g.student_dir, tmp_path / "s.zip", assignment=g.name, self_checks=False)
    with zipfile.ZipFile(tmp_path / "s.zip") as zf:  # collect hands in the notebook with its metadata
        handed_in = nbformat.reads(zf.read(ASSIGNMENTS[g.name].notebook).decode(), as_version=4)
    assert sum(bool(c.metadata.get("nbgrader", {}).get("grade")) for c in handed_in.cells) == \
        len(ASSIGNMENTS[g.name].points)


def test_hand_out_refuses_a_release_that_differs_from_the_student_version(generated, tmp_path):
    gens, _ = generated
    g = gens["03_histogram_losses_and_bin_width"]
    notebook = g.student_dir / ASSIGNMENTS[g.name].notebook
    other = nbformat.read(notebook, as_version=4)
    other.cells[0].source += "\nchanged"
    nbformat.write(other, tmp_path / "release.ipynb")
    with pytest.raises(ValueError, match="differs from the generator's student version"):
        hand_out(tmp_path / "release.ipynb", notebook)


def test_student_modules_import_and_every_todo_raises(generated):
    gens, _ = generated
    for name, g in gens.items():
        a = ASSIGNMENTS[name]
        module = _load(g.student_dir / a.modules[0], f"student_{name}")  # no SyntaxError, imports fine
        assert sorted(g.stubs) == sorted(f for f, _ in a.checks)
        for function, check in a.checks:
            with pytest.raises(NotImplementedError, match=f"TODO: implement {function}"):
                getattr(module, function)(*_case_args(check))
            with pytest.raises(NotImplementedError, match="not implemented yet"):  # and the check says so plainly
                CHECKS[check](getattr(module, function), verbose=False)


@pytest.mark.slow
def test_student_notebooks_run_until_their_first_todo(generated):
    gens, _ = generated
    for name, g in gens.items():
        path = g.student_dir / ASSIGNMENTS[name].notebook
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            assert not (cell.cell_type == "code" and cell.outputs)
        assert nb.metadata.kernelspec.name == "python3" and g.first_todo_cell is not None
        client = NotebookClient(nb, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(g.student_dir)}})
        with pytest.raises(CellExecutionError) as info:
            client.execute()
        assert info.value.ename == "NotImplementedError", f"{name}: {info.value.ename}: {info.value.evalue}"
        failed = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                  and any(o.output_type == "error" for o in c.outputs)]
        assert failed == [g.first_todo_cell], f"{name}: failed at cell {failed}, first TODO is {g.first_todo_cell}"
        ran = [c.execution_count for c in nb.cells[:g.first_todo_cell] if c.cell_type == "code"]
        assert ran and all(n is not None for n in ran)  # everything before the TODO executed


# ------------------------------------------------------------------------------ hidden tests
def _run_hidden(test_file: Path, name: str, submission: Path) -> None:
    module = _load(test_file, f"hidden_{name}")
    ns = load_submission(name, str(submission))
    tests = [getattr(module, t) for t in dir(module) if t.startswith("test_")]
    assert tests
    for test in tests:
        test(ns)


def test_hidden_tests_pass_on_the_solutions_and_fail_on_the_stubs(generated):
    gens, _ = generated
    for name, g in gens.items():
        _run_hidden(g.hidden_tests, name, SOURCE / name)
        with pytest.raises(NotImplementedError, match="not implemented yet"):
            _run_hidden(g.hidden_tests, name, g.student_dir)


@pytest.mark.slow
def test_hidden_tests_run_under_plain_pytest(generated, tmp_path):
    gens, _ = generated
    g = gens["03_histogram_losses_and_bin_width"]
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\n")  # not the project's configuration (nbmake, testpaths)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(ini), str(g.hidden_tests)]
    env = dict(os.environ, RANKLAB_SUBMISSION=str(SOURCE / g.name))
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout[-2000:]


# -------------------------------------------------------------------------------------- collect
@pytest.fixture
def workdir(tmp_path):
    """A student's folder: the solution files plus what must not be handed in."""
    name = "03_histogram_losses_and_bin_width"
    folder = tmp_path / name
    shutil.copytree(SOURCE / name, folder)
    (folder / "__pycache__").mkdir(exist_ok=True)
    (folder / "embeddings.npy").write_bytes(b"\0" * 1000)
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "model.pt").write_bytes(b"\0" * 1000)
    (folder / ".ipynb_checkpoints").mkdir()
    (folder / "helper.py").write_text("HELP = 1\n")
    return folder


@pytest.mark.slow
def test_collect_packs_code_notebook_and_manifest_only(workdir, tmp_path):
    manifest = collect(workdir, tmp_path / "submission.zip")
    a = ASSIGNMENTS["03_histogram_losses_and_bin_width"]
    with zipfile.ZipFile(tmp_path / "submission.zip") as zf:
        assert sorted(zf.namelist()) == sorted([a.notebook, *a.modules, "helper.py", "manifest.json"])
        assert json.loads(zf.read("manifest.json")) == manifest
    assert manifest["assignment"] == a.name and set(manifest["left_out"]) == {
        "embeddings.npy (not a module or notebook)", "checkpoints (folder)"}
    assert [r["passed"] for r in manifest["self_checks"]] == [True, True]
    assert manifest["summary"] == "2/2 self-checks passed"
    assert verify(tmp_path / "submission.zip") == manifest
    ns = load_submission(a.name, str(tmp_path / "submission.zip"))
    CHECKS["check_fast_ap"](ns["fast_ap"], verbose=False)


@pytest.mark.slow
def test_collect_records_failing_self_checks(generated, tmp_path):
    gens, _ = generated
    g = gens["03_histogram_losses_and_bin_width"]
    manifest = collect(g.student_dir, tmp_path / "s.zip", assignment=g.name)
    assert [r["passed"] for r in manifest["self_checks"]] == [False, False]
    assert all("not implemented yet" in r["message"] for r in manifest["self_checks"])


def test_collect_enforces_the_size_limit(workdir, tmp_path):
    (workdir / "big.py").write_text("#" * 3_000_000)
    with pytest.raises(ValueError, match="over the 1 MB limit"):
        collect(workdir, tmp_path / "s.zip", max_mb=1, self_checks=False)


def test_collect_needs_the_assignment_files(workdir, tmp_path):
    (workdir / "histograms.py").unlink()
    with pytest.raises(FileNotFoundError, match="lacks histograms.py"):
        collect(workdir, tmp_path / "s.zip", self_checks=False)


def test_verify_detects_a_changed_file(workdir, tmp_path):
    zip_path = tmp_path / "s.zip"
    collect(workdir, zip_path, self_checks=False)
    with zipfile.ZipFile(zip_path) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    files["histograms.py"] += b"\n# edited after collection\n"
    with zipfile.ZipFile(zip_path, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
    with pytest.raises(ValueError, match="changed after collection"):
        verify(zip_path)
