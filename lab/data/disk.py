"""The papers' datasets read from disk in their published layouts, plus class-per-folder.

``root`` is the dataset folder (or its parent); without it, ``$RANKLAB_DATA/<folder>``. Images
are decoded when read, as RGB (16-bit greyscale scaled to 8 bits, not clipped). Every file is checked
once when the dataset is built (its header, and that it is not cut short). An unreadable image is
skipped: a warning (once per process), the count in ``dataset.num_skipped`` (shared with DataLoader
workers) and another image of the same class in its place, so a bad file never stops a long run. A
class with no readable image at all (every file empty, missing, cut short or not an image) is
dropped when the dataset is built, with one warning for all such classes: it is neither trained
nor evaluated (its images would all be stand-ins).
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import torch
from PIL import Image

from ..core.env import DATA_ENV, data_root
from .labeled_images import DatasetNotFoundError, LabeledImages, check_split

IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"}
INATURALIST_SUPERCATEGORIES = ("Actinopterygii", "Amphibia", "Animalia", "Arachnida", "Aves", "Bacteria",
                               "Chromista", "Fungi", "Insecta", "Mammalia", "Mollusca", "Plantae",
                               "Protozoa", "Reptilia")  # iNaturalist 2018's 14, sorted: stable coarse ids

# name -> (folder names looked for, files that identify the layout, how to get it)
SOURCES = {
    "cub": (("CUB_200_2011",), ("images.txt", "image_class_labels.txt"),
            "CUB-200-2011: download CUB_200_2011.tgz from https://www.vision.caltech.edu/datasets/cub_200_2011/ "
            "(mirror: https://data.caltech.edu/records/65de6-vjr35) and extract it. Layout: CUB_200_2011/"
            "{images.txt, image_class_labels.txt, classes.txt, images/001.Black_footed_Albatross/*.jpg, ...}. "
            "Classes 1-100 train, 101-200 test."),
    "sop": (("Stanford_Online_Products",), ("Ebay_train.txt", "Ebay_test.txt"),
            "Stanford Online Products: download Stanford_Online_Products.zip from "
            "https://cvgl.stanford.edu/projects/lifted_struct/ and extract it. Layout: Stanford_Online_Products/"
            "{Ebay_train.txt, Ebay_test.txt, bicycle_final/*.JPG, ...}; each list has the header "
            "'image_id class_id super_class_id path'."),
    "inaturalist": (("Inaturalist", "iNaturalist", "inaturalist"),
                    ("Inat_dataset_splits/Inaturalist_train_set1.txt", "Inat_dataset_splits/Inaturalist_test_set1.txt"),
                    "iNaturalist 2018: images train_val2018.tar.gz from "
                    "https://github.com/visipedia/inat_comp/tree/master/2018 and Smooth-AP's class split files "
                    "(https://drive.google.com/file/d/1sXfkBTFDrRU3__-NUs1qBP3sf_0uMB98/view, as linked from "
                    "https://github.com/elias-ramzi/HAPPIER). Layout: Inaturalist/{train_val2018/<Supercategory>/"
                    "<category_id>/*.jpg, Inat_dataset_splits/Inaturalist_train_set1.txt, Inaturalist_test_set1.txt}; "
                    "each split line is an image path relative to the root."),
    "folder": ((), (), "Any images in one folder per class: root/<class>/*.jpg, or root/<coarse>/<class>/*.jpg "
               "for a second label level; optionally root/train/... and root/test/... for a given class split "
               "(otherwise the first half of the sorted classes is train, the second half test)."),
}


def find_root(name: str, root: Optional[str]) -> Optional[Path]:
    """The folder holding dataset ``name``'s files, from ``root`` or $RANKLAB_DATA; None if absent."""
    folders, required, _ = SOURCES[name]
    bases = [Path(root).expanduser()] if root is not None else [p for p in [data_root()] if p is not None]
    for base in bases:
        for candidate in [base] + [base / f for f in folders]:
            if candidate.is_dir() and all((candidate / r).is_file() for r in required):
                return candidate
    return None


def _require_root(name: str, root: Optional[str]) -> Path:
    found = find_root(name, root)
    if found is None:
        if root is not None:
            where = f"root={root!r}"
        elif data_root() is not None:
            where = f"${DATA_ENV}={str(data_root())!r}"
        else:
            where = f"no root given and ${DATA_ENV} unset"
        raise DatasetNotFoundError(f"{name} not found ({where}). {SOURCES[name][2]} Then pass root=<that folder> "
                                   f"or set {DATA_ENV} to the folder that contains it.")
    return found


