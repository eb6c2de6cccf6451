"""What a config builds before training: datasets, the model, batch samplers, and an endless,
resumable stream of training batches: :class:`BatchStream` (a DataLoader: disk datasets) or
:class:`DeviceBatchStream` (the images on the device: glyphs, digits). The trainer and
``python -m lab eval`` build through here."""
from __future__ import annotations

import contextlib
import itertools
from typing import Callable, Iterator, Optional

import numpy as np
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
                       cfg.pooling, cfg.layer_norm, cfg.freeze_bn, image_size=cfg.image_size)


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


class _Stream:
    """Endless batches, epoch after epoch, that can be repositioned: ``epoch``/``position`` say
    where the NEXT batch comes from. Subclasses open an epoch's iterator (``_open``, from
    ``position`` on) and turn its next item into a batch (``_fetch``)."""

    batch_sampler: Sampler
    epoch: int = 0
    position: int = 0
    _it: Optional[Iterator] = None

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def seek(self, epoch: int, position: int) -> None:
        self.epoch, self.position, self._it = epoch, position, None

    def _open(self) -> None:
        raise NotImplementedError

    def _fetch(self):
        raise NotImplementedError

    def next(self):
        """The next batch; (epoch, position) afterwards point past it."""
        for _ in range(2):  # at most one epoch boundary to cross
            if self._it is None:
                self._open()
            try:
                batch = self._fetch()
            except StopIteration:
                self.epoch, self.position, self._it = self.epoch + 1, 0, None
                continue
            self.position += 1
            return batch
        raise RuntimeError("the batch sampler yielded no batch in a whole epoch")


class BatchStream(_Stream):
    """(images, labels, indices) batches from a DataLoader (disk datasets, any transform).

    The DataLoader iterator lives across calls (a dashboard asks for a few batches per tick);
    the DataLoader has its own generator so opening an iterator never draws from the global
    torch RNG, which keeps a resumed run on the uninterrupted run's trajectory.
    """

    def __init__(self, dataset: Dataset, batch_sampler, num_workers: int = 0, pin_memory: bool = False,
                 seed: int = 0, prefetch_factor: Optional[int] = None) -> None:
        self.batch_sampler = batch_sampler
        self.skip = _SkipFirst(batch_sampler)
        self.seed = seed
        self.generator = torch.Generator()
        self.loader = DataLoader(dataset, batch_sampler=self.skip, num_workers=num_workers, pin_memory=pin_memory,
                                 generator=self.generator, persistent_workers=num_workers > 0,
                                 prefetch_factor=prefetch_factor if num_workers > 0 else None)

    def _open(self) -> None:
        self.batch_sampler.set_epoch(self.epoch)
        self.skip.skip = self.position
        self.generator.manual_seed(self.seed * 100_003 + self.epoch)  # worker seeds depend on the epoch only
        self._it = iter(self.loader)

    def _fetch(self):
        return next(self._it)


AUGMENT_STREAM = 0x5A17  # keeps the augmentation's seeds apart from other uses of the run's seed
DEVICE_SHARE = 4  # the images stay on a GPU when they take at most 1/4 of its free memory


def augmentation_seed(seed: int, rank: int, epoch: int, position: int) -> int:
    """The seed of one batch's random shifts: a function of where the batch is in the run, so a
    resumed run, or a step tried again after a rollback, draws the same shifts."""
    words = np.random.SeedSequence([AUGMENT_STREAM, seed % 2**64, rank, epoch, position]).generate_state(2)
    return (int(words[0]) << 32 | int(words[1])) & (2**63 - 1)


def fits_on_device(nbytes: int, free_bytes: int) -> bool:
    """Keep ``nbytes`` of images on a device with ``free_bytes`` free, or in (pinned) host memory."""
    return nbytes * DEVICE_SHARE <= free_bytes


class DeviceBatchStream(_Stream):
    """(images, labels, indices) batches of a dataset held in memory with the "small" transform
    (``lab.data.labeled_images.batchable``): its images are one uint8 tensor on ``device`` and a batch is
    an index gather there plus :meth:`SmallTransform.batch` (the same shifts as torchvision's
    RandomCrop, done on the whole batch). Batches are (images (B, C, S, S) float, labels (B, L),
    indices (B,)), all on ``device``.

    The shifts of the batch at (epoch, position) come from a generator seeded by
    :func:`augmentation_seed` (seed, rank, epoch, position), not from the global RNG: resuming or
    retrying a step draws them again, on any device (they are drawn on the CPU).
    """

    def __init__(self, dataset, batch_sampler, device: torch.device, seed: int = 0, rank: int = 0,
                 progress: bool = False) -> None:
        from ..data.labeled_images import resized_pixels

        self.batch_sampler = batch_sampler
        self.transform = dataset.transform
        self.device, self.seed, self.rank = torch.device(device), seed, rank
        pixels = resized_pixels(dataset, progress=progress)
        self.resident = not (self.device.type == "cuda" and
                             not fits_on_device(pixels.numel(), torch.cuda.mem_get_info(self.device)[0]))
        # Not resident: pinned host memory, a batch at a time goes over.
        self.pixels = pixels.to(self.device) if self.resident else pixels.pin_memory()
        self.labels = dataset.labels.view(len(dataset.labels), -1).to(self.device)

    def _open(self) -> None:
        self.batch_sampler.set_epoch(self.epoch)
        self._it = itertools.islice(iter(self.batch_sampler), self.position, None)

    def _fetch(self) -> tuple[Tensor, Tensor, Tensor]:
        return self.batch(next(self._it), augmentation_seed(self.seed, self.rank, self.epoch, self.position))

    def batch(self, indices, seed: int) -> tuple[Tensor, Tensor, Tensor]:
        """The images ``indices`` shifted by the draws of a generator seeded with ``seed``."""
        index = torch.as_tensor(indices, dtype=torch.long)
        shifts = self.transform.draw_shifts(len(index), torch.Generator().manual_seed(seed)) \
            if self.transform.train else None
        on_device = index.to(self.device, non_blocking=True)
        pixels = self.pixels[on_device if self.resident else index]
        images = self.transform.batch(pixels.to(self.device, non_blocking=True), shifts)
        return images, self.labels[on_device], on_device
