"""Running ``python -m lab`` in-process and reading its one error line."""
from __future__ import annotations

import pytest

from lab.cli import main

# A few glyph classes, a narrow run: seconds on 2 cores.
TINY = ["--dataset", "glyphs", "--dataset-kwargs", "num_classes=12", "instances_per_class=4", "--batch-size", "16",
        "--embed-dim", "16", "--eval-backend", "torch", "--no-progress", "--device", "cpu", "--steps", "1"]


def one_error_line(capsys, *argv, started: bool = False) -> str:
    """Run the CLI; it must exit 2 with exactly one line on stderr, no traceback. Returns that line.
    ``started``: a run that failed once training had begun; the line the run prints as it starts (device,
    data and precision) comes first."""
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert info.value.code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 + started and "Traceback" not in err, err
    return lines[-1]
