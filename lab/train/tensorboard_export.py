"""``python -m lab export-tensorboard RUN``: a run folder's metrics.jsonl as TensorBoard scalars.

Each record becomes one scalar per numeric field, tagged ``KIND/FIELD`` (``train/loss``, ``eval/R@1``) at its
step, in ``RUN/tensorboard/`` (or ``--out``); ``tensorboard --logdir RUN/tensorboard`` shows them. Needs the
``tensorboard`` package (the dev extra has it), which the library does not otherwise: without it, one line.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Optional

from .run_folder import read_log


def export_tensorboard(run: Path, out: Optional[Path] = None) -> tuple[Path, int]:
    """Write RUN/metrics.jsonl's numbers as TensorBoard events into ``out`` (default RUN/tensorboard).
    Returns (the events folder, the number of scalars written). A ValueError (one line) names what is missing."""
    if importlib.util.find_spec("tensorboard") is None:
        raise ValueError("export-tensorboard needs the tensorboard package, not installed here: pip install "
                         "tensorboard")
    log = Path(run) / "metrics.jsonl"
    if not log.is_file():
        raise ValueError(f"{log} not found: give a run folder (python -m lab train --out RUN writes it)")
    from torch.utils.tensorboard import SummaryWriter

    out = Path(out) if out is not None else Path(run) / "tensorboard"
    records, _ = read_log(log)  # a damaged line: one line naming the file and the line
    count = 0
    with SummaryWriter(str(out)) as writer:
        for step, line in records:
            record = json.loads(line)
            kind = record.get("kind", "train")
            for key, value in record.items():
                if key not in ("kind", "step") and isinstance(value, (int, float)) and not isinstance(value, bool):
                    writer.add_scalar(f"{kind}/{key}", value, step)
                    count += 1
    return out, count
