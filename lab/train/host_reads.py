"""A training step's numbers read on the host: at once, or deferred to the steps that log.

On a GPU every ``float(tensor)``, ``.item()``, ``.tolist()`` or ``if tensor:`` waits for the device to
finish all the work queued so far: the host stops feeding it. Five such reads a step (loss, batch
AP, gradient norm, two finiteness checks) held small-CNN training at 64 % of the model's own speed
on an H100 (bench/gpu.py, issue 34). On the deferred path (``RuntimePlan.deferred_reads``) a step
keeps its values as device tensors in a :class:`Pending` record, and :func:`read_pending` reads
every pending step's values and non-finite flags in one transfer when a step logs.

Its price: one copy of the run's state (model, optimizer, memory) on the device, taken by
:func:`clone_state` at the first unread step (what a non-finite step found later goes back to), and
the unread steps' embeddings (B x D each) for their batch AP.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

# What each flag of a step says was not finite, in the order the simple path checks them.
FLAG_NAMES = ("embeddings", "loss", "gradient norm")
EMBEDDINGS_NOT_FINITE = "the embeddings (the model diverged)"  # the first flag, in NonFiniteLossError's words


@dataclass
class Pending:
    """One committed step whose numbers are still on the device.

    ``record``: the metrics record (its tensor values and ``batch_ap`` are filled in by the read);
    ``embeddings``, ``labels``: the step's global batch, for ``batch_ap`` (computed at read time: the
    exact AP waits for the device itself); ``flags`` (3,) bool: embeddings, loss, gradient norm not
    finite (never set on the simple path, which raises at once)."""

    record: dict[str, Any]
    embeddings: Tensor
    labels: Tensor
    flags: Tensor
    started: float = field(default_factory=time.perf_counter)

    def tensor_keys(self) -> list[str]:
        return [k for k, v in self.record.items() if isinstance(v, Tensor)]


def read_pending(pending: list[Pending]) -> tuple[list[dict[str, float]], tuple[int, str] | None]:
    """One host read for all ``pending`` steps: each step's tensor values as floats, and
    (index, what) of the first step with a non-finite value (None if none).

    ``what`` is the simple path's words: "the embeddings (the model diverged)", "the loss (nan)",
    "the gradient norm". float64 holds every float32 exactly: the floats equal ``float(tensor)``."""
    tensors = [torch.cat([torch.stack([entry.record[k].detach().reshape(()).double() for k in entry.tensor_keys()]),
                          entry.flags.double()]) for entry in pending]
    rows = torch.cat(tensors).tolist()
    values, bad, offset = [], None, 0
    for index, entry in enumerate(pending):
        keys = entry.tensor_keys()
        numbers = rows[offset: offset + len(keys)]
        flags = rows[offset + len(keys): offset + len(keys) + len(FLAG_NAMES)]
        offset += len(keys) + len(FLAG_NAMES)
        values.append(dict(zip(keys, numbers)))
        if bad is None and any(flags):
            bad = (index, describe_flag(flags, values[-1]["loss"]))
    return values, bad


def describe_flag(flags: list[float], loss: float) -> str:
    if flags[0]:
        return EMBEDDINGS_NOT_FINITE
    return f"the loss ({loss})" if flags[1] else "the gradient norm"


def clone_state(value: Any) -> Any:
    """A copy of a state (nested dicts, lists, tuples) whose tensors are cloned on their device:
    no host read, unlike a state_dict that holds a GradScaler's scale (the deferred path has none)."""
    if isinstance(value, Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: clone_state(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(clone_state(v) for v in value)
    return value
