"""Read a submission zip without trusting it: streamed, bounded, and never outside its folder.

A zip made by ``python -m lab.grading.collect`` holds a handful of flat text files (at most 5 MB of
content), so anything far beyond that is refused before it can cost the grader memory or disk:

* the zip file itself, its number of entries and the sizes its headers declare are checked first;
* an entry named with ``..``, an absolute path, a drive letter or a backslash, and a symbolic link,
  are refused (nothing is written outside the scratch folder);
* every entry is then read CHUNK bytes at a time and counted as it comes out of the decompressor,
  because the sizes in the headers can lie: past the total limit, or past ``max_ratio`` times its
  compressed size (a zip bomb), the read stops with :class:`UnsafeZip`. No entry is ever held in
  memory whole.
"""
from __future__ import annotations

import hashlib
import os
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator

from ..core.files import write_atomic

CHUNK = 1 << 16
RATIO_FLOOR = 1 << 20  # an entry must unpack to this many bytes before its ratio counts: small text compresses well


@dataclass(frozen=True)
class Limits:
    """What one submission zip may hold. The defaults are 10x what ``collect`` ever packs."""

    max_bytes: int = 50 * 2**20  # unpacked size of all its entries together
    max_entries: int = 200
    max_ratio: float = 200.0  # unpacked / compressed size of one entry (notebooks reach ~10)


class UnsafeZip(ValueError):
    """A zip refused before or while reading it; the message names the limit it broke."""


def _mb(n: float) -> str:
    return f"{n / 2**20:g} MB"


def check_entries(zf: zipfile.ZipFile, label: str, limits: Limits) -> list[zipfile.ZipInfo]:
    """The entries of ``zf`` once their count, names, kinds and declared sizes are within ``limits``."""
    infos = zf.infolist()
    if len(infos) > limits.max_entries:
        raise UnsafeZip(f"{label} holds {len(infos)} entries, over the limit of {limits.max_entries}")
    for info in infos:
        name = info.filename
        parts = PurePosixPath(name).parts
        if "\\" in name or name.startswith("/") or ".." in parts or (len(name) > 1 and name[1] == ":"):
            raise UnsafeZip(f"{label}: entry {name!r} points outside its folder (absolute path, drive or '..')")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise UnsafeZip(f"{label}: entry {name!r} is a symbolic link")
    declared = sum(i.file_size for i in infos)
    if declared > limits.max_bytes:
        raise UnsafeZip(f"{label} would unpack to {_mb(declared)}, over the {_mb(limits.max_bytes)} limit")
    return infos


def chunks(zf: zipfile.ZipFile, info: zipfile.ZipInfo, label: str, limits: Limits, used: int = 0) -> Iterator[bytes]:
    """The bytes of one entry, CHUNK at a time; ``used``: bytes already read from this zip (the total limit)."""
    out = 0
    with zf.open(info) as f:
        while chunk := f.read(CHUNK):
            out += len(chunk)
            if used + out > limits.max_bytes:
                raise UnsafeZip(f"{label} unpacks to more than {_mb(limits.max_bytes)} (the limit; at entry "
                                f"{info.filename!r})")
            if out > RATIO_FLOOR and out > limits.max_ratio * max(info.compress_size, 1):
                raise UnsafeZip(f"{label}: entry {info.filename!r} expands more than {limits.max_ratio:g}x its "
                                f"compressed size (the limit; a zip bomb?)")
            yield chunk


def open_zip(path: Path, limits: Limits) -> zipfile.ZipFile:
    """``path`` opened, after checking its own size: a zip's directory is read into memory."""
    if os.path.getsize(path) > limits.max_bytes:
        raise UnsafeZip(f"{Path(path).name} is {_mb(os.path.getsize(path))}, over the {_mb(limits.max_bytes)} limit")
    return zipfile.ZipFile(path)


def read_small(zf: zipfile.ZipFile, name: str, label: str, max_bytes: int = 2**20) -> bytes:
    """One entry read whole, refused beyond ``max_bytes`` (a manifest)."""
    return b"".join(chunks(zf, zf.getinfo(name), label, Limits(max_bytes=max_bytes)))


def sha256_entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo, label: str, limits: Limits, used: int = 0) -> str:
    digest = hashlib.sha256()
    for chunk in chunks(zf, info, label, limits, used):
        digest.update(chunk)
    return digest.hexdigest()


def extract(path: Path, folder: Path, keep: Callable[[str], bool], limits: Limits = Limits()) -> list[str]:
    """Write the flat entries of the zip at ``path`` for which ``keep(name)`` holds into ``folder``.

    Each file appears whole or not at all (a temporary file, then os.replace), so a refusal halfway
    leaves no truncated module to be graded."""
    label, folder, names, used = Path(path).name, Path(folder).resolve(), [], 0
    with open_zip(path, limits) as zf:
        for info in check_entries(zf, label, limits):
            if info.is_dir() or "/" in info.filename or not keep(info.filename):
                continue
            target = folder / info.filename
            if target.parent != folder:  # check_entries refused every way out; this is the last guard
                raise UnsafeZip(f"{label}: entry {info.filename!r} points outside its folder")
            written = []  # the chunks' sizes: write_atomic's callback cannot rebind ``used``

            def copy(out, info=info) -> None:
                for chunk in chunks(zf, info, label, limits, used):
                    out.write(chunk)
                    written.append(len(chunk))

            write_atomic(target, copy)  # the mode a plain open() gives, not mkstemp's owner-only 0o600
            used += sum(written)
            names.append(info.filename)
    return names
