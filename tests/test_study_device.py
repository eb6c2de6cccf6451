"""``python -m lab study --device``: cpu, or cuda where this machine has CUDA; anything else is one line naming
--device and what it accepts, before any file is written (issue 47, point 7). Jobs sent to a SLURM cluster train
on its nodes: there only the form is checked."""
import pytest
import torch

from lab.cli import main
from lab.studies.running import runner
from lab.studies.running.local_pool import check_device
from tests.test_study import fake_execute


def _cuda(monkeypatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def _refused(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err + (e.value.code if isinstance(e.value.code, str) else "")
    assert err.strip() and "\n" not in err.strip(), err
    return err


@pytest.mark.parametrize("extra", [[], ["--jobs", "2"], ["--executor", "submitit"]])
@pytest.mark.parametrize("names", [["methods"], ["pilot"]])
def test_device_cuda_without_cuda_is_one_line_before_any_file(names, extra, tmp_path, monkeypatch, capsys):
    _cuda(monkeypatch, 0)
    monkeypatch.setattr(runner, "execute", lambda spec, *a, **k: fake_execute(spec))  # were it to train: quickly
    if "--executor" in extra:
        monkeypatch.setattr("shutil.which", lambda name: None)  # no sbatch here: submitit's jobs run on this machine
    err = _refused(["study", *names, "--quick", "--device", "cuda", *extra, "--out", str(tmp_path / "out"),
                    "--docs", str(tmp_path / "docs"), "--no-render"], capsys)
    assert "--device 'cuda': CUDA is not available on this machine" in err and "accepted here: cpu" in err
    assert "cuda," not in err.split("accepted here:")[1]
    assert not list(tmp_path.iterdir())  # nothing written, not even the folder


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "CUDA", "mps0"])
def test_a_device_it_does_not_take_is_one_line_naming_the_accepted_values(device, tmp_path, monkeypatch, capsys):
    _cuda(monkeypatch, 1)
    err = _refused(["study", "methods", "--quick", "--device", device, "--out", str(tmp_path / "out"),
                    "--no-render"], capsys)
    assert f"--device {device!r}: not a device it takes; accepted here: cpu, cuda" in err
    assert not (tmp_path / "out").exists()


def test_with_cuda_the_gpus_this_machine_has_are_accepted_and_no_other(monkeypatch):
    _cuda(monkeypatch, 2)
    for device in ("cpu", "cuda", "cuda:0", "cuda:1", None):
        check_device(device)
    with pytest.raises(ValueError, match=r"--device 'cuda:2': this machine has 2 CUDA devices; accepted here: cpu, "
                                         r"cuda, cuda:0\.\.cuda:1$"):
        check_device("cuda:2")


def test_jobs_on_a_cluster_may_ask_for_cuda_the_driver_lacks(monkeypatch):
    """A login node has no GPU; the array's tasks get theirs from SLURM: only the form is checked."""
    _cuda(monkeypatch, 0)
    check_device("cuda", here=False)
    check_device("cuda:3", here=False)
    with pytest.raises(ValueError, match="--device 'gpu': not a device it takes"):
        check_device("gpu", here=False)


def test_device_cpu_trains(tmp_path, monkeypatch):
    _cuda(monkeypatch, 0)
    trained = []
    monkeypatch.setattr(runner, "execute", lambda spec, *a, **k: trained.append(spec) or fake_execute(spec))
    main(["study", "methods", "--quick", "--device", "cpu", "--out", str(tmp_path), "--no-render"])
    assert trained and (tmp_path / "methods.json").is_file()
