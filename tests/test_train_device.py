"""Training batches gathered and augmented on the device (DeviceBatchStream): the same images as the
per-image dataset path, resumable bit for bit; embedding from pixels; where the images live."""
import pytest
import torch
from torch.utils.data import Subset

from lab.data import build_dataset, build_transforms
from lab.losses import build_loss
from lab.train import NonFiniteLossError, Trainer
from lab.train.evaluation import embed_dataset, metrics_backend
from lab.train.loading import (BatchStream, DeviceBatchStream, augmentation_seed, build_batch_sampler,
                               fits_on_device)
from tests._train_fixtures import (ScriptedLoss, TinySet, assert_same_state, resumed_like_straight,
                                   small_model, tiny_config)

RUN = dict(steps=7, scheduler="cosine", warmup_steps=2, xbm_size=24, freeze_bn=False)  # 2 batches per epoch


def glyphs(split: str, train: bool = False):
    return build_dataset("glyphs", split, transform=build_transforms("small", train), num_classes=8,
                         instances_per_class=4)


def make(loss=None, **changes) -> Trainer:
    cfg = tiny_config(**{**RUN, **changes})
    return Trainer(cfg, train_set=glyphs("train", train=True), test_set=glyphs("test"),
                   model=small_model(freeze_bn=cfg.freeze_bn), loss=loss,
                   eval_transform=build_transforms("small", False))


def test_a_device_batch_is_the_per_image_path_with_the_batch_seed():
    train = glyphs("train", train=True)
    sampler = build_batch_sampler(train.labels, tiny_config(), seed=0)
    sampler.set_epoch(0)
    epoch0 = list(sampler)
    stream = DeviceBatchStream(train, sampler, torch.device("cpu"), seed=3)
    for _ in range(5):  # crosses two epoch boundaries
        images, labels, index = stream.next()
        torch.manual_seed(augmentation_seed(3, 0, stream.epoch, stream.position - 1))
        expected = torch.stack([train[i][0] for i in index.tolist()])  # torchvision, one PIL image at a time
        assert torch.equal(images, expected)
        assert torch.equal(labels, train.labels[index]) and index.dtype == torch.int64
    assert stream.epoch == 2 and stream.position == 1
    stream.seek(0, 0)
    assert [stream.next()[2].tolist() for _ in range(len(epoch0))] == epoch0  # the sampler's batches


def test_the_stream_leaves_the_global_rng_alone_and_seeking_repeats_a_batch():
    train = glyphs("train", train=True)
    stream = DeviceBatchStream(train, build_batch_sampler(train.labels, tiny_config(), seed=0), torch.device("cpu"))
    before = torch.get_rng_state()
    batches = [stream.next() for _ in range(4)]
    assert torch.equal(torch.get_rng_state(), before)
    stream.seek(1, 1)
    again = stream.next()
    assert all(torch.equal(x, y) for x, y in zip(again, batches[3]))
    # A batch's shifts are its own: another position, epoch, rank or seed draws others.
    seeds = {augmentation_seed(0, 0, 0, 0), augmentation_seed(0, 0, 0, 1), augmentation_seed(0, 0, 1, 0),
             augmentation_seed(0, 1, 0, 0), augmentation_seed(1, 0, 0, 0)}
    assert len(seeds) == 5 and augmentation_seed(0, 0, 0, 1) == augmentation_seed(0, 0, 0, 1)
    assert all(0 <= s < 2**63 for s in seeds)


def test_the_trainer_gathers_glyphs_on_the_device_and_loads_other_sets():
    trainer = make()
    assert isinstance(trainer.stream, DeviceBatchStream) and trainer.plan.device_batches
    assert trainer.stream.pixels.shape == (32, 1, 32, 32) and trainer.stream.pixels.dtype == torch.uint8
    train, test = TinySet(), TinySet(seed=1, offset=100)
    other = Trainer(tiny_config(), train_set=train, test_set=test, model=small_model())
    assert isinstance(other.stream, BatchStream) and not other.plan.device_batches


def test_resume_on_the_device_path_is_bit_identical(tmp_path):
    first = resumed_like_straight(make, tmp_path, stop=3)
    assert (first.epoch, first.position) == (1, 1) and isinstance(first.stream, DeviceBatchStream)


