"""Does a submission call lab's own version of the function it was asked to write? A signal for the instructor.

Students have ``lab`` installed (the notebooks need it), so a submission can always hand its work to lab's
reference (``from lab.losses.functional import fast_ap``) and pass every check. Two views, combined in the
grade sheet's ``lab_code`` column for each graded function:

- the source, read here as data (``ast``, nothing executed): imports of ``lab`` and of ``importlib`` or
  ``__import__``, and uses of a name like the graded function's that comes from such an import;
- a trace inside the sandbox (:func:`lab.grading.student_server.traced_call`): the lab functions that ran
  while the student's function ran, as the student's process reports them.

Either can be evaded by a determined student (the trace is reported by their own process, and source can
hide a name), and an honest student may call a lab helper: it says which full marks to read, not who cheated.
"""
from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping

MAX_TEXT = 300  # characters of the column per function


def _lab_imports(tree: ast.AST, file: str) -> tuple[list[str], dict[str, str], set[str]]:
    """(notes on imports, {local alias: lab module} of ``import lab.x as y``, names imported from lab)."""
    notes, aliases, names = [], {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "lab" or a.name.startswith("lab."):
                    aliases[a.asname or a.name.split(".")[0]] = a.name
                    notes.append(f"imports {a.name} ({file}:{node.lineno})")
                elif a.name == "importlib":
                    notes.append(f"imports importlib ({file}:{node.lineno})")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "lab" or node.module.startswith("lab."):
                names.update(a.asname or a.name for a in node.names)
                names.update(a.name for a in node.names)
                notes.append(f"imports {', '.join(a.name for a in node.names)} from {node.module} "
                             f"({file}:{node.lineno})")
        elif isinstance(node, ast.Name) and node.id == "__import__":
            notes.append(f"uses __import__ ({file}:{node.lineno})")
    return notes, aliases, names


def static_uses(sources: Mapping[str, bytes], functions: Iterable[str]) -> dict[str, list[str]]:
    """{graded function: what the source shows} from the submission's ``.py`` files: every lab import is noted
    for every function, and a function whose own name is imported from lab, or read as an attribute of a lab
    module alias (``LF.fast_ap``), gets that use first."""
    general: list[str] = []
    direct: dict[str, list[str]] = {f: [] for f in functions}
    for file, data in sorted(sources.items()):
        try:
            tree = ast.parse(data, filename=file)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # the grading says what is wrong with the file; nothing to read here
        notes, aliases, names = _lab_imports(tree, file)
        general += notes
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr in direct and isinstance(node.value, ast.Name)
                    and node.value.id in aliases):
                direct[node.attr].append(f"uses lab's {node.attr} ({file}:{node.lineno})")
        for f in direct:
            if f in names:
                direct[f].insert(0, f"imports lab's {f} ({file})")
    return {f: list(dict.fromkeys(direct[f] + general)) for f in direct}


def column(static: list[str], ran: Iterable[str], function: str) -> str:
    """The ``lab_code`` cell of one graded function: '' when neither view saw lab code, else what they saw,
    the trace of lab's own ``function`` first."""
    ran = sorted(ran, key=lambda name: (not name.endswith("." + function), name))
    parts = ([f"ran {', '.join(ran[:5])}" + (f" and {len(ran) - 5} more" if len(ran) > 5 else "")] if ran else [])
    text = "; ".join(parts + static)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."
