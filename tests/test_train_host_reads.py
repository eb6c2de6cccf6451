"""Host reads of a training step (issue 34): on an accelerator a step reads nothing from the device
until a step logs. The deferred path (``plan.deferred_reads``, forced here on the CPU by the plan a trainer is
built with: it chooses its read protocol from it once, lab.train.step_reads) must train the same trajectory as
the simple path, log the same numbers and report a non-finite step the same way."""
from __future__ import annotations

import contextlib
import dataclasses
import json
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import lab.train.parts as parts_module
from lab.losses import build_loss
from lab.train import NonFiniteLossError, Trainer
from lab.train.memory import CrossBatchMemory, kept_slots
from tests._train_fixtures import (
    assert_same_state,
    small_model,
    tiny_config,
    tiny_splits,
)

# Memory on (two loss calls a step), BN in train mode, cosine schedule with warm-up: every piece of
# state the deferred path must hold back or restore. Reads at steps 1, 3, 6, 9, ...
RUN = {"steps": 12, "scheduler": "cosine", "warmup_steps": 3, "xbm_size": 40, "freeze_bn": False, "log_every": 3}
TIMING = ("seconds_per_step", "images_per_second")


class PlainLoss(nn.Module):
    """A differentiable batch loss that reads nothing on the host (the lab's losses check their
    input with one read a call): squared error of the cosines against same-class indicators."""

    def forward(self, emb, labels, ref_embeddings=None, ref_labels=None, *, mask=None):
        e = F.normalize(emb, dim=1)
        refs = e if ref_embeddings is None else F.normalize(ref_embeddings, dim=1)
        ref_labels = labels if ref_labels is None else ref_labels
        same = (labels[:, :1] == ref_labels[:, :1].T).float()
        weight = torch.ones_like(same) if mask is None else mask.float()
        return (weight * (e @ refs.T - same) ** 2).mean()


class PlainModel(nn.Module):
    """Linear + BatchNorm (train mode: running statistics) + F.normalize: a model that reads nothing
    on the host (lab's EmbeddingModel checks its rows' range with one read, lab.core.normalize)."""

    def __init__(self, size: int = 12, embed_dim: int = 16) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(size * size, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                 nn.Linear(32, embed_dim))
        self.embed_dim = embed_dim

    def forward(self, x):
        return F.normalize(self.net(x), dim=1)


