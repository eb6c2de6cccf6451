"""What an install of ranklab-retrieval weighs: the closure of its requirements, measured from this environment.

    .venv/bin/python -m bench.install_size            # the lean core and each extra, in MB on disk

For each requirement set (the core: ``[project] dependencies``; an extra: the core plus the extra, its
self-references resolved) it walks the installed distributions' ``Requires-Dist`` (markers evaluated for
this machine, extras followed) and adds up the sizes their RECORD lists. So the numbers are those of *this*
environment's builds: on Linux, PyPI's torch is the CUDA build, which pulls the nvidia-* libraries and
triton; the CPU build (download.pytorch.org's CPU index) cannot be measured from here.
``tests/test_lean_install.py`` uses :func:`closure` to give a fresh venv the core's packages and no others.
"""
from __future__ import annotations

import importlib.metadata as metadata
import re
from pathlib import Path
from typing import Iterable, Optional

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
DIST = "ranklab-retrieval"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def project_requirements(extras: Iterable[str] = ()) -> list[Requirement]:
    """pyproject.toml's core requirements plus those of ``extras``, self-references (``DIST[x]``) expanded."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = [Requirement(r) for r in project["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in project["optional-dependencies"][extra]:
            req = Requirement(text)
            if _canonical(req.name) == DIST:
                todo.extend(req.extras)
            else:
                out.append(req)
    return out


def closure(requirements: Iterable[Requirement]) -> dict[str, metadata.Distribution]:
    """{canonical name: installed distribution} of ``requirements`` and everything they require, here."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(req, frozenset()) for req in requirements]
    done: set[tuple[str, frozenset]] = set()
    while todo:
        req, parent_extras = todo.pop()
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in (parent_extras or {""})):
            continue
        name = _canonical(req.name)
        key = (name, frozenset(req.extras))
        if key in done:
            continue
        done.add(key)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue  # an optional platform package this machine does not have
        found[name] = dist
        todo.extend((Requirement(r), frozenset(req.extras)) for r in (dist.requires or []))
    return found


def size_bytes(dist: metadata.Distribution) -> int:
    total = 0
    for file in dist.files or []:
        path = Path(dist.locate_file(file))
        if path.is_file():
            total += path.stat().st_size
    return total


def top_level_entries(dist: metadata.Distribution) -> set[Path]:
    """The entries a distribution puts in site-packages (packages, modules, its .dist-info), as paths."""
    entries = set()
    for file in dist.files or []:
        parts = Path(file).parts
        if parts and parts[0] != ".." and not parts[0].endswith(".pth"):
            entries.add(Path(dist.locate_file(parts[0])))
    return entries


def report(extras: Optional[list[str]] = None) -> list[tuple[str, float, int]]:
    """(requirement set, MB, number of distributions) for the core and each extra."""
    rows = []
    for label, chosen in [("core", []), *[(f"[{e}]", [e]) for e in (extras or ["train", "studies", "notebooks",
                                                                                 "app", "grading", "all"])]]:
        dists = closure(project_requirements(chosen))
        rows.append((label, sum(size_bytes(d) for d in dists.values()) / 1e6, len(dists)))
    return rows


if __name__ == "__main__":
    core = closure(project_requirements())
    biggest = sorted(core.items(), key=lambda kv: -size_bytes(kv[1]))[:6]
    for label, mb, count in report():
        print(f"{label:12s} {mb:9,.0f} MB  {count:4d} distributions")
    print("largest in the core:", ", ".join(f"{name} {size_bytes(d) / 1e6:,.0f} MB" for name, d in biggest))
