"""bench/checkouts.py times the checkout it is given, not the installed lab: a fake checkout whose loss
burns a known CPU time shows that time in its column, the real one runs the real losses, and the
table has one row per case. (Real timings are never asserted.)"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bench import checkouts, measure

ROOT = Path(__file__).resolve().parents[1]

SLOW = textwrap.dedent("""
    import time
    def build_loss(name):
        def loss(embeddings, labels):
            start = time.process_time()
            while time.process_time() - start < 0.05:   # 50 ms of CPU, whatever the case
                pass
            return embeddings.sum() * 0
        return loss
""")


def slow_checkout(tmp_path: Path) -> Path:
    fake = tmp_path / "fake"
    (fake / "lab" / "losses").mkdir(parents=True)
    (fake / "lab" / "__init__.py").write_text("")
    (fake / "lab" / "losses" / "__init__.py").write_text(SLOW)
    return fake


def test_each_side_runs_its_own_checkout(tmp_path):
    fake = slow_checkout(tmp_path)
    fake_times = checkouts.child(fake, ["sup_ap"], [16], repeat=1)
    assert fake_times["sup_ap 16"] >= 0.045
    real_times = checkouts.child(ROOT, ["sup_ap"], [16], repeat=1)
    assert real_times["sup_ap 16"] < 0.045   # the real sup_ap at B = 16 takes well under a millisecond


def test_a_slower_checkout_is_named_and_a_checkout_against_itself_is_not(tmp_path, capsys):
    args = ["--sizes", "16", "--losses", "sup_ap", "--rounds", "2", "--repeat", "1", "--no-write"]
    checkouts.main([str(ROOT), str(slow_checkout(tmp_path)), *args])
    assert "Slower beyond the noise (" in (out := capsys.readouterr().out) and "): sup_ap at B = 16 (" in out
    checkouts.main([str(slow_checkout(tmp_path / "b")), str(ROOT), *args])
    assert "): none." in capsys.readouterr().out


def test_the_table_has_a_row_per_case_and_writes_nothing_with_no_write(capsys, monkeypatch):
    monkeypatch.setattr(measure, "write_section", lambda *a: pytest.fail("wrote docs/benchmarks.md"))
    assert checkouts.main([str(ROOT), str(ROOT), "--sizes", "16", "32", "--losses", "smooth_ap", "fast_ap",
                           "--rounds", "1", "--repeat", "1", "--no-write"]) == 0
    out = capsys.readouterr().out
    cells = [line.split(" | ") for line in out.splitlines() if line.startswith("| ")]
    assert sorted(f"{row[0][2:]} {row[1]}" for row in cells if row[0][2:] in checkouts.LOSSES) == [
        "fast_ap 16", "fast_ap 32", "smooth_ap 16", "smooth_ap 32"]


def test_a_folder_that_is_not_a_checkout_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="not a checkout"):
        checkouts.main([str(tmp_path), str(ROOT), "--no-write"])


SLOW_TRAINER = textwrap.dedent("""
    import time
    class TrainConfig:
        def __init__(self, batch_size, **kwargs):
            self.batch_size = batch_size
    class Trainer:
        def __init__(self, config):
            self.config = config
        def step(self):
            start = time.process_time()
            while time.process_time() - start < 0.05:   # 50 ms of CPU per step
                pass
""")


def test_trainer_batches_time_the_checkouts_own_trainer_step(tmp_path, capsys):
    fake = slow_checkout(tmp_path)
    (fake / "lab" / "train").mkdir()
    (fake / "lab" / "train" / "__init__.py").write_text(SLOW_TRAINER)
    times = checkouts.child(fake, [], [], repeat=1, trainer_batches=[8, 16])
    assert set(times) == {f"{checkouts.TRAINER} 8", f"{checkouts.TRAINER} 16"}
    assert min(times.values()) >= 0.045
    assert checkouts.main([str(fake), str(fake), "--losses", "--trainer-batches", "8", "--rounds", "1",
                           "--repeat", "1", "--no-write"]) == 0
    out = capsys.readouterr().out
    assert f"| {checkouts.TRAINER} | 8 | " in out and "one `Trainer.step` of the CLI's defaults" in out
