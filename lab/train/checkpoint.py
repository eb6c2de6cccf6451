"""Atomic checkpoints, the random-number-generator states that make a resume bit-identical,
and the guards that keep a bad or interrupted step out of them."""
from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator, Optional, Union

import numpy as np
import torch


FORMAT = 1  # bump when the layout of Trainer.state_dict() changes


def check_format(state: Any, path: Union[str, Path]) -> dict[str, Any]:
    """The state of a training checkpoint, or a ValueError saying that ``path`` is not one."""
    if not isinstance(state, dict) or state.get("format") != FORMAT or not {"config", "model"} <= set(state):
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"{path} is not a RankLab training checkpoint of format {FORMAT} (found {found!r})")
    return state


def save_checkpoint(state: dict[str, Any], path: Union[str, Path]) -> Path:
    """torch.save to a temporary file in the same folder, fsync, then os.replace.

    os.replace is atomic on POSIX: a reader (or a crash) sees the old file or the new one,
    never a partial one. The temporary file is removed if writing fails.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # also KeyboardInterrupt in the middle of a write
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def load_checkpoint(path: Union[str, Path], map_location: Union[str, torch.device] = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` (tensors and plain Python only)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return torch.load(path, map_location=map_location, weights_only=True)


def rng_state() -> dict[str, Any]:
    """The global RNG states of python, numpy and torch (CPU and CUDA), as checkpointable values."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"].cpu())  # .cpu(): a checkpoint may be loaded onto a GPU
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


@contextlib.contextmanager
def preserved_rng() -> Iterator[None]:
    """Run a block (evaluation, probing) without moving the training run's random streams."""
    state = rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def all_finite(module: torch.nn.Module) -> bool:
    """True if every parameter and floating buffer is finite: only such states get saved."""
    tensors = list(module.parameters()) + [b for b in module.buffers() if b.is_floating_point()]
    return all(bool(torch.isfinite(t).all()) for t in tensors)


class NonFiniteLossError(FloatingPointError):
    """Training produced NaN/inf at ``step``; nothing of that step was applied or saved."""

    def __init__(self, step: int, what: str, checkpoint: Optional[str] = None,
                 action: str = "training stopped before applying it") -> None:
        self.step, self.checkpoint = step, checkpoint
        kept = f"; the last good checkpoint is {checkpoint}" if checkpoint else "; no checkpoint was written"
        super().__init__(f"{what} is not finite at step {step}: {action}{kept}. "
                         "Lower the learning rate, enable grad_clip or use amp='none'.")


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold Ctrl-C until the block is done (main thread only; elsewhere signals cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            raise KeyboardInterrupt


def truncate_jsonl(path: Path, step: int) -> None:
    """Keep the lines of a metrics log with ``"step" <= step`` (atomic rewrite)."""
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    os.replace(tmp, path)
