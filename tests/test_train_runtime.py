"""The device defaults (lab.train.runtime): a pure function of the device and the config, so the
CUDA choices are checked here without a GPU; the CLI's amp choice and what it prints."""
import pytest
import torch

from lab.cli import build_parser, config_from_args, main, run_config
from lab.train import TrainConfig
from lab.train.runtime import MAX_WORKERS, PREFETCH, auto_amp, runtime_plan, usable_cpus


def plan(device="cuda", batchable=False, timm=False, **config):
    return runtime_plan(device, TrainConfig(**config), batchable=batchable, timm_backbone=timm, cpus=16)


def test_cpu_keeps_todays_settings():
    for batchable in (False, True):
        p = plan("cpu", batchable=batchable, timm=True)
        assert p.num_workers == 0 and not p.pin_memory and not p.non_blocking and not p.channels_last
        assert p.prefetch_factor is None and not p.persistent_workers and p.device_batches == batchable
    assert plan("cpu", num_workers=3).num_workers == 3  # what the config says
    assert TrainConfig().num_workers is None  # the studies do not hash it (lab.studies.spec.config_key)


def test_cuda_disk_datasets_get_workers_pinned_memory_and_prefetch():
    p = plan("cuda")
    assert p.num_workers == 15 and p.workers_auto  # 16 usable cores, one left to the training loop
    assert p.pin_memory and p.persistent_workers and p.prefetch_factor == PREFETCH and p.non_blocking
    assert not p.device_batches and not p.channels_last
    text = p.describe()
    assert "15 workers (from the usable cores)" in text and "pinned memory" in text and f"prefetch {PREFETCH}" in text
    assert "non-blocking copies" in text


@pytest.mark.parametrize("cpus,ranks,workers", [(1, 1, 1), (2, 1, 1), (8, 1, 7), (64, 1, MAX_WORKERS), (16, 4, 3),
                                                (16, 16, 1)])
def test_workers_come_from_this_process_share_of_the_cores(cpus, ranks, workers):
    p = runtime_plan("cuda:0", TrainConfig(), batchable=False, timm_backbone=False, cpus=cpus, local_world_size=ranks)
    assert p.num_workers == workers


def test_an_explicit_worker_count_is_kept_on_cuda():
    p = plan("cuda", num_workers=0)
    assert p.num_workers == 0 and not p.workers_auto and not p.persistent_workers and p.prefetch_factor is None
    assert p.pin_memory and "DataLoader in the training process, pinned memory" in p.describe()
    assert plan("cuda", num_workers=2).num_workers == 2


def test_embedded_sets_on_cuda_use_no_loader_at_all():
    p = plan("cuda", batchable=True, num_workers=8)
    assert p.device_batches and p.num_workers == 0 and not p.pin_memory and p.workers_unused
    assert "one uint8 tensor on cuda" in p.describe() and "num_workers unused" in p.describe()
    assert "num_workers unused" not in plan("cuda", batchable=True).describe()


def test_channels_last_for_timm_backbones_on_cuda_only():
    assert plan("cuda", timm=True).channels_last and "channels_last" in plan("cuda", timm=True).describe()
    assert not plan("cuda", timm=False).channels_last and not plan("cpu", timm=True).channels_last
    assert not plan("mps", timm=True).channels_last


def test_bad_arguments():
    with pytest.raises(ValueError, match="local_world_size must be >= 1, got 0"):
        runtime_plan("cuda", TrainConfig(), batchable=False, timm_backbone=False, local_world_size=0)
    with pytest.raises(ValueError, match="num_workers must be >= 0, got -1"):
        TrainConfig(num_workers=-1)
    assert usable_cpus() >= 1


def test_auto_amp_is_bf16_for_timm_on_cuda_only():
    amp = TrainConfig().amp
    assert auto_amp("cuda", amp, timm_backbone=True)[0] == "bf16"
    assert "--amp none keeps float32" in auto_amp("cuda", amp, timm_backbone=True)[1]
    assert auto_amp("cuda", amp, timm_backbone=True, bf16_supported=False) == \
        ("none", "float32: this GPU has no bf16 (--amp fp16 for mixed precision)")
    assert auto_amp("cuda", amp, timm_backbone=False)[0] == "none"
    assert auto_amp("cpu", amp, timm_backbone=True)[0] == "none"
    assert auto_amp("cuda", "fp16", timm_backbone=True)[0] == "fp16"


# ------------------------------------------------------------------------------------ the CLI
@pytest.fixture
def on_cuda(monkeypatch):
    """The CLI believes it runs on a GPU with bf16: only the amp decision is exercised (no training)."""
    import lab.train.optim
    import lab.train.runtime

    monkeypatch.setattr(lab.train.optim, "select_device", lambda name="auto", local_rank=0: torch.device("cuda"))
    monkeypatch.setattr(lab.train.runtime, "bf16_supported", lambda device: True)


def amp_of(*argv):
    args = build_parser().parse_args(["train", *map(str, argv)])
    cfg, note = run_config(args)
    return cfg.amp, note


def test_the_cli_picks_bf16_for_timm_on_cuda_unless_amp_was_chosen(on_cuda, tmp_path):
    amp, note = amp_of("--model", "resnet18")
    assert amp == "bf16" and "not chosen; --amp none keeps float32" in note
    assert amp_of("--model", "resnet18", "--amp", "none") == ("none", "amp none (--amp)")
    # "none" is a value of --amp and --scheduler, not "flag not given" (it used to be refused as None)
    assert config_from_args(build_parser().parse_args(["train", "--scheduler", "none"])).scheduler == "none"
    assert amp_of("--model", "small_cnn")[0] == "none"
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model: resnet18\namp: none\n")
    assert amp_of("--config", recipe) == ("none", "amp none (the recipe's)")
    recipe.write_text("model: resnet18\n")
    assert amp_of("--config", recipe)[0] == "bf16"


def test_a_resumed_run_keeps_the_amp_it_was_trained_with(on_cuda, tmp_path):
    from lab.train import save_checkpoint
    from lab.train.checkpoint import FORMAT, KEYS

    state = {k: {} for k in KEYS}
    state.update(format=FORMAT, config=TrainConfig(model="resnet18").to_dict(), step=1)  # trained in float32
    save_checkpoint(state, tmp_path / "checkpoint.pt")
    assert amp_of("--resume", tmp_path / "checkpoint.pt") == ("none", "amp none (the checkpoint's)")
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model: resnet18\n")
    assert amp_of("--config", recipe, "--resume", tmp_path / "checkpoint.pt")[0] == "none"


def test_train_says_what_it_chose(capsys):
    main(["train", "--dataset", "glyphs", "--dataset-kwargs", "num_classes=8", "instances_per_class=4",
          "--batch-size", "16", "--embed-dim", "16", "--no-progress", "--device", "cpu", "--steps", "1",
          "--eval-every", "0"])
    err = capsys.readouterr().err
    assert "cpu: data: the images as one uint8 tensor on cpu, each batch gathered and shifted there" in err
    assert "amp none (the config's)" in err
