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
normalised to [-1, 1].
"""
from __future__ import annotations

from typing import Callable, Optional

from torchvision import transforms as T

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
        steps = [T.Resize((image_size, image_size))]
        if train:
            steps.append(T.RandomCrop(image_size, padding=max(1, image_size // 16), fill=0))
        return T.Compose(steps + [T.ToTensor(), T.Normalize((0.5,), (0.5,))])

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
