"""python -m lab export-tensorboard RUN: metrics.jsonl's numbers as TensorBoard scalars, or one line without
tensorboard."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cli import main

ROOT = Path(__file__).resolve().parents[1]
RECORDS = [{"kind": "train", "step": 1, "loss": 0.9, "batch_ap": 0.2, "finite": True},
           {"kind": "train", "step": 2, "loss": 0.8, "batch_ap": 0.3, "finite": True},
           {"kind": "eval", "step": 2, "split": "test", "R@1": 0.5, "mAP@R": 0.25, "num_queries": 40}]


def run_folder(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    return run


def test_the_scalars_are_the_logs_numbers(tmp_path, capsys):
    if importlib.util.find_spec("tensorboard") is None:
        if os.environ.get("RANKLAB_REQUIRE_TENSORBOARD") == "1":
            pytest.fail("RANKLAB_REQUIRE_TENSORBOARD=1 but tensorboard is not installed (the dev extra has it)")
        pytest.skip("tensorboard is not installed (the dev extra has it)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = run_folder(tmp_path)
    main(["export-tensorboard", str(run)])
    assert "7 scalars" in capsys.readouterr().out  # bools and text are not scalars
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    got = {tag: [(e.step, round(e.value, 6)) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    assert got == {"train/loss": [(1, 0.9), (2, 0.8)], "train/batch_ap": [(1, 0.2), (2, 0.3)],
                   "eval/R@1": [(2, 0.5)], "eval/mAP@R": [(2, 0.25)], "eval/num_queries": [(2, 40.0)]}


@pytest.mark.slow
def test_without_tensorboard_it_is_one_line(tmp_path):
    run = run_folder(tmp_path)
    code = ("import sys, runpy; sys.modules['tensorboard'] = None; "
            f"sys.argv = ['lab', 'export-tensorboard', {str(run)!r}]; runpy.run_module('lab', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.splitlines() == [
        "python -m lab export-tensorboard: error: export-tensorboard needs the tensorboard package, not installed "
        "here: pip install tensorboard"]


def test_a_folder_without_a_log_is_one_line(tmp_path, capsys):
    if importlib.util.find_spec("tensorboard") is None:
        pytest.skip("tensorboard is not installed: the missing package is said first")
    with pytest.raises(SystemExit) as info:
        main(["export-tensorboard", str(tmp_path)])
    assert info.value.code == 2 and "metrics.jsonl not found: give a run folder" in capsys.readouterr().err
