"""How retrieval_metrics cuts its work into chunks (lab.metrics.chunking): the memory budget, the
chunk sizes it gives on a device, the largest tensor a call holds, and the same numbers whatever the
chunks. Sizes and counts of operations are asserted, never times."""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import lab.core.budget as lab_budget
import lab.metrics.chunking as chunking
from lab.metrics import retrieval_metrics
from lab.metrics.retrieval import _backend
from tests._counting import count_as_on_a_device

GIB = 2**30


class Probe(TorchDispatchMode):
    """Records the bytes of the largest tensor any op produces, and the ops that make a GPU wait
    for the host (a value read back, or an output whose size depends on the values)."""

    WAITS = {"_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_dim", "unique_consecutive",
             "bincount"}

    def __init__(self):
        super().__init__()
        self.largest, self.waits = 0, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.__name__.split(".")[0] in self.WAITS:
            self.waits.append(func.__name__.split(".")[0])
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel() * t.element_size())
        return out


def grid_embeddings(n: int, dim: int, seed: int) -> torch.Tensor:
    """Small integer coordinates whose norm is a power of two (1, 2 or 4): normalised, they stay
    exact in float32, so every cosine is exact whatever the chunk shape and the BLAS kernel (a
    2-thread product sums in another order than a 1-thread one), and ties are everywhere."""
    g = torch.Generator().manual_seed(seed)
    grid = torch.cartesian_prod(*[torch.arange(-2, 3)] * dim).float()
    grid = grid[torch.isin(grid.square().sum(1), torch.tensor([1.0, 4.0, 16.0]))]
    return grid[torch.randint(0, len(grid), (n,), generator=g)]


