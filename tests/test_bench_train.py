"""bench/train.py's training_throughput (also called by bench/gpu.py): what it returns and that each
data path is the one it names. (Timings themselves are never asserted.)"""
from __future__ import annotations

import pytest

from bench import train as bench_train

TINY = dict(batch_size=16, steps=2, warmup=1, dataset_kwargs={"num_classes": 8, "instances_per_class": 4})


@pytest.mark.parametrize("data_path", bench_train.DATA_PATHS)
def test_throughput_reports_both_loops_per_step_and_per_image(data_path, monkeypatch):
    streams = []
    real_step = bench_train.Trainer.step

    def spy(trainer, n=1):
        streams.append(type(trainer.stream).__name__)
        return real_step(trainer, n)

    monkeypatch.setattr(bench_train.Trainer, "step", spy)
    out = bench_train.training_throughput("cpu", data_path=data_path, **TINY)
    assert streams == [{"device": "DeviceBatchStream", "loader": "BatchStream"}[data_path]] * 2  # warm-up, timed
    for loop in ("with_data", "model_only"):
        rate = out[loop]
        assert rate["steps_per_s"] > 0 and rate["seconds"] > 0
        assert rate["images_per_s"] == pytest.approx(rate["steps_per_s"] * 16)
        assert rate["steps_per_s"] == pytest.approx(2 / rate["seconds"])
    assert out["fraction"] == pytest.approx(out["with_data"]["steps_per_s"] / out["model_only"]["steps_per_s"])
    settings = (out["device"], out["model"], out["batch_size"], out["amp"], out["steps"])
    assert settings == ("cpu", "small_cnn", 16, "none", 2)
    assert ("uint8 tensor on cpu" in out["data"]) == (data_path == "device")


def test_autocast_at_another_image_size():
    out = bench_train.training_throughput("cpu", image_size=40, amp="bf16", **TINY)
    assert out["image_size"] == 40 and out["amp"] == "bf16" and out["model_only"]["steps_per_s"] > 0


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"data_path must be one of \('device', 'loader'\), got 'gpu'"):
        bench_train.training_throughput("cpu", data_path="gpu")
    with pytest.raises(ValueError, match="steps must be >= 1 and warmup >= 0, got steps=0"):
        bench_train.training_throughput("cpu", steps=0)


def test_cpu_time_is_for_the_cpu_without_workers():
    out = bench_train.training_throughput("cpu", cpu_time=True, **TINY)
    assert out["with_data"]["seconds"] > 0 and out["model_only"]["steps_per_s"] > 0
    with pytest.raises(ValueError, match="cpu_time measures this process on the CPU"):
        bench_train.training_throughput("cuda", cpu_time=True, **TINY)
    with pytest.raises(ValueError, match="cpu_time measures this process on the CPU"):
        bench_train.training_throughput("cpu", cpu_time=True, num_workers=2, **TINY)
