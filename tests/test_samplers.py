"""Batch samplers: exact batch composition, coverage, determinism, DDP slicing, bad input."""
from collections import Counter

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from lab.data import HierarchicalBatchSampler, MPerClassBatchSampler


def uneven_labels(num_classes=40, num_categories=4, seed=0):
    """(N, 2): class sizes 2..11 (some smaller than m=4), class c in category c % num_categories."""
    sizes = np.random.default_rng(seed).integers(2, 12, num_classes)
    fine = np.repeat(np.arange(num_classes), sizes)
    return np.stack([fine, fine % num_categories], 1)


def check_m_per_class(batch, fine, batch_size, m):
    counts = Counter(fine[batch].tolist())
    assert len(batch) == batch_size
    assert len(counts) == batch_size // m, counts
    assert set(counts.values()) == {m}, counts


@pytest.mark.parametrize("batch_size,m", [(32, 4), (12, 2), (8, 8), (10, 1)])
def test_m_per_class_composition_and_coverage(batch_size, m):
    labels = uneven_labels()
    sampler = MPerClassBatchSampler(labels, batch_size, m, seed=3)
    batches = list(sampler)
    assert len(batches) == len(sampler) > 0
    for b in batches:
        check_m_per_class(b, labels[:, 0], batch_size, m)
    assert set(np.concatenate(batches).tolist()) == set(range(len(labels)))  # every item visited


def test_small_classes_completed_by_resampling():
    fine = np.array([0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2])  # class 0 has 2 items, m = 4
    batches = list(MPerClassBatchSampler(fine, 8, 4))
    class0 = [[i for i in b if fine[i] == 0] for b in batches if 0 in fine[b]]
    assert class0 and all(len(c) == 4 and set(c) == {0, 1} for c in class0)  # each of its 2 items twice


def test_chunks_do_not_repeat_items_of_big_enough_classes():
    labels = uneven_labels()
    for b in MPerClassBatchSampler(labels, 32, 4, seed=1):
        b = np.array(b)
        for c in np.unique(labels[b, 0]):
            items = b[labels[b, 0] == c]
            if (labels[:, 0] == c).sum() >= 4:
                assert len(set(items.tolist())) == 4


def test_determinism_epochs_and_seeds():
    labels = uneven_labels()
    a, b = MPerClassBatchSampler(labels, 16, 4, seed=0), MPerClassBatchSampler(labels, 16, 4, seed=0)
    assert list(a) == list(b) == list(a)  # same seed, same epoch: same batches, every time
    a.set_epoch(1)
    assert list(a) != list(b)
    b.set_epoch(1)
    assert list(a) == list(b)
    assert list(MPerClassBatchSampler(labels, 16, 4, seed=1)) != list(MPerClassBatchSampler(labels, 16, 4, seed=0))


@pytest.mark.parametrize("cls", [MPerClassBatchSampler, HierarchicalBatchSampler])
def test_ddp_slices_concatenate_to_the_global_batch(cls):
    labels = uneven_labels()
    single = list(cls(labels, 32, 4, seed=5))
    ranks = [list(cls(labels, 32, 4, seed=5, num_replicas=4, rank=r)) for r in range(4)]
    assert all(len(r) == len(single) for r in ranks)
    for step, batch in enumerate(single):
        assert all(len(r[step]) == 8 for r in ranks)
        assert sum((r[step] for r in ranks), []) == batch


def test_accepts_tensor_and_two_level_labels_using_the_fine_column():
    labels = torch.from_numpy(uneven_labels())
    batches = list(MPerClassBatchSampler(labels, 16, 4))
    for b in batches:
        check_m_per_class(b, labels[:, 0].numpy(), 16, 4)
    flat = list(MPerClassBatchSampler(labels[:, 0], 16, 4))
    assert batches == flat


def test_works_as_a_dataloader_batch_sampler():
    labels = torch.from_numpy(uneven_labels())
    data = TensorDataset(torch.arange(len(labels)), labels)
    loader = DataLoader(data, batch_sampler=MPerClassBatchSampler(labels, 16, 4))
    index, lab = next(iter(loader))
    assert index.shape == (16,) and lab.shape == (16, 2)
    assert len(loader) == len(loader.batch_sampler)


