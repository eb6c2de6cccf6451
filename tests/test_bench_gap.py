"""bench/gap.py: its direct N x N definition of Eq. 6 and lab's decomposability_gap agree on the
benchmark's own data, and the section it writes holds a row per size. (Timings are never asserted.)"""
from __future__ import annotations

from bench import gap as bench_gap
from lab.metrics import decomposability_gap


def test_the_sort_and_the_engine_give_the_same_gap_on_the_benchmarks_data():
    for n in (300, 700):  # 3 and 6 batches of 128
        args = bench_gap.problem(n, seed=1)
        assert 0 < bench_gap.gap_by_sort(*args) < 1
        assert abs(decomposability_gap(*args) - bench_gap.gap_by_sort(*args)) < 1e-6


def test_the_section_has_a_row_per_size(capsys):
    rows = bench_gap.main(["--sizes", "64", "300", "--no-write"])
    assert [r["n"] for r in rows] == [64, 300] and all(r["diff"] < 1e-6 for r in rows)
    out = capsys.readouterr().out
    assert "| 64 |" in out and "| 300 |" in out and "<!--" not in out


def test_every_query_has_a_positive_in_its_batch_as_with_the_studies_sampler():
    _, labels, batch_ids = bench_gap.problem(1000, seed=2)
    in_batch = (labels[:, None] == labels[None, :]) & (batch_ids[:, None] == batch_ids[None, :])
    assert (in_batch.sum(1) >= bench_gap.M).all()  # itself and at least M - 1 others
    assert batch_ids.bincount().max() == bench_gap.BATCH
