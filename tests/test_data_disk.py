"""Disk datasets on tiny fixtures in the published layouts; the registry; the paper transforms."""
import warnings

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from lab.data import DATASETS, DatasetNotFoundError, build_dataset, build_transforms, describe_datasets

from tests._disk_fixtures import make_cub, make_inaturalist, make_sop, write_image


def close(pixel, colour, tol=4):  # JPEG moves flat colours by a level or two
    return all(abs(a - b) <= tol for a, b in zip(pixel, colour))


@pytest.fixture
def cub_root(tmp_path):
    """CUB_200_2011 with classes 1, 2 (train) and 101, 102 (test), 3 images each."""
    return make_cub(tmp_path / "CUB_200_2011")


@pytest.fixture
def sop_root(tmp_path):
    """Stanford_Online_Products: products 1-3 train, 4-5 test, in categories bicycle (1) and chair (4)."""
    products = [(1, 1, "bicycle"), (2, 1, "bicycle"), (3, 4, "chair"), (4, 1, "bicycle"), (5, 4, "chair")]
    return make_sop(tmp_path / "Stanford_Online_Products", products)


@pytest.fixture
def inat_root(tmp_path):
    split = {"train": [("Aves", 2761), ("Aves", 2762), ("Plantae", 6000)], "test": [("Insecta", 1200), ("Aves", 2900)]}
    return make_inaturalist(tmp_path / "Inaturalist", split)


def test_cub_parses_the_published_layout(cub_root):
    train, test = build_dataset("cub", "train", root=str(cub_root)), build_dataset("cub", "test", root=str(cub_root))
    assert len(train) == len(test) == 6
    assert train.labels.shape == (6, 1) and train.labels[:, 0].tolist() == [0, 0, 0, 1, 1, 1]
    assert sorted(set(test.labels[:, 0].tolist())) == [100, 101]  # held-out classes keep their ids
    assert train.class_names == {0: "Bird number 1", 1: "Bird number 2"}
    x, y, i = train[4]
    assert x.shape == (3, 30, 40) and y.tolist() == [1] and i == 4
    assert train.image(4).mode == "RGB" and close(train.image(4).getpixel((0, 0)), (2, 60, 0))
    # The parent folder works too.
    assert len(build_dataset("cub", root=str(cub_root.parent))) == 6


def test_sop_has_two_levels(sop_root):
    train, test = build_dataset("sop", "train", root=str(sop_root)), build_dataset("sop", "test", root=str(sop_root))
    assert len(train) == 6 and len(test) == 4
    assert train.level_names == ["product", "category"]
    assert train.labels.tolist() == [[0, 0], [0, 0], [1, 0], [1, 0], [2, 3], [2, 3]]
    assert sorted(set(test.labels[:, 0].tolist())) == [3, 4]
    assert train.coarse_names == {0: "bicycle", 3: "chair"}


def test_inaturalist_split_files(inat_root):
    train = build_dataset("inaturalist", "train", root=str(inat_root))
    test = build_dataset("inaturalist", "test", root=str(inat_root))
    assert len(train) == 6 and len(test) == 4
    assert train.labels[:, 0].tolist() == [2761, 2761, 2762, 2762, 6000, 6000]
    assert train.coarse_names[int(train.labels[0, 1])] == "Aves"
    assert train.coarse_names[int(train.labels[4, 1])] == "Plantae"
    assert test.coarse_names[int(test.labels[0, 1])] == "Insecta" and test.coarse_names == train.coarse_names
    assert set(train.labels[:, 0].tolist()).isdisjoint(test.labels[:, 0].tolist())
    assert train.class_names[2762] == "Aves/2762"


def test_inaturalist_rejects_a_malformed_split_line(inat_root):
    (inat_root / "Inat_dataset_splits" / "Inaturalist_train_set1.txt").write_text("just_a_file.jpg\n")
    with pytest.raises(ValueError, match="line 1"):
        build_dataset("inaturalist", root=str(inat_root))


