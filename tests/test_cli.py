"""python -m lab: train / eval / datasets / demo, recipes, and bad input."""
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
import yaml

from lab.cli import main
from lab.core.env import torch_threads
from lab.data import build_dataset
from lab.train import Trainer, TrainConfig, class_subset, field_names, load_checkpoint, load_config
from lab.train.runtime import INTERACTIVE_EVAL_IMAGES

ROOT = Path(__file__).resolve().parents[1]

RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))
# A few glyph classes, a narrow run: seconds on 2 cores.
TINY = ["--dataset", "glyphs", "--dataset-kwargs", "num_classes=12", "instances_per_class=4", "--batch-size", "16",
        "--m", "4", "--embed-dim", "16", "--eval-backend", "torch", "--no-progress", "--device", "cpu"]


def run(capsys, *argv):
    main([str(a) for a in argv])
    return capsys.readouterr()


def fails(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in argv])
    assert info.value.code not in (0, None)
    return capsys.readouterr().err


def test_train_writes_the_run_and_eval_reads_it(tmp_path, capsys):
    out = tmp_path / "run"
    printed = run(capsys, "train", *TINY, "--steps", 3, "--eval-every", 3, "--out", out).out
    result = json.loads(printed)
    assert {"R@1", "mAP@R", "loss", "decomposability_gap"} <= set(result)
    assert {p.name for p in out.iterdir()} >= {"config.yaml", "metrics.jsonl", "checkpoint.pt"}
    assert load_config(out / "config.yaml").dataset_kwargs == {"num_classes": 12, "instances_per_class": 4}

    evaluated = json.loads(run(capsys, "eval", "--checkpoint", out / "checkpoint.pt", "--backend", "torch",
                               "--export", tmp_path / "emb.npz").out)
    assert evaluated["step"] == 3 and evaluated["R@1"] == pytest.approx(result["R@1"])
    assert Path(evaluated["exported"]).exists()
    sop_style = json.loads(run(capsys, "eval", "--checkpoint", out / "checkpoint.pt", "--backend", "torch",
                               "--ks", 1, 10, 100).out)
    assert {k for k in sop_style if k.startswith("R@")} == {"R@1", "R@10", "R@100"}
    assert sop_style["R@1"] == pytest.approx(evaluated["R@1"]) and sop_style["R@1"] <= sop_style["R@10"] <= 1


def test_train_and_eval_evaluate_a_class_subset_by_default_and_say_so(tmp_path, capsys):
    """Flags alone evaluate INTERACTIVE_EVAL_IMAGES images (lab.train.runtime's policy for interactive
    commands, not TrainConfig's default); --eval-images
    N takes a subset of whole classes, 'all' the whole split; what was evaluated is printed."""
    labels = build_dataset("glyphs", "test", num_classes=12, instances_per_class=4).labels
    subset = class_subset(labels, 20, seed=0)
    classes = len(labels[subset, 0].unique())
    assert subset is not None and len(subset) < len(labels)

    printed = run(capsys, "train", *TINY, "--steps", 1, "--eval-every", 1, "--out", tmp_path / "a")
    assert load_config(tmp_path / "a" / "config.yaml").eval_max_items == INTERACTIVE_EVAL_IMAGES
    assert TrainConfig().eval_max_items is None  # the studies hash TrainConfig's defaults
    assert f"evaluated on the whole test split: {len(labels)} images" in printed.err  # < 3,000 images

    printed = run(capsys, "train", *TINY, "--steps", 1, "--eval-every", 1, "--eval-images", 20, "--out", tmp_path / "b")
    result = json.loads(printed.out)
    assert result["num_queries"] + result["excluded_queries"] == len(subset)
    assert f"evaluated on {len(subset)} of {len(labels)} test images, {classes} of 12 classes" in printed.err
    assert "--eval-images all" in printed.err

    printed = run(capsys, "eval", "--checkpoint", tmp_path / "b" / "checkpoint.pt", "--backend", "torch",
                  "--eval-images", 20)
    assert json.loads(printed.out)["R@1"] == pytest.approx(result["R@1"])
    assert f"evaluated on {len(subset)} of {len(labels)} test images" in printed.err

    run(capsys, "train", *TINY, "--steps", 1, "--eval-every", 0, "--eval-images", "all", "--out", tmp_path / "c")
    assert load_config(tmp_path / "c" / "config.yaml").eval_max_items is None
    assert "'all', got '0'" in fails(capsys, "train", *TINY, "--steps", 1, "--eval-images", 0)


def test_resume_continues_and_refuses_another_config(tmp_path, capsys):
    out = tmp_path / "run"
    run(capsys, "train", *TINY, "--steps", 2, "--eval-every", 0, "--out", out)
    run(capsys, "train", "--resume", "--out", out, "--steps", 4, "--no-progress")  # config from out/config.yaml
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 4
    err = fails(capsys, "train", "--resume", "--out", out, "--steps", 6, "--lr", 0.5)
    assert "different config" in err and "lr: 0.001 in the checkpoint vs 0.5 now" in err
    run(capsys, "train", "--resume", out / "checkpoint.pt", "--steps", 5, "--no-progress")  # a path, no --out
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 5
    assert "needs --out" in fails(capsys, "train", "--resume")


