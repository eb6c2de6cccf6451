"""Reading the notebooks' shipped checkpoints (made by :mod:`lab.experiments.checkpoints`, which
says what they hold and how they are tested): found by the config of the run that asks for one,
their sha256 verified when read. Kept apart from the module that makes them, which imports the
runs that import this one."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Optional, Union

CHECKPOINT_DIR = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
FORMAT = 1
MAKE = "python -m lab.experiments.checkpoints make"


def path_of(name: str, folder: Optional[Path] = None) -> Path:
    return Path(folder or CHECKPOINT_DIR) / f"{name}.pt"


def read(path: Union[str, Path]) -> dict[str, Any]:
    """A shipped checkpoint, its sha256 verified (a damaged file is a
    :class:`lab.train.checkpoint.DamagedCheckpointError`); a ValueError when it is not one of these files."""
    from ..train.checkpoint import load_checkpoint

    path = Path(path)
    state = load_checkpoint(path)
    if not isinstance(state, dict) or state.get("format") != FORMAT or state.get("name") != path.stem:
        raise ValueError(f"{path} is not a notebook checkpoint (expected a file written by `{MAKE} {path.stem}`)")
    return state


def find(config, folder: Optional[Path] = None) -> Optional[tuple[Path, dict[str, Any]]]:
    """(path, state) of the shipped checkpoint trained with ``config`` (a TrainConfig; a field added
    to TrainConfig since the file was made counts at its default), or None."""
    from ..train import TrainConfig
    from ..train.runtime import resolve_amp

    wanted = resolve_amp(config)[0].to_dict()  # amp "auto" as the Trainer would train it here
    for path in sorted(Path(folder or CHECKPOINT_DIR).glob("*.pt")):
        stat = path.stat()
        config_of, state = _read_once(str(path), stat.st_mtime_ns, stat.st_size)
        if resolve_amp(TrainConfig.from_dict(config_of))[0].to_dict() == wanted:
            return path, state
    return None


@functools.lru_cache(maxsize=8)
def _read_once(path: str, mtime_ns: int, size: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config, state) of a file as it is now (a rewritten file has another mtime or size): each
    notebook run looks through every file, each file is read and verified once per process."""
    state = read(path)
    return state["config"], state


def load_into(trainer, path: Path, state: dict[str, Any]):
    """``trainer`` (built from the checkpoint's config) with its weights and step; says so when the
    run reports progress."""
    trainer.model.load_state_dict(state["model"])
    trainer.step_count = int(state["step"])
    trainer.train_seconds = 0.0
    trainer.checkpoint = path
    if trainer.config.progress:
        print(f"loaded {path.name}: {state['step']} steps of {trainer.config.loss}, trained by `{MAKE} {path.stem}` "
              "(a notebook's RETRAIN = True trains it live instead)", flush=True)
    return trainer
