"""Embedded datasets: the glyph catalogue and renderer, digits, the "small" transforms."""
import re
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import torch
from fontTools import unicodedata as ucd

from lab.data import DigitsDataset, GlyphDataset, build_dataset, build_transforms, glyph_catalogue
from lab.data.glyphs import FONT_DIR, FONTS, NOT_A_CHARACTER, _ink, draw_glyph, load_font, split_classes


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A fresh cache folder: the first catalogue call below scans the fonts and writes it."""
    return str(tmp_path_factory.mktemp("ranklab-cache"))


@pytest.fixture(scope="module")
def catalogue(cache):
    return glyph_catalogue(cache)


def test_only_the_curated_fonts_are_used():
    stems = [stem for _, stem in FONTS]
    assert len(stems) == 16 and len({family for family, _ in FONTS}) == 4
    banned = re.compile(r"LastResort|^cm|NonUni|STIXSiz|Display")
    assert not [s for s in stems if banned.search(s)]
    assert all((FONT_DIR / f"{s}.ttf").is_file() for s in stems)


def test_every_class_renders_in_3_fonts_from_2_families(catalogue):
    assert 3000 < len(catalogue) < 5000  # several thousand classes
    codepoints = [g.codepoint for g in catalogue]
    assert len(set(codepoints)) == len(codepoints)
    for g in catalogue:
        assert len(g.fonts) >= 3 and len({FONTS[f][0] for f in g.fonts}) >= 2
        assert ucd.block(chr(g.codepoint)) != "Mathematical Alphanumeric Symbols"
    # Spot-check the claim by drawing: each listed font really draws the character.
    rng = np.random.default_rng(0)
    for g in rng.choice(np.array(catalogue, dtype=object), 40):
        assert all(draw_glyph(g[0], f) is not None for f in g[1])


def test_missing_glyph_rejection_rejects_a_code_point_no_font_has():
    cjk = 0x4E00  # no DejaVu/STIX font has CJK ideographs
    # The fonts do draw something for it (their missing-glyph box) ...
    assert any(_ink(load_font(f, 40), chr(cjk)) is not None for f in range(len(FONTS)))
    # ... and draw_glyph recognises it as the missing glyph, in every font.
    assert all(draw_glyph(cjk, f) is None for f in range(len(FONTS)))
    assert all(draw_glyph(NOT_A_CHARACTER, f) is None for f in range(len(FONTS)))
    assert draw_glyph(ord("A"), 0) is not None
    assert draw_glyph(ord(" "), 0) is None  # blank


def test_look_alike_code_points_are_kept_once(catalogue):
    kept = {g.codepoint for g in catalogue}
    assert ord("A") in kept and 0x0391 not in kept and 0x0410 not in kept  # Greek / Cyrillic capital A
    assert 0x03B1 in kept and 0x0251 not in kept  # Greek alpha wins over IPA Latin alpha
    assert ord("O") in kept and ord("0") in kept  # different ink: both kept


def test_coarse_groups(catalogue):
    group = {g.codepoint: g.group for g in catalogue}
    assert group[ord("A")] == "Latin" and group[0x03B1] == "Greek" and group[ord("Ж")] == "Cyrillic"
    assert group[0x2192] == "Arrows" and group[0x2211] == "Math operators" and group[0x2500] == "Box drawing"
    assert 10 <= len(set(group.values())) <= 30


def test_train_and_test_classes_are_disjoint_halves(catalogue, cache):
    train, test = split_classes(catalogue, "train"), split_classes(catalogue, "test")
    assert {g.codepoint for g in train}.isdisjoint(g.codepoint for g in test)
    assert len(train) + len(test) == len(catalogue) and abs(len(train) - len(test)) <= 20
    assert {g.group for g in train} == {g.group for g in test}  # every group on both sides
    a = GlyphDataset("train", instances_per_class=1, cache_dir=cache)
    b = GlyphDataset("test", instances_per_class=1, cache_dir=cache)
    assert len(a) == len(train) and len(b) == len(test)
    assert set(a.labels[:, 0].tolist()).isdisjoint(b.labels[:, 0].tolist())
    assert a.coarse_names == b.coarse_names  # shared coarse ids


def test_dataset_items_shapes_and_names(cache):
    ds = GlyphDataset(num_classes=20, instances_per_class=3, cache_dir=cache)
    assert len(ds) == 60 and ds.labels.shape == (60, 2) and ds.labels.dtype == torch.int64
    assert ds.level_names == ["glyph", "script"]
    x, y, i = ds[7]
    assert x.shape == (1, 32, 32) and x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1
    assert torch.equal(y, ds.labels[7]) and i == 7
    name = ds.class_names[int(y[0])]
    char = name[0]
    assert unicodedata.name(char) in name and f"U+{ord(char):04X}" in name
    assert ds.coarse_names[int(y[1])] == next(g.group for g in ds.glyphs if chr(g.codepoint) == char)
    assert ds.image(7).mode == "L" and ds.image(7).size == (32, 32)
    assert ds.font_name(7) in [stem for _, stem in FONTS]
    assert GlyphDataset(num_classes=2, instances_per_class=1, image_size=48, cache_dir=cache)[0][0].shape == (1, 48, 48)


def test_rendered_images_are_not_blank_and_fit(cache):
    ds = GlyphDataset(num_classes=100, instances_per_class=2, cache_dir=cache)
    for i in range(len(ds)):
        img = np.asarray(ds.image(i))
        ink = (img > 127).mean()
        assert img.max() > 127 and 0.002 < ink < 0.9, (i, ds.class_names[int(ds.labels[i, 0])])


def test_instances_of_a_class_differ(cache):
    ds = GlyphDataset(num_classes=1, instances_per_class=4, cache_dir=cache)
    images = [np.asarray(ds.image(i)) for i in range(4)]
    assert all(not np.array_equal(images[0], other) for other in images[1:])


def test_deterministic_per_seed_and_independent_of_num_classes(cache):
    a = GlyphDataset(num_classes=10, instances_per_class=3, seed=7, cache_dir=cache)
    b = GlyphDataset(num_classes=10, instances_per_class=3, seed=7, cache_dir=cache)
    c = GlyphDataset(num_classes=10, instances_per_class=3, seed=8, cache_dir=cache)
    d = GlyphDataset(num_classes=4, instances_per_class=3, seed=7, cache_dir=cache)
    same = [np.array_equal(np.asarray(a.image(i)), np.asarray(b.image(i))) for i in range(30)]
    other = [np.array_equal(np.asarray(a.image(i)), np.asarray(c.image(i))) for i in range(30)]
    assert all(same) and not any(other)
    assert torch.equal(a.labels, c.labels)  # the seed changes images, not classes
    assert all(np.array_equal(np.asarray(a.image(i)), np.asarray(d.image(i))) for i in range(12))


def test_catalogue_is_cached_on_disk(cache, catalogue):
    files = list(Path(cache).glob("glyph-catalogue-*.json"))
    assert len(files) == 1
    glyph_catalogue.cache_clear()  # the next call reads the file
    assert glyph_catalogue(cache) == catalogue


def test_bad_arguments(cache):
    with pytest.raises(ValueError, match="split must be one of"):
        GlyphDataset("val", cache_dir=cache)
    with pytest.raises(ValueError, match="num_classes must be at most"):
        GlyphDataset(num_classes=10**6, cache_dir=cache)
    with pytest.raises(ValueError, match="instances_per_class"):
        GlyphDataset(instances_per_class=0, cache_dir=cache)
    with pytest.raises(ValueError, match="image_size"):
        GlyphDataset(image_size=4, cache_dir=cache)


def test_build_dataset_glyphs_with_small_transforms(cache):
    train = build_dataset("glyphs", "train", transform=build_transforms("small", True), num_classes=5,
                          instances_per_class=2, cache_dir=cache)
    x, y, _ = train[0]
    assert x.shape == (1, 32, 32) and x.min() >= -1 and x.max() <= 1 and x.min() < 0  # normalised to [-1, 1]
    ev = build_transforms("small", False)
    assert torch.equal(ev(train.image(0)), ev(train.image(0)))


def test_small_transforms_never_flip():
    names = [type(t).__name__ for t in build_transforms("small", True, 32).transforms]
    assert "RandomHorizontalFlip" not in names and "RandomCrop" in names


def test_digits_splits():
    train, test = DigitsDataset("train"), DigitsDataset("test")
    assert set(train.labels[:, 0].tolist()) == {0, 1, 2, 3, 4} and set(test.labels[:, 0].tolist()) == {5, 6, 7, 8, 9}
    assert len(train) + len(test) == 1797
    a, b = DigitsDataset("train", split_by="images"), DigitsDataset("test", split_by="images")
    assert len(a) + len(b) == 1797 and abs(len(a) - len(b)) <= 10
    assert torch.equal(a.labels.unique(), torch.arange(10)) and torch.equal(b.labels.unique(), torch.arange(10))
    x, y, i = train[3]
    assert x.shape == (1, 32, 32) and y.shape == (1,) and train.level_names == ["digit"]
    assert x.max() > 0.5
    assert DigitsDataset(image_size=8)[0][0].shape == (1, 8, 8)
    with pytest.raises(ValueError, match="split_by must be one of"):
        DigitsDataset(split_by="random")


# ------------------------------------------------------------------- rendered images on disk
@pytest.fixture
def images_dir(tmp_path, cache, catalogue, monkeypatch):
    """An empty cache folder but for the catalogue (not scanned again); datasets of 12 images count
    as "large" here, so the image cache is exercised in a fraction of a second."""
    import shutil

    import lab.data.glyphs as glyphs

    for f in Path(cache).glob("glyph-catalogue-*.json"):
        shutil.copy(f, tmp_path)
    monkeypatch.setattr(glyphs, "CACHE_MIN_IMAGES", 12)
    return tmp_path


def test_rendered_images_are_saved_once_and_read_back_identical(images_dir, monkeypatch):
    tmp_path = images_dir
    first = GlyphDataset(num_classes=4, instances_per_class=3, seed=5, cache_dir=str(tmp_path))
    drawn = first.pixels().clone()
    files = list(tmp_path.glob("glyph-images-*.npy"))
    assert len(files) == 1 and np.load(files[0]).shape == (12, 32, 32)

    second = GlyphDataset(num_classes=4, instances_per_class=3, seed=5, cache_dir=str(tmp_path))
    monkeypatch.setattr(GlyphDataset, "_draw", lambda self, i: pytest.fail("drew an image the cache holds"))
    assert torch.equal(second.pixels(), drawn)
    assert np.array_equal(np.asarray(GlyphDataset(num_classes=4, instances_per_class=3, seed=5,
                                                  cache_dir=str(tmp_path)).image(7)), drawn[7, 0].numpy())


def test_other_images_get_another_file_and_a_damaged_file_is_drawn_again(images_dir):
    tmp_path = images_dir
    a = GlyphDataset(num_classes=4, instances_per_class=3, seed=5, cache_dir=str(tmp_path)).pixels().clone()
    b = GlyphDataset(num_classes=4, instances_per_class=3, seed=6, cache_dir=str(tmp_path)).pixels()
    GlyphDataset(num_classes=4, instances_per_class=3, seed=5, image_size=40, cache_dir=str(tmp_path)).pixels()
    files = sorted(tmp_path.glob("glyph-images-*.npy"))
    assert len(files) == 3 and not torch.equal(a, b)
    for f in files:
        f.write_bytes(b"not an array")
    again = GlyphDataset(num_classes=4, instances_per_class=3, seed=5, cache_dir=str(tmp_path))
    assert torch.equal(again.pixels(), a)
    assert sum(f.stat().st_size > 100 for f in tmp_path.glob("glyph-images-*.npy")) == 1  # rewritten
    assert not list(tmp_path.glob("*.tmp"))


def test_small_or_partly_drawn_datasets_write_nothing(images_dir):
    tmp_path = images_dir
    GlyphDataset(num_classes=2, instances_per_class=3, cache_dir=str(tmp_path)).pixels()  # 6 < 12 images
    part = GlyphDataset(num_classes=4, instances_per_class=3, cache_dir=str(tmp_path))
    part.pixels([0, 1, 2])
    assert not list(tmp_path.glob("glyph-images-*"))
    part.pixels()
    assert len(list(tmp_path.glob("glyph-images-*.npy"))) == 1
