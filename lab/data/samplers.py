"""Batch samplers for rank losses: every query needs positives in its batch.

Use as ``DataLoader(dataset, batch_sampler=sampler)`` and call ``sampler.set_epoch(epoch)``
before each epoch (as with DistributedSampler): an epoch's batches depend only on (seed, epoch).

- ``MPerClassBatchSampler``: batch_size/m distinct classes, m images each (ROADMAP's CUB and
  iNaturalist setting). An epoch visits every image at least once.
- ``HierarchicalBatchSampler``: FastAP's "hard" sampling (FastAP Sec. 4.2 and supp. A, ROADMAP
  supp. B.2 for SOP): half of each batch's classes from one coarse category, half from another.

Both cut each class into chunks of m images (a shuffled cycle through the class, so a chunk
repeats an image only when the class has fewer than m), and deal the chunks into rounds of
distinct classes. Small classes are completed by resampling; ``m`` larger than every class is
refused, as every class would then be padded with repeated images (a configuration mistake).

Several GPUs: ``batch_size`` is the global batch. Every rank builds the same global batches
and yields its contiguous slice [rank*B/world, (rank+1)*B/world), so all-gathering the ranks'
embeddings in rank order gives back exactly the global m-per-class batch.
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import Iterator, Sequence, Union

import numpy as np
import torch
from torch.utils.data import Sampler

from ..core.checks import check_int

Labels = Union[torch.Tensor, np.ndarray, Sequence[int], Sequence[Sequence[int]]]


def as_label_array(labels: Labels) -> np.ndarray:
    """(N,) or (N, L) integer labels -> (N, L) int64 numpy array, finest level first."""
    arr = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if arr.ndim not in (1, 2) or arr.shape[0] == 0 or (arr.ndim == 2 and arr.shape[1] == 0):
        raise ValueError(f"labels must be a non-empty (N,) or (N, L) array of class ids, got shape {arr.shape} "
                         f"(an empty dataset?)")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"labels must be integers (class ids), got dtype {arr.dtype}")
    return arr.reshape(len(arr), -1).astype(np.int64)


# ------------------------------------------------------------------------ dealing rounds
def num_rounds(counts: np.ndarray, per_round: int) -> int:
    """Fewest rounds of ``per_round`` distinct groups that use every group counts[g] times."""
    return max(math.ceil(int(counts.sum()) / per_round), int(counts.max()))


def pad_counts(counts: np.ndarray, per_round: int, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """Raise counts (each to at most ``rounds``, spread over random groups) until they sum to
    rounds * per_round: the extra units are resampled chunks that fill the last slots."""
    counts = counts.copy()
    extra = rounds * per_round - int(counts.sum())
    while extra > 0:
        room = np.flatnonzero(counts < rounds)
        pick = rng.choice(room, size=min(extra, len(room)), replace=False)
        counts[pick] += 1
        extra -= len(pick)
    return counts


def deal(counts: np.ndarray, per_round: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Rounds of ``per_round`` distinct groups, group g in exactly counts[g] of them.

    Needs sum = rounds * per_round and max <= rounds (``pad_counts``). Each round takes the
    groups that must appear in every remaining round, then others at random, in proportion to
    what they have left; so no group is ever left with more chunks than rounds.
    """
    counts = counts.copy()
    rounds = int(counts.sum()) // per_round
    out = []
    for left in range(rounds, 0, -1):
        must = np.flatnonzero(counts == left)
        others = np.flatnonzero((counts > 0) & (counts < left))
        k = per_round - len(must)
        pick = rng.choice(others, size=k, replace=False, p=counts[others] / counts[others].sum()) if k else others[:0]
        chosen = np.concatenate([must, pick])
        rng.shuffle(chosen)
        counts[chosen] -= 1
        out.append(chosen)
    return out


