"""Which data a dashboard server may read, and how large a model it builds: the operator's choice, made when
it starts.

By default the embedded datasets only (glyphs, digits: drawn, never read from the disk). The
operator offers disk datasets with ``RANKLAB_APP_DATA``: entries ``NAME=FOLDER`` separated by the
path separator (``:`` on Linux and macOS, ``;`` on Windows), NAME one of cub, sop, inaturalist or
folder (a bare FOLDER is a "folder" dataset: one sub-folder per class), e.g.

    RANKLAB_APP_DATA=cub=/data/CUB_200_2011:folder=/data/class_photos make app

A link (or anything else a page sends) picks among those and nothing else: a dataset or a folder
the server does not offer is refused in one line, before any path is looked at. A folder is
compared with the operator's as text (``os.path.normpath``: no file is read to compare), and the
server then reads the operator's folder, never the link's spelling of it.

A page may name any timm model, and a link too. The server builds none with more parameters than
``RANKLAB_APP_MAX_PARAMS`` (default 100 M: vit_base and convnext_base train, the 0.8-4.3 B giants whose
weights with Adam's state fill the machine's memory do not), counted on the meta device before anything
is built, e.g. ``make app MAX_PARAMS=25M``.

Nor does it start more than its memory holds. A session's ask is the trainer's estimate
(:func:`lab.train.footprint.needs`: weights, gradients and Adam's moments, a batch and its activations), computed
from the settings on the meta device before anything is built (0.4-1.8 s the first time a page names a timm model,
then cached). The open pages' sessions hold their asks together, paused ones included (a paused run keeps its
model), within the host memory available when the server started (:func:`pool_memory`; the pool reads it again once
its workers are ready, :meth:`lab.dashboard.pool.Pool.worker_ready`): six compare sessions of convnext_base ask for
24 GB, all of a 24 GB machine, and each alone fits, so the trainer's own check (what is free when a run starts) let
all six start. For a class, the operator also caps each session, ``RANKLAB_APP_SESSION_MEMORY`` (``make app
SESSION_MEMORY=3GB``): no page then takes more than its share, and the pages together hold at most the share times
the sessions that train at once (:func:`training_places`).
"""
from __future__ import annotations

import functools
import os
from typing import Optional

import torch

from ..core.budget import parse_budget
from ..core.env import (APP_DATA_ENV as DATA_ENV, APP_MAX_PARAMS_ENV, APP_SESSION_MEMORY_ENV, app_data_text,
                        app_max_params, app_session_memory_text, dashboard_workers, runs_per_worker)
from ..data import EMBEDDED
from ..models import parameter_count
from ..train.footprint import available_bytes
DISK = ("cub", "sop", "inaturalist", "folder")


def offered() -> dict[str, tuple[str, ...]]:
    """{dataset: the folders it may be read from} this server offers ("" for the embedded ones), in the
    order of ``DATASETS`` (embedded first). A malformed entry is an error naming it (the server does not
    start on a configuration it cannot read)."""
    found: dict[str, list[str]] = {name: [""] for name in EMBEDDED}
    for entry in filter(None, (e.strip() for e in app_data_text().split(os.pathsep))):
        name, sep, folder = entry.partition("=")
        if not sep:
            name, folder = "folder", entry
        name, folder = name.strip(), folder.strip()
        if name not in DISK or not folder:
            raise ValueError(f"{DATA_ENV}: {entry!r} is not NAME=FOLDER with NAME one of {', '.join(DISK)}")
        found.setdefault(name, [])
        if folder not in found[name]:
            found[name].append(folder)
    return {name: tuple(folders) for name, folders in found.items()}


def dataset_label(name: str) -> str:
    """How a page's dataset menu names ``name``: "glyphs (embedded)", "cub (from disk)"."""
    return f"{name} (embedded)" if name in EMBEDDED else f"{name} (from disk)"


