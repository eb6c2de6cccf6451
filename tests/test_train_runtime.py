"""The device defaults (lab.train.runtime): a pure function of the device and the config, so the
CUDA choices are checked here without a GPU; amp "auto" resolved by the Trainer, the CLI passing it
through, and what it prints."""
import dataclasses

import pytest
import torch

from lab.cli import build_parser, config_from_args, main, run_config
from lab.train import TrainConfig
from lab.train.optim import amp_dtype
from lab.train.runtime import (INTERACTIVE_EVAL_IMAGES, MAX_WORKERS, PREFETCH, auto_amp, interactive_eval_items,
                               resolve_amp, runtime_plan, usable_cpus)


def plan(device="cuda", batchable=False, timm=False, **config):
    return runtime_plan(device, TrainConfig(**config), batchable=batchable, timm_backbone=timm, cpus=16)


def test_cpu_keeps_todays_settings():
    for batchable in (False, True):
        p = plan("cpu", batchable=batchable, timm=True)
        assert p.num_workers == 0 and not p.pin_memory and not p.non_blocking and not p.channels_last
        assert p.prefetch_factor is None and not p.persistent_workers and p.device_batches == batchable
    assert plan("cpu", num_workers=3).num_workers == 3  # what the config says
    assert TrainConfig().num_workers is None  # the studies do not hash it (lab.studies.running.spec.config_key)


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
    with pytest.raises(ValueError, match=r"num_workers must be an integer >= 0 \(None: chosen .*\), got -1"):
        TrainConfig(num_workers=-1)
    assert usable_cpus() >= 1


def test_auto_amp_is_bf16_for_timm_on_cuda_only():
    amp = TrainConfig().amp
    assert amp == "auto"  # the default: Trainer(cfg) gets the policy, not only the CLI
    assert auto_amp("cuda", amp, timm_backbone=True)[0] == "bf16"
    assert "--amp none keeps float32" in auto_amp("cuda", amp, timm_backbone=True)[1]
    assert auto_amp("cuda", amp, timm_backbone=True, bf16_supported=False) == \
        ("none", "float32: this GPU has no bf16 (amp auto; --amp fp16 for mixed precision)")
    assert auto_amp("cuda", amp, timm_backbone=False)[0] == "none"
    assert auto_amp("cpu", amp, timm_backbone=True)[0] == "none"
    for chosen in ("none", "bf16", "fp16"):  # an explicit choice is kept on every device
        on_cuda = auto_amp("cuda", chosen, timm_backbone=True)[0]
        assert on_cuda == chosen == auto_amp("cpu", chosen, timm_backbone=False)[0]


def test_resolve_amp_replaces_auto_only(on_cuda):
    cfg = TrainConfig(model="resnet18", loss="smooth_ap", loss_kwargs={"tau": 0.05})
    resolved, why = resolve_amp(cfg, "cuda", timm_backbone=True)
    assert resolved == dataclasses.replace(cfg, amp="bf16") and "amp auto" in why
    assert resolve_amp(cfg)[0].amp == "bf16"  # device and model from the config: resnet18 is a timm name
    assert resolve_amp(dataclasses.replace(cfg, model="small_cnn"))[0].amp == "none"
    assert resolve_amp(cfg, "cpu", timm_backbone=True)[0].amp == "none"
    chosen = dataclasses.replace(cfg, amp="none")
    assert resolve_amp(chosen, "cuda", timm_backbone=True) == (chosen, "amp none (the config's)")
    with pytest.raises(ValueError, match="amp 'auto' must be resolved first"):
        amp_dtype("auto")


def test_interactive_commands_evaluate_a_subset_unless_a_size_was_chosen():
    """A policy function of the interactive commands, not TrainConfig's default: Trainer(cfg) from a
    notebook or a study evaluates what the config says (None: the whole split)."""
    assert TrainConfig().eval_max_items is None
    assert interactive_eval_items(None, chosen=False) == INTERACTIVE_EVAL_IMAGES
    for chosen in (False, True):
        assert interactive_eval_items(500, chosen=chosen) == 500
    assert interactive_eval_items(None, chosen=True) is None  # a recipe's (or checkpoint's) whole split


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
    cfg, amp_from = run_config(args)
    return cfg.amp, amp_from


