"""Datasets, transforms and batch samplers: ``build_dataset(name, split, root, transform, **kwargs)``.

Every dataset yields ``(image (C, H, W) float, labels (L,) int64, index)`` with ``labels``
(N, L) finest level first, held-out classes in test (fine labels disjoint from train's).
Embedded, always available: "glyphs" (Unicode characters drawn with matplotlib's fonts) and
"digits" (scikit-learn's). From disk: "cub", "sop", "inaturalist", "folder"; see
``describe_datasets()`` for what this machine has and how to get the rest.
"""
from __future__ import annotations

from ..core.extras import require

require("lab.data")  # first: a missing extra is one line naming it, not a traceback from a submodule

import inspect
from typing import Callable, Optional

from .labeled_images import SPLITS, DatasetNotFoundError, LabeledImages, check_split
from .digits import DigitsDataset
from .disk import DATA_ENV, SOURCES, ImageFiles, cub, find_root, folder, inaturalist, sop
from .glyphs import GlyphDataset, glyph_catalogue
from .samplers import HierarchicalBatchSampler, MPerClassBatchSampler
from .transforms import SmallTransform, build_transforms

EMBEDDED = ("glyphs", "digits")
DATASETS: dict[str, Callable[..., LabeledImages]] = {
    "glyphs": GlyphDataset,
    "digits": DigitsDataset,
    "cub": cub,
    "sop": sop,
    "inaturalist": inaturalist,
    "folder": folder,
}
# Which transforms a dataset's images want (build_transforms(kind, ...)).
TRANSFORM_KIND = {"glyphs": "small", "digits": "small", "cub": "paper", "sop": "paper", "inaturalist": "paper",
                  "folder": "paper"}


def build_dataset(name: str, split: str = "train", root: Optional[str] = None, transform: Optional[Callable] = None,
                  **kwargs) -> LabeledImages:
    """Dataset ``name`` (see DATASETS). ``root`` is ignored by the embedded ones; ``kwargs`` go to
    the builder, e.g. ``build_dataset("glyphs", num_classes=200, instances_per_class=10, seed=1)``."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of: {', '.join(DATASETS)}")
    check_split(split)
    builder = DATASETS[name]
    accepted = [p for p in inspect.signature(builder).parameters if p not in ("split", "root", "transform")]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ValueError(f"{name} does not take {', '.join(unknown)}; its options are: {', '.join(accepted) or 'none'}")
    if name in EMBEDDED:
        return builder(split=split, transform=transform, **kwargs)
    return builder(split=split, root=root, transform=transform, **kwargs)


def describe_datasets(root: Optional[str] = None) -> str:
    """Which datasets this machine has (embedded ones always; disk ones under ``root`` or
    $RANKLAB_DATA) and how to obtain the others."""
    lines = ["Datasets (build_dataset(name, split='train'|'test', root=...)):",
             "  glyphs       available (embedded): Unicode characters drawn with matplotlib's DejaVu and STIX fonts,"
             " ~3,700 classes split in halves; labels (glyph, script); 1 x 32 x 32",
             "  digits       available (embedded): scikit-learn's 8x8 digits, 0-4 train / 5-9 test"
             " (split_by='images' for all ten in both); 1 x 32 x 32"]
    for name in ("cub", "sop", "inaturalist"):
        found = find_root(name, root)
        state = f"available at {found}" if found else f"not found. {SOURCES[name][2]}"
        lines.append(f"  {name:<12} {state}")
    lines.append(f"  folder       needs root=<dir>. {SOURCES['folder'][2]}")
    lines.append(f"Disk datasets are looked for in root or ${DATA_ENV} (the folder itself or its parent).")
    return "\n".join(lines)


__all__ = [
    "DATASETS", "SPLITS", "build_dataset", "describe_datasets", "build_transforms", "LabeledImages", "ImageFiles",
    "GlyphDataset", "DigitsDataset", "glyph_catalogue", "cub", "sop", "inaturalist", "folder",
    "MPerClassBatchSampler", "HierarchicalBatchSampler", "DatasetNotFoundError", "TRANSFORM_KIND", "SmallTransform",
]
