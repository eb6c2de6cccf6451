"""The package layering of README's "Layout", read from the source: every import of every module,
including imports inside functions (a loop hidden in a function is still a loop)."""
from __future__ import annotations

import ast

from tests._imports import LAB, graph, imported_modules

# Bottom up. A package may import its own modules and any package of a lower layer, never one of
# its own layer (siblings stay independent) or of a higher one.
LAYERS = [
    {"lab", "lab.core"},  # lab/__init__ holds only the version
    {"lab.losses", "lab.metrics"},  # lab.losses.engine is a level below the losses (see the end)
    {"lab.data", "lab.models"},
    {"lab.train"},
    {"lab.experiments", "lab.viz"},
    {"lab.dashboard", "lab.grading", "lab.studies"},
    {"lab.cli", "lab.docs_figures"},  # then app.py, app_pages/ and the notebooks, outside the package
]
RANK = {package: i for i, layer in enumerate(LAYERS) for package in layer}
# Modules that belong to another package's unit: lab.ranking is the public face of lab.core.steps.
UNIT = {"lab.ranking": "lab.core", "lab.__main__": "lab.cli"}


def package_of(module: str) -> str:
    """The unit of layering: lab.<first part> (lab itself for lab/__init__.py)."""
    first = ".".join(module.split(".")[:2])
    return UNIT.get(first, first)


def test_every_package_has_a_layer():
    packages = {package_of(m) for m in graph()}
    assert packages <= set(RANK), f"packages without a layer in tests/test_layers.py: {sorted(packages - set(RANK))}"


def test_no_package_imports_a_higher_or_sibling_package():
    wrong = []
    for module, targets in graph().items():
        mine = package_of(module)
        for target in targets:
            theirs = package_of(target)
            if theirs != mine and RANK[theirs] >= RANK[mine]:
                wrong.append(f"{module} imports {target} ({theirs} is not below {mine})")
    assert not wrong, "layering violations:\n" + "\n".join(sorted(wrong))


