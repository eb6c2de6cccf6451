"""Atomic checkpoints, the random-number-generator states that make a resume bit-identical,
and the guards that keep a bad or interrupted step out of them."""
from __future__ import annotations

import contextlib
import hashlib
import pickle
import random
import signal
import threading
import warnings
from pathlib import Path
from typing import Any, Iterator, Optional, Union

import numpy as np
import torch

from ..core.files import write_atomic


FORMAT = 1  # bump when the layout of Trainer.state_dict() changes


KEYS = ("format", "config", "step", "epoch", "position", "world_size", "model", "loss", "optimizer", "scheduler",
        "scaler", "memory", "rng")  # Trainer.state_dict()
WHAT = "expected a file written by `python -m lab train --out` or Trainer.save"
DAMAGED = "the file is damaged, cut short or not a PyTorch file"


def not_a_checkpoint(path: Union[str, Path], why: str) -> ValueError:
    return ValueError(f"{path} is not a RankLab checkpoint ({WHAT}): {why}")


def check_format(state: Any, path: Union[str, Path]) -> dict[str, Any]:
    """The state of a training checkpoint, or a ValueError saying that ``path`` is not one."""
    if not isinstance(state, dict):
        raise not_a_checkpoint(path, f"it holds a {type(state).__name__}, not a dict of the run's state")
    missing = [k for k in KEYS if k not in state]
    if missing:
        found = ", ".join(map(str, list(state)[:6])) + (", ..." if len(state) > 6 else "")
        hint = " (a model's state_dict?)" if state and all(isinstance(v, torch.Tensor) for v in state.values()) else ""
        missing_text = ", ".join(missing[:4]) + (", ..." if len(missing) > 4 else "")
        raise not_a_checkpoint(path, f"it has no {missing_text} (its keys: {found or 'none'}){hint}")
    if state["format"] != FORMAT:
        raise not_a_checkpoint(path, f"it is of format {state['format']!r}; this version reads format {FORMAT}")
    if not isinstance(state["config"], dict) or not isinstance(state["model"], dict):
        raise not_a_checkpoint(path, "its config or model entry is not a dict")
    return state


CHECKSUM = "sha256"  # the entry save_checkpoint adds: the digest of everything else in the file


def state_digest(state: Any) -> str:
    """sha256 of a state's values: every tensor's dtype, shape and bytes, every plain value's repr,
    in the order of the containers (the order torch.save keeps). 4 KB of zeros written over a
    tensor change it; loading never runs code, so only the values can be checked, not the bytes."""
    digest = hashlib.sha256()
    _feed(digest, state)
    return digest.hexdigest()