def test_folder_layouts(tmp_path):
    flat = tmp_path / "flat"
    for c in "abcd":
        for k in range(2):
            write_image(flat / c / f"{k}.png")
    (flat / "a" / "notes.txt").write_text("not an image")
    train, test = build_dataset("folder", "train", root=str(flat)), build_dataset("folder", "test", root=str(flat))
    assert train.labels[:, 0].tolist() == [0, 0, 1, 1] and test.labels[:, 0].tolist() == [2, 2, 3, 3]
    assert train.class_names == {0: "a", 1: "b"}

    nested = tmp_path / "nested"
    for coarse, cls in [("birds", "gull"), ("birds", "tern"), ("cars", "audi"), ("cars", "fiat")]:
        write_image(nested / "train" / coarse / cls / "0.jpg")
    write_image(nested / "test" / "birds" / "heron" / "0.jpg")
    train, test = build_dataset("folder", "train", root=str(nested)), build_dataset("folder", "test", root=str(nested))
    assert train.level_names == ["class", "coarse"] and len(train) == 4 and len(test) == 1
    assert train.coarse_names == {0: "birds", 1: "cars"}
    assert train.labels[:, 0].tolist() == [0, 1, 2, 3]
    assert test.labels.tolist() == [[4, 0]] and test.class_names == {4: "birds/heron"}


def test_corrupt_image_is_skipped_counted_and_replaced(cub_root):
    bad = cub_root / "images" / "001.Bird_number_1" / "Bird_Number_1_0001_2.jpg"
    bad.write_bytes(b"this is not a jpeg")
    with pytest.warns(RuntimeWarning, match="unreadable"):  # found as the dataset is built: every file is checked
        ds = build_dataset("cub", root=str(cub_root))
    x, y, i = ds[1]
    assert ds.num_skipped == 1 and i == 1 and y.tolist() == [0] and x.shape == (3, 30, 40)
    assert close(ds.image(1).getpixel((0, 0)), (1, 120, 0))  # the next image of the same class
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: later reads are quiet
        for j in range(len(ds)):
            ds[j]
    assert ds.num_skipped == 1  # a known-bad file is not read (nor counted) again


@pytest.mark.parametrize("damage", ["empty", "garbage"])
def test_a_class_without_any_readable_image_is_dropped_with_one_warning(cub_root, damage):
    # Issue 34, defect 12: main made each such image a black 256x256 stand-in, one warning line each.
    for path in (cub_root / "images" / "001.Bird_number_1").iterdir():
        path.write_bytes(b"" if damage == "empty" else b"not an image at all")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ds = build_dataset("cub", root=str(cub_root))
        images = [ds[j][0] for j in range(len(ds))]
    assert [str(w.message) for w in record] == [
        "train split: dropped 1 class(es) with no readable image ('Bird number 1'; e.g. "
        f"{cub_root / 'images' / '001.Bird_number_1' / 'Bird_Number_1_0000_1.jpg'}): 3 images of 1 classes remain "
        "(dataset.dropped_classes)"]
    assert ds.labels[:, 0].tolist() == [1, 1, 1] and ds.dropped_classes == {0: "Bird number 1"}
    assert ds.class_names == {1: "Bird number 2"} and ds.num_skipped == 3
    assert all(x.shape == (3, 30, 40) and x.max() > 0 for x in images)  # no black stand-in
    assert ds.image(0).getpixel((0, 0))[0] == 2  # class 2's own first image
    with pytest.raises(ValueError, match="the train split has no readable image"):
        for path in (cub_root / "images" / "002.Bird_number_2").iterdir():
            path.write_bytes(b"")
        build_dataset("cub", root=str(cub_root))


