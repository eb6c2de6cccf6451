"""The dashboard's datasets are built once per process for every config that reads the same data (issue 46, item 3:
a page's first Start must not redo what another page already did)."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import lab.dashboard.datasets as datasets
from lab.dashboard.datasets import DATA_FIELDS, data_key, shared_datasets
from lab.train import TrainConfig
from lab.train.loading import build_datasets

GLYPHS = dict(dataset="glyphs", dataset_kwargs={"num_classes": 6}, image_size=32, batch_size=8, m=2, steps=5)


@pytest.fixture(autouse=True)
def _fresh():
    datasets.clear()
    yield
    datasets.clear()


class Reads:
    """A config that records every field read from it."""

    def __init__(self, config: TrainConfig) -> None:
        self._config, self.read = config, set()

    def __getattr__(self, name: str):
        self.read.add(name)
        return getattr(self._config, name)


def test_build_datasets_reads_only_the_fields_of_the_data_key():
    config = Reads(TrainConfig(**GLYPHS))
    build_datasets(config)
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert config.read & fields <= set(DATA_FIELDS), config.read
    assert config.read & fields, "the trace saw no read"


@pytest.mark.parametrize("change", [dict(seed=7), dict(lr=3e-3), dict(batch_size=12, m=3), dict(steps=100),
                                    dict(loss="smooth_ap"), dict(loss_kwargs={"tau": 0.05})])
def test_a_run_setting_the_data_do_not_read_shares_the_data(change, monkeypatch):
    built = []
    monkeypatch.setattr(datasets, "build_datasets", lambda c: built.append(c) or build_datasets(c))
    first = shared_datasets(TrainConfig(**GLYPHS))
    second = shared_datasets(TrainConfig(**{**GLYPHS, **change}))
    assert len(built) == 1
    assert torch.equal(first[0].pixels(), second[0].pixels()) and first[0] is not second[0]


@pytest.mark.parametrize("change", [dict(dataset_kwargs={"num_classes": 7}), dict(image_size=40),
                                    dict(transform="paper")])
def test_a_setting_the_data_read_builds_its_own(change, monkeypatch):
    built = []
    monkeypatch.setattr(datasets, "build_datasets", lambda c: built.append(c) or build_datasets(c))
    assert data_key(TrainConfig(**GLYPHS)) != data_key(TrainConfig(**{**GLYPHS, **change}))
    shared_datasets(TrainConfig(**GLYPHS))
    shared_datasets(TrainConfig(**{**GLYPHS, **change}))
    assert len(built) == 2


def test_each_caller_gets_its_own_copy_sharing_the_images():
    a, b = shared_datasets(TrainConfig(**GLYPHS)), shared_datasets(TrainConfig(**{**GLYPHS, "seed": 3}))
    a[0].transform = None  # a trainer's probe swaps the transform for a moment
    assert b[0].transform is not None