def _feed(digest: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        t = value.detach()
        digest.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        if t.numel():
            digest.update(t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    elif isinstance(value, dict):
        digest.update(f"D{len(value)}".encode())
        for key, item in value.items():
            _feed(digest, key)
            _feed(digest, item)
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__}{len(value)}".encode())
        for item in value:
            _feed(digest, item)
    else:
        digest.update(f"V{type(value).__name__}:{value!r}".encode())


def previous_path(path: Union[str, Path]) -> Path:
    """Where :func:`save_checkpoint` keeps the checkpoint it replaced: checkpoint.pt -> checkpoint.prev.pt."""
    path = Path(path)
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def save_checkpoint(state: dict[str, Any], path: Union[str, Path], keep_previous: bool = True) -> Path:
    """torch.save with the state's sha256 (:func:`state_digest`) to a temporary file of this
    process, fsync, then os.replace (atomic: a reader or a crash sees the old file or the new one).

    ``keep_previous``: the file it replaces stays as :func:`previous_path` (hard-linked, so that
    ``path`` exists at every moment), the last 2 checkpoints. Temporary files left by this process
    or by a process that is gone (SIGKILL, power loss) are removed; another live process's are not.
    """
    path = Path(path)
    stored = {**state, CHECKSUM: state_digest(state)} if isinstance(state, dict) else state
    return write_atomic(path, lambda f: torch.save(stored, f), previous_path(path) if keep_previous else None)


def load_checkpoint(path: Union[str, Path], map_location: Union[str, torch.device] = "cpu") -> Any:
    """Load a file written by :func:`save_checkpoint`: tensors and plain Python values only
    (``weights_only``: loading never runs code from the file), its sha256 verified when it has
    one. :func:`check_format` then says whether it is a training checkpoint.

    A missing path is a FileNotFoundError; a folder, an empty, damaged or cut-short file, or a
    pickled object (``torch.save(model)``) a one-line ValueError naming the path.
    """
    path = Path(path)
    if path.is_dir():
        inside = path / "checkpoint.pt"
        hint = f"; did you mean {inside}?" if inside.is_file() else ""
        raise not_a_checkpoint(path, f"it is a folder{hint}")
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path} ({WHAT})")
    if path.stat().st_size == 0:
        raise not_a_checkpoint(path, "the file is empty")
    try:
        with warnings.catch_warnings():  # a foreign pickle warns about its protocol before failing
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location=map_location, weights_only=True)
    except MemoryError:
        raise
    except pickle.UnpicklingError as e:
        if "Unsupported global" in str(e):  # torch.save(model), or any other pickled Python object
            raise not_a_checkpoint(path, "it holds pickled Python objects (e.g. torch.save(model)) where a "
                                         "checkpoint holds only tensors and plain values") from None
        raise not_a_checkpoint(path, DAMAGED) from None
    except Exception as e:  # EOFError, RuntimeError (zip), OSError, KeyError, ...: what torch.load meets
        if isinstance(e, RuntimeError) and "zip archive" not in str(e):
            raise  # e.g. a CUDA map_location without CUDA: not the file's fault, torch's own message
        raise not_a_checkpoint(path, DAMAGED) from None
    if isinstance(state, dict) and CHECKSUM in state:
        stored = state.pop(CHECKSUM)
        if stored != state_digest(state):
            raise DamagedCheckpointError(f"{path} is damaged: its values do not match the sha256 written with them "
                                         "(a disk, copy or storage error changed the file)")
    return state


class DamagedCheckpointError(ValueError):
    """A checkpoint whose values changed after it was written (its sha256 does not match)."""


def load_with_fallback(path: Union[str, Path], map_location: Union[str, torch.device] = "cpu"
                       ) -> tuple[dict[str, Any], Path]:
    """(state, the path it came from): ``path``'s training checkpoint, or, when that one is damaged,
    cut short or missing, the previous one kept beside it (:func:`previous_path`), with a warning.
    Neither usable: the error about ``path`` (naming the previous one's problem too)."""
    path = Path(path)
    try:
        return check_format(load_checkpoint(path, map_location), path), path
    except (ValueError, FileNotFoundError) as error:
        previous = previous_path(path)
        damaged = isinstance(error, FileNotFoundError) or DAMAGED in str(error) or \
            isinstance(error, DamagedCheckpointError) or "the file is empty" in str(error)
        if not damaged or not previous.is_file():
            raise
        try:
            state = check_format(load_checkpoint(previous, map_location), previous)
        except (ValueError, FileNotFoundError) as other:
            raise type(error)(f"{error}; the previous checkpoint is unusable too: {other}") from None
        why = " ".join(str(error).split())
    warnings.warn(f"{why}; resuming from the previous checkpoint {previous} "
                  f"(step {state['step']}) instead", RuntimeWarning)  # one location: shown once per process
    return state, previous


def load_weights(module: torch.nn.Module, weights: dict[str, Any], path: Union[str, Path], what: str = "model") -> None:
    """``module.load_state_dict(weights)``; weights that do not fit the module (a checkpoint whose config was
    edited, another model's file) are a one-line ValueError naming ``path`` and the first mismatches, where
    load_state_dict raises a RuntimeError of one line per tensor."""
    try:
        module.load_state_dict(weights)
    except RuntimeError as e:
        problems = [line.strip() for line in str(e).splitlines()[1:] if line.strip()] or [str(e)]
        shown = "; ".join(problems[:2]) + (f"; and {len(problems) - 2} more" if len(problems) > 2 else "")
        raise ValueError(f"{path}: its {what} weights do not fit the {what} its config builds ({shown})") from None


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
