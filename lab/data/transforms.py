"""Image transforms: PIL image -> normalised float tensor (C, H, W).

``"paper"`` is the protocol of ROADMAP supp. B.2 (also Smooth-AP's, FastAP's) for CUB, SOP and
iNaturalist with an ImageNet-pretrained backbone:
- train: resize the shorter side to 256, random crop with area scale in ``crop_scale`` and
  aspect ratio in [3/4, 4/3], resized to 224, horizontal flip with probability 1/2;
- eval: resize the shorter side to 256, centre crop 224; both ImageNet-normalised.

The paper says the crop "has a size between 40 and 256". torchvision's ``scale`` is the crop's
area as a fraction of the image's, so a square crop of side s on the 256 x 256 image is
scale = (s / 256)^2: read literally, 40 px gives (40/256)^2 = 0.024. The authors' released
config uses ``scale=(0.16, 1)`` = 0.4^2, i.e. "40" as 40 % of the side (102 px); that is the
default here, and ``crop_scale=(0.024, 1.0)`` gives the literal reading. (On a non-square image
the fractions are of its whole area, so the same scale means larger crops in pixels.)

``"small"`` is for the 1-channel glyphs and digits: a random shift (pad by image_size/16 with
black, crop back) and no flip, since a mirrored glyph is another glyph (b/d, p/q, <, >, ...);
normalised to [-1, 1]. :class:`SmallTransform` does it to one PIL image (torchvision, in a
DataLoader) or to a whole uint8 batch on any device (:meth:`SmallTransform.batch`, what the
trainer does with the embedded datasets): the same pixels for the same shifts, and the shifts
drawn as torchvision draws them, so one generator state gives the same images either way.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import torch
from PIL import Image
from torch import Tensor
from torchvision import transforms as T
from tqdm.auto import tqdm

from ..core.checks import check_int

KINDS = ("paper", "small")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
PAPER_CROP_SCALE = (0.16, 1.0)  # ROADMAP's released config; (0.024, 1.0) is the text read literally
PAPER_RATIO = (3 / 4, 4 / 3)


def build_transforms(
    kind: str,
    train: bool,
    image_size: Optional[int] = None,
    *,
    crop_scale: tuple[float, float] = PAPER_CROP_SCALE,
) -> Callable:
    """The ``kind`` ("paper" | "small") pipeline for training (random) or evaluation (fixed).

    ``image_size`` defaults to 224 ("paper": resized to image_size * 256/224 first) or 32 ("small").
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if not isinstance(train, bool):
        raise ValueError(f"train must be True or False, got {train!r}")
    image_size = image_size if image_size is not None else (224 if kind == "paper" else 32)
    image_size = check_int("image_size", image_size, minimum=8)
    if kind == "small":
        return SmallTransform(image_size, train)

    lo, hi = crop_scale
    if not 0 < lo <= hi <= 1:
        raise ValueError(f"crop_scale must be (low, high) with 0 < low <= high <= 1, got {crop_scale!r}")
    resize = round(image_size * 256 / 224)  # 256 for 224: the papers' ratio
    if train:
        steps = [T.Resize(resize), T.RandomResizedCrop(image_size, scale=crop_scale, ratio=PAPER_RATIO),
                 T.RandomHorizontalFlip()]
    else:
        steps = [T.Resize(resize), T.CenterCrop(image_size)]
    # convert("RGB"): a grayscale or CMYK file in a colour dataset still gives 3 channels.
    return T.Compose([T.Lambda(_rgb)] + steps + [T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def _rgb(img):
    return img.convert("RGB") if img.mode != "RGB" else img


class SmallTransform(T.Compose):
    """The "small" pipeline: Resize to ``image_size``, [RandomCrop(image_size, padding, fill=0):
    a random shift by -padding..padding pixels per axis, black coming in], ToTensor, Normalize
    to [-1, 1]. Called on a PIL image as any torchvision Compose; :meth:`batch` does the same to
    a uint8 batch already resized (:meth:`resize_pixels`), on the batch's device."""

    def __init__(self, image_size: int, train: bool) -> None:
        self.image_size = image_size
        self.padding = max(1, image_size // 16) if train else 0
        steps: list[Callable] = [T.Resize((image_size, image_size))]
        if train:
            steps.append(T.RandomCrop(image_size, padding=self.padding, fill=0))
        super().__init__(steps + [T.ToTensor(), T.Normalize((0.5,), (0.5,))])

    @property
    def train(self) -> bool:
        return self.padding > 0

    def draw_shifts(self, n: int, generator: Optional[torch.Generator] = None) -> Tensor:
        """(n, 2) int64 crop offsets (row i, column j) in the padded image, each uniform in
        0..2*padding, drawn in torchvision's order (RandomCrop.get_params draws i then j per
        image): the same generator state gives the same shifts as n calls of the transform."""
        if not self.train:
            raise ValueError("draw_shifts: this is an evaluation transform (train=False): it has no random shift")
        return torch.randint(0, 2 * self.padding + 1, (n, 2), generator=generator)

    def resize_pixels(self, pixels: Tensor, progress: bool = False) -> Tensor:
        """uint8 (N, C, h, w) -> (N, C, image_size, image_size): the transform's Resize, done once
        per image with PIL (bilinear, as torchvision does it), so :meth:`batch` sees the pixels
        RandomCrop sees. Already of the size: returned as they are (PIL's resize is then a copy)."""
        check_pixels(pixels)
        if tuple(pixels.shape[2:]) == (self.image_size, self.image_size):
            return pixels
        resize, out = self.transforms[0], []
        for p in tqdm(pixels, desc="resize", unit="image", disable=not progress, delay=1.0):
            image = Image.fromarray(p[0].numpy() if len(p) == 1 else p.permute(1, 2, 0).numpy())
            out.append(torch.from_numpy(np.asarray(resize(image)).copy()).view(self.image_size, self.image_size, -1))
        return torch.stack(out).permute(0, 3, 1, 2).contiguous()

    def batch(self, pixels: Tensor, shifts: Optional[Tensor] = None) -> Tensor:
        """uint8 pixels (B, C, S, S), S = image_size, and (train) crop offsets (B, 2) from
        :meth:`draw_shifts` -> float32 (B, C, S, S) in [-1, 1], on the pixels' device: image b
        shifted by (shifts[b] - padding), zeros coming in, then ToTensor's /255 and Normalize's
        (x - 0.5) / 0.5 as the same float32 operations (bit-identical to the per-image path)."""
        check_pixels(pixels)
        if tuple(pixels.shape[2:]) != (self.image_size, self.image_size):
            raise ValueError(f"pixels must be {self.image_size} x {self.image_size} (resize_pixels), "
                             f"got {tuple(pixels.shape[2:])}")
        if self.train:
            pixels = self._shift(pixels, shifts)
        elif shifts is not None:
            raise ValueError("shifts given to an evaluation transform (train=False), which does not shift")
        return pixels.float().div(255).sub(0.5).div(0.5).contiguous()

    def _shift(self, pixels: Tensor, shifts: Optional[Tensor]) -> Tensor:
        p, (b, _, size, _) = self.padding, pixels.shape
        if shifts is None or tuple(shifts.shape) != (b, 2) or shifts.dtype != torch.int64:
            got = None if shifts is None else f"{tuple(shifts.shape)} {shifts.dtype}"
            raise ValueError(f"shifts must be a ({b}, 2) int64 tensor of crop offsets (draw_shifts), got {got}")
        if shifts.numel() and not (0 <= int(shifts.min()) and int(shifts.max()) <= 2 * p):
            low, high = int(shifts.min()), int(shifts.max())
            raise ValueError(f"shifts must lie in 0..{2 * p} (2 x padding), got {low}..{high}")
        c = pixels.shape[1]
        shifts = shifts.to(pixels.device, non_blocking=True)
        padded = torch.nn.functional.pad(pixels, (p, p, p, p))  # zeros: RandomCrop's fill=0
        steps = torch.arange(size, device=pixels.device)
        rows = (shifts[:, :1] + steps)[:, None, :, None].expand(b, c, size, size + 2 * p)
        cols = (shifts[:, 1:] + steps)[:, None, None, :].expand(b, c, size, size)
        # Rows i..i+S-1, then columns j..j+S-1 of each padded image: two gathers (about twice
        # as fast on the CPU as one advanced index over (batch, row, column)).
        return padded.gather(2, rows).gather(3, cols)


def check_pixels(pixels: Tensor) -> None:
    if not isinstance(pixels, Tensor) or pixels.dtype != torch.uint8 or pixels.dim() != 4:
        what = f"{pixels.dtype} of shape {tuple(pixels.shape)}" if isinstance(pixels, Tensor) else type(pixels).__name__
        raise ValueError(f"pixels must be a uint8 tensor (N, C, H, W), got {what}")
