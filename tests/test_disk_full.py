"""A full disk during a save is one line naming the file and ENOSPC (issue 47, point 7): torch.save met the
OSError, then its zip writer raised a RuntimeError (inline_container.cc) while closing, and the CLI showed
both tracebacks, rc 1. And resuming a finished run no longer appends a second evaluation of its last step."""
from __future__ import annotations

import errno
import json
import os

import pytest
import torch

from lab.cli import main
from lab.core import files
from lab.train import load_checkpoint
from lab.train.checkpoint import previous_path
from tests._cli import TINY, one_error_line


class FullAfter:
    """A file object that takes ``room`` writes and then fails as a full disk does (errno 28)."""

    def __init__(self, f, room: int = 2) -> None:
        self.f, self.room = f, room

    def write(self, data):
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= 1
        return self.f.write(data)

    def flush(self):
        self.f.flush()


def test_torch_save_on_a_full_disk_buries_the_cause_this_is_what_is_undone():
    # The shape of the failure being handled, from torch itself: a RuntimeError on top, the OSError beneath.
    with open(os.devnull, "wb") as sink, pytest.raises(RuntimeError, match="inline_container") as info:
        torch.save({"w": torch.zeros(10_000)}, FullAfter(sink))
    assert isinstance(info.value.__context__, OSError) and info.value.__context__.errno == errno.ENOSPC


@pytest.mark.parametrize("existing", [False, True])
def test_write_atomic_names_the_file_and_enospc_and_leaves_the_old_file(tmp_path, existing):
    path = tmp_path / "checkpoint.pt"
    if existing:
        path.write_bytes(b"the previous checkpoint")
    with pytest.raises(files.DiskFullError) as info:
        files.write_atomic(path, lambda f: torch.save({"w": torch.zeros(10_000)}, FullAfter(f)))
    state = "the file there is unchanged" if existing else "no file was written"
    assert str(info.value) == f"cannot write {path}: no space left on device (ENOSPC); {state}"
    assert info.value.errno == errno.ENOSPC and isinstance(info.value, OSError)
    assert sorted(p.name for p in tmp_path.iterdir()) == (["checkpoint.pt"] if existing else [])
    if existing:
        assert path.read_bytes() == b"the previous checkpoint"


def test_a_training_run_on_a_full_disk_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    real = torch.save
    monkeypatch.setattr(torch, "save", lambda obj, f, *a, **k: real(obj, FullAfter(f), *a, **k))
    out = tmp_path / "run"
    line = one_error_line(capsys, "train", *TINY, "--out", out, started=True)
    assert line == (f"python -m lab train: error: cannot write {out / 'checkpoint.pt'}: no space left on device "
                    "(ENOSPC); no file was written")


def test_the_metrics_log_on_a_full_disk_names_itself(tmp_path, capsys, monkeypatch):
    import lab.train.trainer as trainer_module

    class Appending(FullAfter):  # as a context manager, as _log opens metrics.jsonl (its only open)
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(trainer_module, "open", lambda *a, **k: Appending(open(*a, **k), room=0), raising=False)
    line = one_error_line(capsys, "train", *TINY, "--out", tmp_path / "run", started=True)
    assert line.startswith(f"python -m lab train: error: cannot write {tmp_path / 'run' / 'metrics.jsonl'}: "
                           "no space left on device (ENOSPC); its last line may be cut short")


def evaluations(out) -> list[dict]:
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if r["kind"] == "eval"]


def test_resuming_a_finished_run_adds_no_second_evaluation_and_keeps_the_previous_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    main(["train", *TINY, "--steps", "2", "--checkpoint-every", "1", "--eval-every", "5", "--out", str(out)])
    first = json.loads(capsys.readouterr().out)
    assert [r["step"] for r in evaluations(out)] == [2]
    assert load_checkpoint(previous_path(out / "checkpoint.pt"))["step"] == 1
    main(["train", "--resume", "--out", str(out), "--no-progress"])  # nothing left to train
    again = json.loads(capsys.readouterr().out)
    assert [r["step"] for r in evaluations(out)] == [2]  # was [2, 2]
    assert again["R@1"] == first["R@1"] and again["mAP@R"] == first["mAP@R"]
    assert load_checkpoint(previous_path(out / "checkpoint.pt"))["step"] == 1  # was replaced by step 2's copy