# ---------------------------------------------------------------------------- dataset
class ImageFiles(LabeledImages):
    """Images listed by path with labels (N, L); unreadable files are replaced, never fatal."""

    def __init__(self, split: str, paths: Sequence[Path], labels: np.ndarray, level_names: list[str],
                 class_names: dict[int, str], coarse_names: dict[int, str], transform: Optional[Callable]):
        if len(paths) == 0:
            raise ValueError(f"the {split} split lists no images: check the dataset's files")
        self.split, self.paths, self.transform = split, [Path(p) for p in paths], transform
        self.labels = torch.as_tensor(np.asarray(labels, dtype=np.int64).reshape(len(paths), -1))
        self.level_names, self.class_names, self.coarse_names = level_names, class_names, coarse_names
        self._skipped = torch.zeros(1, dtype=torch.long).share_memory_()  # workers add to the same counter
        self.skipped_paths: set[Path] = set()  # this process's
        self._warned = False
        self.dropped_classes: dict[int, str] = {}
        self._same_class = self._group()
        self._drop_unreadable_classes()

    def _group(self) -> dict[int, np.ndarray]:
        """Fine class -> its items' indices, sorted."""
        fine = self.labels[:, 0].numpy()
        order = np.argsort(fine, kind="stable")
        starts = np.flatnonzero(np.r_[True, fine[order][1:] != fine[order][:-1]])
        return {int(fine[order[s]]): order[s:e] for s, e in zip(starts, np.r_[starts[1:], len(order)])}

    def _drop_unreadable_classes(self) -> None:
        """Check every file once, as the dataset is built (:func:`_complete`: its header, and that it is not
        cut short). A file that fails is skipped from the start, counted and warned about once; a class left
        without a file is dropped, one warning for all such classes. A class kept has a whole image to
        stand in for any other of its files, so no draw of the sampler, hours in, can stop the run."""
        bad: dict[int, list[Path]] = {}  # class -> its files that fail, in order
        dropped = []
        for c, items in self._same_class.items():
            failing = [self.paths[i] for i in items if not _complete(self.paths[i])]
            if failing:
                bad[c] = failing
            if len(failing) == len(items):
                dropped.append(c)
        for c, paths in bad.items():
            for path in paths:  # counted like those found when read; warned about once, not in a dropped class
                self._skip(path, None, warn=c not in dropped)
        if not dropped:
            return
        example = bad[dropped[0]][0]
        keep = ~torch.isin(self.labels[:, 0], torch.tensor(dropped))
        if not keep.any():
            raise ValueError(f"the {self.split} split has no readable image ({self.num_skipped} files empty, missing, "
                             f"cut short or not an image, e.g. {example})")
        self.dropped_classes = {c: self.class_names.pop(c, f"class {c}") for c in dropped}
        self.paths = [p for p, k in zip(self.paths, keep.tolist()) if k]
        self.labels = self.labels[keep]
        self._same_class = self._group()
        names = ", ".join(repr(n) for n in list(self.dropped_classes.values())[:5])
        names += ", ..." if len(dropped) > 5 else ""
        warnings.warn(f"{self.split} split: dropped {len(dropped)} class(es) with no readable image ({names}; e.g. "
                      f"{example}): {len(self.paths):,} images of {len(self._same_class):,} classes remain "
                      "(dataset.dropped_classes)", RuntimeWarning, stacklevel=3)

    @property
    def num_skipped(self) -> int:
        """Unreadable images met so far (each counted once per process that read it)."""
        return int(self._skipped.item())

    def image(self, i: int) -> Image.Image:
        i = self._index(i)
        same = self._same_class[int(self.labels[i, 0])]
        start = int(np.searchsorted(same, i))  # `same` is sorted: the class's items in index order
        for j in np.roll(same, -start):  # i first, then the class's next images
            path = self.paths[j]
            if path in self.skipped_paths:
                continue
            try:
                with Image.open(path) as img:
                    return to_rgb(img)  # decodes now: a truncated file fails here, not later
            except BAD_FILE_ERRORS as err:
                self._skip(path, err)
        # Every file was whole when the dataset was built, and none decodes now (changed on disk since): no
        # stand-in can carry this label (a black image would be trained as the class), so stop, saying which.
        raise ValueError(f"every image of class {self.class_names.get(int(self.labels[i, 0]))!r} of the {self.split} "
                         f"split is unreadable (e.g. {self.paths[i]}): repair or remove its files")

    def _skip(self, path: Path, err: Optional[Exception], warn: bool = True) -> None:
        self.skipped_paths.add(path)
        self._skipped += 1
        if warn and not self._warned:
            self._warned = True
            why = f"{type(err).__name__}: {err}" if err is not None else "empty, missing, cut short or not an image"
            warnings.warn(f"skipping unreadable image {path} ({why}); another image of its "
                          f"class is used instead. Further ones are counted in dataset.num_skipped.", RuntimeWarning)