def _same_folder(a: str, b: str) -> bool:
    return bool(a.strip()) and os.path.normpath(a.strip()) == os.path.normpath(b)


def refusal(dataset: str, root: str) -> Optional[str]:
    """Why this server will not read ``dataset`` from ``root`` (one line), or None when it offers it."""
    data = offered()
    if dataset not in data:
        return f"this server does not offer the dataset {dataset!r} (it offers: {', '.join(data)})"
    if dataset in EMBEDDED or any(_same_folder(root, f) for f in data[dataset]) or not root.strip():
        return None  # an empty root: the operator's first folder
    offers = ", ".join(data[dataset])
    return f"this server does not read {dataset} data from that folder (the operator offers: {offers})"


def allowed_root(dataset: str, root: str) -> str:
    """The folder the server reads ``dataset`` from for ``root``: the operator's spelling of it, its first
    folder for an empty ``root``, "" for an embedded dataset. Call after :func:`refusal` said None."""
    if dataset in EMBEDDED:
        return ""
    folders = offered()[dataset]
    return next((f for f in folders if _same_folder(root, f)), folders[0])


def millions(count: int) -> str:
    """A parameter count in millions, as the page and ``make app`` write it: "100 M", "843.6 M"."""
    return f"{count / 1e6:,.1f}".removesuffix(".0") + " M"


def model_refusal(model: str) -> Optional[str]:
    """Why this server will not build ``model`` (one line), or None when its size is within the operator's
    limit. Call with a name :func:`lab.models.check_model_name` accepts. Counted with RGB input (a grey
    dataset's first layer is a little smaller: the count is "about")."""
    limit = app_max_params()
    try:
        count = parameter_count(model)
    except Exception as e:  # noqa: BLE001 - every timm 1.0.31 model builds on the meta device; a later one may not
        return (f"{model}: its size cannot be counted before it is built ({type(e).__name__}), and this server "
                f"builds only models it can count (at most {millions(limit)} parameters)")
    if count <= limit:
        return None
    return (f"{model} has about {millions(count)} parameters; this server builds models of at most "
            f"{millions(limit)} (its operator sets {APP_MAX_PARAMS_ENV})")


def available_memory() -> int:
    """The host memory available now (:func:`lab.train.footprint.available_bytes`)."""
    return available_bytes(torch.device("cpu"))


@functools.lru_cache(maxsize=1)
def memory_at_start() -> int:
    """The host memory available the first time this process asks: a server asks on its first page."""
    return available_memory()


def training_places() -> int:
    """The sessions this server trains at once: its workers times the runs each trains (1 with
    ``RANKLAB_WORKERS=0``, whose threads have no cap)."""
    workers = dashboard_workers()
    return workers * runs_per_worker() if workers else 1


def session_memory() -> tuple[int, str, str]:
    """(the bytes one session's runs may ask for, that amount and why, as a page and ``make app`` word them:
    "3GB", "its operator sets ..."): the operator's cap, else all the memory the server had when it started.
    A malformed ``RANKLAB_APP_SESSION_MEMORY`` is a ValueError naming it."""
    text = app_session_memory_text()
    if text is not None:  # in the operator's words: parse_budget's GB is 2**30 bytes
        try:
            share = parse_budget(text, "a session's memory")
        except ValueError as e:
            raise ValueError(f"{APP_SESSION_MEMORY_ENV}={text!r}: {e}") from None
        return share, text, f"its operator sets {APP_SESSION_MEMORY_ENV}"
    total = memory_at_start()
    return total, f"{total / 1e9:.2f} GB", (f"all the memory it had when it started; its operator can set "
                                            f"{APP_SESSION_MEMORY_ENV} to share it")


def pool_memory() -> int:
    """What the open pages' sessions may hold together: the memory available when the server started, and no
    more than the operator's cap of a session times the sessions that train at once."""
    total = memory_at_start()
    if app_session_memory_text() is None:
        return total
    return min(total, session_memory()[0] * training_places())
