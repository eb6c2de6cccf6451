"""Notebooks: outputs stripped, paired py:percent file in sync, required sections present."""
import re
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]


def sources(nb):
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 4


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_outputs_are_stripped(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name}: run `jupytext --sync` on a clean copy")
    assert nb.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_paired_percent_script_matches(path):
    script = path.with_suffix(".py")
    assert script.exists(), f"{script.name} missing: `jupytext --set-formats ipynb,py:percent {path.name}`"
    nb, py = jupytext.read(path), jupytext.read(script)
    assert sources(nb) == sources(py), f"{path.name} and {script.name} differ: run `jupytext --sync {script.name}`"
    assert py.metadata["jupytext"]["formats"] == "ipynb,py:percent"
    assert nb.metadata["jupytext"]["formats"] == "ipynb,py:percent"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_required_sections(path):
    nb = nbformat.read(path, as_version=4)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")  # a title first
    assert "**What you will learn.**" in nb.cells[0].source
    assert re.search(r"\\tag\{\d+\}|Eq\. \d+", markdown), "the equations it implements, numbered as in the papers"
    assert "## Summary" in markdown
    exercises = markdown.split("## Exercises", 1)
    assert len(exercises) == 2, "an Exercises section at the end"
    assert 2 <= len(re.findall(r"^\d+\. ", exercises[1], re.M)) <= 4
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "import lab" in code or "from lab" in code
    assert "assert " in code  # the notebook checks the claims it makes
