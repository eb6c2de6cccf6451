"""A student's submission on the grading side: verify a zip, unpack it, import its modules, and the
namespace the tests run in (the submission's functions, everything in ``lab.grading``, ``torch``).

A submission is a folder or a zip made by ``python -m lab.grading.collect`` (a flat zip of the
assignment's modules and notebook plus ``manifest.json`` with the SHA-256 of every file).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

from ..core.env import submission_path
from .assignments import ASSIGNMENTS, Assignment
from .cases import Case
from .topic_checks import CHECKS
from .feedback import CheckFailure, CheckResult, NotImplementedYet
from .topics import TOPICS, cases, get_case
from .unzip import Limits, check_entries, extract, open_zip, read_small, sha256_entry

MANIFEST = "manifest.json"
KINDS = (".py", ".ipynb")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def verify(zip_path: Path, limits: Limits = Limits()) -> dict[str, Any]:
    """The manifest of a submission zip, after checking every file against its hash (read in chunks,
    within ``limits``: see :mod:`lab.grading.unzip`)."""
    label = Path(zip_path).name
    with open_zip(zip_path, limits) as zf:
        infos = {i.filename: i for i in check_entries(zf, label, limits)}
        manifest = json.loads(read_small(zf, MANIFEST, label))
        listed = {f["path"]: f["sha256"] for f in manifest["files"]}
        present = set(infos) - {MANIFEST}
        if present != set(listed):
            raise ValueError(f"{zip_path}: files {sorted(present ^ set(listed))} are not as the manifest lists them")
        used = 0
        for name, digest in listed.items():
            if sha256_entry(zf, infos[name], label, limits, used) != digest:
                raise ValueError(f"{zip_path}: {name} was changed after collection (hash mismatch)")
            used += infos[name].file_size
    return manifest


def unpack(zip_path: Path, folder: Path, limits: Limits = Limits(), suffixes: tuple[str, ...] = KINDS) -> list[str]:
    """Write the zip's top-level files with these ``suffixes`` (modules and notebooks) into ``folder``; returns
    their names. Raises :class:`~lab.grading.unzip.UnsafeZip` for a zip beyond ``limits`` (a zip bomb, a path
    out)."""
    return extract(zip_path, folder, lambda name: Path(name).suffix in suffixes and not name.startswith("."), limits)


def import_modules(folder: Path, assignment: Assignment) -> dict[str, Any]:
    """The public names of the assignment's modules, imported from ``folder`` under unique names."""
    ns: dict[str, Any] = {}
    sys.path.insert(0, str(folder))  # a module may import the student's own helper files
    try:
        for module in assignment.modules:
            path = folder / module
            unique = f"_submission_{sha256(str(path.resolve()).encode())[:12]}_{path.stem}"
            spec = importlib.util.spec_from_file_location(unique, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            ns.update({k: v for k, v in vars(mod).items() if not k.startswith("_")})
    finally:
        sys.path.remove(str(folder))
    return ns


def grading_names() -> dict[str, Any]:
    """What a test cell sees besides the submission: the public names of lab.grading and torch."""
    import torch

    return {**CHECKS, "CHECKS": CHECKS, "TOPICS": TOPICS, "Case": Case, "cases": cases, "get_case": get_case,
            "CheckFailure": CheckFailure, "CheckResult": CheckResult, "NotImplementedYet": NotImplementedYet,
            "torch": torch}


def load_submission(assignment: str, path: Optional[str] = None) -> dict[str, Any]:
    """Namespace for the hidden tests: :func:`grading_names` and the submission's functions.

    ``path`` (default: the RANKLAB_SUBMISSION environment variable) is a folder or a zip made by
    ``collect`` (verified against its manifest first).
    """
    path = path or submission_path()
    if not path:
        raise RuntimeError("set RANKLAB_SUBMISSION to the submission folder or zip to grade")
    source = Path(path)
    if source.suffix == ".zip":
        verify(source)
        folder = Path(tempfile.mkdtemp(prefix="ranklab_submission_"))
        unpack(source, folder)
    else:
        folder = source
    return {**grading_names(), **import_modules(folder.resolve(), ASSIGNMENTS[assignment])}