@pytest.mark.parametrize("cut", [10, 200])
def test_a_class_whose_files_are_all_cut_short_is_dropped_when_the_dataset_is_built(cub_root, cut):
    # Issue 47: such a class was kept (its first header opened) and stopped the run when the sampler first
    # drew it, possibly hours in. Every file is checked now: cut short after its header, it is skipped.
    folder = cub_root / "images" / "001.Bird_number_1"
    for path in folder.iterdir():
        path.write_bytes(path.read_bytes()[:-cut])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ds = build_dataset("cub", root=str(cub_root))
        images = [ds[j][0] for j in range(len(ds))]  # no draw stops: class 1 is gone
    assert [str(w.message) for w in record] == [
        "train split: dropped 1 class(es) with no readable image ('Bird number 1'; e.g. "
        f"{folder / 'Bird_Number_1_0000_1.jpg'}): 3 images of 1 classes remain (dataset.dropped_classes)"]
    assert ds.dropped_classes == {0: "Bird number 1"} and ds.num_skipped == 3 and len(images) == 3


def test_one_file_cut_short_is_skipped_at_build_and_its_class_kept(cub_root):
    path = cub_root / "images" / "002.Bird_number_2" / "Bird_Number_2_0001_5.jpg"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.warns(RuntimeWarning, match=f"skipping unreadable image {path}"):
        ds = build_dataset("cub", root=str(cub_root))
    assert ds.num_skipped == 1 and path in ds.skipped_paths and ds.dropped_classes == {}
    assert close(ds.image(4).getpixel((0, 0)), (2, 120, 0))  # the file after it stands in


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "GIF", "BMP", "WEBP", "TIFF"])
def test_whole_files_of_every_format_pass_and_cut_ones_fail_the_build_check(tmp_path, fmt):
    from lab.data.disk import _complete

    path = tmp_path / f"x.{fmt.lower()}"
    Image.effect_noise((64, 48), 40).convert("RGB").save(path, fmt)
    assert _complete(path)
    padded = tmp_path / f"padded.{fmt.lower()}"
    padded.write_bytes(path.read_bytes() + b"\0" * 8)  # bytes after the end marker: still whole
    assert _complete(padded)
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    assert not _complete(path)


def test_a_file_changed_on_disk_after_the_build_still_stops_with_its_class_name(cub_root):
    ds = build_dataset("cub", root=str(cub_root))
    for path in (cub_root / "images" / "001.Bird_number_1").iterdir():
        path.write_bytes(path.read_bytes()[:-10])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="every image of class 'Bird number 1' of the train split is unreadable"):
            ds[0]


def test_a_16_bit_png_is_scaled_to_8_bits_not_clipped(cub_root):
    # Issue 34, defect 12: convert("RGB") clipped I;16 at 255, an almost white image, without a word.
    path = cub_root / "images" / "001.Bird_number_1" / "Bird_Number_1_0000_1.jpg"
    ramp = (np.arange(30 * 40).reshape(30, 40) * 50).astype(np.uint16)  # 0 .. 59950
    Image.fromarray(ramp).save(path, format="PNG")  # a PNG under the listed name: PIL reads the content
    assert Image.open(path).mode == "I;16"
    pixels = np.asarray(build_dataset("cub", root=str(cub_root)).image(0))
    assert pixels.shape == (30, 40, 3) and np.array_equal(pixels[..., 0], pixels[..., 2])
    assert np.abs(pixels[..., 0].astype(int) - np.rint(ramp / 257.0)).max() == 0
    assert 100 < pixels.mean() < 130  # the ramp's mean, 116.4; clipped it was 254


def test_skips_in_dataloader_workers_reach_the_main_process(cub_root):
    (cub_root / "images" / "002.Bird_number_2" / "Bird_Number_2_0000_4.jpg").write_bytes(b"")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = build_dataset("cub", root=str(cub_root))  # the class's first file: found when the dataset is built
        batches = list(DataLoader(ds, batch_size=3, num_workers=1))
    assert sum(len(b[0]) for b in batches) == 6 and ds.num_skipped == 1


