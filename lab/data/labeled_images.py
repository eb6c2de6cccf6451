"""What every RankLab dataset shares: the (image, labels, index) item and the argument checks.

A dataset holds ``labels`` (N, L) int64, finest level first, ``level_names`` (L names),
``class_names`` {fine label: readable name}, a settable ``transform`` and ``image(i)``, the
untransformed PIL image. ``dataset[i]`` is ``(image (C, H, W) float, labels (L,), i)``.
Datasets small enough to hold as bytes (``in_memory``: glyphs, digits) also give all their
images at once, ``pixels()``, which the trainer gathers and augments by the batch on its device.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
from PIL import Image
from torch import Tensor
from torch.utils.data import Dataset
from torchvision.transforms.functional import to_tensor

SPLITS = ("train", "test")


class DatasetNotFoundError(FileNotFoundError, ValueError):
    """A dataset's files are not where they were looked for. Both a FileNotFoundError and a
    ValueError, so callers that catch either kind (missing file, bad argument) see it."""


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


class LabeledImages(Dataset):
    """Base class: subclasses set the attributes below in ``__init__`` and define ``image(i)``."""

    labels: Tensor  # (N, L) int64, finest level first
    level_names: list[str]  # (L,) e.g. ["glyph", "script"]
    class_names: dict[int, str]  # fine label -> readable name
    coarse_names: dict[int, str]  # coarse label (level 1) -> name; empty when L == 1
    transform: Optional[Callable]
    in_memory: bool = False  # True: ``pixels`` gives every image at once as uint8

    def __len__(self) -> int:
        return len(self.labels)

    def image(self, i: int) -> Image.Image:
        raise NotImplementedError

    def pixels(self, indices: Optional[Sequence[int]] = None, progress: bool = False) -> Tensor:
        """The untransformed images ``indices`` (default: all, in order) as uint8 (n, C, H, W),
        ``image(i)``'s pixels; only datasets held in memory (``in_memory``) have it."""
        raise NotImplementedError(f"{type(self).__name__} reads its images one by one (a DataLoader does); "
                                  "only in-memory datasets (glyphs, digits) give pixels()")

    def _rows(self, indices: Optional[Sequence[int]]) -> np.ndarray:
        """``indices`` as an int64 array of positions (all when None); out of range: IndexError."""
        if indices is None:
            return np.arange(len(self))
        rows = np.asarray(indices, dtype=np.int64).reshape(-1)
        if len(rows) and not (-len(self) <= rows.min() and rows.max() < len(self)):
            bad = rows[(rows < -len(self)) | (rows >= len(self))][0]
            raise IndexError(f"index {bad} out of range for a dataset of {len(self)} items")
        return rows % max(1, len(self))

    def _index(self, i: int) -> int:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"index {i} out of range for a dataset of {n} items")
        return int(i) % n

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor, int]:
        i = self._index(i)
        img = self.image(i)
        # No transform: the stored image as floats in [0, 1]; see build_transforms for the protocols.
        x = self.transform(img) if self.transform is not None else to_tensor(img)
        return x, self.labels[i], i

    def __repr__(self) -> str:
        classes = len(self.labels[:, 0].unique()) if len(self) else 0
        return (f"{type(self).__name__}(split={getattr(self, 'split', '?')!r}, images={len(self)}, "
                f"classes={classes}, levels={self.level_names})")


def batchable(dataset) -> bool:
    """True when a batch of ``dataset`` can be made from its pixels on a device: it is held in
    memory and its transform is the "small" one (:class:`lab.data.transforms.SmallTransform`)."""
    from .transforms import SmallTransform

    return bool(getattr(dataset, "in_memory", False)) and isinstance(getattr(dataset, "transform", None),
                                                                     SmallTransform)


def resized_pixels(dataset, indices: Optional[Sequence[int]] = None, progress: bool = False) -> Tensor:
    """uint8 (n, C, S, S): the images ``indices`` of a :func:`batchable` dataset after its transform's
    deterministic part (Resize to S), ready for ``dataset.transform.batch``."""
    if not batchable(dataset):
        transform = type(getattr(dataset, "transform", None)).__name__
        raise ValueError(f"{type(dataset).__name__} with transform {transform} is not batchable: it needs pixels() "
                         "(glyphs, digits) and the 'small' transform")
    return dataset.transform.resize_pixels(dataset.pixels(indices, progress), progress)
