"""What a config builds before training: datasets, the model, batch samplers, and an endless,
resumable stream of training batches. The trainer and ``python -m lab eval`` build through here."""
from __future__ import annotations

import contextlib
import itertools
from typing import Callable, Iterator, Optional

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset, Sampler

from .config import TrainConfig


def transform_kind(cfg: TrainConfig) -> str:
    """cfg.transform, or the kind the dataset's images want (lab.data.TRANSFORM_KIND)."""
    from ..data import TRANSFORM_KIND

    return cfg.transform or TRANSFORM_KIND.get(cfg.dataset, "paper")


def build_split(cfg: TrainConfig, split: str, train: bool = False, data_root: Optional[str] = None) -> Dataset:
    """One split of the config's dataset with the training augmentation (``train``) or the
    evaluation transform; ``data_root`` overrides ``cfg.data_root``."""
    from ..data import build_dataset, build_transforms

    transform = build_transforms(transform_kind(cfg), train=train, image_size=cfg.image_size)
    return build_dataset(cfg.dataset, split=split, root=data_root or cfg.data_root, transform=transform,
                         **cfg.dataset_kwargs)


def build_datasets(cfg: TrainConfig) -> tuple[Dataset, Dataset, Callable]:
    """(train split with training augmentation, test split, the evaluation transform)."""
    train, test = build_split(cfg, "train", train=True), build_split(cfg, "test")
    return train, test, test.transform


def model_for(cfg: TrainConfig, in_chans: int, pretrained: Optional[bool] = None) -> nn.Module:
    """The config's embedding model for images of ``in_chans`` channels (``pretrained`` overrides
    ``cfg.pretrained``: a checkpoint's weights replace them anyway)."""
    from ..models import build_model

    return build_model(cfg.model, cfg.embed_dim, in_chans, cfg.pretrained if pretrained is None else pretrained,
                       cfg.pooling, cfg.layer_norm, cfg.freeze_bn)


def build_batch_sampler(labels: Tensor, cfg: TrainConfig, seed: int, num_replicas: int = 1, rank: int = 0):
    """The m-per-class (or hierarchical) batch sampler over ``labels`` (N, L); batch_size is global."""
    from ..data import HierarchicalBatchSampler, MPerClassBatchSampler

    cls = HierarchicalBatchSampler if cfg.sampler == "hierarchical" else MPerClassBatchSampler
    sampler = cls(labels, batch_size=cfg.batch_size, m=cfg.m, seed=seed, num_replicas=num_replicas, rank=rank)
    if len(sampler) == 0:
        raise ValueError(f"the training set ({len(labels)} images) is too small for one batch of "
                         f"batch_size={cfg.batch_size} with m={cfg.m}: lower batch_size")
    return sampler


def probe_batches(labels: Tensor, cfg: TrainConfig) -> tuple[Tensor, Tensor]:
    """A fixed probe set for the decomposability gap: (indices (P,), batch ids (P,)).

    The first ``cfg.probe_batches`` batches a (single-process) sampler draws with its own
    seed, so the probe is the same whatever the run's position or number of ranks.
    """
    sampler = build_batch_sampler(labels, cfg, seed=cfg.seed + 7919)
    sampler.set_epoch(0)
    batches = list(itertools.islice(iter(sampler), cfg.probe_batches))
    indices = torch.tensor([i for b in batches for i in b], dtype=torch.long)
    batch_ids = torch.cat([torch.full((len(b),), k, dtype=torch.long) for k, b in enumerate(batches)])
    return indices, batch_ids


@contextlib.contextmanager
def transform_of(dataset: Dataset, transform: Optional[Callable]) -> Iterator[Dataset]:
    """Temporarily give ``dataset`` another transform (e.g. the evaluation one for the train split)."""
    if transform is None or not hasattr(dataset, "transform"):
        yield dataset
        return
    saved = dataset.transform
    dataset.transform = transform
    try:
        yield dataset
    finally:
        dataset.transform = saved


class _SkipFirst(Sampler):
    """A batch sampler without its first ``skip`` batches: resuming mid-epoch costs no image loading."""

    def __init__(self, batches, skip: int = 0) -> None:
        self.batches, self.skip = batches, skip

    def __iter__(self):
        return itertools.islice(iter(self.batches), self.skip, None)

    def __len__(self) -> int:
        return max(0, len(self.batches) - self.skip)


class BatchStream:
    """Endless (images, labels, indices) batches, epoch after epoch, that can be repositioned.

    ``epoch``/``position`` say where the NEXT batch comes from. The DataLoader iterator lives
    across calls (a dashboard asks for a few batches per tick); the DataLoader has its own
    generator so opening an iterator never draws from the global torch RNG, which keeps a
    resumed run on the uninterrupted run's trajectory.
    """

    def __init__(self, dataset: Dataset, batch_sampler, num_workers: int = 0, pin_memory: bool = False,
                 seed: int = 0) -> None:
        self.batch_sampler = batch_sampler
        self.skip = _SkipFirst(batch_sampler)
        self.seed = seed
        self.generator = torch.Generator()
        self.loader = DataLoader(dataset, batch_sampler=self.skip, num_workers=num_workers, pin_memory=pin_memory,
                                 generator=self.generator, persistent_workers=num_workers > 0)
        self.epoch, self.position = 0, 0
        self._it: Optional[Iterator] = None

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def seek(self, epoch: int, position: int) -> None:
        self.epoch, self.position, self._it = epoch, position, None

    def _open(self) -> None:
        self.batch_sampler.set_epoch(self.epoch)
        self.skip.skip = self.position
        self.generator.manual_seed(self.seed * 100_003 + self.epoch)  # worker seeds depend on the epoch only
        self._it = iter(self.loader)

    def next(self):
        """The next batch; (epoch, position) afterwards point past it."""
        for _ in range(2):  # at most one epoch boundary to cross
            if self._it is None:
                self._open()
            try:
                batch = next(self._it)
            except StopIteration:
                self.epoch, self.position, self._it = self.epoch + 1, 0, None
                continue
            self.position += 1
            return batch
        raise RuntimeError("the batch sampler yielded no batch in a whole epoch")
