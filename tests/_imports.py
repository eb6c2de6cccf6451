"""The one reader of the lab's imports, for the layering tests (tests/test_layers.py) and lab.grading's
structure (tests/test_grading_structure.py): every import of a module, including those inside functions
(a loop hidden in a function is still a loop)."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "lab"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_imports(path: Path, name: Optional[str] = None) -> set[str]:
    """Every module ``path`` imports, at any depth of its code, relative imports resolved (``from pkg import
    x``: pkg, and pkg.x when x is a module of this tree). ``name``: the module's name, for a file outside
    the tree (default: its place in it)."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            for alias in node.names:  # `from . import x` may name a submodule
                sub = f"{target}.{alias.name}"
                where = ROOT / Path(*sub.split("."))
                if where.with_suffix(".py").exists() or where.is_dir():
                    found.add(sub)
    found.discard(name)
    return found


def imported_modules(path: Path, name: Optional[str] = None) -> set[str]:
    """Every lab module ``path`` imports (:func:`all_imports`)."""
    return {m for m in all_imports(path, name) if m == "lab" or m.startswith("lab.")}


def graph(package: Path = LAB) -> dict[str, set[str]]:
    """{module: the lab modules it imports} for every module under ``package``."""
    return {module_name(p): imported_modules(p) for p in sorted(package.rglob("*.py"))}
