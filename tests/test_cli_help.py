"""python -m lab's help: train's flags explained from one source (TrainConfig's FIELD_HELP, which its docstring
shows too), the top-level --help without torch, one line where torch is missing, the demo's honest ETA."""
import argparse
import dataclasses
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import cli
from lab.train import TrainConfig
from lab.train.config import FIELD_HELP

ROOT = Path(__file__).resolve().parents[1]


def run_lab(*argv: str, block_torch: bool = False) -> subprocess.CompletedProcess:
    """``python -m lab ARGV`` in a fresh interpreter; ``block_torch``: as if torch were not installed."""
    code = ("import sys, runpy\n"
            + ("sys.modules['torch'] = None  # import torch raises ModuleNotFoundError, as without torch\n"
               if block_torch else "")
            + f"sys.argv = ['lab', *{list(argv)!r}]\n"
            "try:\n    runpy.run_module('lab', run_name='__main__')\n"
            "finally:\n    print('TORCH_IMPORTED' if sys.modules.get('torch') else 'NO_TORCH', file=sys.stderr)\n")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_every_train_field_has_its_meaning_in_one_place():
    fields = [f.name for f in dataclasses.fields(TrainConfig)]
    assert sorted(FIELD_HELP) == sorted(fields)
    for name, text in FIELD_HELP.items():
        assert text and text != name.replace("_", " "), name


def test_train_help_and_the_config_docstring_show_the_same_meanings():
    parser = cli.build_parser("train")
    train = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["train"]
    helps = {a.dest: a.help for a in train._actions}
    for name, text in FIELD_HELP.items():
        assert helps[name].startswith(text.replace("%", "%%")), name
        assert f"- **{name}** (default `" in TrainConfig.__doc__ and text in TrainConfig.__doc__, name
    train.format_help()  # argparse %-formats every help string: a bare "%" would raise here


def test_the_top_level_help_imports_no_torch():
    run = run_lab("--help")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "train from a recipe" in run.stdout and run.stderr.strip().splitlines()[-1] == "NO_TORCH"


def test_without_torch_a_command_is_one_line_saying_how_to_activate_the_venv():
    run = run_lab("demo", block_torch=True)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 1 and lines[0] == "NO_TORCH" and len(lines) == 2  # the marker, then the one line
    assert lines[1].startswith("python -m lab demo: error: torch is not installed in this Python")
    assert "source .venv/bin/activate" in lines[1] and "pip install 'ranklab-retrieval[train]'" in lines[1]


def test_a_bare_python_m_lab_is_one_line_naming_the_commands():
    run = run_lab(block_torch=True)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and sorted(lines) == sorted([
        "python -m lab: error: name a command: demo, train, eval, datasets, study, export-tensorboard (python -m "
        "lab --help says what each does)", "NO_TORCH"])


@pytest.mark.parametrize("done, elapsed", [(1, 0.5), (10, 5.0), (200, 60.0), (900, 89.0)])
def test_the_demo_bars_total_makes_its_eta_the_time_left(done, elapsed):
    total = cli.demo_total(done, elapsed, seconds=90.0, max_steps=2000)
    rate = done / elapsed
    eta = (total - done) / rate  # what tqdm shows at this rate
    assert abs(eta - (90.0 - elapsed)) <= 1 / rate + 1e-9 or total == 2000
    assert cli.demo_total(done, 95.0, seconds=90.0, max_steps=2000) == done  # over time: no step left
    assert cli.demo_total(10, 0.01, seconds=90.0, max_steps=2000) == 2000  # the step cap still holds


def test_the_demo_bar_ends_at_the_steps_it_ran(monkeypatch, capsys):
    import tqdm.auto

    totals = {}

    class Bar(tqdm.auto.tqdm):
        def close(self):
            totals.setdefault(id(self), (self.total, self.n))
            super().close()

    class FakeTrainer:  # steps of 10 ms: a 0.5 s demo runs ~50 of its 2000 steps
        def __init__(self, cfg):
            self.step_count, self.train_set = 0, range(100)

        def evaluate(self, progress=False):
            return {"R@1": 0.1, "mAP@R": 0.1, "decomposability_gap": 0.1, "num_queries": 10}

        def step(self):
            time.sleep(0.01)
            self.step_count += 1
            return {"loss": 1.0, "batch_ap": 0.5}

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    monkeypatch.setattr("lab.train.Trainer", FakeTrainer)
    cli.demo(argparse.Namespace(loss="roadmap", steps=2000, seed=0, eval_items=0, seconds=0.5))
    (total, n), = totals.values()
    assert 10 < n < 2000 and n <= total <= n + 5, (total, n)  # before: total 2000, an ETA of minutes