@pytest.mark.parametrize("flag, value, expected", [
    ("--dataset", "imagenet", "unknown dataset 'imagenet'; choose one of: glyphs, digits"),
    ("--model", "resnet_typo", "choose 'small_cnn' or any timm model name, e.g. resnet18"),
    ("--loss", "ap_typo", "unknown loss 'ap_typo'; choose one of:"),
    ("--batch-size", "30", "batch_size (30) must be divisible by m (4)"),
    ("--optimizer", "sgd", "invalid choice: 'sgd'"),
])
def test_bad_names_and_values_list_the_valid_ones(capsys, flag, value, expected, tmp_path):
    args = [a for a in TINY] + ["--steps", "1", "--out", str(tmp_path / "bad"), flag, value]
    assert expected in fails(capsys, "train", *args)


def test_datasets_command(capsys):
    printed = run(capsys, "datasets").out
    assert "glyphs" in printed and "cub" in printed


@pytest.mark.slow
def test_demo_runs_and_prints_before_and_after(capsys):
    printed = run(capsys, "demo", "--steps", 2, "--eval-items", 60).out
    assert "R@1:" in printed and "->" in printed and "mAP@R:" in printed


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_every_recipe_maps_onto_the_config(recipe):
    raw = yaml.safe_load(recipe.read_text())
    assert set(raw) <= set(field_names())
    cfg = load_config(recipe)
    assert cfg.batch_size % cfg.m == 0
    for key, value in raw.items():  # nothing silently dropped or reinterpreted
        assert getattr(cfg, key) == value, key


def test_the_paper_recipes_match_the_papers():
    by_name = {p.stem: load_config(p) for p in RECIPES}
    cub = by_name["roadmap_cub_resnet50"]
    assert (cub.model, cub.pooling, cub.layer_norm, cub.embed_dim, cub.lr, cub.epochs, cub.batch_size, cub.m) == \
        ("resnet50", "max", True, 512, 1e-6, 200, 128, 4)
    sop = by_name["roadmap_sop_resnet50"]
    assert (sop.sampler, sop.lr, sop.lr_head, sop.milestones, sop.gamma) == ("hierarchical", 1e-5, 2e-5, [30, 70], 0.3)
    deit = by_name["roadmap_sop_deit_s"]
    assert (deit.optimizer, deit.embed_dim, deit.epochs, deit.milestones) == ("adamw", 384, 75, [25, 50])
    suprank = by_name["suprank_sop_resnet50"]
    assert (suprank.batch_size, suprank.scheduler, suprank.lr, suprank.layer_norm) == (256, "cosine", 5e-5, True)


def test_a_paper_recipe_runs_two_steps_with_the_small_model(tmp_path, capsys):
    """The CUB recipe (max pooling, LayerNorm, Adam, its lrs) on tiny glyphs and the small CNN."""
    out = tmp_path / "run"
    run(capsys, "train", "--config", RECIPES[0].parent / "roadmap_cub_resnet50.yaml", *TINY, "--model", "small_cnn",
        "--no-pretrained", "--transform", "small", "--image-size", 32, "--epochs", 0, "--steps", 2,
        "--eval-every", 0, "--num-workers", 0, "--out", out)
    cfg = load_config(out / "config.yaml")
    assert (cfg.pooling, cfg.layer_norm, cfg.lr) == ("max", True, 1e-6)
    assert cfg.eval_max_items is None  # a recipe keeps its own evaluation (the papers': the whole split)
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 2


def test_glyph_recipe_is_the_default_config():
    assert load_config(RECIPES[0].parent / "glyphs_small_cnn.yaml") == TrainConfig()


@pytest.mark.parametrize("amp", [None, "bf16"])
def test_the_cli_and_the_trainer_given_its_config_yaml_train_the_same_weights_bitwise(tmp_path, amp):
    """Issue 33: ``python -m lab train`` and ``Trainer(cfg)`` are the same run for the same config. The
    interactive evaluation size is written into config.yaml, and so is the amp the Trainer resolved, so the
    Trainer given that file, stepping without evaluating, ends on the CLI's checkpoint weights, bit for bit.
    Without --amp, a config left at amp "auto" (as a notebook builds it) resolves to the file's amp and
    trains the same weights: the policy lives in the Trainer, not in the CLI. With --amp bf16 (autocast
    runs on the CPU too), the chosen amp is passed through and recorded."""
    out = tmp_path / "cli"
    # One thread on both sides: the thread count changes a CPU run's bits, and this process's count is
    # whatever an earlier test left (the study runner sets 1 for good).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "lab", "train", *TINY, "--steps", "4", "--eval-every", "2",
                           *(["--amp", amp] if amp else []), "--out", str(out)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    cli_weights = load_checkpoint(out / "checkpoint.pt")["model"]
    cfg = dataclasses.replace(load_config(out / "config.yaml"), out=None)
    assert cfg.eval_max_items == INTERACTIVE_EVAL_IMAGES and cfg.amp == (amp or "none")  # resolved, in the file
    assert load_checkpoint(out / "checkpoint.pt")["config"]["amp"] == cfg.amp

    def weights_after(config: TrainConfig) -> tuple[dict, TrainConfig]:
        with torch_threads(1):
            trainer = Trainer(config)
            trainer.step(4)
            return trainer.model.state_dict(), trainer.config

    configs = [cfg] if amp else [cfg, dataclasses.replace(cfg, amp="auto")]
    for config in configs:
        same, trained = weights_after(config)
        assert trained == cfg  # "auto" resolved as the CLI's run resolved it
        assert same.keys() == cli_weights.keys()
        assert all(torch.equal(same[k], cli_weights[k]) for k in same), config.amp
    other, _ = weights_after(dataclasses.replace(cfg, seed=1))
    assert not all(torch.equal(other[k], cli_weights[k]) for k in other)  # the comparison can fail
