"""What bench/gpu.py times: one loss call (fwd + bwd from the embeddings) on a batch of a given size
and composition, under one of three engines, and how a call is timed (median of 3, a failure is a cell).
"""
from __future__ import annotations

import contextlib
import os
import time
import traceback
from typing import Callable, Iterator, Optional

import torch

import lab.losses as L
from bench.measure import measure
from lab.losses.engine import plan

DIM = 512  # the measurements: D = 512
FLAT = ["smooth_ap", "sup_ap", "roadmap", "calibration", "fast_ap", "soft_bin_ap", "blackbox_ap", "smooth_recall",
        "sup_recall", "rod_recall", "roadmap_proxy", "proxy_dg"]
GRADED = ["sup_hap", "happier", "sup_ndcg", "rod_ndcg"]
CUBIC = {"smooth_ap", "sup_ap", "roadmap", "smooth_recall", "sup_recall", "rod_recall", "roadmap_proxy"}  # O(B P N)
ENGINES = ("default", "pytorch", "cpu-sized")


@contextlib.contextmanager
def engine(name: str) -> Iterator[None]:
    """``default``: as shipped; ``pytorch``: fused kernels off; ``cpu-sized``: kernels off and the CPU's
    block, tile and chunk sizes on any device (what the engine did everywhere before)."""
    saved_env = os.environ.get(plan.FUSED_ENV)
    try:
        if name != "default":
            os.environ[plan.FUSED_ENV] = "0"
        with plan.cpu_sized() if name == "cpu-sized" else contextlib.nullcontext():
            yield
    finally:
        if saved_env is None:
            os.environ.pop(plan.FUSED_ENV, None)
        else:
            os.environ[plan.FUSED_ENV] = saved_env


def batch(size: int, composition: str, device: torch.device, dtype=torch.float32):
    """(embeddings (B, DIM) leaf, labels): "4/class" and "2 classes" give (B,) fine labels; "2 levels"
    gives (B, 2), 4 per fine class and 8 fine classes per coarse class."""
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(size, DIM, generator=g).to(device=device, dtype=dtype).requires_grad_()
    per_class = size // 2 if composition == "2 classes" else 4
    fine = torch.arange(size, device=device) // per_class
    labels = torch.stack([fine, fine // 8], 1) if composition == "2 levels" else fine
    return emb, labels


def build(name: str, labels: torch.Tensor, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(0)
    fine = labels if labels.dim() == 1 else labels[:, 0]
    return L.build_loss(name, num_classes=int(fine.max()) + 1, embed_dim=DIM).to(device)


class Case:
    """One loss on one batch: forward + backward from the embeddings; the last value and gradient kept."""

    def __init__(self, name: str, size: int, composition: str, device: torch.device) -> None:
        self.emb, self.labels = batch(size, composition, device)
        self.loss = build(name, self.labels, device)
        self.value: Optional[torch.Tensor] = None

    def __call__(self) -> None:
        self.emb.grad = None
        value = self.loss(self.emb, self.labels)
        value.backward()
        self.value = value.detach()

    def result(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.value.float().cpu(), self.emb.grad.float().cpu()


def timed(fn: Callable[[], None], device: torch.device) -> tuple[Optional[float], Optional[float], str]:
    """(seconds, peak MB, note): the median of 3 after a warm-up, or one run when one takes over a second."""
    try:
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        first = time.perf_counter() - start
        seconds, peak = measure(fn, device, repeat=1 if first > 1.0 else 3)
        return seconds, peak, ""
    except torch.OutOfMemoryError:
        return None, None, "out of memory"
    except Exception as error:  # a kernel that fails on this GPU is a result too: the table says so
        traceback.print_exc()
        return None, None, f"error: {type(error).__name__}"
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()


def ms(seconds: Optional[float]) -> str:
    if seconds is None:
        return "—"
    return f"{seconds * 1e3:.0f}" if seconds >= 0.1 else f"{seconds * 1e3:.2g}" if seconds < 1e-3 else \
        f"{seconds * 1e3:.1f}"


def predicted(last: dict, key: tuple, size: int, grow: int) -> Optional[float]:
    """Seconds one call at ``size`` should take, from the last size measured for ``key`` (B^grow)."""
    if key not in last:
        return None
    b, seconds = last[key]
    return seconds * (size / b) ** grow


class Deadline:
    """The run's time limit: what is not started before it is stated as not run, so that the section
    is still written when a lease on a GPU is short."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.end = seconds, time.perf_counter() + seconds

    def passed(self) -> bool:
        return time.perf_counter() > self.end

    def note(self) -> str:
        return f"not run: the run reached its {self.seconds:.0f} s deadline (`--deadline`)"
