"""Where a number came from: the code, the libraries and the machine that produced a run.

A study record without this cannot say which code trained it (issue 33: 15 of 45 runs of protocol v2
finished after a change to the loss definitions, and no record could show it). ``provenance()`` is
cheap (one ``git`` call and a hash of ``lab``'s own sources, ~50 ms) and never raises: outside a git
checkout the commit is None and the source hash still identifies the code.

Since issue 43 a record also names faiss's and torchvision's versions (None where not installed), the CPU
model (``/proc/cpuinfo``'s "model name") and its vector instruction sets (:func:`cpu_features`) and, given the
run's datasets, a hash of what they hold (:func:`dataset_hash`: their sizes, labels and a sample of rendered
images). Records from before lack those fields and stay valid: nothing reads them to find a run (a run's key
hashes its config).
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Optional

from .env import scheduler_variables

PACKAGE = Path(__file__).resolve().parents[1]  # lab/
CHECKOUT = PACKAGE.parent


def source_hash(root: Path = PACKAGE) -> str:
    """sha1 over lab's ``*.py`` files (relative path and bytes, in sorted order): equal hashes, equal code,
    whether or not the tree is committed."""
    digest = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _git(checkout: Path, *args: str) -> Optional[str]:
    try:
        done = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None  # unstripped: porcelain lines start with a space


def code_version(checkout: Path = CHECKOUT, package: str = PACKAGE.name) -> dict[str, Any]:
    """{"commit", "dirty", "dirty_files", "source_hash"}: the checkout's HEAD (None outside git) and the
    files of the package that differ from it (only its code: a study rewrites results/ while it runs)."""
    commit = (_git(checkout, "rev-parse", "HEAD") or "").strip() or None
    changed = _git(checkout, "status", "--porcelain", "--untracked-files=all", "--", package) if commit else None
    files = sorted(line[3:] for line in (changed or "").splitlines() if line.strip())
    return {"commit": commit, "dirty": bool(files) if commit else None, "dirty_files": files[:20],
            "source_hash": source_hash(checkout / package)}


def distribution_version(*names: str) -> Optional[str]:
    """The installed version of the first of ``names`` (distribution names, e.g. faiss-cpu) found, else None."""
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


# The vector units a float32 kernel can be dispatched to (oneDNN, MKL): "model name" does not tell them apart on a
# virtual machine ("Intel(R) Xeon(R) Processor" on two machines whose runs' bits differed, 2026-11-29), nor does
# torch's capability string ("AVX512" on both; the second also had AMX and AVX512-FP16).
VECTOR_FLAGS = ("sse", "ssse", "avx", "amx", "fma", "f16c")


def _cpuinfo_field(name: str, cpuinfo: Path) -> Optional[str]:
    """The value of the first ``name`` line of ``/proc/cpuinfo`` (Linux); None where there is none."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.split(":")[0].strip() == name:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> Optional[str]:
    """The CPU's vector instruction sets, sorted, from the first "flags" line of ``/proc/cpuinfo`` (Linux), e.g.
    "amx_bf16 ... avx512f ... fma"; None where it cannot be read."""
    flags = (_cpuinfo_field("flags", cpuinfo) or "").split()
    return " ".join(sorted(f for f in flags if f.startswith(VECTOR_FLAGS))) or None


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> Optional[str]:
    """The CPU's "model name" (Linux), else what ``platform.processor()`` says, else None."""
    return _cpuinfo_field("model name", cpuinfo) or platform.processor() or None


def dataset_hash(datasets: Mapping[str, Any], sample: int = 8) -> Optional[str]:
    """sha1 (16 hex) of what ``datasets`` ({split: dataset with ``labels``, ``len`` and ``image(i)``}) hold: each
    split's name, size and labels, and ``sample`` of its images evenly spread (their pixels as rendered). Cheap
    (a few images drawn) and the same in every process for the same data; None if a dataset cannot be read."""
    import numpy

    digest = hashlib.sha1()
    try:
        for split in sorted(datasets):
            ds = datasets[split]
            n = len(ds)
            digest.update(f"{split}:{n}:".encode())
            digest.update(numpy.ascontiguousarray(numpy.asarray(ds.labels)).tobytes())
            for i in sorted({round(k * (n - 1) / max(1, sample - 1)) for k in range(sample)} if n else ()):
                digest.update(numpy.ascontiguousarray(numpy.asarray(ds.image(i))).tobytes())
    except Exception:  # noqa: BLE001 (provenance never raises: a record without the hash still records the rest)
        return None
    return digest.hexdigest()[:16]


def provenance(device: str = "cpu", threads: Optional[int] = None,
               datasets: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """Everything a record needs to say what produced it (the run's seed and config are the record's own);
    ``datasets``: the run's {split: dataset}, for :func:`dataset_hash` (None without them)."""
    import numpy
    import torch

    out: dict[str, Any] = {
        **code_version(),
        "torch": torch.__version__, "numpy": numpy.__version__, "python": sys.version.split()[0],
        "torchvision": distribution_version("torchvision"),
        "faiss": distribution_version("faiss-cpu", "faiss-gpu", "faiss-gpu-cu12", "faiss-gpu-cu11", "faiss"),
        "cpu_model": cpu_model(), "cpu_features": cpu_features(),
        "dataset_hash": dataset_hash(datasets) if datasets is not None else None,
        "device": str(device), "threads": threads if threads is not None else torch.get_num_threads(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores", "host": platform.node(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
    }
    if str(device).startswith("cuda") and torch.cuda.is_available():
        out["accelerator"] = torch.cuda.get_device_name(torch.device(device))
        out["cuda"] = torch.version.cuda
    return out


# Where a run ran on a cluster (issue 44): the scheduler's variables a job sees, under the record's names.
SLURM_FIELDS = {"slurm_job_id": "SLURM_JOB_ID", "slurm_array_job_id": "SLURM_ARRAY_JOB_ID",
                "slurm_array_task_id": "SLURM_ARRAY_TASK_ID", "slurm_restart_count": "SLURM_RESTART_COUNT",
                "slurm_partition": "SLURM_JOB_PARTITION"}


def where_it_ran(device: str = "cpu") -> dict[str, Any]:
    """The host, the SLURM job (its id, its array's id and index, how often it was requeued, its partition: those
    set in this process's environment, none outside SLURM), the GPUs it was given (CUDA_VISIBLE_DEVICES) and the
    GPU's name (None off CUDA). Kept apart from :func:`provenance`, which says what code and libraries ran."""
    out: dict[str, Any] = {"host": platform.node()}
    found = scheduler_variables((*SLURM_FIELDS.values(), "CUDA_VISIBLE_DEVICES"))
    out.update({name: found[var] for name, var in SLURM_FIELDS.items() if found.get(var)})
    if "CUDA_VISIBLE_DEVICES" in found:
        out["cuda_visible_devices"] = found["CUDA_VISIBLE_DEVICES"]
    out["gpu"] = None
    if str(device).startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            out["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return out
