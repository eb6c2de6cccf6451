"""The options of retrieval_metrics are one record (lab.metrics.options.RetrievalOptions): the
functions' keywords are its fields, each bad value gets one line naming it, and the record is frozen."""
from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch

from lab.metrics import RetrievalOptions, per_query_metrics, retrieval_metrics

FIELDS = {f.name: f.default for f in dataclasses.fields(RetrievalOptions)}


@pytest.mark.parametrize("fn", [retrieval_metrics, per_query_metrics])
def test_the_keywords_are_the_records_fields_with_its_defaults(fn):
    params = inspect.signature(fn).parameters
    data = ["query_emb", "query_labels", "ref_emb", "ref_labels"]
    assert list(params)[:4] == data
    options = {name: p.default for name, p in params.items() if name not in data}
    assert options == FIELDS
    assert all(params[name].kind is inspect.Parameter.KEYWORD_ONLY for name in FIELDS)


def test_every_field_is_described_where_it_is_declared():
    source = inspect.getsource(RetrievalOptions)
    for name in FIELDS:  # a field line followed by its docstring
        line = next(i for i, text in enumerate(source.splitlines()) if text.strip().startswith(f"{name}:"))
        assert source.splitlines()[line + 1].strip().startswith('"""'), name


BAD = [("ks", 0, "ks must be"), ("ks", [1, -2], "ks must be"), ("backend", "annoy", "backend must be"),
       ("chunk_size", 0, "chunk_size must be"), ("alpha", -1.0, "alpha must be"),
       ("method", "heap", "method must be one of"), ("memory_budget", "lots", "memory_budget must be")]


@pytest.mark.parametrize("name, value, message", BAD)
def test_a_bad_value_gets_one_line_naming_it(name, value, message):
    emb, labels = torch.randn(6, 3), torch.tensor([0, 0, 1, 1, 2, 2])
    for make in (lambda: RetrievalOptions(**{name: value}), lambda: retrieval_metrics(emb, labels, **{name: value}),
                 lambda: per_query_metrics(emb, labels, **{name: value})):
        with pytest.raises(ValueError, match=message) as info:
            make()
        assert "\n" not in str(info.value) and repr(value) in str(info.value)


def test_an_unknown_keyword_names_the_accepted_ones():
    with pytest.raises(TypeError, match="unexpected keyword argument 'k': the options are ks, backend") as info:
        retrieval_metrics(torch.randn(4, 2), torch.tensor([0, 0, 1, 1]), k=3)
    assert all(name in str(info.value) for name in FIELDS)


def test_the_record_is_frozen_and_normalised():
    options = RetrievalOptions(ks=[1, 5], memory_budget="1MB")
    assert options.ks == (1, 5) and options.memory_budget == 2**20
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.ks = (1,)
    assert RetrievalOptions() == RetrievalOptions(ks=(1, 2, 4, 8))


def test_keywords_reach_the_computation():
    g = torch.Generator().manual_seed(0)
    emb, labels = torch.randn(60, 4, generator=g), torch.arange(60) % 6
    out = retrieval_metrics(emb, labels, ks=(1, 3), full_map=False, chunk_size=7)
    assert set(out) == {"R@1", "R@3", "mAP@R", "num_queries", "excluded_queries"}
    assert out["R@1"] == retrieval_metrics(emb, labels, ks=1, method="sort")["R@1"]
