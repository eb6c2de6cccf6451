"""The exact metrics without a full sort (lab.metrics.counting, list_metrics, relevant) against
the sort-based oracle (lab.metrics.exact / hierarchical), scikit-learn and pytorch-metric-learning,
on random data full of ties."""
from __future__ import annotations

import itertools
import multiprocessing
import os
import threading

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

import lab.metrics.counting as counting
from lab.core.relevance import hap_relevance, shared_levels
from lab.metrics import asi, average_precision, h_ap, map_at_r, ndcg, recall_at_k, retrieval_metrics, true_recall_at_k
from lab.metrics.list_metrics import list_metrics
from lab.metrics.relevant import PAD, LabelIndex, Lists
from tests._counting import count_as_on_a_device

# The four ways count_at_least may count on the CPU: (COMPARISONS_PER_SCORE, MAX_PASSES, MAX_CELLS_PER_SCORE,
# SORT_COST); and the two of a GPU, run here on CPU tensors: DEVICE_MAX_PASSES.
STRATEGIES = {"compare": (1e9, 0, 1.0, np.inf), "passes": (0.0, 10**9, 0.0, np.inf), "grid": (0.0, 0, 1e9, np.inf),
              "sort": (0.0, 0, 0.0, 0.0), "device-broadcast": 10**9, "device-buckets": 0}


@pytest.fixture(params=list(STRATEGIES))
def strategy(request, monkeypatch):
    if request.param.startswith("device"):
        count_as_on_a_device(monkeypatch, STRATEGIES[request.param])
        return request.param
    compare, passes, cells, sort = STRATEGIES[request.param]
    monkeypatch.setattr(counting, "COMPARISONS_PER_SCORE", compare)
    monkeypatch.setattr(counting, "MAX_PASSES", passes)
    monkeypatch.setattr(counting, "MAX_CELLS_PER_SCORE", cells)
    monkeypatch.setattr(counting, "SORT_COST", sort)
    monkeypatch.setattr(counting, "SLAB_SCORES", 500)  # slabs of a few rows: their edges are exercised
    return request.param


def tied_scores(q, n, decimals, seed):
    """float32 scores on a grid of 10^-decimals: many exact ties."""
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(q, n, generator=g) * 2 - 1).mul(10**decimals).round().div(10**decimals).float()


# ----------------------------------------------------------------------------------- counting
@pytest.mark.parametrize("decimals", [1, 2, 5])
def test_counts_equal_brute_force(strategy, decimals):
    g = torch.Generator().manual_seed(decimals)
    scores = tied_scores(12, 200, decimals, seed=decimals)
    scores[torch.arange(12), torch.arange(12)] = float("-inf")  # the query's own entry never counts
    for p in (1, 7, 90):  # thresholds taken among the scores (ties with items), some padded
        picks = torch.randint(12, 200, (12, p), generator=g)
        t = scores.gather(1, picks).numpy().copy()
        t[::3, p // 2 :] = np.inf
        got = counting.count_at_least(scores, torch.from_numpy(t))
        assert got.at_least.dtype == got.among.dtype == torch.int64
        s = scores.numpy()
        for i in range(12):
            for j in range(p):
                if np.isfinite(t[i, j]):
                    assert got.at_least[i, j] == (s[i] >= t[i, j]).sum()
                    assert got.among[i, j] == (t[i][np.isfinite(t[i])] <= t[i, j]).sum()
                else:
                    assert got.at_least[i, j] == 0 and got.among[i, j] == 0


@pytest.mark.parametrize("threads", [2, 3])
def test_counts_split_over_threads_equal_one_thread(strategy, threads, monkeypatch):
    """Each thread counts its share of the rows: the same integers, and every row counted once."""
    monkeypatch.setattr(counting, "MIN_ROWS_PER_THREAD", 4)
    scores = tied_scores(40, 300, 2, seed=threads)
    t = scores[:, :9].clone().contiguous()
    t[::5, 4:] = float("inf")
    one = counting.count_at_least(scores, t)
    seen = []
    count = counting._count_numpy
    monkeypatch.setattr(counting, "_count_numpy", lambda s, t, cap: seen.append(len(t)) or count(s, t, cap))
    with counting.counting_threads(threads):
        split = counting.count_at_least(scores, t)
    assert sorted(seen) == sorted(np.diff(np.linspace(0, 40, threads + 1).astype(int)).tolist())
    assert torch.equal(one.at_least, split.at_least) and torch.equal(one.among, split.among)


def test_counting_threads_are_kept_between_calls_and_a_forked_child_starts_its_own(monkeypatch):
    monkeypatch.setattr(counting, "MIN_ROWS_PER_THREAD", 4)
    scores = tied_scores(40, 300, 2, seed=5)
    t = scores[:, :9].clone().contiguous()
    one = counting.count_at_least(scores, t)

    def pool_threads():
        return {th.ident for th in threading.enumerate() if th.name.startswith("ranklab-counting")}

    seen = set()
    with counting.counting_threads(2):
        for _ in range(8):
            assert torch.equal(counting.count_at_least(scores, t).at_least, one.at_least)
            seen |= pool_threads()
    assert 1 <= len(seen) <= counting._pool[0]  # the pool's threads, not new ones for every call
    # Several children: before the pool primed torch's threads, 6 % of children failed at random.
    for _ in range(CHILDREN):
        child = multiprocessing.get_context("fork").Process(target=_count_in_a_child, args=(scores, t, one.at_least))
        child.start()
        child.join(120)
        if child.exitcode is None:
            child.kill()
        assert child.exitcode == 0, child.exitcode  # None: it hung (the parent's pool has no thread there)


CHILDREN = 20


def test_a_new_counting_pool_sets_torchs_threads_before_its_threads_start(monkeypatch):
    # torch re-creates its own thread pool in a forked child on the first torch op of each thread, and
    # not thread-safely: the thread that builds the counting pool must do it before the pool's threads.
    calls = []
    set_threads = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads",
                        lambda n: calls.append((threading.current_thread().name, n)) or set_threads(n))
    monkeypatch.setattr(counting, "_pool", (0, None))
    monkeypatch.setattr(counting, "MIN_ROWS_PER_THREAD", 4)
    scores = tied_scores(40, 300, 2, seed=5)
    with counting.counting_threads(2):
        counting.count_at_least(scores, scores[:, :9].clone())
    assert calls == [(threading.current_thread().name, torch.get_num_threads())]


