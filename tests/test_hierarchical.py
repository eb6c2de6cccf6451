"""Hierarchical relevance, H-AP / NDCG / ASI metrics and the Sup-H-AP / Sup-NDCG losses (SupRank Sec. V)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import lab.losses as L
import lab.losses.functional as LF
from lab.core.relevance import build_relevance, hap_relevance, ndcg_relevance, shared_levels, wap_relevance
from lab.metrics import asi, average_precision, graded_ranks, h_ap, ndcg, retrieval_metrics
from tests.reference_graded import (asi_loop, assert_same_values_and_grads, h_ap_loop, hap_relevance_loop, level_loop,
                                    ndcg_loop, sup_hap_loop, sup_ndcg_loop, wap_relevance_loop)
from tests.test_losses_inputs import LargestTensor

# Appendix B, Fig. 13-14: a "Lada #2" query; relevances 1 (Lada #2), 2/3 (another Lada), 1/3 (a car),
# 0 (another vehicle). Both rankings put a Lada #2 at ranks 2 and 5; rank 1 holds a Lada (top row,
# the less severe mistake) or a car (bottom row). The paper gives AP 0.45 for both, H-AP 0.78 vs
# 0.67, and H-rank^+(2) = 5/3 vs 4/3 (Fig. 4).
LADA_SCORES = torch.tensor([[0.9, 0.8, 0.7, 0.6, 0.5]] * 2, dtype=torch.float64)
LADA_RELEVANCE = torch.tensor([[2 / 3, 1, 0, 1 / 3, 1], [1 / 3, 1, 0, 1 / 3, 1]], dtype=torch.float64)


def random_levels(q, n, num, seed, tie_grid=None):
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(q, n, generator=g, dtype=torch.float64)
    if tie_grid:
        scores = (scores * tie_grid).round() / tie_grid  # many ties
    levels = torch.randint(0, num + 1, (q, n), generator=g)
    levels[:, : num + 1] = torch.arange(num + 1)  # every level present in every row
    mask = torch.rand(q, n, generator=g) > 0.1
    mask[:, : num + 1] = True
    return scores, levels, mask


def rows(*tensors):
    return zip(*[t.tolist() for t in tensors])


# ------------------------------------------------------------------------------ relevance
def test_levels_are_the_deepest_shared_label_column():
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 2, (12, 3), generator=g)
    refs = torch.randint(0, 2, (9, 3), generator=g)
    want = [[level_loop(a, b) for b in refs.tolist()] for a in labels.tolist()]
    assert shared_levels(labels, refs).tolist() == want
    assert shared_levels(labels[:, 0], refs[:, 0]).tolist() == (labels[:, :1] == refs[:, 0]).long().tolist()


def test_eq20_total_weights_for_three_levels():
    """Sec. V-A1: for L = 3 and alpha = 1 the levels weigh 1, 2/3, 1/3 and 0 (one item each here)."""
    query = torch.tensor([[2, 0, 0]])  # model "Lada #2", brand "Lada", type "Cars"
    items = torch.tensor([[2, 0, 0], [1, 0, 0], [5, 3, 0], [7, 4, 1]])  # Lada #2, Lada #1, another car, a bus
    rel = build_relevance(query, items)
    torch.testing.assert_close(rel, torch.tensor([[1, 2 / 3, 1 / 3, 0]]))


@pytest.mark.parametrize("alpha", [0.0, 1.0, 3.0])
def test_hap_and_wap_relevance_match_loops(alpha):
    _, levels, mask = random_levels(4, 20, 3, seed=1)
    weights = [0.5, 0.3, 0.2]  # label columns, finest first
    hap = hap_relevance(levels, 3, mask, alpha=alpha)
    wap = wap_relevance(levels, 3, mask, weights=weights)
    for lev, m, h, w in rows(levels, mask, hap, wap):
        torch.testing.assert_close(torch.tensor(h), torch.tensor(hap_relevance_loop(lev, m, 3, alpha)))
        by_paper_level = {3: weights[0], 2: weights[1], 1: weights[2]}
        torch.testing.assert_close(torch.tensor(w), torch.tensor(wap_relevance_loop(lev, m, by_paper_level)))
    assert ndcg_relevance(levels, mask).tolist() == ((2.0 ** levels - 1) * mask).tolist()


def test_wap_relevance_sums_to_one():
    """Eq. 48-56 of the proof of Property 1."""
    _, levels, mask = random_levels(5, 30, 3, seed=2)
    torch.testing.assert_close(wap_relevance(levels, 3, mask, weights=[0.2, 0.3, 0.5]).sum(1), torch.ones(5))


# ------------------------------------------------------------------------------- metrics
def test_lada_example_of_appendix_b():
    ap = average_precision(LADA_SCORES, LADA_RELEVANCE == 1)
    hap = h_ap(LADA_SCORES, LADA_RELEVANCE)
    torch.testing.assert_close(ap, torch.tensor([0.45, 0.45], dtype=torch.float64))
    assert abs(float(hap[0]) - 0.78) < 0.005 and abs(float(hap[1]) - 0.67) < 0.005
    h_rank = graded_ranks(LADA_SCORES, LADA_RELEVANCE).h_rank_plus[:, 1]  # instance 2, a Lada #2
    torch.testing.assert_close(h_rank, torch.tensor([5 / 3, 4 / 3], dtype=torch.float64))


def test_h_ap_equals_ap_for_binary_labels():
    scores, levels, mask = random_levels(6, 25, 1, seed=3, tie_grid=8)
    rel = hap_relevance(levels, 1, mask)
    torch.testing.assert_close(h_ap(scores, rel, mask), average_precision(scores, levels == 1, mask))


@pytest.mark.parametrize("tie_grid", [None, 6])
def test_property_1_h_ap_is_the_weighted_sum_of_level_aps(tie_grid):
    scores, levels, mask = random_levels(8, 30, 3, seed=4, tie_grid=tie_grid)
    weights = torch.distributions.Dirichlet(torch.ones(3)).sample().tolist()
    rel = wap_relevance(levels, 3, mask, weights=weights)
    weighted = sum(w * average_precision(scores, levels >= 3 - i, mask) for i, w in enumerate(weights))
    torch.testing.assert_close(h_ap(scores, rel, mask), weighted)


@pytest.mark.parametrize("tie_grid", [None, 5])
def test_graded_metrics_match_loops(tie_grid):
    scores, levels, mask = random_levels(5, 18, 3, seed=5, tie_grid=tie_grid)
    rel = hap_relevance(levels, 3, mask, alpha=2.0).double()
    gains = ndcg_relevance(levels, mask).double()
    got_hap, got_ndcg, got_asi = h_ap(scores, rel, mask), ndcg(scores, gains, mask), asi(scores, levels, mask)
    for i, (s, r, gain, lev, m) in enumerate(rows(scores, rel, gains, levels, mask)):
        assert got_hap[i].item() == pytest.approx(h_ap_loop(s, r, m))
        assert got_ndcg[i].item() == pytest.approx(ndcg_loop(s, gain, m))
        assert got_asi[i].item() == pytest.approx(asi_loop(s, [x * v for x, v in zip(lev, m)], m))


def test_perfect_ranking_scores_one_and_mistakes_score_less():
    # Equal level sizes, so Eq. 20's relevance decreases with the level (|Omega^(l)| could invert it).
    levels = torch.tensor([[3, 3, 2, 2, 1, 1, 0]])
    ideal = torch.tensor([[0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]])
    swapped = torch.tensor([[0.9, 0.8, 0.7, 0.5, 0.6, 0.4, 0.3]])  # a level-1 item above a level-2 one
    for metric, rel in ((h_ap, hap_relevance(levels, 3)), (ndcg, ndcg_relevance(levels)), (asi, levels)):
        assert metric(ideal, rel).item() == pytest.approx(1.0)
        assert metric(swapped, rel).item() < 1.0


def test_query_without_positive_is_nan_with_a_warning():
    with pytest.warns(RuntimeWarning, match="no positive"):
        out = h_ap(torch.rand(2, 4), torch.tensor([[0.0, 1, 0, 0], [0, 0, 0, 0]]))
    assert out[0].isfinite() and out[1].isnan()


# ------------------------------------------------------------------------ loss properties
@st.composite
def graded_problems(draw):
    q, n = draw(st.integers(1, 3)), draw(st.integers(2, 7))
    grid = st.integers(-8, 8).map(lambda x: x / 8)  # coarse grid: ties and large gaps both occur
    scores = torch.tensor(draw(st.lists(st.lists(grid, min_size=n, max_size=n), min_size=q, max_size=q)),
                          dtype=torch.float64)
    rel = torch.tensor(draw(st.lists(st.lists(st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0, 3.0]), min_size=n,
                                              max_size=n), min_size=q, max_size=q)), dtype=torch.float64)
    rel[:, 0] = torch.where(rel[:, 0] > 0, rel[:, 0], torch.ones(q, dtype=torch.float64))  # a positive per query
    return scores, rel


@settings(max_examples=60, deadline=None)
@given(graded_problems(), st.sampled_from([(0.01, 100.0, 0.05), (0.1, 0.0, 0.0), (0.5, 10.0, 0.2)]))
def test_sup_losses_upper_bound_the_metric_losses(problem, hparams):
    scores, rel = problem
    tau, rho, delta = hparams
    kw = dict(reduction="none", tau=tau, rho=rho, delta=delta)
    assert (LF.sup_hap(scores, rel, **kw) >= 1 - h_ap(scores, rel) - 1e-12).all()
    assert (LF.sup_ndcg(scores, rel, **kw) >= 1 - ndcg(scores, rel) - 1e-12).all()


@pytest.mark.parametrize("tie_grid", [None, 6])
def test_sup_losses_match_loops_values_and_gradients(tie_grid):
    scores, levels, mask = random_levels(4, 12, 2, seed=6, tie_grid=tie_grid)
    scores.requires_grad_(True)
    rel = hap_relevance(levels, 2, mask).double()
    gains = ndcg_relevance(levels, mask).double()
    for fn, loop, r in ((LF.sup_hap, sup_hap_loop, rel), (LF.sup_ndcg, sup_ndcg_loop, gains)):
        got = fn(scores, r, mask=mask, reduction="none")
        want = torch.stack([loop(list(s), r_.tolist(), m.tolist()) for s, r_, m in zip(scores, r, mask)])
        assert_same_values_and_grads(got, want, scores)


def test_binary_relevance_gives_sup_ap():
    scores, levels, mask = random_levels(5, 16, 1, seed=7)
    targets = levels == 1
    torch.testing.assert_close(LF.sup_hap(scores, targets.double() * 0.3, mask=mask),
                               LF.sup_ap(scores, targets, mask=mask))
    emb, labels = torch.randn(24, 8), torch.arange(6).repeat_interleave(4)
    torch.testing.assert_close(L.SupHAP()(emb, labels), L.SupAP()(emb, labels))


@pytest.mark.parametrize("name", ["sup_hap", "sup_ndcg"])
def test_chunked_equals_unchunked_and_gradcheck(name):
    scores, levels, mask = random_levels(5, 9, 2, seed=8)
    scores.requires_grad_(True)
    rel = hap_relevance(levels, 2, mask).double()
    fn = getattr(LF, name)
    whole = fn(scores, rel, mask=mask, reduction="none")
    chunked = fn(scores, rel, mask=mask, reduction="none", chunk_size=2)
    assert_same_values_and_grads(chunked, whole, scores)
    small = scores[:3, :7].detach().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda s: fn(s, rel[:3, :7], mask=mask[:3, :7], tau=0.1), (small,))


def test_embedding_level_builds_relevance_over_the_batch_without_the_query():
    g = torch.Generator().manual_seed(9)
    fine = torch.arange(8).repeat_interleave(3)
    labels = torch.stack([fine, fine // 4], 1)
    emb = torch.randn(len(fine), 6, generator=g, dtype=torch.float64)
    e = F.normalize(emb, dim=1)
    mask = ~torch.eye(len(fine), dtype=torch.bool)
    for loss, fn, kind in ((L.SupHAP(alpha=2.0), LF.sup_hap, "hap"), (L.SupNDCG(), LF.sup_ndcg, "ndcg")):
        rel = build_relevance(labels, labels, mask, kind, alpha=2.0)
        torch.testing.assert_close(loss(emb, labels), fn(e @ e.T, rel, mask=mask))
    wap = L.SupHAP(relevance="wap", weights=[0.7, 0.3])(emb, labels)
    rel = build_relevance(labels, labels, mask, "wap", weights=[0.7, 0.3])
    torch.testing.assert_close(wap, LF.sup_hap(e @ e.T, rel, mask=mask))


@pytest.mark.parametrize("cls", [L.SupHAP, L.SupNDCG])
def test_hierarchical_losses_hold_no_cubic_tensor(cls):
    batch, per_class, per_coarse = 256, 4, 8  # P = 4 * 8 - 1 = 31 items of relevance > 0
    fine = torch.arange(batch // per_class).repeat_interleave(per_class)
    labels = torch.stack([fine, fine // per_coarse], 1)
    emb = torch.randn(batch, 32, requires_grad=True)
    with LargestTensor() as probe:
        cls()(emb, labels).backward()
    assert probe.largest <= batch * (per_class * per_coarse - 1) * batch
    assert probe.largest < batch**3 / 5


# -------------------------------------------------------------------------- retrieval
@pytest.mark.filterwarnings("ignore:.*have no positive")  # queries alone in their class are left out anyway
def test_retrieval_metrics_hierarchical_keys():
    g = torch.Generator().manual_seed(10)
    fine = torch.randint(0, 12, (90,), generator=g)
    labels = torch.stack([fine, fine // 4], 1)
    emb = torch.randn(90, 8, generator=g)
    out = retrieval_metrics(emb, labels, backend="torch", chunk_size=17, level_names=["model", "brand"])
    e = F.normalize(emb, dim=1)
    scores, mask = e @ e.T, ~torch.eye(90, dtype=torch.bool)
    kept = ((fine[:, None] == fine[None, :]) & mask).any(1)
    levels = shared_levels(labels, labels)
    expected = {"H-AP": h_ap(scores, build_relevance(labels, labels, mask), mask),
                "NDCG": ndcg(scores, build_relevance(labels, labels, mask, "ndcg"), mask),
                "ASI": asi(scores, levels * mask, mask),
                "AP@model": average_precision(scores, levels >= 2, mask),
                "AP@brand": average_precision(scores, levels >= 1, mask)}
    for key, values in expected.items():
        assert out[key] == pytest.approx(float(values[kept].mean()), abs=1e-5)
    assert out["AP@model"] == pytest.approx(out["mAP"])
    assert retrieval_metrics(emb, labels, backend="faiss", level_names=["model", "brand"]) == pytest.approx(out)
    flat = retrieval_metrics(emb, fine, backend="torch")
    assert set(flat) == {"R@1", "R@2", "R@4", "R@8", "mAP@R", "mAP", "num_queries", "excluded_queries"}
    assert retrieval_metrics(emb, labels[:, :1], backend="torch") == flat


# -------------------------------------------------------------------------- bad inputs
def test_bad_graded_inputs_raise_clear_errors():
    scores = torch.rand(2, 4)
    with pytest.raises(ValueError, match="relevance must have the shape"):
        LF.sup_hap(scores, torch.rand(2, 3))
    with pytest.raises(ValueError, match="relevance must be >= 0"):
        LF.sup_ndcg(scores, torch.tensor([[1.0, -0.5, 0, 0], [1, 0, 0, 0]]))
    with pytest.raises(ValueError, match="relevance contains NaN"):
        h_ap(scores, torch.tensor([[1.0, float("nan"), 0, 0], [1, 0, 0, 0]]))
    with pytest.raises(ValueError, match="L=2 levels but ref_labels have L=3"):
        build_relevance(torch.zeros(3, 2, dtype=torch.long), torch.zeros(4, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="ref_labels levels"):
        L.SupHAP()(torch.randn(3, 4), torch.zeros(3, 2, dtype=torch.long), torch.randn(5, 4),
                   torch.zeros(5, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="L=2 levels but ref_labels have L=1"):
        retrieval_metrics(torch.randn(3, 4), torch.zeros(3, 2, dtype=torch.long), torch.randn(5, 4),
                          torch.zeros(5, dtype=torch.long), backend="torch")
    with pytest.raises(ValueError, match="weights must be 2 numbers"):
        L.SupHAP(relevance="wap", weights=[0.5, 0.3])
    with pytest.raises(ValueError, match="weights must be 3 numbers"):
        L.SupHAP(relevance="wap", weights=[0.5, 0.5])(torch.randn(4, 3), torch.zeros(4, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="relevance must be one of"):
        L.SupHAP(relevance="dcg")
    with pytest.raises(ValueError, match=r"hap_alpha must be a number in \[0, 10\]"):
        L.SupHAP(alpha=-1.0)
    with pytest.raises(ValueError, match="level_names must be 2"):
        retrieval_metrics(torch.randn(4, 3), torch.zeros(4, 2, dtype=torch.long), backend="torch", level_names=["a"])