class _Poison(torch.autograd.Function):
    """Identity forward; a NaN gradient backward."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


class PoisonAt(nn.Module):
    """Wraps a loss: at training step ``at`` its gradient (``what="gradient"``) or its value
    (``what="loss"``) is NaN. Keyed by the step, not the call: a step trained again is poisoned again."""

    def __init__(self, inner: nn.Module, at: int, what: str = "gradient") -> None:
        super().__init__()
        self.inner, self.at, self.what, self.trainer = inner, at, what, None

    def forward(self, emb, labels, *args, **kwargs):
        hit = self.trainer is not None and self.trainer.step_count + 1 == self.at
        if hit and self.what == "gradient":
            emb = _Poison.apply(emb)
        out = self.inner(emb, labels, *args, **kwargs)
        return out * float("nan") if hit and self.what == "loss" else out


@contextlib.contextmanager
def plan_reads(deferred: bool):
    """Trainers built inside get a runtime plan whose host reads are ``deferred`` (as on an accelerator) or not."""
    real = parts_module.runtime_plan

    def plan(*args, **kwargs):
        return dataclasses.replace(real(*args, **kwargs), deferred_reads=deferred)
    with mock.patch.object(parts_module, "runtime_plan", plan):
        yield


def make(deferred: bool, loss=None, model=None, **changes) -> Trainer:
    train, test = tiny_splits()
    cfg = tiny_config(**{**RUN, **changes})
    model = model if model is not None else small_model(freeze_bn=cfg.freeze_bn)
    with plan_reads(deferred):
        trainer = Trainer(cfg, train_set=train, test_set=test, model=model,
                          loss=loss if loss is not None else build_loss("roadmap"))
    if isinstance(trainer.loss_fn, PoisonAt):
        trainer.loss_fn.trainer = trainer
    return trainer


def log_lines(folder) -> list[dict]:
    if not (folder / "metrics.jsonl").exists():  # stopped before its first log line
        return []
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def untimed(history) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in history]


def test_the_cpu_plan_reads_at_once_and_accelerators_defer():
    from lab.train.runtime import runtime_plan

    def plan(device, amp="none"):
        return runtime_plan(device, tiny_config(amp=amp), batchable=True, timm_backbone=False, cpus=4)
    assert not plan("cpu").deferred_reads and plan("cuda").deferred_reads and plan("mps").deferred_reads
    assert not plan("cuda", "fp16").deferred_reads  # the scaler reads its own state
    assert "host reads at the logging steps only" in plan("cuda").describe()


@pytest.mark.parametrize("loss", ["roadmap", "plain"])
def test_the_deferred_path_trains_and_logs_like_the_simple_path(tmp_path, loss):
    runs = {}
    for deferred in (False, True):
        out = tmp_path / str(deferred)
        trainer = make(deferred, build_loss("roadmap") if loss == "roadmap" else PlainLoss(), out=str(out))
        last = trainer.step(5)  # reads at 1, 3 and when step() returns (5)
        assert not trainer.reads.pending and isinstance(last["loss"], float) and isinstance(last["batch_ap"], float)
        trainer.fit()  # on to 12, then a checkpoint
        runs[deferred] = trainer, out
    (simple, a), (deferred, b) = runs[False], runs[True]
    assert_same_state(simple, deferred)
    assert untimed(simple.history) == untimed(deferred.history) and len(simple.history) == 12
    assert log_lines(a) == log_lines(b) and [r["step"] for r in log_lines(a)] == [1, 3, 6, 9, 12]
    for key in ("loss", "batch_ap", "grad_norm"):  # real numbers, not placeholders
        assert all(isinstance(r[key], float) for r in deferred.history), key
    assert all(r["seconds_per_step"] > 0 for r in deferred.history)
    saved = [torch.load(p / "checkpoint.pt", weights_only=False) for p in (a, b)]
    for name, value in saved[0]["model"].items():
        assert torch.equal(value, saved[1]["model"][name]), name


@pytest.mark.parametrize("loss,what,at", [("roadmap", "gradient", 5), ("plain", "gradient", 5),
                                          ("plain", "loss", 8), ("plain", "gradient", 1)])
def test_a_non_finite_step_is_reported_and_undone_like_on_the_simple_path(tmp_path, loss, what, at):
    """NaN at step ``at`` (reads at 1, 3, 6, 9): the simple path stops there; the deferred one finds it
    when it next reads (with the lab's loss, when the NaN weights make the next batch refuse)."""
    runs = {}
    for deferred in (False, True):
        out = tmp_path / str(deferred)
        inner = build_loss("roadmap") if loss == "roadmap" else PlainLoss()
        trainer = make(deferred, PoisonAt(inner, at, what), out=str(out), checkpoint_every=4)
        with pytest.raises(NonFiniteLossError) as error:
            trainer.fit()
        runs[deferred] = trainer, out, str(error.value)
    (simple, a, message), (deferred, b, deferred_message) = runs[False], runs[True]
    assert deferred_message.replace(str(b), str(a)) == message and f"at step {at}:" in message
    assert ("gradient norm" if what == "gradient" else "the loss (nan)") in message
    assert simple.step_count == deferred.step_count == at - 1
    assert_same_state(simple, deferred)
    assert untimed(simple.history) == untimed(deferred.history)
    assert log_lines(a) == log_lines(b)
    for trainer in (simple, deferred):  # the same trajectory on from there, the NaN gone
        trainer.loss_fn.at = 0
        trainer.fit()
    assert_same_state(simple, deferred)
    assert log_lines(a) == log_lines(b)


def test_nan_embeddings_are_reported_like_on_the_simple_path():
    messages, states = [], []
    for deferred in (False, True):
        trainer = make(deferred, PlainLoss(), steps=4)
        with torch.no_grad():
            for p in trainer.model.head.parameters():
                p.fill_(float("nan"))
        with pytest.raises(NonFiniteLossError) as error:
            trainer.step(2)
        messages.append(str(error.value))
        states.append(trainer.step_count)
    assert messages[0] == messages[1] and "embeddings" in messages[0] and states == [0, 0]


# ------------------------------------------------------------------------------ counting host reads
READS = ("item", "tolist", "numpy", "__float__", "__int__", "__bool__", "__index__")


@contextlib.contextmanager
def counted_reads(trainer: Trainer):
    """Count the reads of tensor values on the host during training steps, except where the value
    lives on the host on every device: the batch stream's shifts (drawn on the CPU) and Adam's step
    counters (CPU tensors unless capturable or fused)."""
    counts, paused = [0], [False]

    def host_side(t) -> bool:
        return any(t is s.get("step") for s in trainer.optimizer.state.values())

    originals = {name: getattr(torch.Tensor, name) for name in READS}

    def counting(name):
        def read(self, *args, **kwargs):
            if not paused[0] and not host_side(self):
                counts[0] += 1
            return originals[name](self, *args, **kwargs)
        return read

    fetch = trainer.stream.next

    def next_batch():
        paused[0] = True
        try:
            return fetch()
        finally:
            paused[0] = False

    trainer.stream.next = next_batch
    for name in READS:
        setattr(torch.Tensor, name, counting(name))
    try:
        yield counts
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
        del trainer.stream.next


@pytest.mark.parametrize("xbm_size", [0, 40])
def test_a_deferred_step_reads_nothing_until_a_step_logs(xbm_size):
    trainer = make(True, PlainLoss(), PlainModel(), xbm_size=xbm_size, log_every=4)
    trainer.step(1)  # step 1 logs; Adam's state exists from here on
    per_step = []
    for _ in range(4):  # steps 2, 3, 4 (logs), 5
        with counted_reads(trainer) as counts:
            trainer._train_step()
        per_step.append(counts[0])
    assert per_step[0] == per_step[1] == per_step[3] == 0, per_step
    assert per_step[2] > 0  # step 4 reads steps 2-4 (the counter sees reads)


def test_the_simple_path_reads_every_step():
    """The counter's check: on the simple path each step reads (loss, flags, batch AP)."""
    trainer = make(False, PlainLoss(), PlainModel(), log_every=4)
    trainer.step(1)
    with counted_reads(trainer) as counts:
        trainer._train_step()  # step 2 does not log
    assert counts[0] >= 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (torch.cuda.set_sync_debug_mode)")
def test_a_deferred_step_on_cuda_never_synchronises():
    train, test = tiny_splits()
    trainer = Trainer(tiny_config(**{**RUN, "device": "cuda"}), train_set=train, test_set=test,
                      model=PlainModel(), loss=PlainLoss())
    assert trainer.plan.deferred_reads
    trainer.step(3)  # warm-up: cuDNN, allocator, Adam's state; step 3 logs
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        trainer._train_step()  # steps 4 and 5 do not log
        trainer._train_step()
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    trainer.step(1)  # step 6 reads all three
    assert [r["step"] for r in trainer.history][-3:] == [4, 5, 6]


# ------------------------------------------------------------------------------ the memory's host mirror
def reference_contents(memory: CrossBatchMemory, embeddings, labels, indices):
    """The memory's read before issue 34: a boolean mask of the kept slots."""
    n = int(memory.filled)
    overwritten = (int(memory.ptr) + torch.arange(len(embeddings))) % memory.size
    keep = torch.ones(n, dtype=torch.bool)
    keep[overwritten[overwritten < n]] = False
    old_e, old_y, old_i = memory.embeddings[:n], memory.labels[:n], memory.indices[:n]
    return (torch.cat([embeddings, old_e[keep]]), torch.cat([labels.view(len(labels), -1), old_y[keep]]),
            torch.cat([indices, old_i[keep]]))


@pytest.mark.parametrize("size,batch", [(7, 3), (8, 4), (5, 5), (12, 5), (3, 1)])
def test_the_memory_reads_like_its_boolean_mask_reference(size, batch):
    g = torch.Generator().manual_seed(size * 10 + batch)
    memory, copy = CrossBatchMemory(size, 4), CrossBatchMemory(size, 4)
    for step in range(3 * size):
        e, y, i = torch.randn(batch, 4, generator=g), torch.randint(0, 3, (batch,), generator=g), \
            torch.arange(step * batch, (step + 1) * batch)
        for got, want in zip(memory.contents_after(e, y, i), reference_contents(memory, e, y, i)):
            assert torch.equal(got, want), (size, batch, step)
        memory.enqueue(e, y, i)
    copy.load_state_dict(memory.state_dict())  # the host mirror comes with a loaded state
    e, y, i = torch.randn(batch, 4, generator=g), torch.zeros(batch, dtype=torch.long), torch.arange(batch)
    for got, want in zip(copy.contents_after(e, y, i), reference_contents(memory, e, y, i)):
        assert torch.equal(got, want)


def test_kept_slots_against_a_set_reference():
    for size in range(1, 9):
        for filled in range(size + 1):
            for ptr in range(size):
                for count in range(1, size + 1):
                    written = {(ptr + j) % size for j in range(count)}
                    want = [s for s in range(filled) if s not in written]
                    got = [s for a, b in kept_slots(ptr, count, filled, size) for s in range(a, b)]
                    assert got == want, (ptr, count, filled, size)
