"""What every RankLab dataset shares: the (image, labels, index) item and the argument checks.

A dataset holds ``labels`` (N, L) int64, finest level first, ``level_names`` (L names),
``class_names`` {fine label: readable name}, a settable ``transform`` and ``image(i)``, the
untransformed PIL image. ``dataset[i]`` is ``(image (C, H, W) float, labels (L,), i)``.
"""
from __future__ import annotations

from typing import Callable, Optional

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

    def __len__(self) -> int:
        return len(self.labels)

    def image(self, i: int) -> Image.Image:
        raise NotImplementedError

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