def chunks(items: np.ndarray, n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """(n, m) items: a shuffled cycle through ``items``; the first ceil(len/m) rows cover all of
    them, and a row repeats an item only if there are fewer than m."""
    cycle = rng.permutation(items)
    return cycle[np.arange(n * m).reshape(n, m) % len(cycle)]


# ----------------------------------------------------------------------------- samplers
class MPerClassBatchSampler(Sampler[list[int]]):
    """Batches of batch_size/m distinct classes x m items; labels (N,) or (N, L), column 0 used."""

    def __init__(self, labels: Labels, batch_size: int, m: int, seed: int = 0, num_replicas: int = 1, rank: int = 0):
        fine = as_label_array(labels)[:, 0]
        self._setup(fine, batch_size, m, seed, num_replicas, rank)
        self.num_batches = num_rounds(self.chunk_counts, self.classes_per_batch)

    def _setup(self, fine: np.ndarray, batch_size: int, m: int, seed: int, num_replicas: int, rank: int) -> None:
        batch_size, m, seed = check_int("batch_size", batch_size), check_int("m", m), check_int("seed", seed, minimum=0)
        num_replicas = check_int("num_replicas", num_replicas)
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or not 0 <= rank < num_replicas:
            raise ValueError(f"rank must be an integer in [0, num_replicas={num_replicas}), got {rank!r}")
        if batch_size % m:
            raise ValueError(f"batch_size ({batch_size}) must be divisible by m ({m}): a batch is batch_size/m "
                             f"classes x m items")
        if batch_size % num_replicas:
            raise ValueError(f"batch_size ({batch_size}) is the global batch: it must be divisible by "
                             f"num_replicas ({num_replicas})")
        self.classes, inverse = np.unique(fine, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        sizes = np.bincount(inverse)
        self.items = np.split(order, np.cumsum(sizes)[:-1])  # per class, its dataset indices
        if m > sizes.max():
            raise ValueError(f"m ({m}) is larger than the largest class ({sizes.max()} items): every class would be "
                             f"padded with repeated images; choose m <= {sizes.max()}")
        classes_per_batch = batch_size // m
        if classes_per_batch > len(self.classes):
            raise ValueError(f"batch_size/m = {batch_size}/{m} = {batch_size // m} classes per batch, but the labels "
                             f"have only {len(self.classes)} classes; lower batch_size or raise m")
        self.batch_size, self.m, self.seed = batch_size, m, seed
        self.num_replicas, self.rank, self.epoch = num_replicas, int(rank), 0
        self.classes_per_batch = classes_per_batch
        self.chunk_counts = -(-sizes // m)  # ceil: chunks that cover each class once

    def set_epoch(self, epoch: int) -> None:
        self.epoch = check_int("epoch", epoch, minimum=0)

    def __len__(self) -> int:
        return self.num_batches

    def global_batches(self) -> list[np.ndarray]:
        """This epoch's batches for all ranks together, each (batch_size,) dataset indices."""
        rng = np.random.default_rng([self.seed, self.epoch])
        counts = pad_counts(self.chunk_counts, self.classes_per_batch, self.num_batches, rng)
        rounds = self._deal_chunks(np.arange(len(self.classes)), counts, self.classes_per_batch, rng)
        return [np.concatenate(b) for b in rounds]

    def _deal_chunks(self, classes: np.ndarray, counts: np.ndarray, per_round: int, rng) -> list[list[np.ndarray]]:
        """Rounds of ``per_round`` chunks of distinct ``classes``; counts[k] chunks of classes[k]."""
        pools = [list(chunks(self.items[c], int(n), self.m, rng)) for c, n in zip(classes, counts)]
        return [[pools[k].pop() for k in rnd] for rnd in deal(counts, per_round, rng)]

    def __iter__(self) -> Iterator[list[int]]:
        size = self.batch_size // self.num_replicas
        for batch in self.global_batches():
            yield batch[self.rank * size : (self.rank + 1) * size].tolist()


class LeftOutCategories(RuntimeWarning):
    """HierarchicalBatchSampler's warning: coarse categories with fewer than batch_size/(2m) classes,
    left out of every batch. ``categories`` (their label ids), ``classes`` (each one's number of
    classes), ``needed`` (batch_size/(2m)) and ``items`` (the sampled labels' length): a caller that
    knows the categories' names can say which they are (:mod:`lab.experiments.hierarchical_runs` does)."""

    def __init__(self, categories: list[int], classes: list[int], needed: int, items: int):
        self.categories, self.classes, self.needed, self.items = categories, classes, needed, items
        listed = ", ".join(f"{c} ({n} class{'es' if n != 1 else ''})" for c, n in zip(categories, classes))
        super().__init__(f"{len(categories)} coarse categories of these {items} items have fewer than batch_size/(2m) "
                         f"= {needed} classes and are left out of HierarchicalBatchSampler's batches: {listed}")


class HierarchicalBatchSampler(MPerClassBatchSampler):
    """FastAP's hard batches: batch_size/(2m) classes x m items from each of two coarse categories.

    ``labels`` (N, L >= 2); ``level`` is the coarse column (default 1). An epoch visits every
    item at least once: each category's chunks are dealt into half-batches of distinct classes,
    and half-batches into batches of two distinct categories, drawn at random in proportion to
    what each category has left. (FastAP instead cycles through all category pairs with a fixed
    number of batches per pair; for SOP's 12 categories the two are close.) Categories with fewer
    than batch_size/(2m) classes cannot fill a half-batch and are left out, with a warning.
    """

    def __init__(self, labels: Labels, batch_size: int, m: int, seed: int = 0, num_replicas: int = 1,
                 rank: int = 0, level: int = 1):
        arr = as_label_array(labels)
        if arr.shape[1] < 2:
            raise ValueError(f"HierarchicalBatchSampler needs labels (N, L>=2) with a coarse level (e.g. SOP's "
                             f"super_class_id, glyphs' script); got shape {tuple(np.shape(labels))}. "
                             f"Use MPerClassBatchSampler for single-level labels")
        if isinstance(level, bool) or not isinstance(level, numbers.Integral) or not 1 <= level < arr.shape[1]:
            raise ValueError(f"level must be an integer in [1, {arr.shape[1] - 1}] (a coarse column), got {level!r}")
        self._setup(arr[:, 0], batch_size, m, seed, num_replicas, rank)
        if batch_size % (2 * m):
            raise ValueError(f"batch_size ({batch_size}) must be divisible by 2*m ({2 * m}): half the batch from "
                             f"each of two categories, m items per class")
        first = np.array([it[0] for it in self.items])
        coarse = arr[first, level]  # category of each class
        if (arr[np.concatenate(self.items), level] != np.repeat(coarse, [len(it) for it in self.items])).any():
            raise ValueError(f"labels[:, {level}] must be the same for all items of a class (a coarse category)")
        half = self.classes_per_batch // 2
        names, sizes = np.unique(coarse, return_counts=True)
        small = names[sizes < half]
        if len(small):
            warnings.warn(LeftOutCategories(small.tolist(), sizes[sizes < half].tolist(), half, len(arr)))
        kept = names[sizes >= half]
        if len(kept) < 2:
            raise ValueError(f"HierarchicalBatchSampler needs >= 2 coarse categories with >= batch_size/(2m) = {half} "
                             f"classes; category sizes (classes): {dict(zip(names.tolist(), sizes.tolist()))}. "
                             f"Lower batch_size or raise m")
        self.categories = [np.flatnonzero(coarse == c) for c in kept]  # class positions per category
        self.half_counts = np.array([num_rounds(self.chunk_counts[c], half) for c in self.categories])
        self.num_batches = num_rounds(self.half_counts, 2)

    def global_batches(self) -> list[np.ndarray]:
        rng = np.random.default_rng([self.seed, self.epoch])
        half = self.classes_per_batch // 2
        halves = pad_counts(self.half_counts, 2, self.num_batches, rng)
        pools = []
        for classes, n in zip(self.categories, halves):
            counts = pad_counts(self.chunk_counts[classes], half, int(n), rng)
            pools.append(self._deal_chunks(classes, counts, half, rng))
        return [np.concatenate([c for k in pair for c in pools[k].pop()]) for pair in deal(halves, 2, rng)]
