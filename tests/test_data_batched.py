"""The "small" transform done by the batch (SmallTransform.batch), against torchvision's per-image
pipeline and a plain-loop definition of the shift; the shifts' distribution; pixels() of the
embedded datasets; bad input."""
import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms as T

from lab.data import DigitsDataset, GlyphDataset, build_dataset, build_transforms
from lab.data.labeled_images import batchable, resized_pixels
from lab.data.transforms import SmallTransform


def random_images(n: int, size: int, channels: int = 1, seed: int = 0) -> list[Image.Image]:
    """Blobs of ink on black with a noisy border, so that any shift changes the pixels."""
    rng = np.random.default_rng(seed)
    shape = (size, size) if channels == 1 else (size, size, channels)
    return [Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)) for _ in range(n)]


def as_pixels(images: list[Image.Image]) -> torch.Tensor:
    arrays = [np.asarray(im) for im in images]
    arrays = [a[:, :, None] if a.ndim == 2 else a for a in arrays]
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()


def shifted_by_loops(image: np.ndarray, i: int, j: int, p: int) -> np.ndarray:
    """RandomCrop(padding=p, fill=0) at offsets (i, j) of the padded image, pixel by pixel."""
    h, w = image.shape[:2]
    out = np.zeros_like(image)
    for y in range(h):
        for x in range(w):
            sy, sx = y + i - p, x + j - p
            if 0 <= sy < h and 0 <= sx < w:
                out[y, x] = image[sy, sx]
    return out


@pytest.mark.parametrize("size,channels", [(32, 1), (48, 1), (32, 3)])
def test_batch_is_torchvision_image_by_image_for_the_same_generator_state(size, channels):
    transform = build_transforms("small", True, size)
    images = random_images(40, size, channels)
    torch.manual_seed(11)  # RandomCrop draws from the global generator
    expected = torch.stack([transform(im) for im in images])
    shifts = transform.draw_shifts(len(images), torch.Generator().manual_seed(11))
    got = transform.batch(as_pixels(images), shifts)
    assert got.dtype == torch.float32 and torch.equal(got, expected)  # bit for bit


def test_every_shift_is_randomcrop_at_that_offset_and_the_loop_definition(monkeypatch):
    transform = build_transforms("small", True, 16)
    p = transform.padding
    image = random_images(1, 16, seed=3)[0]
    pixels = as_pixels([image])
    offsets = [(i, j) for i in range(2 * p + 1) for j in range(2 * p + 1)]
    for i, j in offsets:
        monkeypatch.setattr(T.RandomCrop, "get_params", staticmethod(lambda img, size, i=i, j=j: (i, j, 16, 16)))
        expected = transform(image)
        got = transform.batch(pixels, torch.tensor([[i, j]]))[0]
        assert torch.equal(got, expected), (i, j)
        loops = shifted_by_loops(np.asarray(image), i, j, p).astype(np.float32)
        assert torch.equal(got[0], torch.from_numpy((loops / 255 - 0.5) / 0.5).float()), (i, j)


def test_zero_shift_is_the_identity_and_equals_the_evaluation_transform():
    train, evaluation = build_transforms("small", True, 32), build_transforms("small", False, 32)
    pixels = as_pixels(random_images(5, 32))
    centre = torch.full((5, 2), train.padding, dtype=torch.int64)
    assert torch.equal(train.batch(pixels, centre), evaluation.batch(pixels))
    assert torch.equal(evaluation.batch(pixels), (pixels.float() / 255 - 0.5) / 0.5)
    assert evaluation.batch(pixels).min() >= -1 and evaluation.batch(pixels).max() <= 1


def test_shifts_are_uniform_over_the_padding_range_and_independent():
    transform = build_transforms("small", True, 32)  # padding 2: offsets 0..4, shifts -2..2
    n, k = 100_000, 2 * transform.padding + 1
    shifts = transform.draw_shifts(n, torch.Generator().manual_seed(0))
    assert shifts.dtype == torch.int64 and shifts.min() == 0 and shifts.max() == k - 1
    for axis in range(2):
        counts = torch.bincount(shifts[:, axis], minlength=k).double()
        assert ((counts - n / k).abs() < 5 * (n / k) ** 0.5).all()  # 5 sigma of a uniform count
    joint = torch.bincount(shifts[:, 0] * k + shifts[:, 1], minlength=k * k).double()
    assert ((joint - n / k**2).abs() < 5 * (n / k**2) ** 0.5).all()  # rows and columns independent
    assert transform.padding == 32 // 16 and build_transforms("small", True, 8).padding == 1


