"""Tiny datasets, models and losses shared by the training tests (and the DDP worker script)."""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import Dataset

from lab.models import EmbeddingHead, EmbeddingModel, SmallCNN
from lab.train import TrainConfig

FAST = dict(batch_size=16, m=4, steps=4, eval_every=0, progress=False, probe_batches=2, eval_batch_size=64,
            eval_backend="torch", device="cpu", embed_dim=16)


class TinySet(Dataset):
    """``classes`` x ``per_class`` noisy copies of a random 1 x size x size prototype per class.

    labels (N, 2): fine class (offset by ``offset``, so a test split has other classes) and a
    coarse class = fine // 4. Deterministic: no transform, no randomness when read.
    """

    def __init__(self, classes: int = 12, per_class: int = 6, size: int = 12, seed: int = 0, offset: int = 0):
        g = torch.Generator().manual_seed(seed)
        protos = torch.randn(classes, 1, size, size, generator=g)
        self.images = protos.repeat_interleave(per_class, 0) + 0.7 * torch.randn(classes * per_class, 1, size, size,
                                                                                  generator=g)
        fine = torch.arange(classes).repeat_interleave(per_class) + offset
        self.labels = torch.stack([fine, fine // 4], 1)
        self.level_names = ["fine", "coarse"]
        self.transform = None

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.images[i], self.labels[i], i


def tiny_config(**changes) -> TrainConfig:
    return TrainConfig(**{**FAST, **changes})


def tiny_splits() -> tuple[TinySet, TinySet]:
    return TinySet(), TinySet(seed=1, offset=100)


class DropoutMLP(nn.Module):
    """A model without BatchNorm but with dropout: staged backprop must replay its randomness."""

    def __init__(self, size: int = 12, embed_dim: int = 16) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.backbone = nn.Sequential(nn.Flatten(), nn.Linear(size * size, 32), nn.ReLU(), nn.Dropout(0.3))
        self.head = EmbeddingHead(32, embed_dim)
        self.embed_dim = embed_dim

    def forward(self, x):
        return self.head(self.backbone(x))


def small_model(freeze_bn: bool = True, embed_dim: int = 16, seed: int = 0) -> EmbeddingModel:
    """The small CNN, narrower, for fast tests; initialised from ``seed``."""
    torch.manual_seed(seed)
    backbone = SmallCNN(1, widths=(8, 8, 16, 16))
    return EmbeddingModel(backbone, EmbeddingHead(16, embed_dim), "small_cnn", freeze_bn=freeze_bn)


class ScriptedLoss(nn.Module):
    """Wraps a loss: records every call, and returns NaN (or raises) at chosen call numbers."""

    def __init__(self, inner: nn.Module, nan_at: int = 0, interrupt_at: int = 0) -> None:
        super().__init__()
        self.inner, self.nan_at, self.interrupt_at = inner, nan_at, interrupt_at
        self.calls: list[dict] = []

    def forward(self, emb, labels, ref_embeddings=None, ref_labels=None, *, mask=None):
        self.calls.append({"labels": labels.clone(), "refs": None if ref_embeddings is None else ref_embeddings.clone(),
                           "ref_labels": ref_labels, "mask": mask})
        if len(self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        out = self.inner(emb, labels, ref_embeddings, ref_labels, mask=mask)
        return out * float("nan") if len(self.calls) == self.nan_at else out


def assert_same_state(a, b) -> None:
    """Two trainers hold bit-identical state: model, cross-batch memory, Adam's moments, counters."""
    for (name, x), y in zip(a.model.state_dict().items(), b.model.state_dict().values()):
        assert torch.equal(x, y), name
    if a.memory is not None:
        for x, y in zip(a.memory.state_dict().values(), b.memory.state_dict().values()):
            assert torch.equal(x, y)
    sa, sb = a.optimizer.state_dict()["state"], b.optimizer.state_dict()["state"]
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k]["exp_avg_sq"], sb[k]["exp_avg_sq"]) for k in sa)
    assert (a.step_count, a.epoch, a.position) == (b.step_count, b.epoch, b.position)


def resumed_like_straight(make, out, stop: int):
    """Train ``make()`` straight through; train another to step ``stop`` with checkpoints in ``out``,
    resume a third from it and finish: the third must end bit-identical to the first. Returns the
    interrupted trainer (for checks of where it stopped)."""
    straight = make()
    straight.fit()
    first = make(out=str(out))
    first.fit(steps=stop)
    resumed = make(out=str(out)).resume(out / "checkpoint.pt")
    resumed.fit()
    assert_same_state(straight, resumed)
    return first
