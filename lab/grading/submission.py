"""A student's submission on the grading side: verify a zip, unpack it, import its modules, and the
namespace the tests run in (the submission's functions, everything in ``lab.grading``, ``torch``).

A submission is a folder or a zip made by ``python -m lab.grading.collect`` (a flat zip of the
assignment's modules and notebook plus ``manifest.json`` with the SHA-256 of every file).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Optional

from .assignments import ASSIGNMENTS, Assignment
from .cases import Case
from .checks import CHECKS
from .feedback import CheckFailure, CheckResult, NotImplementedYet
from .topics import TOPICS, cases, get_case

MANIFEST = "manifest.json"
KINDS = (".py", ".ipynb")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def verify(zip_path: Path) -> dict[str, Any]:
    """The manifest of a submission zip, after checking every file against its hash."""
    with zipfile.ZipFile(zip_path) as zf:
        manifest = json.loads(zf.read(MANIFEST))
        listed = {f["path"]: f["sha256"] for f in manifest["files"]}
        present = set(zf.namelist()) - {MANIFEST}
        if present != set(listed):
            raise ValueError(f"{zip_path}: files {sorted(present ^ set(listed))} are not as the manifest lists them")
        for name, digest in listed.items():
            if sha256(zf.read(name)) != digest:
                raise ValueError(f"{zip_path}: {name} was changed after collection (hash mismatch)")
    return manifest


def unpack(zip_path: Path, folder: Path) -> list[str]:
    """Write the zip's top-level modules and notebooks into ``folder``; returns their names."""
    names = []
    with zipfile.ZipFile(zip_path) as zf:
        for name in zf.namelist():
            if Path(name).suffix in KINDS and "/" not in name and not name.startswith("."):
                (folder / name).write_bytes(zf.read(name))
                names.append(name)
    return names


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
    path = path or os.environ.get("RANKLAB_SUBMISSION")
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