def test_the_package_never_imports_the_app_or_the_notebooks():
    for path in sorted(LAB.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            assert not any(n.split(".")[0] in ("app", "app_pages", "notebooks", "bench", "tests") for n in names), path


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each a loop."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_loop_between_packages():
    edges: dict[str, set[str]] = {}
    for module, targets in graph().items():
        edges.setdefault(package_of(module), set()).update(package_of(t) for t in targets
                                                           if package_of(t) != package_of(module))
    assert cycles(edges) == []


def test_no_import_loop_between_modules():
    g = graph()
    # A package's __init__ re-exports its modules; an edge into a package means "some module of it".
    edges = {m: {t for t in targets if t in g and not (m.startswith(t + ".") and t != "lab")}
             for m, targets in g.items()}
    assert cycles(edges) == [], "import loops (function-level imports included)"


def test_the_checker_sees_a_loop_and_a_violation(tmp_path):
    # The test must be able to fail: a two-node loop, and an upward import, are reported.
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    module = LAB / "metrics" / "retrieval.py"
    assert "lab.core.checks" in imported_modules(module)
    assert all(package_of(t) in ("lab.core", "lab.metrics") for t in imported_modules(module))


# Inside lab.losses the engine is a floor of its own: every loss stands on it, it imports no loss.
ENGINE = "lab.losses.engine"


def in_engine(module: str) -> bool:
    return module == ENGINE or module.startswith(ENGINE + ".")


def engine_violations(edges: dict[str, set[str]]) -> list[str]:
    """Imports from the engine into lab.losses outside it (a loss, base, functional, the registry)."""
    return sorted(f"{m} imports {t}" for m, targets in edges.items() if in_engine(m)
                  for t in targets if package_of(t) == "lab.losses" and not in_engine(t))


def test_the_engine_is_a_level_below_the_losses():
    g = graph()
    assert any(in_engine(m) for m in g), "lab/losses/engine/ is missing"
    assert engine_violations(g) == [], "the engine imports a loss"
    assert ENGINE in g["lab.losses.smooth_ap"]  # the losses do stand on it
    # The check can fail: an engine module importing a loss file is reported.
    assert engine_violations({f"{ENGINE}.blocks": {"lab.losses.base", "lab.core.checks", f"{ENGINE}.plan"}}) == \
        [f"{ENGINE}.blocks imports lab.losses.base"]


# Inside lab.studies: the running side (train, write results/) never imports the reporting side (read them back,
# write the page) nor the command line; no view of the reporting side imports another; and the package stays
# at most STUDIES_FLOORS deep (review 2026-11b: 11 floors, each module importing the one below).
STUDIES = "lab.studies"
RUNNING, REPORTING, STUDIES_CLI = f"{STUDIES}.running", f"{STUDIES}.reporting", f"{STUDIES}.cli"
VIEWS = {f"{REPORTING}.{v}" for v in ("results_page", "verdicts", "headline")}
STUDIES_FLOORS = 7


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def studies_edges(g: dict[str, set[str]]) -> dict[str, set[str]]:
    """lab.studies' own imports, without a module's edge into the package it sits in (its __init__)."""
    return {m: {t for t in targets if within(t, STUDIES) and not m.startswith(t + ".")}
            for m, targets in g.items() if within(m, STUDIES)}


def studies_violations(edges: dict[str, set[str]]) -> list[str]:
    wrong = []
    for m, targets in edges.items():
        for t in targets:
            if within(m, RUNNING) and (within(t, REPORTING) or t == STUDIES_CLI):
                wrong.append(f"{m} imports {t} (the running side imports no reporting and no command line)")
            elif within(m, REPORTING) and t == STUDIES_CLI:
                wrong.append(f"{m} imports {t} (the reporting side imports no command line)")
            elif m in VIEWS and t in VIEWS:
                wrong.append(f"{m} imports {t} (a view assembles sections, not another view)")
    return sorted(wrong)


def floors(edges: dict[str, set[str]]) -> list[str]:
    """The longest chain of imports (one floor per module), top first."""
    memo: dict[str, list[str]] = {}

    def chain(m: str) -> list[str]:
        if m not in memo:
            memo[m] = [m] + max((chain(t) for t in edges.get(m, ()) if t in edges), key=len, default=[])
        return memo[m]

    return max((chain(m) for m in edges), key=len, default=[])


def test_the_studies_run_below_what_reports_them_and_stay_shallow():
    edges = studies_edges(graph())
    assert any(within(m, RUNNING) for m in edges) and VIEWS <= set(edges), "lab/studies/{running,reporting}/ moved"
    assert studies_violations(edges) == []
    longest = floors(edges)
    assert len(longest) <= STUDIES_FLOORS, f"{len(longest)} floors: {' -> '.join(longest)}"
    assert f"{RUNNING}.spec" in edges[f"{REPORTING}.study_sections"]  # the reporting side does stand on it
    # The checks can fail: a running module importing a view, a view importing a view, a chain of 8 floors.
    assert studies_violations({f"{RUNNING}.runner": {f"{REPORTING}.verdicts"},
                               f"{REPORTING}.headline": {f"{REPORTING}.verdicts"}}) == [
        f"{REPORTING}.headline imports {REPORTING}.verdicts (a view assembles sections, not another view)",
        f"{RUNNING}.runner imports {REPORTING}.verdicts (the running side imports no reporting and no command line)"]
    tower = {f"m{i}": {f"m{i + 1}"} for i in range(7)} | {"m7": set(), "other": {"m7"}}
    assert floors(tower) == [f"m{i}" for i in range(8)]


# lab.core holds two kinds of modules (its docstring lists them): the maths under the losses and metrics, and
# the process helpers that training, data, studies, grading and the CLI share. Each module is in one group.
CORE_MATHS = {"checks", "steps", "relevance", "graded_ranks", "normalize", "budget", "hparams"}
CORE_PROCESS = {"env", "extras", "files", "provenance", "convert", "frozen", "precision"}


def core_group_violations(edges: dict[str, set[str]]) -> list[str]:
    """Imports across lab.core's groups: a maths helper importing a process helper other than env (the
    environment's switches), a process helper importing a maths helper."""
    wrong = []
    for module, targets in edges.items():
        if module.startswith("lab.core."):
            mine = module.split(".")[2]
            for target in targets:
                theirs = target.split(".")[2] if target.startswith("lab.core.") else None
                if (mine in CORE_MATHS and theirs in CORE_PROCESS - {"env"}) or \
                        (mine in CORE_PROCESS and theirs in CORE_MATHS):
                    wrong.append(f"{module} imports {target}")
    return sorted(wrong)


def test_lab_core_is_its_two_groups_as_its_docstring_says():
    modules = {p.stem for p in (LAB / "core").glob("*.py") if p.stem != "__init__"}
    assert CORE_MATHS | CORE_PROCESS == modules and not CORE_MATHS & CORE_PROCESS, \
        f"a lab/core module in no group or two: {sorted(modules ^ (CORE_MATHS | CORE_PROCESS))}"
    doc = ast.get_docstring(ast.parse((LAB / "core" / "__init__.py").read_text()))
    maths, process = doc.split("Process helpers", 1)
    assert all(f"``{m}``" in maths for m in CORE_MATHS) and all(f"``{m}``" in process for m in CORE_PROCESS)
    assert core_group_violations(graph()) == []
    # The check can fail: a maths helper importing the atomic writer is reported.
    assert core_group_violations({"lab.core.steps": {"lab.core.files", "lab.core.env"}}) == \
        ["lab.core.steps imports lab.core.files"]
