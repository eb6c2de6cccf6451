"""Glyphs: an embedded retrieval dataset of Unicode characters drawn with matplotlib's fonts.

A class is a code point drawn by >= 3 of 16 fonts from >= 2 of their 4 families (DejaVu Sans,
Sans Mono, Serif and STIX General, 4 styles each); an image is one of those fonts under a random
affine jitter (rotation, scale, shear, shift). Labels (N, 2): the glyph and its script or symbol group (Latin, Greek,
Arrows, Math operators, ...). Train and test hold disjoint halves of the classes, as CUB does.

The class catalogue takes a few seconds to scan, so it is cached in memory and on disk
(``$RANKLAB_CACHE`` or ``~/.cache/ranklab``) and rescanned when the file is missing. Rendering a
whole split (~15k images) takes seconds too: once every image of a dataset of at least
``CACHE_MIN_IMAGES`` has been drawn (``pixels()``), the images are saved next to the catalogue,
under a name that hashes everything they depend on, and later datasets read them back.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import unicodedata
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Sequence

import matplotlib
import numpy as np
import PIL
import torch
from fontTools import unicodedata as ucd
from fontTools.ttLib import TTFont
from PIL import Image, ImageFont, features
from torch import Tensor
from tqdm.auto import tqdm

from ..core import env
from ..core.checks import check_int
from ..core.files import write_atomic
from .labeled_images import LabeledImages, check_split

FONT_DIR = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
# Left out: LastResortHE (its cmap claims everything, it draws placeholders), cm*10 (TeX
# encodings: ASCII code points hold other symbols), STIXNonUni (private use), STIXSiz* (sized
# big operators), *Display (tiny subsets).
FAMILIES = {
    "DejaVu Sans": ("DejaVuSans", "DejaVuSans-Bold", "DejaVuSans-Oblique", "DejaVuSans-BoldOblique"),
    "DejaVu Sans Mono": ("DejaVuSansMono", "DejaVuSansMono-Bold", "DejaVuSansMono-Oblique",
                         "DejaVuSansMono-BoldOblique"),
    "DejaVu Serif": ("DejaVuSerif", "DejaVuSerif-Bold", "DejaVuSerif-Italic", "DejaVuSerif-BoldItalic"),
    "STIX General": ("STIXGeneral", "STIXGeneralBol", "STIXGeneralItalic", "STIXGeneralBolIta"),
}
FONTS = [(family, stem) for family, stems in FAMILIES.items() for stem in stems]  # index -> font
MIN_FONTS, MIN_FAMILIES = 3, 2
MIN_INK = 4  # pixels above half intensity; fewer = blank (spaces, empty .notdef)
MIN_GROUP = 10  # coarse groups with fewer classes merge into OTHER
OTHER = "Miscellaneous symbols"
NOT_A_CHARACTER = 0x10FFFD  # no font has it: each font draws its missing-glyph box for it
SCAN_SIZE = 40  # font size (px) of the catalogue scan: the default 32 px image is drawn at 40
CATALOGUE_VERSION = 2  # bump when the rules below change: old cache files are then ignored
RENDER_VERSION = 1  # bump when jitter_image or _base_ink draw differently: old image files are then ignored
CACHE_MIN_IMAGES = 2000  # smaller datasets render in well under a second: not worth a file

# Where a script's everyday letters live: they win ties between look-alike code points.
MAIN_BLOCKS = {"Basic Latin", "Latin-1 Supplement", "Greek and Coptic", "Cyrillic", "Armenian", "Georgian", "Arabic"}
# Blocks of script-neutral characters (script Common) -> coarse group; other blocks keep their name.
SYMBOL_GROUPS = {
    "Basic Latin": "ASCII and Latin-1 symbols", "Latin-1 Supplement": "ASCII and Latin-1 symbols",
    "General Punctuation": "Punctuation", "Supplemental Punctuation": "Punctuation",
    "Mathematical Operators": "Math operators", "Supplemental Mathematical Operators": "Math operators",
    "Miscellaneous Mathematical Symbols-A": "Math operators",
    "Miscellaneous Mathematical Symbols-B": "Math operators",
    "Arrows": "Arrows", "Supplemental Arrows-A": "Arrows", "Supplemental Arrows-B": "Arrows",
    "Miscellaneous Symbols and Arrows": "Arrows",
    "Box Drawing": "Box drawing", "Block Elements": "Box drawing",
    "Geometric Shapes": "Shapes", "Geometric Shapes Extended": "Shapes",
    "Spacing Modifier Letters": "Modifier letters", "Modifier Tone Letters": "Modifier letters",
    "Letterlike Symbols": "Letterlike and number forms", "Number Forms": "Letterlike and number forms",
    "Superscripts and Subscripts": "Letterlike and number forms",
    "Enclosed Alphanumerics": "Letterlike and number forms",
    "Miscellaneous Symbols": "Miscellaneous symbols", "Miscellaneous Technical": "Technical symbols",
    "Currency Symbols": "Currency", "Dingbats": "Dingbats",
}
# Affine jitter of one instance: rotation (degrees), scale, shear, shift (fraction of the canvas).
JITTER_LOW = np.array([-12.0, 0.85, -0.15, -0.05, -0.05])
JITTER_HIGH = np.array([12.0, 1.10, 0.15, 0.05, 0.05])


class Glyph(NamedTuple):
    codepoint: int
    fonts: tuple[int, ...]  # indices into FONTS that draw it
    group: str  # coarse label name


# ------------------------------------------------------------------------------ drawing
@functools.lru_cache(maxsize=None)
def load_font(index: int, size: int) -> ImageFont.FreeTypeFont:
    # BASIC layout: raqm would decompose a precomposed letter the font lacks into base +
    # combining mark and make the font look as if it covered it.
    path = FONT_DIR / f"{FONTS[index][1]}.ttf"
    return ImageFont.truetype(str(path), size, layout_engine=ImageFont.Layout.BASIC)


def _ink(font: ImageFont.FreeTypeFont, char: str) -> Optional[np.ndarray]:
    """(h, w) uint8 mask of the char cropped to its ink box; None when nothing is drawn."""
    core = font.getmask(char, mode="L")
    w, h = core.size
    if w * h == 0:
        return None
    mask = np.frombuffer(bytes(core), dtype=np.uint8).reshape(h, w)
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    return mask[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1] if len(rows) else None


def _key(ink: np.ndarray) -> bytes:
    return repr(ink.shape).encode() + ink.tobytes()


@functools.lru_cache(maxsize=None)
def _missing_glyph(index: int, size: int) -> Optional[bytes]:
    ink = _ink(load_font(index, size), chr(NOT_A_CHARACTER))
    return None if ink is None else _key(ink)


def draw_glyph(codepoint: int, font: int, size: int = SCAN_SIZE) -> Optional[np.ndarray]:
    """The glyph's ink, (h, w) uint8 cropped to its box, in FONTS[font] at ``size`` px; None
    when the font draws nothing or only its missing-glyph box for it."""
    ink = _ink(load_font(font, size), chr(codepoint))
    if ink is None or int((ink > 127).sum()) < MIN_INK or _key(ink) == _missing_glyph(font, size):
        return None
    return ink


def jitter_image(ink: Image.Image, image_size: int, jitter: np.ndarray) -> Image.Image:
    """Ink (L mask) centred on a 2x canvas under the affine ``jitter``, box-filtered to image_size."""
    canvas = 2 * image_size
    angle, scale, shear, dx, dy = jitter
    w, h = ink.size
    scale *= min(1.0, 0.8 * canvas / max(w, h))  # shrink only glyphs that would not fit
    a = np.deg2rad(angle)
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    forward = scale * rot @ np.array([[1.0, shear], [0.0, 1.0]])
    # PIL maps each output pixel back to the input: p_in = inv @ (p_out - centre - shift) + g.
    inv = np.linalg.inv(forward)
    offset = np.array([w / 2, h / 2]) - inv @ (np.array([canvas / 2 + dx * canvas, canvas / 2 + dy * canvas]))
    data = (inv[0, 0], inv[0, 1], offset[0], inv[1, 0], inv[1, 1], offset[1])
    big = ink.transform((canvas, canvas), Image.Transform.AFFINE, data, resample=Image.Resampling.BILINEAR)
    return big.reduce(2)  # 2x2 box filter: anti-aliases thin strokes


# ---------------------------------------------------------------------------- catalogue
def _wanted(codepoint: int) -> bool:
    char = chr(codepoint)
    return (
        unicodedata.category(char)[0] not in "CZM"  # controls, spaces, combining marks
        and ucd.block(char) != "Mathematical Alphanumeric Symbols"  # styled copies of Latin/Greek
        and unicodedata.normalize("NFC", char) == char  # e.g. OHM SIGN is GREEK CAPITAL OMEGA
    )


def _enough(fonts) -> bool:
    return len(fonts) >= MIN_FONTS and len({FONTS[f][0] for f in fonts}) >= MIN_FAMILIES


def _group(codepoint: int) -> str:
    char = chr(codepoint)
    script = ucd.script(char)
    if script not in ("Zyyy", "Zinh", "Zzzz"):
        return ucd.script_name(script)
    block = ucd.block(char)
    return SYMBOL_GROUPS.get(block, block)


def scan_fonts() -> list[Glyph]:
    """Every qualifying class, by code point. A few seconds: use ``glyph_catalogue``."""
    cmaps = [set(TTFont(FONT_DIR / f"{stem}.ttf", lazy=True).getBestCmap()) for _, stem in FONTS]
    covered: dict[int, list[int]] = {}
    for f, cmap in enumerate(cmaps):
        for cp in cmap:
            covered.setdefault(cp, []).append(f)
    drawn: dict[int, dict[int, bytes]] = {}  # code point -> {font: hash of its ink}
    for cp in sorted(covered):
        if not (_enough(covered[cp]) and _wanted(cp)):  # the cmap is a cheap first filter
            continue
        inks = {f: hashlib.md5(_key(ink)).digest() for f in covered[cp] if (ink := draw_glyph(cp, f)) is not None}
        if _enough(inks):
            drawn[cp] = inks
    # Images are centred on the ink box, so two code points with the same ink in some font (Latin A,
    # Greek Alpha, Cyrillic A; one-dot Braille cells) cannot be told apart: keep one, the first in
    # (main script block first, then code point) order, so Greek alpha wins over IPA's Latin alpha.
    glyphs, seen = [], set()
    for cp in sorted(drawn, key=lambda cp: (ucd.block(chr(cp)) not in MAIN_BLOCKS, cp)):
        keys = set(drawn[cp].items())
        if not keys & seen:
            seen |= keys
            glyphs.append(Glyph(cp, tuple(sorted(drawn[cp])), _group(cp)))
    glyphs.sort()
    sizes: dict[str, int] = {}
    for g in glyphs:
        sizes[g.group] = sizes.get(g.group, 0) + 1
    return [g._replace(group=g.group if sizes[g.group] >= MIN_GROUP else OTHER) for g in glyphs]


def cache_root(cache_dir: Optional[str] = None) -> Path:
    return Path(cache_dir) if cache_dir else env.cache_dir()


def _fingerprint() -> list:
    """Everything a scan or a drawing depends on besides our code: rasteriser and font files."""
    return [PIL.__version__, features.version("freetype2"),
            [(stem, (FONT_DIR / f"{stem}.ttf").stat().st_size) for _, stem in FONTS]]


def _cache_file(cache_dir: Optional[str]) -> Path:
    digest = hashlib.md5(json.dumps([CATALOGUE_VERSION, *_fingerprint()]).encode()).hexdigest()[:12]
    return cache_root(cache_dir) / f"glyph-catalogue-{digest}.json"


def _write_atomic(path: Path, write: Callable, mode: str = "w") -> None:
    """``write(file)`` into a temporary file beside ``path``, then rename: a concurrent reader never
    sees half a file. A read-only cache folder is no error (the in-memory copy still serves)."""
    with contextlib.suppress(OSError):
        # lab.core.files: the mode a plain open() gives (NamedTemporaryFile's 0o600 hid a shared cache)
        write_atomic(path, write if mode == "wb" else lambda f: _as_text(f, write))


def _as_text(f, write: Callable) -> None:
    """``write`` into the binary file ``f`` as UTF-8 text, flushed and detached (``f`` stays open)."""
    text = io.TextIOWrapper(f, encoding="utf-8")
    write(text)
    text.flush()
    text.detach()


@functools.lru_cache(maxsize=4)
def glyph_catalogue(cache_dir: Optional[str] = None) -> tuple[Glyph, ...]:
    """The qualifying classes, read from the disk cache or scanned (and cached) when missing."""
    path = _cache_file(cache_dir)
    try:
        return tuple(Glyph(cp, tuple(fonts), group) for cp, fonts, group in json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        pass  # missing or unreadable cache: rescan
    glyphs = tuple(scan_fonts())
    _write_atomic(path, lambda f: json.dump([list(g) for g in glyphs], f))
    return glyphs


def split_classes(catalogue: tuple[Glyph, ...], split: str) -> list[Glyph]:
    """The split's classes, in label order. Within each group, code points alternate between
    train and test, so both halves cover every group; the order is a fixed pseudo-random one
    (a hash, independent of numpy versions) so that the first k classes sample every group."""
    check_split(split)
    by_group: dict[str, list[Glyph]] = {}
    for g in catalogue:
        by_group.setdefault(g.group, []).append(g)
    half = [g for members in by_group.values() for g in members[split == "test"::2]]
    return sorted(half, key=lambda g: hashlib.md5(str(g.codepoint).encode()).digest())


# ------------------------------------------------------------------------------ dataset
class GlyphDataset(LabeledImages):
    """Rendered Unicode glyphs: 1-channel ``image_size`` x ``image_size``, white ink on black.

    ``num_classes`` (default: all of the split) x ``instances_per_class`` images; instance k of
    a class uses the class's fonts in a seeded random order (cycling) and its own jitter, so
    ``seed`` fixes every image and a class draws the same images whatever ``num_classes`` is.
    Images are drawn when first read and kept (N x size x size bytes); ``pixels()`` draws (or
    reads from the disk cache) all that are asked for at once. Fine labels: train 0..n-1, test
    n..; coarse labels are shared by both splits.
    """

    in_memory = True

    def __init__(
        self,
        split: str = "train",
        num_classes: Optional[int] = None,
        instances_per_class: int = 8,
        image_size: int = 32,
        seed: int = 0,
        transform: Optional[Callable] = None,
        cache_dir: Optional[str] = None,
    ):
        check_split(split)
        instances_per_class = check_int("instances_per_class", instances_per_class)
        image_size, seed = check_int("image_size", image_size, minimum=8), check_int("seed", seed, minimum=0)
        catalogue = glyph_catalogue(cache_dir)
        classes = split_classes(catalogue, split)
        if num_classes is not None:
            num_classes = check_int("num_classes", num_classes)
            if num_classes > len(classes):
                raise ValueError(f"num_classes must be at most {len(classes)} (the {split} classes), got {num_classes}")
            classes = classes[:num_classes]
        self.split, self.image_size, self.seed, self.transform = split, image_size, seed, transform
        self.cache_dir = cache_dir
        self.glyphs = classes
        groups = sorted({g.group for g in catalogue})
        first = 0 if split == "train" else len(split_classes(catalogue, "train"))
        k = instances_per_class
        fonts, jitter = [], []
        for g in classes:
            rng = np.random.default_rng([seed, g.codepoint])
            fonts.append(np.resize(rng.permutation(g.fonts), k))  # np.resize cycles the order
            jitter.append(rng.uniform(JITTER_LOW, JITTER_HIGH, size=(k, 5)))
        self.codepoints = np.repeat([g.codepoint for g in classes], k)
        self.fonts = np.concatenate(fonts)  # (N,) index into FONTS
        self.jitter = np.concatenate(jitter)  # (N, 5)
        fine = np.repeat(np.arange(first, first + len(classes)), k)
        coarse = np.repeat([groups.index(g.group) for g in classes], k)
        self.labels = torch.from_numpy(np.stack([fine, coarse], 1).astype(np.int64))
        self.level_names = ["glyph", "script"]
        self.class_names = {first + c: _describe(g.codepoint) for c, g in enumerate(classes)}
        self.coarse_names = dict(enumerate(groups))
        self._rendered = np.zeros((len(self.codepoints), image_size, image_size), dtype=np.uint8)
        self._done = np.zeros(len(self.codepoints), dtype=bool)
        self._cache_read = self._cache_written = False

    def image(self, i: int) -> Image.Image:
        i = self._index(i)
        if not self._done[i]:
            self._read_cache()
        if not self._done[i]:
            self._draw(i)
        return Image.fromarray(self._rendered[i])

    def pixels(self, indices: Optional[Sequence[int]] = None, progress: bool = False) -> Tensor:
        """uint8 (n, 1, S, S) of ``indices`` (default all): drawn now where not drawn yet, with a
        progress bar (``progress``) when that takes more than a second; a whole dataset of at
        least CACHE_MIN_IMAGES images is then saved to the disk cache for the next process."""
        rows = self._rows(indices)
        self._read_cache()
        missing = np.unique(rows[~self._done[rows]])
        for i in tqdm(missing, desc=f"render {self.split} glyphs", unit="image", disable=not progress, delay=1.0):
            self._draw(int(i))
        if len(missing) and self._done.all() and len(self) >= CACHE_MIN_IMAGES and not self._cache_written:
            _write_atomic(self._cache_path(), lambda f: np.save(f, self._rendered), mode="wb")
            self._cache_written = True
        images = self._rendered if indices is None else self._rendered[rows]  # all: no copy
        return torch.from_numpy(images).unsqueeze(1)

    def _draw(self, i: int) -> None:
        ink = _base_ink(int(self.codepoints[i]), int(self.fonts[i]), round(1.25 * self.image_size))
        self._rendered[i] = np.asarray(jitter_image(ink, self.image_size, self.jitter[i]))
        self._done[i] = True

    def _cache_path(self) -> Path:
        # The drawing's every input: code points, fonts and jitter (seed, classes, instances), size, renderer.
        head = json.dumps([RENDER_VERSION, *_fingerprint(), self.image_size, len(self)]).encode()
        digest = hashlib.md5(head + self.codepoints.tobytes() + self.fonts.tobytes() + self.jitter.tobytes())
        return cache_root(self.cache_dir) / f"glyph-images-{digest.hexdigest()[:16]}.npy"

    def _read_cache(self) -> None:
        """Once per dataset: every image from the disk cache, if a file for exactly these images exists."""
        if self._cache_read or len(self) < CACHE_MIN_IMAGES:
            return
        self._cache_read = True
        try:
            images = np.load(self._cache_path(), allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return  # missing or damaged: drawn again (and saved again by pixels())
        if images.shape == self._rendered.shape and images.dtype == np.uint8:
            self._rendered[:] = images
            self._done[:] = True
            self._cache_written = True

    def font_name(self, i: int) -> str:
        """The font file (without .ttf) that drew image i, e.g. "DejaVuSerif-Italic"."""
        return FONTS[int(self.fonts[self._index(i)])][1]


@functools.lru_cache(maxsize=100_000)
def _base_ink(codepoint: int, font: int, size: int) -> Image.Image:
    ink = draw_glyph(codepoint, font, size)
    if ink is not None:
        return Image.fromarray(ink)
    # Drawn at the scan size but not at this one (tiny sizes): scale the scan's ink.
    scan = Image.fromarray(draw_glyph(codepoint, font, SCAN_SIZE))
    return scan.resize((max(1, scan.width * size // SCAN_SIZE), max(1, scan.height * size // SCAN_SIZE)))


def _describe(codepoint: int) -> str:
    return f"{chr(codepoint)} U+{codepoint:04X} {unicodedata.name(chr(codepoint), '')}".rstrip()
