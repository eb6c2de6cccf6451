"""The notebooks ship no unfilled placeholder, and assert nothing that only trained data could
contradict: an assert holds in every mode (a property of the maths or the code); what a trained
model measured is printed and discussed in prose."""
import ast
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
# An ALL_CAPS_WITH_UNDERSCORES token in prose (FULL_MODE_RESULTS) is a placeholder; in code spans
# (`LEVEL_METRICS`) and maths it is a name.
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z0-9]+(?:_[A-Z0-9]{2,})+\b")  # not a symbol such as AP_Q
UNFINISHED = re.compile(r"\b(TODO|FIXME|TBD|XXX)\b")


def cells(path: Path, kind: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == kind]


def prose(text: str) -> str:
    """Markdown without code spans, code blocks and maths."""
    for pattern in (r"```.*?```", r"`[^`]*`", r"\$\$.*?\$\$", r"\$[^$]*\$"):
        text = re.sub(pattern, " ", text, flags=re.S)
    return text


def test_the_placeholder_pattern_catches_the_old_ones():
    assert PLACEHOLDER.findall(prose("In full mode, FULL_MODE_RESULTS")) == ["FULL_MODE_RESULTS"]
    assert PLACEHOLDER.findall(prose("the `LEVEL_METRICS` and $\\mathcal{L}_\\text{DG}$, R@1, mAP@R, H-AP, AP_Q")) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_placeholder_or_unfinished_text(path):
    for text in cells(path, "markdown"):
        assert not PLACEHOLDER.findall(prose(text)), text[:200]
        assert not UNFINISHED.findall(text), text[:200]
    for code in cells(path, "code"):
        assert not UNFINISHED.findall(code), code[:200]


def full_mode_asserts(code: str) -> list[str]:
    """Asserts under ``if not fast_mode():`` (or ``if fast_mode(): ... else:``): they test trained data."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.If) and "fast_mode" in ast.unparse(node.test):
            negated = isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)
            for stmt in node.body if negated else node.orelse:
                found += [ast.unparse(n) for n in ast.walk(stmt) if isinstance(n, ast.Assert)]
    return found


def test_the_full_mode_assert_finder_finds_them():
    assert full_mode_asserts("if not fast_mode():\n    assert x > 0\nassert y") == ["assert x > 0"]
    assert full_mode_asserts("if fast_mode():\n    print(1)\nelse:\n    assert z\n") == ["assert z"]
    assert full_mode_asserts("if not fast_mode():\n    print(x)\n") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_assertion_that_only_holds_on_trained_data(path):
    for code in cells(path, "code"):
        source = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
        assert full_mode_asserts(source) == [], code[:300]