def test_a_step_rolled_back_after_nan_draws_the_same_shifts_again():
    straight = make(steps=4, xbm_size=0)
    straight.fit()
    failing = make(loss=ScriptedLoss(build_loss("roadmap"), nan_at=3), steps=4, xbm_size=0)
    with pytest.raises(NonFiniteLossError, match="at step 3"):
        failing.fit()
    assert failing.step_count == 2
    failing.fit()  # call 4 of the loss is finite: step 3 again, from the same batch and shifts
    assert_same_state(straight, failing)


def test_channels_last_steps_like_the_default_layout(monkeypatch):
    """The CUDA plan's channels_last, forced on the CPU: model and batches in NHWC, the same loss and
    gradients of the first step (one step only: after it, Adam would turn last-bit differences of
    near-zero gradients into whole steps)."""
    import dataclasses

    import lab.train.parts as parts_module

    plain = make(steps=1, xbm_size=0)
    plain_loss = plain.step()["loss"]
    real = parts_module.runtime_plan
    monkeypatch.setattr(parts_module, "runtime_plan",
                        lambda *a, **k: dataclasses.replace(real(*a, **k), channels_last=True))
    nhwc = make(steps=1, xbm_size=0)
    conv = next(m for m in nhwc.model.modules() if isinstance(m, torch.nn.Conv2d) and m.in_channels > 1)
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    # float32 convolutions in another order, through a sigmoid of scores / 0.01: 1e-5 apart was seen in a
    # loaded run; a wrong permutation of the images moves the loss by ~1e-1
    assert nhwc.step()["loss"] == pytest.approx(plain_loss, rel=1e-4)
    for (name, x), y in zip(plain.model.named_parameters(), nhwc.model.parameters()):
        # float32 sums over the batch's pixels taken in another order: close as whole tensors
        assert torch.linalg.vector_norm(y.grad - x.grad) <= 1e-3 * torch.linalg.vector_norm(x.grad), name


def test_loader_workers_and_prefetch_give_the_batches_of_the_main_process():
    train = TinySet()
    sampler = build_batch_sampler(train.labels, tiny_config(), seed=0)
    inline = BatchStream(train, sampler, num_workers=0)
    workers = BatchStream(train, build_batch_sampler(train.labels, tiny_config(), seed=0), num_workers=1,
                          prefetch_factor=4)
    assert workers.loader.prefetch_factor == 4 and workers.loader.persistent_workers
    for _ in range(3):
        assert all(torch.equal(x, y) for x, y in zip(inline.next(), workers.next()))


def test_images_stay_on_a_gpu_only_when_they_take_a_quarter_of_its_free_memory():
    assert fits_on_device(1_000, 4_000) and not fits_on_device(1_001, 4_000)
    assert fits_on_device(0, 0)
    # Images kept in host memory (a GPU too small for them): the batches are the same.
    train = glyphs("train", train=True)
    resident, host = (DeviceBatchStream(train, build_batch_sampler(train.labels, tiny_config(), seed=0),
                                        torch.device("cpu")) for _ in range(2))
    assert resident.resident
    host.resident = False  # on the CPU there is no GPU to leave them off; the gather path is what changes
    for _ in range(3):
        assert all(torch.equal(x, y) for x, y in zip(resident.next(), host.next()))


# ---------------------------------------------------------------------------- evaluation
@pytest.mark.parametrize("indices", [None, [5, 3, 30, 7, 0, 9, 11]])
def test_embedding_from_pixels_equals_the_per_image_path(indices):
    test = glyphs("test")
    model = small_model()
    fast, labels = embed_dataset(model, test, torch.device("cpu"), 4, indices=indices)
    rows = list(range(len(test))) if indices is None else indices
    slow, slow_labels = embed_dataset(model, Subset(test, rows), torch.device("cpu"), 4)  # a Subset: DataLoader
    assert torch.equal(fast, slow) and torch.equal(labels, slow_labels)
    assert model.training  # put back in train mode


def test_metrics_run_on_a_cuda_device_with_torch():
    assert metrics_backend("faiss", torch.device("cuda")) == "torch"
    assert metrics_backend("faiss", "cuda:1") == "torch"
    assert metrics_backend("torch", torch.device("cpu")) == "torch"
    pytest.importorskip("faiss")
    assert metrics_backend("faiss", torch.device("cpu")) == "faiss"
    assert metrics_backend("faiss", None) == "faiss"