def test_hierarchical_batches_use_exactly_two_categories_half_each():
    labels = uneven_labels(num_classes=60, num_categories=5)
    sampler = HierarchicalBatchSampler(labels, 16, 2, seed=2)
    batches = list(sampler)
    assert len(batches) == len(sampler)
    pairs = set()
    for b in batches:
        check_m_per_class(b, labels[:, 0], 16, 2)
        cats = Counter(labels[b, 1].tolist())
        assert len(cats) == 2 and set(cats.values()) == {8}, cats
        first, second = labels[b[:8], 1], labels[b[8:], 1]  # the two halves, one category each
        assert len(set(first)) == 1 and len(set(second)) == 1
        pairs.add(frozenset(cats))
    assert len(pairs) > 1  # not always the same pair
    assert set(np.concatenate(batches).tolist()) == set(range(len(labels)))


def test_hierarchical_leaves_out_categories_too_small_for_half_a_batch():
    labels = uneven_labels(num_classes=30, num_categories=3)
    labels = np.concatenate([labels, [[100, 9], [100, 9], [101, 9], [101, 9]]])  # category 9: 2 classes
    with pytest.warns(RuntimeWarning, match="fewer than") as caught:
        sampler = HierarchicalBatchSampler(labels, 24, 2)  # half a batch = 6 classes
    assert all(9 not in labels[b, 1] for b in sampler)
    # Issue 36, C-3: which categories, with their sizes, for a caller that knows their names.
    left = caught[0].message
    assert (left.categories, left.classes, left.needed, left.items) == ([9], [2], 6, len(labels))
    assert "9 (2 classes)" in str(left)


def test_hierarchical_determinism():
    labels = uneven_labels()
    a, b = HierarchicalBatchSampler(labels, 16, 4), HierarchicalBatchSampler(labels, 16, 4)
    assert list(a) == list(b)
    a.set_epoch(3)
    assert list(a) != list(b)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(batch_size=30, m=4), "divisible by m"),
        (dict(batch_size=32, m=16), "larger than the largest class"),
        (dict(batch_size=400, m=4), "classes per batch"),
        (dict(batch_size=32, m=0), "m must be an integer"),
        (dict(batch_size=32, m=4, num_replicas=3), "divisible by num_replicas"),
        (dict(batch_size=32, m=4, num_replicas=2, rank=2), "rank must be"),
        (dict(batch_size=32, m=4, seed=-1), "seed must be"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MPerClassBatchSampler(uneven_labels(), **kwargs)


def test_bad_labels():
    with pytest.raises(ValueError, match="empty dataset"):
        MPerClassBatchSampler(np.zeros(0, dtype=int), 8, 4)
    with pytest.raises(ValueError, match="integers"):
        MPerClassBatchSampler(np.zeros(10), 8, 4)
    with pytest.raises(ValueError, match="epoch"):
        MPerClassBatchSampler(uneven_labels(), 8, 4).set_epoch(-1)


def test_hierarchical_bad_input():
    labels = uneven_labels()
    with pytest.raises(ValueError, match="coarse level"):
        HierarchicalBatchSampler(labels[:, 0], 16, 4)
    with pytest.raises(ValueError, match="2\\*m"):
        HierarchicalBatchSampler(labels, 12, 4)
    with pytest.raises(ValueError, match=">= 2 coarse categories"):
        HierarchicalBatchSampler(np.stack([labels[:, 0], np.zeros(len(labels), dtype=int)], 1), 16, 4)
    mixed = labels.copy()
    mixed[0, 1] = (mixed[0, 1] + 1) % 4  # one item of class 0 in another category
    with pytest.raises(ValueError, match="same for all items of a class"):
        HierarchicalBatchSampler(mixed, 16, 4)
    with pytest.raises(ValueError, match="level"):
        HierarchicalBatchSampler(labels, 16, 4, level=2)
