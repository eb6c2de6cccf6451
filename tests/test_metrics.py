"""Exact metrics against scikit-learn and brute force; faiss and torch backends agree."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score

from lab.metrics import (average_precision, decomposability_gap, map_at_r, precision_at_1, recall_at_k,
                         retrieval_metrics, true_recall_at_k)

from . import reference as ref


def problem(q=10, n=25, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(q, n, generator=g, dtype=torch.float64)
    targets = torch.rand(q, n, generator=g) < 0.3
    mask = torch.rand(q, n, generator=g) > 0.2
    targets[:, 0] = mask[:, 0] = True  # every query has a positive
    return scores, targets, mask


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=15, max_size=15), st.lists(st.booleans(), min_size=15, max_size=15))
def test_ap_equals_sklearn_including_ties(levels, flags):
    if not any(flags):
        flags[0] = True
    scores = torch.tensor(levels, dtype=torch.float64)[None] / 4  # only 5 values: many ties
    targets = torch.tensor(flags)[None]
    want = average_precision_score(np.array(flags), np.array(levels, dtype=float))
    assert abs(float(average_precision(scores, targets)[0]) - want) < 1e-12


def test_mask_equals_dropping_the_items():
    scores, targets, mask = problem()
    got = average_precision(scores, targets, mask)
    for i in range(len(scores)):
        keep = mask[i]
        want = average_precision(scores[i, keep][None], targets[i, keep][None])[0]
        assert abs(got[i] - want) < 1e-12
        assert abs(got[i] - ref.ap_loop(scores[i].tolist(), targets[i].tolist(), keep.tolist())) < 1e-12


def test_rank_metrics_equal_brute_force():
    scores, targets, mask = problem(seed=1)
    ks = [1, 2, 4, 8]
    mapr = map_at_r(scores, targets, mask)
    rec = recall_at_k(scores, targets, mask, k=ks)
    trec = true_recall_at_k(scores, targets, mask, k=ks)
    p1 = precision_at_1(scores, targets, mask)
    for i in range(len(scores)):
        s, t, v = scores[i].tolist(), targets[i].tolist(), mask[i].tolist()
        assert abs(mapr[i] - ref.map_at_r_loop(s, t, v)) < 1e-12
        for j, k in enumerate(ks):
            assert rec[i, j] == ref.recall_loop(s, t, v, k)
            assert abs(trec[i, j] - ref.true_recall_loop(s, t, v, k)) < 1e-12
        assert p1[i] == ref.recall_loop(s, t, v, 1)
    assert recall_at_k(scores, targets, mask, k=4).shape == (len(scores),)


def test_properties_of_the_metrics():
    scores, targets, mask = problem(seed=2)
    assert torch.all(map_at_r(scores, targets, mask) <= average_precision(scores, targets, mask) + 1e-12)
    perfect = targets.double() + 0.01 * scores  # every positive above every negative
    for fn in (average_precision, map_at_r, precision_at_1):
        assert torch.allclose(fn(perfect, targets, mask), torch.ones(len(scores), dtype=torch.float64))
    rec = recall_at_k(scores, targets, mask, k=[1, 2, 4, 8, 16])
    assert torch.all(rec[:, 1:] >= rec[:, :-1])  # monotone in k


def test_ties_are_pessimistic():
    scores = torch.tensor([[0.5, 0.5, 0.1]])
    targets = torch.tensor([[True, False, False]])
    assert precision_at_1(scores, targets)[0] == 0  # tied with a negative at the top: a miss
    assert average_precision(scores, targets)[0] == 0.5


def test_query_without_positive_is_nan_with_a_warning():
    scores = torch.rand(2, 4)
    targets = torch.tensor([[False] * 4, [True, False, False, False]])
    with pytest.warns(RuntimeWarning, match="1 of 2 queries have no positive"):
        ap = average_precision(scores, targets)
    assert torch.isnan(ap[0]) and not torch.isnan(ap[1])


def brute_force_metrics(q_emb, q_lab, r_emb, r_lab, exclude_self, ks):
    q = torch.nn.functional.normalize(q_emb.double(), dim=1)
    r = torch.nn.functional.normalize(r_emb.double(), dim=1)
    sums, used = {f"R@{k}": 0.0 for k in ks} | {"mAP@R": 0.0, "mAP": 0.0}, 0
    for i in range(len(q)):
        items = [j for j in range(len(r)) if not (exclude_self and j == i)]
        s = [float(q[i] @ r[j]) for j in items]
        t = [bool(r_lab[j] == q_lab[i]) for j in items]
        if not any(t):
            continue
        used += 1
        v = [True] * len(items)
        for k in ks:
            sums[f"R@{k}"] += ref.recall_loop(s, t, v, k)
        sums["mAP@R"] += ref.map_at_r_loop(s, t, v)
        sums["mAP"] += ref.ap_loop(s, t, v)
    return {k: v / used for k, v in sums.items()}, used


@pytest.mark.parametrize("with_refs", [False, True])
def test_retrieval_metrics_brute_force_and_backends_agree(with_refs):
    g = torch.Generator().manual_seed(3)
    q_emb, q_lab = torch.randn(40, 8, generator=g), torch.randint(0, 8, (40,), generator=g)
    q_lab[-1] = 99  # alone in its class: excluded and counted
    r_emb, r_lab = ((torch.randn(30, 8, generator=g), torch.randint(0, 8, (30,), generator=g)) if with_refs
                    else (None, None))
    ks = (1, 2, 4, 8)
    want, used = brute_force_metrics(q_emb, q_lab, q_emb if r_emb is None else r_emb,
                                     q_lab if r_lab is None else r_lab, not with_refs, ks)
    results = [retrieval_metrics(q_emb, q_lab, r_emb, r_lab, ks=ks, backend=b, chunk_size=c)
               for b in ("faiss", "torch") for c in (None, 7)]
    for got in results:
        assert got["num_queries"] == used and got["excluded_queries"] == 40 - used
        for key, value in want.items():
            assert abs(got[key] - value) < 1e-5, key


def test_self_is_removed_by_index_not_by_column_zero():
    """A duplicate image of the query is a positive at distance 0, not the query itself."""
    emb = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.1, 1.0]])
    labels = torch.tensor([0, 0, 1, 1])
    for backend in ("faiss", "torch"):
        out = retrieval_metrics(emb, labels, backend=backend)
        assert out["R@1"] == 1.0 and out["mAP"] == 1.0


@pytest.mark.parametrize("seed", range(12))
def test_hierarchical_labels_use_the_finest_level(seed):
    """The same numbers to the bit: the coarse column changes how queries are chunked, not the sums
    (a third of the seeds differed in mAP's last bit when the sum followed the chunks' order)."""
    emb = torch.randn(20, 4, generator=torch.Generator().manual_seed(seed))
    fine_labels = torch.arange(5).repeat_interleave(4)
    two_level = torch.stack([fine_labels, fine_labels // 3], dim=1)
    a = retrieval_metrics(emb, fine_labels, backend="torch")
    b = retrieval_metrics(emb, two_level, backend="torch")
    assert all(a[k] == b[k] for k in a)


def test_retrieval_metrics_bad_input():
    emb, labels = torch.randn(6, 3), torch.tensor([0, 0, 1, 1, 2, 2])
    with pytest.raises(ValueError, match="backend"):
        retrieval_metrics(emb, labels, backend="annoy")
    with pytest.raises(ValueError, match="ks"):
        retrieval_metrics(emb, labels, ks=(0,))
    with pytest.raises(ValueError, match="no query"):
        retrieval_metrics(emb, torch.arange(6))
    with pytest.raises(ValueError, match="ref_emb has dim"):
        retrieval_metrics(emb, labels, torch.randn(4, 5), torch.tensor([0, 1, 2, 3]))


def test_decomposability_gap_of_the_toy():
    """ROADMAP Fig. 1b / supp. Fig. 9: AP = 1 inside each batch, below 1 globally."""
    # Unit vectors at angle theta from the query: similarity cos(theta). Batch 0: positives
    # at 0.1, 0.2 above a negative at 0.3; batch 1: positives at 0.5, 0.6 above a negative at
    # 0.7 -- each batch is perfectly ranked, but the batch-0 negative outranks batch 1's positives.
    theta = torch.tensor([0.0, 0.1, 0.2, 0.3, 0.5, 0.6, 0.7])  # item 0 is the query
    emb = torch.stack([torch.cos(theta), torch.sin(theta)], dim=1)
    labels = torch.tensor([0, 0, 0, 1, 0, 0, 1])
    batches = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    scores = torch.cos(theta[1:])[None].double()
    targets = (labels[1:] == 0)[None]
    assert float(average_precision(scores, targets)[0]) < 1
    for b in (0, 1):
        keep = batches[1:] == b
        assert float(average_precision(scores[:, keep], targets[:, keep])[0]) == 1.0

    # The estimator, by brute force: every item is a query; batch AP minus global AP.
    sims = (emb @ emb.T).tolist()
    gaps = []
    for i in range(7):
        others = [j for j in range(7) if j != i]
        in_batch = [j for j in others if batches[j] == batches[i]]
        t_all, t_b = [labels[j] == labels[i] for j in others], [labels[j] == labels[i] for j in in_batch]
        if any(t_b):
            gaps.append(ref.ap_loop([sims[i][j] for j in in_batch], t_b)
                        - ref.ap_loop([sims[i][j] for j in others], t_all))
    gap = decomposability_gap(emb, labels, batches)
    assert gap > 0 and abs(gap - sum(gaps) / len(gaps)) < 1e-6
    assert decomposability_gap(emb, labels, torch.zeros(7, dtype=torch.long)) == 0.0