def test_the_cli_passes_amp_through_and_the_trainer_resolves_auto(on_cuda, tmp_path):
    """The CLI no longer decides amp (it used to put bf16 into the config itself): "auto" reaches the
    Trainer, as from a notebook, unless --amp, the recipe or the checkpoint being resumed chose."""
    assert amp_of("--model", "resnet18") == ("auto", None)
    assert amp_of("--model", "resnet18", "--amp", "none") == ("none", "--amp")
    # "none" is a value of --amp and --scheduler, not "flag not given" (it used to be refused as None)
    assert config_from_args(build_parser().parse_args(["train", "--scheduler", "none"])).scheduler == "none"
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model: resnet18\namp: none\n")
    assert amp_of("--config", recipe) == ("none", "the recipe's")
    recipe.write_text("model: resnet18\n")
    assert amp_of("--config", recipe) == ("auto", None)


def test_a_resumed_run_keeps_the_amp_it_was_trained_with(on_cuda, tmp_path):
    from lab.train import save_checkpoint
    from lab.train.checkpoint import FORMAT, KEYS

    state = {k: {} for k in KEYS}
    state.update(format=FORMAT, config=TrainConfig(model="resnet18", amp="none").to_dict(), step=1)  # float32
    save_checkpoint(state, tmp_path / "checkpoint.pt")
    assert amp_of("--resume", tmp_path / "checkpoint.pt") == ("none", "the checkpoint's")
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model: resnet18\n")
    assert amp_of("--config", recipe, "--resume", tmp_path / "checkpoint.pt")[0] == "none"


def test_the_trainer_resolves_auto_and_records_the_resolved_amp(tmp_path, monkeypatch):
    """Trainer(cfg), as a notebook or the dashboard builds it, gets the amp policy; config.yaml, the
    checkpoint and trainer.config hold its answer, never "auto". The policy is replaced by one that says
    bf16 on this CPU, so that the recorded value is not merely the float32 default."""
    import lab.train.runtime
    from lab.train import Trainer, load_checkpoint, load_config
    from tests._train_fixtures import TinySet, tiny_config

    def trainer(name, **changes):
        return Trainer(tiny_config(out=str(tmp_path / name), **changes), train_set=TinySet(),
                       test_set=TinySet(offset=12))

    plain = trainer("plain")
    assert plain.config.amp == "none" and plain.amp_dtype is None and "amp auto" in plain.amp_note
    monkeypatch.setattr(lab.train.runtime, "auto_amp", lambda device, amp, **kw: ("bf16", "bf16 (the test's policy)"))
    auto = trainer("auto")
    assert (auto.config.amp, auto.amp_dtype, auto.amp_note) == ("bf16", torch.bfloat16, "bf16 (the test's policy)")
    assert auto.config == dataclasses.replace(tiny_config(out=auto.config.out), amp="bf16")
    auto.step(1)
    auto.save(tmp_path / "auto" / "checkpoint.pt")
    assert load_config(tmp_path / "auto" / "config.yaml").amp == "bf16"
    assert load_checkpoint(tmp_path / "auto" / "checkpoint.pt")["config"]["amp"] == "bf16"
    assert trainer("chosen", amp="none").config.amp == "none"  # a chosen amp is never resolved


def test_train_says_what_it_chose(capsys):
    main(["train", "--dataset", "glyphs", "--dataset-kwargs", "num_classes=8", "instances_per_class=4",
          "--batch-size", "16", "--embed-dim", "16", "--no-progress", "--device", "cpu", "--steps", "1",
          "--eval-every", "0"])
    err = capsys.readouterr().err
    assert "cpu: data: the images as one uint8 tensor on cpu, each batch gathered and shifted there" in err
    assert "float32 (amp auto: bf16 autocast only for a timm backbone on CUDA)" in err
