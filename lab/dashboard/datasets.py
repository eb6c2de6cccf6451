"""The dashboard's datasets, drawn or read once per process for every session that trains or shows them.

Twelve students on the default settings train on the same glyphs: the first page (or worker process)
that needs a data configuration builds it, every later one gets it from here. Each caller gets its
own shallow copy (the images and labels shared, read only): a trainer swaps a dataset's transform
for a moment (the decomposability probe embeds the train split with the evaluation transform), and
one session's swap must never be another's augmentation.
"""
from __future__ import annotations

import copy
import json
import threading
from collections import OrderedDict
from typing import Any

from ..train import TrainConfig
from ..train.loading import build_datasets

KEPT = 4  # data configurations kept (a glyph set of 200 + 200 classes is ~20 MB)
_kept: "OrderedDict[str, tuple]" = OrderedDict()
_building: dict[str, threading.Lock] = {}
_lock = threading.Lock()


def data_key(config: TrainConfig) -> str:
    """What the datasets of ``config`` depend on: every field but the loss and its hyper-parameters (a
    field the data do not read merely keeps two equal sets apart)."""
    fields: dict[str, Any] = {k: v for k, v in config.to_dict().items() if k not in ("loss", "loss_kwargs")}
    return json.dumps(fields, sort_keys=True, default=str)


def shared_datasets(config: TrainConfig) -> tuple:
    """(train split, test split, evaluation transform) of ``config``: built once per process and
    configuration, each call a copy of its own (see the module's doc)."""
    key = data_key(config)
    with _lock:
        building = _building.setdefault(key, threading.Lock())
    with building:  # two pages asking at once: one builds, the other waits for it
        with _lock:
            found = _kept.get(key)
            if found is not None:
                _kept.move_to_end(key)
        if found is None:
            found = build_datasets(config)
            with _lock:
                _kept[key] = found
                while len(_kept) > KEPT:
                    _kept.popitem(last=False)
    train, test, eval_transform = found
    return copy.copy(train), copy.copy(test), eval_transform


def clear() -> None:
    """Forget every kept dataset (tests)."""
    with _lock:
        _kept.clear()
        _building.clear()
