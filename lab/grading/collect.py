"""Pack a student's work for submission (the grading side: :mod:`lab.grading.submission`).

    python -m lab.grading.collect STUDENT_DIR -o submission.zip [--assignment NAME]
                                  [--max-mb 5] [--strip-outputs] [--no-checks] [--timeout 300]

The zip holds the assignment's module(s) and notebook (plus any other top-level .py/.ipynb
the student wrote) and ``manifest.json``: file hashes and the self-check results. Nothing
else — data, checkpoints and caches are left out — and its size is capped.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Optional

from .. import __version__
from .assignments import ASSIGNMENTS, Assignment, find_assignment
from .topic_checks import CHECKS
from .submission import KINDS, MANIFEST, import_modules, load_submission, sha256, verify

__all__ = ["collect", "select_files", "run_self_checks", "main",
           "load_submission", "verify"]  # the last two: hidden-test files generated before they moved import them here


def _strip_outputs(data: bytes) -> bytes:
    import nbformat

    nb = nbformat.reads(data.decode(), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nbformat.writes(nb).encode()


def select_files(folder: Path, assignment: Assignment) -> tuple[list[Path], list[str]]:
    """(files to pack, 'name (why)' for what is left out). The assignment's own files must exist."""
    required = [assignment.notebook, *assignment.modules]
    missing = [f for f in required if not (folder / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} lacks {', '.join(missing)} (assignment {assignment.name})")
    keep, left_out = [], []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.name == "__pycache__":  # caches are not the student's work
            continue
        if path.is_file() and path.suffix in KINDS:
            keep.append(path)
        else:
            left_out.append(f"{path.name} ({'folder' if path.is_dir() else 'not a module or notebook'})")
    return keep, left_out


def run_self_checks(folder: Path, assignment: Assignment, timeout: float = 300) -> list[dict[str, Any]]:
    """The assignment's checks on the student's functions, in a subprocess (a hang or a crash stays there)."""
    cmd = [sys.executable, "-m", "lab.grading.collect", "--self-check", str(folder), "--assignment", assignment.name]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        problem = f"the self-checks did not finish within {timeout:.0f} s (an endless loop?)"
    except (json.JSONDecodeError, IndexError):
        problem = f"the self-checks could not run: {(proc.stderr or proc.stdout).strip()[-1500:]}"
    return [dict(function=f, check=c, passed=False, message=problem) for f, c in assignment.checks]


def _self_check_here(folder: Path, assignment: Assignment) -> list[dict[str, Any]]:
    try:
        ns = import_modules(folder, assignment)
    except Exception as exc:  # the module itself is broken: every check fails with that reason
        return [dict(function=f, check=c, passed=False, message=f"importing your module failed: "
                     f"{type(exc).__name__}: {exc}") for f, c in assignment.checks]
    results = []
    for function, check in assignment.checks:
        try:
            CHECKS[check](ns[function], verbose=False)
            results.append(dict(function=function, check=check, passed=True, message="passed"))
        except Exception as exc:
            results.append(dict(function=function, check=check, passed=False, message=str(exc)[:4000]))
    return results


def collect(folder: Path, output: Path, assignment: Optional[str] = None, max_mb: float = 5.0,
            strip_outputs: bool = False, self_checks: bool = True, timeout: float = 300) -> dict[str, Any]:
    """Write the submission zip; return its manifest."""
    folder = Path(folder).resolve()
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a folder")
    found = ASSIGNMENTS[assignment] if assignment else find_assignment(folder.name, {p.name for p in folder.iterdir()})
    files, left_out = select_files(folder, found)
    blobs = {}
    for path in files:
        data = path.read_bytes()
        blobs[path.name] = _strip_outputs(data) if strip_outputs and path.suffix == ".ipynb" else data
    total = sum(map(len, blobs.values()))
    if total > max_mb * 2**20:
        sizes = ", ".join(f"{n} {len(b) / 2**20:.1f} MB" for n, b in sorted(blobs.items(), key=lambda x: -len(x[1])))
        raise ValueError(f"the submission would be {total / 2**20:.1f} MB, over the {max_mb:g} MB limit ({sizes}). "
                         "Clear the notebook outputs (Kernel > Restart & Clear Output) or use --strip-outputs.")
    import torch

    manifest = {
        "assignment": found.name,
        "created_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "lab_version": __version__, "python": platform.python_version(), "torch": torch.__version__,
        "files": [{"path": n, "sha256": sha256(b), "bytes": len(b)} for n, b in blobs.items()],
        "left_out": left_out,
        "self_checks": run_self_checks(folder, found, timeout) if self_checks else [],
    }
    passed = sum(r["passed"] for r in manifest["self_checks"])
    manifest["summary"] = (f"{passed}/{len(manifest['self_checks'])} self-checks passed" if self_checks
                           else "self-checks not run")
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in blobs.items():
            zf.writestr(name, data)
        zf.writestr(MANIFEST, json.dumps(manifest, indent=2))
    return manifest


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.grading.collect", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="the student's assignment folder")
    parser.add_argument("-o", "--output", type=Path, default=Path("submission.zip"))
    parser.add_argument("--assignment", choices=sorted(ASSIGNMENTS), help="default: guessed from the folder")
    parser.add_argument("--max-mb", type=float, default=5.0, help="size limit of the zip's content (default 5 MB)")
    parser.add_argument("--strip-outputs", action="store_true", help="clear the notebook outputs in the zip")
    parser.add_argument("--no-checks", action="store_true", help="do not run the self-checks")
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed for the self-checks")
    parser.add_argument("--self-check", action="store_true", help=argparse.SUPPRESS)  # the subprocess side
    args = parser.parse_args(argv)
    if args.self_check:
        found = ASSIGNMENTS[args.assignment]
        results = _self_check_here(args.folder.resolve(), found)
        sys.stdout.write("\n" + json.dumps(results) + "\n")
        return
    try:
        manifest = collect(args.folder, args.output, args.assignment, args.max_mb, args.strip_outputs,
                           not args.no_checks, args.timeout)
    except (OSError, ValueError) as exc:
        parser.exit(2, f"collect: {exc}\n")
    print(f"wrote {args.output}: {', '.join(f['path'] for f in manifest['files'])} + {MANIFEST}")
    for name in manifest["left_out"]:
        print(f"  left out: {name}")
    for r in manifest["self_checks"]:
        print(f"  {'✓' if r['passed'] else '✗'} {r['check']}({r['function']})"
              + ("" if r["passed"] else f": {r['message'].splitlines()[0]}"))
    print(manifest["summary"])


if __name__ == "__main__":
    main()