# ------------------------------------------------------------------------- pure functions
def test_budget_on_cuda_reads_the_free_memory(monkeypatch):
    """No GPU needed: torch.cuda.mem_get_info answers with fake values. The metrics share the losses'
    budget (lab.core.budget), and the caller's memory_budget wins over it."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (6 * GIB, 80 * GIB))
    monkeypatch.delenv(lab_budget.BUDGET_ENV, raising=False)
    cuda = torch.device("cuda")
    assert chunking.budget_bytes(cuda) == lab_budget.device_budget("cuda", 6 * GIB) == int(1.5 * GIB)
    assert chunking.budget_bytes(cuda, memory_budget=2**20) == 2**20
    assert chunking.budget_bytes(cuda, memory_budget="1MB") == 2**20
    assert chunking.budget_bytes(torch.device("cpu")) == lab_budget.CPU_BUDGET
    with lab_budget.memory_budget("4MB"):
        assert chunking.budget_bytes(cuda) == chunking.budget_bytes(torch.device("cpu")) == 4 * 2**20


@pytest.mark.parametrize("free, n, width", [(80 * GIB, 100_000, 7), (8 * GIB, 100_000, 7), (GIB, 15_000, 79),
                                            (10**6, 300_000, 7), (40 * GIB, 1_000, 0)])
def test_device_chunk_rows_fill_the_budget_and_no_more(free, n, width):
    rows = chunking.device_chunk_rows(free, n, width)
    budget_ = lab_budget.device_budget("cuda", free)
    per_query = n * chunking.SCORE_BYTES["device"] + width * chunking.item_bytes(1)
    assert rows >= 1
    assert rows == 1 or rows * per_query <= budget_  # within the budget...
    assert (rows + 1) * per_query > budget_  # ...and one more query would not be
    assert chunking.device_chunk_rows(free, 2 * n, width) <= rows  # a larger gallery: fewer queries
    assert chunking.device_chunk_rows(2 * free, n, width) >= rows


def test_an_h100_chunk_at_100k_is_far_from_cache_sized():
    """The issue's case: 100k x 128 with ~78 GB free. Chunks of ~1,300 queries (~75 chunks of 2 GB),
    not the 41 queries of the CPU's 2**22 scores."""
    rows = chunking.device_chunk_rows(78 * GIB, 100_000, 7)
    assert rows > 1000
    assert -(-100_000 // rows) < 100
    assert chunking.chunk_rows(lab_budget.CPU_BUDGET, 100_000, 7, "cpu") < 50


def test_chunk_bounds_cover_every_query_once_within_the_budget():
    rng = np.random.default_rng(0)
    widths = np.sort(rng.integers(1, 300, (500, 2)), axis=0)  # two parts per list (labels that are no tree)
    widths = widths[np.argsort(widths.sum(1), kind="stable")]
    for budget in (2**16, 10**6, 10**8):
        bounds = chunking.chunk_bounds(widths, 2000, budget, "cuda", num_levels=2)
        assert [b[0] for b in bounds] == [0] + [b[1] for b in bounds[:-1]] and bounds[-1][1] == 500
        for start, end in bounds:
            width = widths[start:end].max(0).sum()  # the chunk's lists: each part as wide as its widest
            need = (end - start) * (2000 * chunking.SCORE_BYTES["device"] + width * chunking.item_bytes(2))
            assert end - start == 1 or need <= budget
    assert chunking.chunk_bounds(widths, 2000, 10**8, "cuda", chunk_size=64)[1] == (64, 128)


def test_memory_budget_must_be_a_number_of_bytes():
    emb, labels = torch.randn(6, 3), torch.tensor([0, 0, 1, 1, 2, 2])
    for bad in (-1, 100, "2 apples", "-5MB", True, float("nan")):
        with pytest.raises(ValueError, match="memory_budget"):
            retrieval_metrics(emb, labels, memory_budget=bad)
    # the losses' units are accepted too
    assert retrieval_metrics(emb, labels, memory_budget="1MB") == retrieval_metrics(emb, labels, memory_budget=2**20)


def test_faiss_is_only_used_on_the_cpu():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert _backend(None, cpu) == _backend(None, cuda) == _backend("faiss", cuda) == "torch"
    assert _backend("faiss", cpu) == "faiss"
    with pytest.raises(ValueError, match="backend must be None or one of"):
        retrieval_metrics(torch.randn(4, 2), torch.tensor([0, 0, 1, 1]), backend="annoy")


# ------------------------------------------------------------------------------ behaviour
LABELS = {
    "flat": lambda fine, g: fine,
    "tree": lambda fine, g: torch.stack([fine, fine // 5], 1),
    "no tree": lambda fine, g: torch.stack([fine, torch.randint(0, 4, fine.shape, generator=g)], 1),
}


def assert_same(a: dict, b: dict) -> None:
    """The same numbers: hit rates and counts exactly; the other means up to the last bits of a float64
    sum (a chunk's lists are padded to its widest one, and a row sum over more zeros may round apart)."""
    assert a.keys() == b.keys()
    for key in a:
        exact = key.startswith("R@") or key.endswith("queries")
        assert a[key] == (b[key] if exact else pytest.approx(b[key], abs=1e-14))


@pytest.mark.parametrize("on_device", [False, True])
@pytest.mark.parametrize("kind", list(LABELS))
def test_tiny_budgets_give_identical_results(monkeypatch, kind, on_device):
    if on_device:
        count_as_on_a_device(monkeypatch, max_passes=8)
    g = torch.Generator().manual_seed(1)
    emb = grid_embeddings(300, 4, seed=1)
    labels = LABELS[kind](torch.randint(0, 30, (300,), generator=g), g)
    whole = retrieval_metrics(emb, labels)
    for budget in (lab_budget.MIN_BUDGET, 10**5):
        assert_same(retrieval_metrics(emb, labels, memory_budget=budget), whole)
    assert_same(retrieval_metrics(emb, labels, chunk_size=7), whole)
    # A gallery (no self-retrieval), a few queries at a time.
    q, r = labels[:100], labels[100:]
    assert_same(retrieval_metrics(emb[:100], q, emb[100:], r, memory_budget=lab_budget.MIN_BUDGET),
                retrieval_metrics(emb[:100], q, emb[100:], r))


@pytest.mark.parametrize("max_passes", [0, 8])
def test_the_largest_tensor_stays_within_the_budget(monkeypatch, max_passes):
    """With the GPU's way of counting (every tensor a torch one), nothing a chunk makes is larger than
    the budget (here 5 queries a chunk, their int64 bucket keys 160 KB). The inputs and the per-query
    results are not chunked; with 200 queries and a gallery of 4,000 they are below it."""
    count_as_on_a_device(monkeypatch, max_passes)
    g = torch.Generator().manual_seed(2)
    n, budget = 4000, 300_000
    emb = torch.nn.functional.normalize(torch.randn(n + 200, 8, generator=g), dim=1)
    fine = torch.randint(0, 400, (n + 200,), generator=g)
    labels = torch.stack([fine, fine // 10], 1)  # two levels: lists of ~100 items, all the metrics
    args = (emb[:200], labels[:200], emb[200:], labels[200:])
    with Probe() as small:
        retrieval_metrics(*args, memory_budget=budget)
    assert small.largest <= budget
    with Probe() as default:  # the probe sees the blocks: by default they are far larger
        retrieval_metrics(*args)
    assert default.largest > 10 * budget


@pytest.mark.parametrize("max_passes", [0, 8])
def test_the_chunks_never_wait_for_the_host(monkeypatch, max_passes):
    """The ops that make a GPU wait (an .item(), a nonzero, a unique) happen before the chunk loop: as
    many with 3 chunks as with 20."""
    count_as_on_a_device(monkeypatch, max_passes)
    g = torch.Generator().manual_seed(3)
    emb = torch.randn(300, 8, generator=g)
    fine = torch.randint(0, 30, (300,), generator=g)
    for labels in (fine, torch.stack([fine, fine // 6], 1), torch.stack([fine, torch.randint(0, 3, (300,))], 1)):
        waits = []
        for chunk_size in (100, 15):
            with Probe() as probe:
                retrieval_metrics(emb, labels, chunk_size=chunk_size)
            waits.append(sorted(probe.waits))
        assert waits[0] == waits[1]
        # unit_rows' range check and the check for copies read their numbers in one move to the host, the
        # positives per query are counted on the host from the labels: none of the probe's ops (before: 5)
        assert waits[0] == []
    with Probe() as probe:  # a gallery with copies: finding them is the one op that waits
        retrieval_metrics(torch.cat([emb, emb[:5]]), torch.cat([fine, fine[:5]]), chunk_size=100)
    assert sorted(probe.waits) == ["_unique2", "unique_dim"]


def test_a_chunks_bookkeeping_runs_on_one_cpu_thread_and_the_count_is_restored(monkeypatch):
    import lab.metrics.retrieval as retrieval

    seen = []
    real = retrieval.list_metrics
    monkeypatch.setattr(retrieval, "list_metrics",
                        lambda *a, **k: seen.append(torch.get_num_threads()) or real(*a, **k))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        retrieval_metrics(torch.randn(60, 4), torch.arange(60) // 3, chunk_size=20)
        assert seen == [1, 1, 1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def _peak_rise(fn) -> int:
    """Bytes the process's peak resident memory (Linux VmHWM, reset first) rises above its size during fn()."""
    def kb(key):
        return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key))
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak back to the current size
    base = kb("VmRSS:")
    fn()
    return (kb("VmHWM:") - base) * 1024


@pytest.fixture
def exact_peaks():
    """glibc's malloc maps every block of 64 KB or more on its own and unmaps it when freed, so the peak
    resident memory follows the live tensors (by default freed blocks stay in the heap and may not be
    reused: the peak then depends on the order of the allocations). Afterwards: blocks under 32 MB from the
    heap, glibc's own steady state."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        pytest.skip("needs glibc")
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux's /proc peak memory")
    mmap_threshold = -3  # M_MMAP_THRESHOLD
    assert libc.mallopt(mmap_threshold, 64 * 2**10) == 1
    yield
    libc.mallopt(mmap_threshold, 32 * 2**20)


@pytest.mark.parametrize("max_passes", [None, 0, 8])  # None: the CPU's own (numpy) counting
def test_the_peak_memory_of_a_call_stays_within_the_budget(monkeypatch, exact_peaks, max_passes):
    """The probe above sees the tensors ops return, not the temporaries inside an op (a bool tensor summed
    into int64 is first copied to int64: 8 bytes a bool, which put the GPU's comparison at 5x its budget).
    The process's peak memory sees both: it rises by at most the budget plus the call's O(N) copies
    (normalised gallery, label index: about 55 bytes an item here, measured with one query)."""
    if max_passes is not None:
        count_as_on_a_device(monkeypatch, max_passes)
    g = torch.Generator().manual_seed(4)
    n, budget = 200_000, 24 * 2**20
    gallery, queries = torch.randn(n, 4, generator=g), torch.randn(64, 4, generator=g)
    labels = torch.arange(n) // 8  # 8 per class: lists of 8, the broadcast comparison when max_passes is 8
    query_labels = torch.randint(0, n // 8, (64,), generator=g)
    retrieval_metrics(queries[:2], query_labels[:2], gallery, labels)  # first-call allocations
    rise = _peak_rise(lambda: retrieval_metrics(queries, query_labels, gallery, labels, memory_budget=budget))
    assert rise <= budget + 64 * n


# ------------------------------------------------------------------------- per query, and the gap


def test_per_query_metrics_are_the_plain_loops_query_by_query_with_nan_where_left_out():
    """Each query's AP against ROADMAP Eq. 1 by plain loops and its mAP@R against the sort, on exact
    cosines with ties; a query alone in its class is NaN; the means are retrieval_metrics'."""
    from lab.metrics import per_query_metrics
    from tests import reference as ref

    emb = grid_embeddings(120, 3, seed=4)
    labels = torch.randint(0, 12, (120,), generator=torch.Generator().manual_seed(4))
    labels[7] = 99  # alone in its class: no positive, left out
    values = per_query_metrics(emb, labels)
    sims = (torch.nn.functional.normalize(emb.double(), dim=1) @ torch.nn.functional.normalize(emb.double(), dim=1).T)
    for i in range(120):
        others = [j for j in range(120) if j != i]
        s, t = [float(sims[i, j]) for j in others], [bool(labels[j] == labels[i]) for j in others]
        if i == 7:
            assert torch.isnan(values["mAP"][i]) and torch.isnan(values["mAP@R"][i])
            continue
        assert abs(float(values["mAP"][i]) - ref.ap_loop(s, t)) < 1e-12
    # mAP@R with ties: the sort reference (the loops' ranked list assumes no ties)
    from lab.metrics import map_at_r
    kept = torch.ones(120, dtype=torch.bool)
    kept[7] = False
    self_mask = ~torch.eye(120, dtype=torch.bool)
    want = map_at_r(sims[kept], (labels[:, None] == labels[None, :])[kept], self_mask[kept])
    assert torch.allclose(values["mAP@R"][kept], want, rtol=0, atol=1e-12)
    means = retrieval_metrics(emb, labels)
    for key in ("R@1", "mAP@R", "mAP"):
        assert abs(float(values[key].nanmean()) - means[key]) < 1e-12
    assert means["excluded_queries"] == int(values["mAP"].isnan().sum()) == 1


def gap_loop(emb: torch.Tensor, labels: list, batch_ids: list) -> float:
    """ROADMAP Eq. 6 by plain loops: each query's AP among the other items of its batch minus its AP
    among all other items, averaged over the queries with a positive in their batch."""
    from tests import reference as ref

    e = torch.nn.functional.normalize(emb.double(), dim=1)
    sims, n, gaps = (e @ e.T).tolist(), len(labels), []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        batch = [j for j in others if batch_ids[j] == batch_ids[i]]
        in_batch = ref.ap_loop([sims[i][j] for j in batch], [labels[j] == labels[i] for j in batch])
        if in_batch is not None:
            gaps.append(in_batch - ref.ap_loop([sims[i][j] for j in others], [labels[j] == labels[i] for j in others]))
    return sum(gaps) / len(gaps)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_decomposability_gap_is_its_plain_loop_definition_with_ties(seed):
    """Uneven batches, one of which holds no positive pair (its queries are left out), and ties
    everywhere (exact cosines of grid points); (N, 2) labels use the finest column."""
    from lab.metrics import decomposability_gap

    g = torch.Generator().manual_seed(seed)
    emb = grid_embeddings(150, 3, seed=seed)
    fine = torch.randint(0, 15, (150,), generator=g)
    batch_ids = torch.randint(0, 5, (150,), generator=g)
    batch_ids[-6:] = 9
    fine[-6:] = torch.arange(100, 106)  # batch 9: six classes of one image each
    want = gap_loop(emb, fine.tolist(), batch_ids.tolist())
    assert abs(decomposability_gap(emb, fine, batch_ids) - want) < 1e-12
    assert abs(decomposability_gap(emb, torch.stack([fine, fine // 5], 1), batch_ids) - want) < 1e-12
    assert decomposability_gap(emb, fine, torch.zeros(150, dtype=torch.long)) == 0.0  # one batch: the global AP


def test_the_decomposability_gap_never_holds_an_n_by_n_block(monkeypatch):
    """3,000 items (an N x N float block: 36 MB) within a 1 MB budget: both APs are counted in
    chunks; with the GPU's way of counting every tensor is a torch one the probe sees."""
    from lab.metrics import decomposability_gap

    count_as_on_a_device(monkeypatch, 8)
    g = torch.Generator().manual_seed(3)
    n = 3000
    emb, labels = torch.randn(n, 8, generator=g), torch.randint(0, 300, (n,), generator=g)
    batch_ids = torch.randint(0, 25, (n,), generator=g)
    with lab_budget.memory_budget("1MB"), Probe() as probe:
        gap = decomposability_gap(emb, labels, batch_ids)
    assert probe.largest <= 2**20 < n * n * 4
    assert 0 < gap < 1