def _count_in_a_child(scores, t, want):
    counting.MIN_ROWS_PER_THREAD = 4
    with counting.counting_threads(2):
        os._exit(0 if torch.equal(counting.count_at_least(scores, t).at_least, want) else 1)


@pytest.mark.parametrize("full_map", [True, False])
def test_the_callers_threads_become_chunk_workers(monkeypatch, full_map):
    """On the CPU with T torch threads, T workers each count whole chunks with one thread (numpy and
    torch); with one thread the chunks run in order in the caller's thread. The same numbers, and the
    caller's thread count back afterwards."""
    import threading

    seen = []
    count = counting.count_at_least
    monkeypatch.setattr("lab.metrics.list_metrics.count_at_least", lambda s, t, cap: seen.append(
        (threading.get_ident(), counting._threads.get(), torch.get_num_threads())) or count(s, t, cap))
    emb = torch.nn.functional.normalize(torch.randn(400, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    labels = torch.arange(400) // 4
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        two = retrieval_metrics(emb, labels, chunk_size=10, full_map=full_map)
        assert torch.get_num_threads() == 2 and len(seen) == 40
        assert {(threads, torch_threads) for _, threads, torch_threads in seen} == {(1, 1)}
        workers = {ident for ident, _, _ in seen}
        assert len(workers) == 2 and threading.get_ident() not in workers
        seen.clear()
        torch.set_num_threads(1)
        one = retrieval_metrics(emb, labels, chunk_size=10, full_map=full_map)
        assert {ident for ident, _, _ in seen} == {threading.get_ident()}
    finally:
        torch.set_num_threads(before)
    assert one == two


def test_each_worker_holds_its_share_of_the_budget(monkeypatch):
    """Two workers, two chunks in memory at once: each chunk's score block (and the bool mask the
    counting makes of it, chunking.SCORE_BYTES) within half the budget."""
    import lab.metrics.chunking as chunking
    import lab.metrics.retrieval as retrieval

    blocks = []
    real = retrieval.list_metrics
    monkeypatch.setattr(retrieval, "list_metrics",
                        lambda scores, *a, **k: blocks.append(scores.numel() * chunking.SCORE_BYTES["cpu"])
                        or real(scores, *a, **k))
    emb = torch.randn(3000, 8, generator=torch.Generator().manual_seed(1))
    labels = torch.arange(3000) // 6
    budget = 4 * 2**20  # each worker's half: 87 queries a chunk, more than MIN_WORKER_ROWS
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            blocks.clear()
            retrieval_metrics(emb, labels, memory_budget=budget)
            assert budget / (2 * threads) < max(blocks) <= budget / threads  # within its share, and filling it
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("decimals", [1, 2, 5])
def test_capped_counts_are_exact_up_to_the_cap_and_beyond_after(strategy, decimals):
    g = torch.Generator().manual_seed(40 + decimals)
    scores = tied_scores(24, 200, decimals, seed=40 + decimals)
    t = scores.gather(1, torch.randint(0, 200, (24, 9), generator=g)).contiguous()
    t[::4, 5:] = float("inf")
    cap = torch.randint(0, 120, (24,), generator=g)
    got = counting.count_at_least(scores, t, cap)
    full = counting.count_at_least(scores, t)
    s = scores.numpy()
    for i in range(24):
        for j in range(9):
            exact = int((s[i] >= t[i, j].item()).sum()) if torch.isfinite(t[i, j]) else 0
            assert got.at_least[i, j] == (exact if exact <= cap[i] else counting.BEYOND)
    assert torch.equal(got.among, full.among)


def test_the_sort_is_timed_once_per_row_length_and_chosen_by_its_time(monkeypatch):
    monkeypatch.setattr(counting, "SORT_COST", None)
    monkeypatch.setattr(counting, "_sort_costs", {})
    cost = counting._sort_cost(1000)
    assert 0 < cost < np.inf and counting._sort_costs == {1024: cost}
    assert counting._sort_cost(600) == cost and counting._sort_cost(1025) != cost  # 1,024 and 2,048 long rows
    # Many thresholds over most of the row (a coarse level on hard data): the sort unless it is dear.
    scores = tied_scores(16, 1000, 6, seed=3)
    t = scores[:, :100].clone()
    sorted_ = []
    by_sorting = counting._by_sorting
    monkeypatch.setattr(counting, "_by_sorting", lambda s, t: sorted_.append(1) or by_sorting(s, t))
    want = counting.count_at_least(scores, t)
    for timed, sorts in ((0.5, True), (1e6, False)):
        counting._sort_costs[1024] = timed
        sorted_.clear()
        got = counting.count_at_least(scores, t)
        assert bool(sorted_) == sorts and torch.equal(got.at_least, want.at_least)


class _Comparisons:
    """numpy, recording how many score rows the comparison passes read."""

    def __init__(self) -> None:
        self.rows = 0

    def __getattr__(self, name):
        return getattr(np, name)

    def greater_equal(self, a, b, out=None):
        self.rows += len(a)
        return np.greater_equal(a, b, out=out)


@pytest.mark.parametrize("cap, passes", [(0, "one per row"), (10**6, "one per threshold")])
def test_capped_passes_leave_a_row_at_its_first_count_above_the_cap(monkeypatch, cap, passes):
    monkeypatch.setattr(counting, "SLAB_SCORES", 500)
    recorded = _Comparisons()
    monkeypatch.setattr(counting, "np", recorded)
    scores = tied_scores(30, 100, 3, seed=7)
    t = scores[:, 10:17].clone().numpy()
    t[::3, 4:] = np.inf
    at_least, _ = counting._by_capped_passes(scores.numpy(), t, np.full(30, cap))
    finite = int(np.isfinite(t).sum())
    assert recorded.rows == (30 if passes == "one per row" else finite)
    assert (at_least[np.isfinite(t)] == counting.BEYOND).all() if cap == 0 else (at_least < counting.BEYOND).all()


# ------------------------------------------------------------------------ per-query metrics
def lists_from_levels(levels: torch.Tensor) -> Lists:
    """Dense (Q, N) levels -> lists of the items of level > 0 (test helper, no label index)."""
    rows = [torch.nonzero(r > 0).squeeze(1).numpy() for r in levels]
    width = max(len(r) for r in rows)
    items = np.full((len(rows), width), PAD)
    for i, r in enumerate(rows):
        items[i, : len(r)] = r[np.random.default_rng(i).permutation(len(r))]  # lists need no order
    lev = np.where(items == PAD, 0, np.take_along_axis(levels.numpy(), np.maximum(items, 0), 1))
    return Lists(torch.from_numpy(items), torch.from_numpy(lev))


@pytest.mark.parametrize("decimals", [1, 2, 6])
def test_binary_metrics_equal_the_sort_oracle_and_sklearn(strategy, decimals):
    scores = tied_scores(16, 120, decimals, seed=10 + decimals)
    g = torch.Generator().manual_seed(decimals)
    targets = torch.rand(16, 120, generator=g) < 0.15
    targets[:, 0] = True
    ks = (1, 2, 4, 8, 30)
    got = list_metrics(scores, lists_from_levels(targets.long()), 1, ks)
    np.testing.assert_allclose(got["mAP"], average_precision(scores, targets).numpy(), atol=1e-6)
    np.testing.assert_allclose(got["mAP@R"], map_at_r(scores, targets).numpy(), atol=1e-6)
    want = recall_at_k(scores, targets, k=list(ks)).numpy()
    for j, k in enumerate(ks):
        np.testing.assert_array_equal(got[f"R@{k}"], want[:, j])
    for i in range(16):  # pessimistic ties are scikit-learn's
        sk = average_precision_score(targets[i].numpy(), scores[i].double().numpy())
        assert abs(got["mAP"][i] - sk) < 1e-9


@pytest.mark.parametrize("decimals", [1, 2, 6])
def test_top_of_the_list_metrics_without_full_map_equal_the_full_ones(strategy, decimals):
    scores = tied_scores(20, 150, decimals, seed=30 + decimals)
    targets = torch.rand(20, 150, generator=torch.Generator().manual_seed(decimals)) < 0.1
    targets[:, 0] = True
    # Row 0: 8 positives tied at the top with one negative. rank = 9 > max(R, k) = 8, yet R@2 = 1:
    # the cap must leave room for k - 1 negatives above R positives.
    scores[0], targets[0] = -0.5, False
    scores[0, :9], targets[0, 1:9] = 0.9, True
    ks = (1, 2, 4, 8)
    lists = lists_from_levels(targets.long())
    full, top = list_metrics(scores, lists, 1, ks), list_metrics(scores, lists, 1, ks, full_map=False)
    assert set(top) == set(full) - {"mAP"}
    for key in top:
        torch.testing.assert_close(top[key], full[key], rtol=0, atol=0)
    assert top["R@2"][0] == 1 and top["R@1"][0] == 0


def test_full_map_false_is_for_flat_labels():
    emb = torch.nn.functional.normalize(torch.randn(40, 4, generator=torch.Generator().manual_seed(0)), dim=1)
    labels = torch.stack([torch.arange(40) // 4, torch.arange(40) // 8], 1)
    with pytest.raises(ValueError, match="full_map"):
        retrieval_metrics(emb, labels, full_map=False)
    with pytest.raises(ValueError, match="full_map"):
        list_metrics(emb @ emb.T, lists_from_levels((labels[:, None, 0] == labels[None, :, 0]).long()), 1, (1,),
                     graded=True, full_map=False)


@pytest.mark.parametrize("num, decimals, alpha", [(2, 1, 1.0), (2, 6, 1.0), (3, 2, 0.5), (3, 1, 2.0)])
def test_graded_metrics_equal_the_sort_oracle(strategy, num, decimals, alpha):
    scores = tied_scores(14, 150, decimals, seed=20 + num + decimals)
    g = torch.Generator().manual_seed(num * 10 + decimals)
    levels = torch.randint(0, num + 1, (14, 150), generator=g)
    levels[:, 0] = num  # every query has a positive of the finest level
    keys = [f"AP@level{i}" for i in range(num)]
    got = list_metrics(scores, lists_from_levels(levels), num, (1,), alpha, graded=True, level_keys=keys)
    want = {"H-AP": h_ap(scores, hap_relevance(levels, num, alpha=alpha)),
            "NDCG": ndcg(scores, 2.0 ** levels.float() - 1),
            "ASI": asi(scores, levels.float())}
    want |= {key: average_precision(scores, levels >= num - i) for i, key in enumerate(keys)}
    for key, values in want.items():
        np.testing.assert_allclose(got[key], values.numpy(), atol=2e-6, err_msg=key)


# ------------------------------------------------------------------------- relevant lists
@pytest.mark.parametrize("tree", [True, False])
def test_lists_hold_every_relevant_item_with_its_level(tree):
    g = torch.Generator().manual_seed(5)
    fine = torch.randint(0, 30, (120,), generator=g)
    coarse = fine // 6 if tree else torch.randint(0, 4, (120,), generator=g)
    labels = torch.stack([fine, coarse, coarse // 2 if tree else torch.randint(0, 3, (120,), generator=g)], 1)
    index = LabelIndex(labels[:40], labels, all_levels=True)
    assert index.tree == tree
    widths = index.widths(labels[:40].numpy())
    assert widths.shape == (40, 1 if tree else 3)
    lists = index.lists(labels[:40], widths.max(0).tolist(), torch.arange(40))
    assert lists.items.shape[1] == widths.max(0).sum()  # the width the host planned for
    dense = shared_levels(labels[:40], labels)
    dense[torch.arange(40), torch.arange(40)] = 0  # the query itself is left out
    for i in range(40):
        listed = {int(j): int(level) for j, level in zip(lists.items[i], lists.levels[i]) if j != PAD}
        assert listed == {j: int(dense[i, j]) for j in torch.nonzero(dense[i]).squeeze(1).tolist()}


# ---------------------------------------------------------------------- embedding level
def tied_embeddings(n, dim, seed):
    """Coordinates on a coarse grid and exact duplicates: tied similarities everywhere."""
    g = torch.Generator().manual_seed(seed)
    emb = torch.randint(-2, 3, (n, dim), generator=g).float()
    emb[emb.abs().sum(1) == 0, 0] = 1.0
    emb[1::9] = emb[0::9][: len(emb[1::9])]  # duplicates (same class or not)
    return emb


@pytest.mark.parametrize("backend", ["torch", "faiss"])
def test_retrieval_metrics_equal_the_sort_path(strategy, backend):
    g = torch.Generator().manual_seed(7)
    n = 260
    emb = tied_embeddings(n, 4, seed=7)
    fine = torch.randint(0, 45, (n,), generator=g)
    two = torch.stack([fine, fine // 5], 1)
    three = torch.stack([fine, fine // 5, fine // 15], 1)
    untree = torch.stack([fine, torch.randint(0, 5, (n,), generator=g)], 1)
    for labels, kw in [(fine, {}), (two, {"level_names": ["a", "b"]}), (three, {"alpha": 0.5}), (untree, {})]:
        for chunk_size in (None, 23):
            fast = retrieval_metrics(emb, labels, backend=backend, chunk_size=chunk_size, **kw)
            slow = retrieval_metrics(emb, labels, backend=backend, chunk_size=chunk_size, method="sort", **kw)
            assert fast.keys() == slow.keys()
            for key in fast:
                assert fast[key] == pytest.approx(slow[key], abs=1e-6), (key, labels.shape)
            if labels.dim() == 1:  # R@k and mAP@R alone: the same numbers, from the same chunks
                top = retrieval_metrics(emb, labels, backend=backend, chunk_size=chunk_size, full_map=False)
                assert top == {key: value for key, value in fast.items() if key != "mAP"}
                sorted_top = retrieval_metrics(emb, labels, backend=backend, chunk_size=chunk_size, method="sort",
                                               full_map=False)
                assert sorted_top == pytest.approx(top, abs=1e-6) and sorted_top.keys() == top.keys()


def test_retrieval_metrics_with_a_gallery_equal_the_sort_path(strategy):
    g = torch.Generator().manual_seed(8)
    q_emb, r_emb = tied_embeddings(70, 3, seed=1), tied_embeddings(150, 3, seed=2)
    q_lab = torch.stack([torch.randint(0, 12, (70,), generator=g)] * 2, 1)
    r_lab = torch.stack([torch.randint(0, 14, (150,), generator=g)] * 2, 1)
    q_lab[:, 1] //= 4
    r_lab[:, 1] //= 4
    for q, r in [(q_lab[:, 0], r_lab[:, 0]), (q_lab, r_lab)]:
        fast = retrieval_metrics(q_emb, q, r_emb, r, backend="torch", ks=(1, 5, 100))
        slow = retrieval_metrics(q_emb, q, r_emb, r, backend="torch", ks=(1, 5, 100), method="sort")
        assert fast == pytest.approx(slow, abs=1e-6)
    top = retrieval_metrics(q_emb, q_lab[:, 0], r_emb, r_lab[:, 0], ks=(1, 5, 100), full_map=False)
    fast = retrieval_metrics(q_emb, q_lab[:, 0], r_emb, r_lab[:, 0], ks=(1, 5, 100))
    assert top == {key: value for key, value in fast.items() if key != "mAP"}


def test_flat_retrieval_sorts_no_gallery_row(monkeypatch):
    """Complexity guard: with classes of 8 images no score array longer than a class is sorted."""
    g = torch.Generator().manual_seed(9)
    centres = torch.randn(60, 16, generator=g)
    labels = torch.arange(60).repeat_interleave(8)
    emb = centres[labels] + 0.3 * torch.randn(480, 16, generator=g)
    longest = []
    real_sort, real_argsort = np.sort, np.argsort

    def spy(real):
        def wrapped(a, *args, **kwargs):
            if np.issubdtype(np.asarray(a).dtype, np.floating):  # scores; label arrays may be sorted
                longest.append(np.shape(a)[-1])
            return real(a, *args, **kwargs)
        return wrapped

    monkeypatch.setattr(np, "sort", spy(real_sort))
    monkeypatch.setattr(np, "argsort", spy(real_argsort))
    real_torch_sort = torch.sort  # the references' int64 keys of the check for copies: N numbers, once

    def torch_sort(x, *args, **kwargs):
        if x.is_floating_point():
            return pytest.fail("torch.sort called on scores")
        return real_torch_sort(x, *args, **kwargs)

    monkeypatch.setattr(torch, "sort", torch_sort)
    out = retrieval_metrics(emb, labels, backend="torch", chunk_size=50)
    assert out["num_queries"] == 480 and max(longest, default=0) <= 8


def test_same_r1_and_map_at_r_as_pytorch_metric_learning():
    """AccuracyCalculator (k="max_bin_count") finds its neighbours with faiss (L2 distance, its own
    order among equal distances) and removes the query by index, as we do. Ties are ordered
    differently (ours: every item tied with a positive ranks above it, even another positive), so
    the data has no tie (or near tie) between a positive and any other item of its row."""
    calculator = pytest.importorskip("pytorch_metric_learning.utils.accuracy_calculator")
    g = torch.Generator().manual_seed(20)  # a seed whose data passes the check below
    labels = torch.randint(0, 16, (160,), generator=g)
    emb = torch.nn.functional.normalize(torch.randn(160, 8, generator=g), dim=1)
    sims = (emb @ emb.T).double()
    same = labels[:, None] == labels[None, :]
    for i, (row, positive) in enumerate(zip(sims, same)):
        positive[i] = False
        gaps = (row[positive][:, None] - row[None, :]).abs()
        gaps[torch.arange(len(gaps)), torch.nonzero(positive).squeeze(1)] = 1.0  # a positive with itself
        gaps[:, i] = 1.0  # the query is removed
        assert (gaps > 5e-6).all()
    ours = retrieval_metrics(emb, labels, backend="torch")
    theirs = calculator.AccuracyCalculator(include=("precision_at_1", "mean_average_precision_at_r"),
                                           k="max_bin_count", device=torch.device("cpu")).get_accuracy(emb, labels)
    assert ours["R@1"] == pytest.approx(theirs["precision_at_1"], abs=1e-9)
    assert ours["mAP@R"] == pytest.approx(theirs["mean_average_precision_at_r"], abs=1e-6)


def test_method_must_be_known():
    with pytest.raises(ValueError, match="method must be one of"):
        retrieval_metrics(torch.randn(6, 3), torch.tensor([0, 0, 1, 1, 2, 2]), method="heap")


def _worst_case_hits(scores: list[float], targets: list[bool], k: int) -> int:
    """Fewest positives in the top k over every order of the items consistent with the scores
    (tied items in any order): the pessimistic tie convention, by brute force."""
    best = None
    for order in itertools.permutations(range(len(scores))):
        if any(scores[a] < scores[b] for a, b in zip(order, order[1:])):
            continue
        hits = sum(targets[i] for i in order[:k])
        best = hits if best is None else min(best, hits)
    return best


def test_recall_at_k_breaks_ties_against_the_query_but_not_between_positives():
    g = torch.Generator().manual_seed(3)
    for _ in range(40):
        n = 6
        scores = torch.randint(0, 3, (1, n), generator=g).float()  # many ties
        targets = torch.rand(1, n, generator=g) < 0.5
        targets[0, 0] = True
        ks = [1, 2, 3, 4]
        want_tr = torch.tensor([[_worst_case_hits(scores[0].tolist(), targets[0].tolist(), k) /
                                 min(k, int(targets.sum())) for k in ks]], dtype=torch.float32)
        torch.testing.assert_close(recall_at_k(scores, targets, k=ks), (want_tr > 0).float())
        torch.testing.assert_close(true_recall_at_k(scores, targets, k=ks), want_tr)
    # Two duplicate images of the query's class on top: R@1 = 1 in both methods of retrieval_metrics
    # (it was 0: the duplicates pushed each other down).
    emb = torch.tensor([[1.0, 0.0]] * 3 + [[0.0, 1.0]] * 3)
    labels = torch.tensor([0, 0, 0, 1, 1, 1])
    for method in ("sort", "count"):
        assert retrieval_metrics(emb, labels, backend="torch", method=method)["R@1"] == 1.0


@pytest.mark.parametrize("threads", [1, 2])
def test_the_top_of_the_list_path_compares_each_score_about_once(monkeypatch, threads):
    """Complexity guard (scores compared, never seconds): on data whose positives lie anywhere in the
    row (random embeddings, 7 positives a query), R@k and mAP@R alone (``full_map=False``) compare each
    score with about one threshold, where the full mAP compares it with each of the 7; on tied data with
    copies, both give the same R@k and mAP@R, with one chunk worker or two."""
    monkeypatch.setattr(counting, "SORT_COST", 100.0)  # the passes, whatever this machine's sort costs
    compared = []
    real = counting._count_row_by_row
    monkeypatch.setattr(counting, "_count_row_by_row",
                        lambda slab, t, out: compared.append(slab.size) or real(slab, t, out))
    g = torch.Generator().manual_seed(11)
    n = 2400
    emb, labels = torch.randn(n, 16, generator=g), torch.arange(n) // 8
    tied = torch.cat([tied_embeddings(n - 200, 3, seed=11), tied_embeddings(200, 3, seed=11)])  # ties and copies
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        top = retrieval_metrics(emb, labels, full_map=False)
        top_compared, compared[:] = sum(compared), []
        full = retrieval_metrics(emb, labels)
        full_compared = sum(compared)
        tied_top, tied_full = retrieval_metrics(tied, labels, full_map=False), retrieval_metrics(tied, labels)
    finally:
        torch.set_num_threads(before)
    scores = n * (n - 1)
    assert scores <= top_compared <= 1.1 * scores < 6 * scores <= full_compared
    assert top == {key: value for key, value in full.items() if key != "mAP"}
    assert tied_top == {key: value for key, value in tied_full.items() if key != "mAP"}


def test_an_error_in_a_worker_stops_the_chunks_not_yet_started(monkeypatch):
    """The first error reaches the caller, the chunks after it are dropped (not computed), and the
    caller's thread count is back."""
    import lab.metrics.retrieval as retrieval

    calls = []
    real = retrieval.list_metrics

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("chunk 3 failed")
        return real(*args, **kwargs)

    monkeypatch.setattr(retrieval, "list_metrics", failing)
    emb, labels = torch.randn(600, 4, generator=torch.Generator().manual_seed(2)), torch.arange(600) // 3
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with pytest.raises(RuntimeError, match="chunk 3 failed"):
            retrieval_metrics(emb, labels, chunk_size=5)  # 120 chunks
        assert torch.get_num_threads() == 2 and len(calls) < 20
    finally:
        torch.set_num_threads(before)


def test_workers_keep_chunks_of_a_useful_size():
    """As many workers as threads while each share of the budget holds MIN_WORKER_ROWS queries; fewer
    with a large gallery or a small budget; one on a GPU or with faiss; the threads with a chunk_size."""
    from lab.metrics.chunking import SCORE_BYTES
    from lab.metrics.parallel import MIN_WORKER_ROWS, chunk_workers

    cpu, row = torch.device("cpu"), SCORE_BYTES["cpu"] * MIN_WORKER_ROWS
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(4)
        assert chunk_workers(cpu, "torch", 1000, 4 * 1000 * row) == 4
        assert chunk_workers(cpu, "torch", 1000, 3 * 1000 * row) == 3
        assert chunk_workers(cpu, "torch", 1000, 1000 * row - 1) == 1
        assert chunk_workers(cpu, "torch", 10**6, 2**25, chunk_size=7) == 4
        assert chunk_workers(cpu, "faiss", 1000, 4 * 1000 * row) == 1
        assert chunk_workers(torch.device("cuda"), "torch", 1000, 4 * 1000 * row) == 1
    finally:
        torch.set_num_threads(before)