def test_the_batch_runs_on_the_pixels_device_and_leaves_the_global_rng_alone():
    transform = build_transforms("small", True, 32)
    before = torch.get_rng_state()
    out = transform.batch(as_pixels(random_images(3, 32)), transform.draw_shifts(3, torch.Generator()))
    assert out.device == torch.device("cpu") and out.is_contiguous()
    assert torch.equal(torch.get_rng_state(), before)


def test_bad_batches_are_refused_with_the_argument_named():
    train, evaluation = build_transforms("small", True, 32), build_transforms("small", False, 32)
    pixels = as_pixels(random_images(2, 32))
    with pytest.raises(ValueError, match=r"pixels must be a uint8 tensor \(N, C, H, W\), got torch.float32"):
        train.batch(pixels.float(), torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"pixels must be 32 x 32 \(resize_pixels\), got \(16, 16\)"):
        evaluation.batch(pixels[:, :, :16, :16])
    with pytest.raises(ValueError, match=r"shifts must be a \(2, 2\) int64 tensor .* got None"):
        train.batch(pixels)
    with pytest.raises(ValueError, match=r"shifts must be a \(2, 2\) int64 tensor .* got \(2, 2\) torch.float32"):
        train.batch(pixels, torch.zeros(2, 2))
    with pytest.raises(ValueError, match=r"shifts must lie in 0..4 \(2 x padding\), got 0..5"):
        train.batch(pixels, torch.tensor([[0, 5], [1, 1]]))
    with pytest.raises(ValueError, match="shifts given to an evaluation transform"):
        evaluation.batch(pixels, torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="evaluation transform .* has no random shift"):
        evaluation.draw_shifts(2)


# ------------------------------------------------------------------------------ dataset pixels
def test_glyph_pixels_are_the_images_in_the_order_asked():
    ds = GlyphDataset(num_classes=6, instances_per_class=3)
    every = ds.pixels()
    assert every.shape == (18, 1, 32, 32) and every.dtype == torch.uint8
    assert all(np.array_equal(every[i, 0].numpy(), np.asarray(ds.image(i))) for i in range(18))
    picked = ds.pixels([5, 0, 17, 5, -1])
    assert torch.equal(picked, every[[5, 0, 17, 5, 17]])
    with pytest.raises(IndexError, match="index 18 out of range for a dataset of 18 items"):
        ds.pixels([0, 18])


def test_digit_pixels_are_the_upsampled_images():
    ds = DigitsDataset("test", image_size=24)
    pixels = ds.pixels([3, 1])
    assert pixels.shape == (2, 1, 24, 24)
    assert np.array_equal(pixels[0, 0].numpy(), np.asarray(ds.image(3)))
    assert np.array_equal(pixels[1, 0].numpy(), np.asarray(ds.image(1)))


def test_resized_pixels_feed_the_batch_the_images_the_per_image_path_sees():
    # Drawn at 32, trained at 40: the transform's Resize is applied once to the stored pixels.
    ds = build_dataset("glyphs", transform=build_transforms("small", False, 40), num_classes=4, instances_per_class=2)
    assert batchable(ds)
    assert torch.equal(ds.transform.batch(resized_pixels(ds)), torch.stack([ds[i][0] for i in range(len(ds))]))
    same = build_dataset("glyphs", transform=build_transforms("small", False, 32), num_classes=4, instances_per_class=2)
    assert resized_pixels(same).data_ptr() == same.pixels().data_ptr()  # no copy when the size is right


def test_only_in_memory_datasets_with_the_small_transform_are_batchable(tmp_path):
    glyphs = GlyphDataset(num_classes=2, instances_per_class=1)
    assert not batchable(glyphs)  # no transform
    glyphs.transform = build_transforms("paper", False)
    assert not batchable(glyphs)
    with pytest.raises(ValueError, match="is not batchable: it needs pixels\\(\\) .* and the 'small' transform"):
        resized_pixels(glyphs)
    (tmp_path / "a").mkdir()
    for k in range(2):
        Image.new("RGB", (8, 8)).save(tmp_path / "a" / f"{k}.png")
    folder = build_dataset("folder", root=str(tmp_path), transform=build_transforms("small", True))
    assert not folder.in_memory and not batchable(folder)
    with pytest.raises(NotImplementedError, match="reads its images one by one"):
        folder.pixels()
    assert isinstance(build_transforms("small", True), SmallTransform)
