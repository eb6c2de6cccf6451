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


# The config's fields that build_datasets reads (loading.build_split: the dataset, where it is, its own
# arguments, and the transform's kind and size); a test traces build_datasets' reads against this list.
DATA_FIELDS = ("dataset", "data_root", "dataset_kwargs", "transform", "image_size")


def data_key(config: TrainConfig) -> str:
    """What the datasets of ``config`` depend on: the fields build_datasets reads, and nothing else. The seed,
    the batch, the loss or the run length of a student's run do not change its images: twelve students on
    twelve seeds share one set (keyed on every field, each seed drew its own, evicting the others)."""
    fields: dict[str, Any] = {name: getattr(config, name) for name in DATA_FIELDS}
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
