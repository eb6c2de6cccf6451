"""Tiny CUB-200-2011, Stanford Online Products and iNaturalist-2018 folders in their published layouts.

Shared by the loader tests (tests/test_data_disk.py) and the recipe runs (tests/test_cli.py).
Images are flat-colour JPEGs; ``colour(class, k)`` picks the colour of the k-th image of a class.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Sequence

from PIL import Image

Colour = Callable[[int, int], tuple[int, int, int]]


def write_image(path: Path, colour=(200, 30, 30), size=(40, 30)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)


def make_cub(root: Path, classes: Iterable[int] = (1, 2, 101, 102), per_class: int = 3,
             colour: Colour = lambda c, k: (c, k * 60, 0)) -> Path:
    """CUB_200_2011 (images.txt, image_class_labels.txt, classes.txt, images/): classes <= 100 are
    the training split, as in the real one."""
    images, labels, names = [], [], []
    n = 0
    for c in classes:
        folder = f"{c:03d}.Bird_number_{c}"
        names.append(f"{c} {folder}")
        for k in range(per_class):
            n += 1
            rel = f"{folder}/Bird_Number_{c}_{k:04d}_{n}.jpg"
            write_image(root / "images" / rel, colour=colour(c, k))
            images.append(f"{n} {rel}")
            labels.append(f"{n} {c}")
    (root / "images.txt").write_text("\n".join(images) + "\n")
    (root / "image_class_labels.txt").write_text("\n".join(labels) + "\n")
    (root / "classes.txt").write_text("\n".join(names) + "\n")
    return root


def make_sop(root: Path, products: Sequence[tuple[int, int, str]], per_class: int = 2, first_test: int = 4,
             colour: Colour = lambda c, k: (200, 30, 30)) -> Path:
    """Stanford_Online_Products (Ebay_train.txt, Ebay_test.txt, <category>_final/): ``products`` are
    (class_id, super_class_id, category name); class ids >= ``first_test`` go to the test split."""
    rows: dict[str, list[str]] = {"train": [], "test": []}
    n = 0
    for cls, sup, name in products:
        for k in range(per_class):
            n += 1
            rel = f"{name}_final/{1000 + cls}_{k}.JPG"
            write_image(root / rel, colour=colour(cls, k))
            rows["train" if cls < first_test else "test"].append(f"{n} {cls} {sup} {rel}")
    for split, lines in rows.items():
        (root / f"Ebay_{split}.txt").write_text("image_id class_id super_class_id path\n" + "\n".join(lines) + "\n")
    return root


def make_inaturalist(root: Path, split: dict[str, Sequence[tuple[str, int]]], per_class: int = 2,
                     colour: Colour = lambda c, k: (200, 30, 30)) -> Path:
    """Inaturalist (Smooth-AP's Inat_dataset_splits/Inaturalist_{train,test}_set1.txt and
    train_val2018/<Supercategory>/<category_id>/): ``split`` maps a split to (supercategory, id) pairs."""
    (root / "Inat_dataset_splits").mkdir(parents=True, exist_ok=True)
    for name, classes in split.items():
        lines = []
        for sup, cat in classes:
            for k in range(per_class):
                rel = f"train_val2018/{sup}/{cat}/{cat:05d}{k}abc.jpg"
                write_image(root / rel, colour=colour(cat, k))
                lines.append(rel)
        (root / "Inat_dataset_splits" / f"Inaturalist_{name}_set1.txt").write_text("\n".join(lines) + "\n")
    return root
