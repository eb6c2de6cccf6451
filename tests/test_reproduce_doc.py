"""docs/reproduce-on-gpu.md: every `python -m lab train` / `eval` / `study` command of the page parses with the
real CLI, names an existing recipe, builds a valid config and its loss (with the papers' datasets' class counts),
so the page cannot drift from the code. Loops are expanded, `sbatch --wrap '...'` read inside, and the torchrun
line runs as written (on 2 CPU processes)."""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cli import build_parser, config_from_args
from lab.losses import LOSSES, build_loss
from lab.studies.running.paper_studies import PAPER_STUDIES, paper_runs
from lab.train import load_config

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reproduce-on-gpu.md"
TRAIN_CLASSES = {"cub": 100, "sop": 11318, "inaturalist": 5690}


def lines() -> list[str]:
    """The shell lines of the page's bash blocks, with `for x in a b; do` loops expanded."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", PAGE.read_text(), flags=re.S):
        loops: dict[str, list[str]] = {}
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            loop = re.match(r"for (\w+) in (.+); do$", line)
            if loop:
                loops[loop.group(1)] = loop.group(2).split()
            elif line:
                expanded = [line]
                for name, values in loops.items():
                    expanded = [c.replace(f"${name}", v) for c in expanded for v in values] \
                        if f"${name}" in line else expanded
                out += expanded
    return out


def commands() -> list[list[str]]:
    """The arguments of every `-m lab` command of the page (inside an sbatch --wrap too), after `lab`."""
    out = []
    for line in lines():
        words = shlex.split(line.replace("$SLURM_ARRAY_TASK_ID", "0"))
        for i, word in enumerate(words):
            if word.startswith("--wrap"):
                words = shlex.split(words[i + 1] if word == "--wrap" else word.split("=", 1)[1])
                break
        if "-m" in words and words[words.index("-m") + 1:words.index("-m") + 2] == ["lab"]:
            out.append(words[words.index("-m") + 2:])
    return out


def test_the_page_has_the_commands_of_every_table():
    train = [c for c in commands() if c[0] == "train"]
    recipes = {c[c.index("--config") + 1] for c in train}
    assert {f"recipes/roadmap_{d}_{b}.yaml" for d in ("cub", "sop", "inat") for b in ("resnet50", "deit_s")} <= recipes
    studies = [c for c in commands() if c[0] == "study"]
    named = {n for c in studies for n in build_parser().parse_args(c).names}
    assert named == {"table4", "suprank"}
    # each on one GPU, on a cluster (submitit), planned (--dry-run), and in your own sbatch array (--shard)
    for flag in ("--dry-run", "--executor", "--shard", "--base", "--jobs"):
        assert any(flag in c for c in studies), flag
    table4 = paper_runs("table4")
    assert {r.seed for r in table4} == {0, 1, 2, 3, 4}  # supp. Table 4: 5 runs per loss
    losses = {r.config["loss"] for study in PAPER_STUDIES for r in paper_runs(study)}
    assert {"fast_ap", "soft_bin_ap", "blackbox_ap", "smooth_ap", "roadmap", "roadmap_proxy", "sup_ap",
            "smooth_recall", "sup_recall", "rod_recall"} <= losses


@pytest.mark.parametrize("argv", [c for c in commands() if c[0] == "study"], ids=lambda c: " ".join(c[1:5]))
def test_every_study_command_parses_and_names_what_exists(argv):
    args = build_parser().parse_args(argv)
    if args.base is not None:
        assert (ROOT / args.base).is_file() and args.base.stem in PAPER_STUDIES["table4"].recipes
    assert args.executor in ("local", "submitit") and (args.device in (None, "cuda"))


@pytest.mark.parametrize("argv", [c for c in commands() if c[0] == "train"], ids=lambda c: " ".join(c[2:6]))
def test_every_train_command_builds_its_config_and_loss(argv):
    args = build_parser().parse_args(argv)
    assert (ROOT / args.config).exists(), args.config
    cfg = config_from_args(args)
    assert cfg.loss in LOSSES and cfg.batch_size % cfg.m == 0
    recipe = load_config(ROOT / args.config)
    if cfg.loss != recipe.loss:  # the recipe's ROADMAP hyper-parameters are dropped, not passed to another loss
        assert cfg.loss_kwargs == {}
    else:
        assert cfg.loss_kwargs == recipe.loss_kwargs
    loss = build_loss(cfg.loss, num_classes=TRAIN_CLASSES[cfg.dataset], embed_dim=cfg.embed_dim, **cfg.loss_kwargs)
    assert type(loss) is LOSSES[cfg.loss]


def test_every_eval_command_evaluates_the_whole_test_split():
    evals = [build_parser().parse_args(c) for c in commands() if c[0] == "eval"]
    assert len(evals) == 3
    assert [a.ks for a in evals] == [[1, 2, 4, 8], [1, 10, 100], [1, 4, 16, 32]]  # the R@k of Table 3 per dataset
    assert [a.max_items for a in evals] == [None, None, None]  # every test image queries all the others


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["cub", "sop", "inat"])
def test_the_first_command_of_each_dataset_trains_on_a_tiny_copy_in_its_published_layout(dataset, tmp_path):
    """Table 3's command for the dataset, on a fixture in the dataset's own file layout; only the
    backbone (a small CNN, no download), the image size and the run length are shrunk."""
    from lab.cli import main
    from lab.train import load_checkpoint
    from tests._disk_fixtures import make_cub, make_inaturalist, make_sop

    if dataset == "cub":
        root = make_cub(tmp_path / "CUB_200_2011", classes=(1, 2, 3, 101, 102), per_class=4)
    elif dataset == "sop":
        root = make_sop(tmp_path / "Stanford_Online_Products", [(1, 1, "bicycle"), (2, 1, "bicycle"), (3, 4, "chair"),
                                                                 (4, 4, "chair"), (5, 1, "bicycle"), (6, 4, "chair")],
                        per_class=4, first_test=5)
    else:
        root = make_inaturalist(tmp_path / "Inaturalist", {"train": [("Aves", 1), ("Aves", 2), ("Plantae", 3)],
                                                             "test": [("Insecta", 4), ("Aves", 5)]}, per_class=4)
    argv = next(c for c in commands() if c[0] == "train" and f"roadmap_{dataset}_resnet50" in c[c.index("--config") + 1]
                and "--loss" not in c)
    out = tmp_path / "run"
    argv = [a if a != argv[argv.index("--out") + 1] else str(out) for a in argv]
    argv[argv.index("--config") + 1] = str(ROOT / argv[argv.index("--config") + 1])
    main(argv + ["--data-root", str(root), "--model", "small_cnn", "--no-pretrained", "--image-size", "32",
                 "--batch-size", "4", "--m", "2", "--epochs", "0", "--steps", "2", "--eval-every", "2",
                 "--num-workers", "0", "--no-progress"])
    state = load_checkpoint(out / "checkpoint.pt")
    assert state["step"] == 2 and state["config"]["dataset"] in ("cub", "sop", "inaturalist")
    assert state["config"]["sampler"] == ("hierarchical" if dataset == "sop" else "m_per_class")


@pytest.mark.slow
def test_the_torchrun_line_runs_as_written(tmp_path):
    """The page's one-run-on-several-GPUs line, word for word, on 2 CPU processes (gloo) instead of 4 GPUs,
    shrunk as above on a tiny SOP copy (``--per-class``: torchrun reads ``--m`` as its own, ambiguous, option).
    `torchrun ... python -m lab train` (the page's old "prefix any command") fails: torchrun takes a script, or -m
    and a module."""
    from lab.train import load_checkpoint
    from tests._disk_fixtures import make_sop

    line = next(line for line in lines() if "torchrun" in line)
    words = shlex.split(line)
    assert words[:5] == [".venv/bin/torchrun", "--standalone", "--nproc_per_node", "4", "-m"] and words[5:7] == [
        "lab", "train"]
    root = make_sop(tmp_path / "Stanford_Online_Products", [(c, 1 if c % 2 else 4, "bicycle" if c % 2 else "chair")
                                                             for c in range(1, 13)], per_class=4, first_test=9)
    words[0], words[3] = str(Path(sys.executable).parent / "torchrun"), "2"
    words = [str(ROOT / w) if w.startswith("recipes/") else str(tmp_path / "run") if w.startswith("runs/") else w
             for w in words]
    run = subprocess.run(words + ["--data-root", str(root), "--model", "small_cnn", "--no-pretrained", "--image-size",
                                  "32", "--batch-size", "8", "--per-class", "2", "--epochs", "0", "--steps", "2",
                                  "--eval-every", "0", "--num-workers", "0", "--no-progress"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    state = load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    assert state["step"] == 2 and state["world_size"] == 2