BAD_FILE_ERRORS = (OSError, ValueError, SyntaxError, Image.DecompressionBombError)  # what PIL raises on one


# How each format ends: a file whose last bytes are these is whole (JPEG's EOI marker, PNG's IEND chunk,
# GIF's trailer). Reading them costs one seek per file; decoding every image would cost minutes on SOP.
END_MARKERS = {"JPEG": b"\xff\xd9", "PNG": b"IEND\xaeB`\x82", "GIF": b"\x3b"}


def _complete(path: Path) -> bool:
    """Whether ``path`` is a whole image: its header opens (size and mode) and it ends with its format's end
    marker. Another format, or bytes after the marker (some cameras pad files), is decoded in full to know."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16))
            tail = f.read().rstrip(b"\0")
        with Image.open(path) as img:
            if img.size[0] <= 0 or img.size[1] <= 0:
                return False
            marker = END_MARKERS.get(img.format or "")
            if marker is None or not tail.endswith(marker):
                img.load()  # a file cut short raises here ("image file is truncated")
            return True
    except BAD_FILE_ERRORS:
        return False


def to_rgb(img: Image.Image) -> Image.Image:
    """``img`` as 8-bit RGB. 16-bit greyscale (``I;16``, a 16-bit PNG) is scaled to 8 bits:
    convert("RGB") clips it at 255, which turns nearly every pixel white. Mode ``I`` (32-bit, how
    older Pillow opens those PNGs) is scaled the same way when it holds values above 255."""
    if img.mode.startswith("I;16") or (img.mode == "I" and img.getextrema()[1] > 255):
        values = np.asarray(img, dtype=np.float64)
        return Image.fromarray(np.clip(np.rint(values / 257.0), 0, 255).astype(np.uint8)).convert("RGB")
    return img.convert("RGB")


def _check_first_image(name: str, root: Path, paths: Sequence[Path]) -> None:
    # A list file without images next to it means a wrong root: say so now, not via 1e5 skips.
    if paths and not Path(paths[0]).is_file():
        raise DatasetNotFoundError(f"{name}: the lists are in {root} but the image {paths[0]} is missing. "
                                   f"{SOURCES[name][2]}")


def _read_table(path: Path, columns: int, header: bool = False) -> list[list[str]]:
    rows = []
    for n, line in enumerate(path.read_text().splitlines()[int(header):], start=1 + int(header)):
        if not line.strip():
            continue
        parts = line.split(maxsplit=columns - 1)
        if len(parts) != columns:
            raise ValueError(f"{path}, line {n}: expected {columns} fields, got {line!r}")
        rows.append(parts)
    return rows


# ----------------------------------------------------------------------------- layouts
def cub(split: str = "train", root: Optional[str] = None, transform: Optional[Callable] = None) -> ImageFiles:
    """CUB-200-2011, classes 1-100 train, 101-200 test. Labels (N, 1): class_id - 1."""
    check_split(split)
    base = _require_root("cub", root)
    paths = {i: p for i, p in _read_table(base / "images.txt", 2)}
    classes = {i: int(c) for i, c in _read_table(base / "image_class_labels.txt", 2)}
    if set(paths) != set(classes):
        raise ValueError(f"{base}: images.txt and image_class_labels.txt list different image ids")
    names = {}
    if (base / "classes.txt").is_file():  # "001.Black_footed_Albatross" -> "Black footed Albatross"
        names = {int(c) - 1: n.split(".", 1)[-1].replace("_", " ") for c, n in _read_table(base / "classes.txt", 2)}
    keep = [i for i in paths if (classes[i] <= 100) == (split == "train")]
    files = [base / "images" / paths[i] for i in keep]
    labels = np.array([classes[i] - 1 for i in keep])
    _check_first_image("cub", base, files)
    class_names = {int(c): names.get(int(c), f"class {c + 1}") for c in np.unique(labels)}
    return ImageFiles(split, files, labels, ["class"], class_names, {}, transform)


def sop(split: str = "train", root: Optional[str] = None, transform: Optional[Callable] = None) -> ImageFiles:
    """Stanford Online Products. Labels (N, 2): class_id - 1 (product), super_class_id - 1 (category)."""
    check_split(split)
    base = _require_root("sop", root)
    rows = _read_table(base / f"Ebay_{split}.txt", 4, header=True)
    files = [base / path for _, _, _, path in rows]
    labels = np.array([[int(c) - 1, int(s) - 1] for _, c, s, _ in rows]).reshape(-1, 2)
    _check_first_image("sop", base, files)
    # The category's name is its folder: "bicycle_final/..." -> "bicycle".
    coarse = {int(s) - 1: path.split("/")[0].removesuffix("_final") for _, _, s, path in rows}
    class_names = {int(c) - 1: f"{coarse[int(s) - 1]} {c}" for _, c, s, _ in rows}
    return ImageFiles(split, files, labels, ["product", "category"], class_names, dict(sorted(coarse.items())),
                      transform)


def inaturalist(split: str = "train", root: Optional[str] = None, transform: Optional[Callable] = None) -> ImageFiles:
    """iNaturalist 2018 with Smooth-AP's class split. Each line of Inat_dataset_splits/Inaturalist_{split}_set1.txt
    is a path relative to root, ``train_val2018/<Supercategory>/<category_id>/<image>.jpg``. Labels (N, 2):
    the category id (as in train2018.json; train and test ids are disjoint) and the supercategory."""
    check_split(split)
    base = _require_root("inaturalist", root)
    listing = base / "Inat_dataset_splits" / f"Inaturalist_{split}_set1.txt"
    lines = [line.strip() for line in listing.read_text().splitlines() if line.strip()]
    parts = [line.split("/") for line in lines]
    for n, p in enumerate(parts, start=1):
        if len(p) < 3 or not p[-2].isdigit():
            raise ValueError(f"{listing}, line {n}: expected <...>/<Supercategory>/<category_id>/<image>, "
                             f"got {lines[n - 1]!r}")
    supers = list(INATURALIST_SUPERCATEGORIES) + sorted({p[-3] for p in parts} - set(INATURALIST_SUPERCATEGORIES))
    labels = np.array([[int(p[-2]), supers.index(p[-3])] for p in parts]).reshape(-1, 2)
    files = [base / line for line in lines]
    _check_first_image("inaturalist", base, files)
    class_names = {int(p[-2]): f"{p[-3]}/{p[-2]}" for p in parts}
    return ImageFiles(split, files, labels, ["species", "supercategory"], class_names, dict(enumerate(supers)),
                      transform)


def folder(split: str = "train", root: Optional[str] = None, transform: Optional[Callable] = None) -> ImageFiles:
    """Images in class folders: root/<class>/* (labels (N, 1)) or root/<coarse>/<class>/* (labels (N, 2)).
    With root/train and root/test, those are the splits; else sorted classes are halved, first half train.
    Fine labels number train's classes 0..n-1, then the test-only ones: held-out classes get their own ids."""
    check_split(split)
    if root is None or not Path(root).expanduser().is_dir():
        raise DatasetNotFoundError(f"folder: root must be an existing directory, got {root!r}. {SOURCES['folder'][2]}")
    base = Path(root).expanduser()
    given = (base / "train").is_dir() and (base / "test").is_dir()
    trees = {s: _class_folders(base / s) for s in ("train", "test")} if given else {"all": _class_folders(base)}
    # Train classes first, so train's fine labels are 0..n-1 as in CUB and SOP.
    if given:
        everything = sorted(trees["train"]) + sorted(set(trees["test"]) - set(trees["train"]))
    else:
        everything = sorted(trees["all"])
    if not everything:
        raise DatasetNotFoundError(f"folder: no images found under {base}. {SOURCES['folder'][2]}")
    depth = {len(c) for c in everything}
    if len(depth) != 1:
        raise ValueError(f"folder: mix of root/<class>/ and root/<coarse>/<class>/ image folders under {base}; use one")
    if given:
        tree = trees[split]
    else:  # first half of the sorted classes train, second half test, like CUB's 100/100
        cut = (len(everything) + 1) // 2
        half = set(everything[:cut] if split == "train" else everything[cut:])
        tree = {c: f for c, f in trees["all"].items() if c in half}
    fine_ids = {c: k for k, c in enumerate(everything)}
    coarse_names = sorted({c[0] for c in everything}) if depth == {2} else []
    files, labels = [], []
    for c in sorted(tree):
        files += tree[c]
        labels += [[fine_ids[c]] + ([coarse_names.index(c[0])] if coarse_names else [])] * len(tree[c])
    level_names = ["class", "coarse"] if coarse_names else ["class"]
    class_names = {fine_ids[c]: "/".join(c) for c in tree}
    return ImageFiles(split, files, np.array(labels), level_names, class_names, dict(enumerate(coarse_names)),
                      transform)


def _class_folders(top: Path) -> dict[tuple[str, ...], list[Path]]:
    """(class,) or (coarse, class) -> sorted image files, for image folders 1 or 2 levels below top."""
    found: dict[tuple[str, ...], list[Path]] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        images = sorted(Path(dirpath) / f for f in filenames if Path(f).suffix.lower() in IMAGE_EXTENSIONS)
        key = Path(dirpath).relative_to(top).parts
        if images and 1 <= len(key) <= 2:
            found[key] = images
    return found
