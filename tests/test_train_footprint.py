"""A run that cannot fit in memory is refused before it allocates (issue 47, point 7): ``--image-size 100000``
allocated 20 GB for 212 s, ``--embed-dim 1000000000`` was an allocator traceback. The estimate is checked
against a plain count of the real model's parameters and activations; the refusals against a small
"available memory" set by the test, nothing of the refused size is ever allocated."""
from __future__ import annotations

import resource

import pytest
import torch

from lab.train import Trainer, TrainConfig
from lab.train import footprint
from lab.train.loading import model_for
from tests._cli import TINY, one_error_line
from tests._train_fixtures import small_model, tiny_config, tiny_splits

CPU = torch.device("cpu")


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes


def test_a_huge_embedding_is_one_line_naming_the_flag_before_any_allocation(capsys):
    before = peak_rss_bytes()
    line = one_error_line(capsys, "train", *TINY, "--embed-dim", "1000000000")
    assert line.startswith("python -m lab train: error: --embed-dim 1000000000: the model's ")
    assert "of memory (the whole run: at least" in line and "available" in line
    assert peak_rss_bytes() - before < 2**30  # the 2.1 TB model was never allocated


def test_a_huge_image_is_refused_before_one_image_is_made(capsys):
    before = peak_rss_bytes()
    line = one_error_line(capsys, "train", *TINY, "--image-size", "100000")
    assert "--image-size 100000: one image of 100000x100000 pixels: at least 150.0 GB of memory" in line
    assert peak_rss_bytes() - before < 2**30


def test_a_dataset_is_not_read_at_an_image_size_that_cannot_fit(monkeypatch):
    class Untouchable(torch.utils.data.Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            raise AssertionError("an image was built before the size was checked")

    monkeypatch.setattr(footprint, "available_bytes", lambda device: 10**6)
    with pytest.raises(ValueError, match=r"^--image-size 1024: one image of 1024x1024 pixels: at least 15.7 MB"):
        footprint.check_fits(TrainConfig(image_size=1024), CPU, Untouchable())


@pytest.mark.parametrize("changes, flags", [
    (dict(), "--model small_cnn"),  # the parameters, their gradients and Adam's moments are largest
    (dict(eval_batch_size=4096), "--image-size 32, --eval-batch-size 4096"),
    (dict(batch_size=4096, m=4), "--image-size 32, --batch-size 4096"),
    (dict(xbm_size=10**6), "--xbm-size 1000000"),
])
def test_the_trainer_refuses_what_the_machine_does_not_have(monkeypatch, changes, flags):
    available = 200_000  # bytes: the tiny run needs about 1.6 MB
    monkeypatch.setattr(footprint, "available_bytes", lambda device: available)
    train, test = tiny_splits()
    with pytest.raises(ValueError) as info:
        Trainer(tiny_config(**changes), train_set=train, test_set=test)
    message = str(info.value)
    assert message.startswith(f"{flags}: ") and message.endswith("but this machine has 200.0 KB available")
    assert "\n" not in message


def test_a_run_that_fits_is_not_refused():
    train, test = tiny_splits()
    Trainer(tiny_config(), train_set=train, test_set=test).step()


def _real_counts(model: torch.nn.Module, image: torch.Tensor) -> tuple[int, int]:
    """Sum and largest of the element counts of the backbone's leaf outputs, on a real forward pass."""
    counts = []
    leaves = [m for m in model.backbone.modules() if not list(m.children())]
    hooks = [m.register_forward_hook(lambda m, i, o: counts.append(o.numel())) for m in leaves]
    with torch.no_grad():
        model.backbone.eval()(image[None])
    for h in hooks:
        h.remove()
    return sum(counts), max(counts)


@pytest.mark.parametrize("embed_dim, image_size", [(16, 32), (128, 48)])
def test_the_estimate_counts_the_real_models_parameters_and_activations(embed_dim, image_size):
    cfg = TrainConfig(embed_dim=embed_dim, image_size=image_size, batch_size=8, m=4, eval_batch_size=4)
    image = torch.zeros(1, image_size, image_size)
    model = model_for(cfg, 1)
    params = sum(p.numel() for p in model.parameters())
    total, largest = _real_counts(model, image)
    items = footprint.needs(cfg, image)
    assert items[0].nbytes == 4 * footprint.ADAM_COPIES * params  # weights, gradients, Adam's two moments
    assert items[1].nbytes == 4 * 8 * image_size**2 + 4 * 8 * total  # 8 float32 images and their activations
    assert items[2].nbytes == 4 * (4 * image_size**2 + 2 * 4 * largest)
    given = footprint.needs(cfg, image, model=model)  # a model passed in: counted from itself
    assert [n.nbytes for n in given] == [n.nbytes for n in items]


def test_eval_refuses_in_one_line_too(tmp_path, capsys, monkeypatch):
    from lab.cli import main

    main(["train", *TINY, "--out", str(tmp_path / "run")])
    capsys.readouterr()
    monkeypatch.setattr(footprint, "available_bytes", lambda device: 1000)
    line = one_error_line(capsys, "eval", "--checkpoint", tmp_path / "run" / "checkpoint.pt", "--device", "cpu")
    assert line.startswith("python -m lab eval: error: ") and "but this machine has 1.0 KB available" in line
    assert "Adam" not in line  # evaluating holds no gradients nor optimizer state


def test_small_model_fixture_is_counted_like_a_built_one():
    model = small_model()
    assert footprint.needs(tiny_config(), torch.zeros(1, 12, 12), model=model)[0].nbytes == \
        16 * sum(p.numel() for p in model.parameters())
