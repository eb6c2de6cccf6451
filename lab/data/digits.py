"""scikit-learn's bundled 8x8 handwritten digits (1,797 images, 10 classes), as a RankLab dataset.

Ten classes make a weak held-out-class benchmark, so two splits are offered:
- ``split_by="classes"`` (default, the retrieval protocol): train = digits 0-4, test = 5-9;
  fine labels of train and test are disjoint, as for every other dataset.
- ``split_by="images"``: all ten digits in both splits, alternate images of each digit in
  train and test. Test queries then retrieve classes seen in training (a closed-set check,
  not the papers' protocol); the labels of the two splits are the same 0-9.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
import torch
from PIL import Image
from torch import Tensor

from ..core.checks import check_int
from .labeled_images import LabeledImages, check_split

SPLIT_BY = ("classes", "images")


class DigitsDataset(LabeledImages):
    """1-channel digits upsampled (bilinear) from 8x8 to ``image_size``, white ink on black."""

    in_memory = True

    def __init__(
        self,
        split: str = "train",
        split_by: str = "classes",
        image_size: int = 32,
        transform: Optional[Callable] = None,
    ):
        check_split(split)
        if split_by not in SPLIT_BY:
            raise ValueError(f"split_by must be one of {SPLIT_BY}, got {split_by!r}")
        image_size = check_int("image_size", image_size, minimum=8)
        from sklearn.datasets import load_digits  # here: importing sklearn takes seconds

        images, digits = load_digits(return_X_y=True)
        if split_by == "classes":
            keep = (digits < 5) if split == "train" else (digits >= 5)
        else:
            # Alternate within each digit: both splits get half of every class, whatever the seed.
            rank = np.zeros(len(digits), dtype=np.int64)
            for d in range(10):
                rank[digits == d] = np.arange(int((digits == d).sum()))
            keep = (rank % 2 == 0) if split == "train" else (rank % 2 == 1)
        # sklearn stores ink 0..16; scale to 0..255. (N, 8, 8) uint8
        self.images_8x8 = (images[keep].reshape(-1, 8, 8) * (255 / 16)).round().astype(np.uint8)
        self.split, self.split_by, self.image_size, self.transform = split, split_by, image_size, transform
        self.labels = torch.from_numpy(digits[keep].astype(np.int64))[:, None]
        self.level_names = ["digit"]
        self.class_names = {int(d): str(d) for d in np.unique(digits[keep])}
        self.coarse_names = {}
        self._upsampled: Optional[np.ndarray] = None  # (N, S, S) uint8 once pixels() is asked for

    def image(self, i: int) -> Image.Image:
        img = Image.fromarray(self.images_8x8[self._index(i)])
        return img if self.image_size == 8 else img.resize((self.image_size,) * 2, Image.Resampling.BILINEAR)

    def pixels(self, indices: Optional[Sequence[int]] = None, progress: bool = False) -> Tensor:
        if self._upsampled is None:  # ~1,000 tiny images: all at once, once
            self._upsampled = np.stack([np.asarray(self.image(i)) for i in range(len(self))])
        return torch.from_numpy(self._upsampled[self._rows(indices)]).unsqueeze(1)
