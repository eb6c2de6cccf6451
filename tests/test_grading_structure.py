"""lab.grading's structure: no import loop (module or function level), only the lab's public layers below it,
and one record per topic behind every public check."""
from __future__ import annotations

from pathlib import Path

import lab.grading as grading
from lab.grading import CHECKS, TOPICS
from lab.grading.topic_checks import make_check
from tests._imports import graph, imported_modules

PACKAGE = Path(grading.__file__).parent
# What grading may import from the lab: its own modules and the layers below it (never the reverse).
ALLOWED = ("lab.grading", "lab.core", "lab.losses", "lab.metrics", "lab.ranking")


# The lab's one import reader (tests/_imports.py), as the layering tests read the whole package. An edge into
# the package itself (`from . import x`, which also names lab.grading) is dropped: its __init__ re-exports.
GRAPH = {m: {t for t in targets if not m.startswith(t + ".")} for m, targets in graph(PACKAGE).items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """A cycle of the graph as a path [a, b, ..., a], or [] when it is acyclic (depth-first search)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def test_find_cycle_finds_function_level_loops():
    """The detector itself: a loop closed by an import inside a function is found, a chain is not."""
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    source = PACKAGE / "collect.py"
    assert "lab.grading.topic_checks" in GRAPH["lab.grading.collect"], "the parser must see collect's imports"
    assert imported_modules(source) >= GRAPH["lab.grading.collect"]


def test_function_level_imports_are_parsed(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from . import topic_checks\n    from .. import grading\n"
                      "    from .cases import Case\n")
    assert imported_modules(module, "lab.grading.m") == {"lab.grading.topic_checks", "lab.grading", "lab",
                                                         "lab.grading.cases"}


def test_grading_has_no_import_cycle():
    cycle = find_cycle({m: {t for t in ts if t.startswith("lab.grading")} for m, ts in GRAPH.items()})
    assert not cycle, "import loop in lab.grading: " + " -> ".join(cycle)


def test_grading_imports_only_the_layers_below_it():
    for module, targets in GRAPH.items():
        wrong = {t for t in targets if t != "lab" and not t.startswith(ALLOWED)}
        assert not wrong, f"{module} imports {sorted(wrong)}: grading may use only {ALLOWED}"


def test_every_topic_has_its_public_check():
    assert set(CHECKS) == {f"check_{name}" for name in TOPICS}
    for name, spec in TOPICS.items():
        check = getattr(grading, f"check_{name}")
        assert check is CHECKS[f"check_{name}"] and f"check_{name}" in grading.__all__
        assert check.__name__ == f"check_{name}" and spec.signature in check.__doc__
        assert spec.signature.startswith(f"{name}(") and spec.cases(0) and spec.mistakes is not None
    assert make_check(TOPICS["h_minus"]).__name__ == "check_h_minus"