def test_missing_root_says_where_to_get_the_data(tmp_path, monkeypatch):
    monkeypatch.delenv("RANKLAB_DATA", raising=False)
    with pytest.raises(DatasetNotFoundError, match="CUB_200_2011.tgz") as err:
        build_dataset("cub", root=str(tmp_path / "nowhere"))
    assert isinstance(err.value, ValueError) and isinstance(err.value, FileNotFoundError)
    assert "images.txt" in str(err.value) and "https://" in str(err.value)
    with pytest.raises(DatasetNotFoundError, match="RANKLAB_DATA unset"):
        build_dataset("sop")
    with pytest.raises(DatasetNotFoundError, match="Inat_dataset_splits"):
        build_dataset("inaturalist", root=str(tmp_path))
    with pytest.raises(DatasetNotFoundError, match="root must be an existing directory"):
        build_dataset("folder")


def test_lists_without_images_are_reported(cub_root):
    import shutil

    shutil.rmtree(cub_root / "images")
    with pytest.raises(DatasetNotFoundError, match="is missing"):
        build_dataset("cub", root=str(cub_root))


def test_env_var_and_describe(cub_root, monkeypatch):
    monkeypatch.setenv("RANKLAB_DATA", str(cub_root.parent))
    assert len(build_dataset("cub", "test")) == 6
    text = describe_datasets()
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ")}
    assert set(lines) == set(DATASETS)
    assert "available" in lines["glyphs"] and "available" in lines["digits"]
    assert f"available at {cub_root}" in lines["cub"]
    assert "not found" in lines["sop"] and "cvgl.stanford.edu" in lines["sop"]
    assert "not found" in lines["inaturalist"] and "inat_comp" in lines["inaturalist"]


def test_registry_errors():
    with pytest.raises(ValueError, match="glyphs, digits, cub, sop, inaturalist, folder"):
        build_dataset("imagenet")
    with pytest.raises(ValueError, match="split must be one of"):
        build_dataset("digits", split="validation")
    with pytest.raises(ValueError, match="num_clases.*options are: .*num_classes"):
        build_dataset("glyphs", num_clases=10)


def test_paper_transforms(cub_root):
    ds = build_dataset("cub", root=str(cub_root), transform=build_transforms("paper", train=True))
    x, _, _ = ds[0]
    assert x.shape == (3, 224, 224)
    train = build_transforms("paper", True)
    crop = next(t for t in train.transforms if type(t).__name__ == "RandomResizedCrop")
    assert crop.scale == (0.16, 1.0) and crop.ratio == pytest.approx((3 / 4, 4 / 3))
    assert [type(t).__name__ for t in train.transforms][1:4] == ["Resize", "RandomResizedCrop", "RandomHorizontalFlip"]
    literal = build_transforms("paper", True, crop_scale=((40 / 256) ** 2, 1.0))
    literal_crop = next(t for t in literal.transforms if type(t).__name__ == "RandomResizedCrop")
    assert literal_crop.scale[0] == pytest.approx(0.0244, abs=1e-4)
    ev = build_transforms("paper", False)
    img = Image.fromarray(np.random.default_rng(0).integers(0, 255, (300, 400, 3), dtype=np.uint8))
    a, b = ev(img), ev(img)
    assert a.shape == (3, 224, 224) and torch.equal(a, b)
    assert ev(img.convert("L")).shape == (3, 224, 224)  # grayscale files still give 3 channels
    # ImageNet normalisation: a mid-grey image maps to (0.5 - mean) / std.
    grey = ev(Image.new("RGB", (256, 256), (128, 128, 128)))
    expected = [(128 / 255 - m) / s for m, s in zip((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))]
    assert grey[:, 0, 0] == pytest.approx(expected, abs=1e-4)
    with pytest.raises(ValueError, match="kind must be one of"):
        build_transforms("imagenet", True)
    with pytest.raises(ValueError, match="crop_scale"):
        build_transforms("paper", True, crop_scale=(0.0, 1.0))
