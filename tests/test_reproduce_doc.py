"""docs/reproduce-on-gpu.md: every `python -m lab train` / `eval` command of the page parses with
the real CLI, names an existing recipe, builds a valid config and its loss (with the papers'
datasets' class counts), so the page cannot drift from the code. Loops are expanded."""
import re
import shlex
from pathlib import Path

import pytest

from lab.cli import build_parser, config_from_args
from lab.losses import LOSSES, build_loss
from lab.train import load_config

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reproduce-on-gpu.md"
TRAIN_CLASSES = {"cub": 100, "sop": 11318, "inaturalist": 5690}


def commands() -> list[list[str]]:
    """The lab commands of the page's bash blocks, with `for x in a b; do` loops expanded."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", PAGE.read_text(), flags=re.S):
        loops: dict[str, list[str]] = {}
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            loop = re.match(r"for (\w+) in (.+); do$", line)
            if loop:
                loops[loop.group(1)] = loop.group(2).split()
            elif "-m lab train" in line or "-m lab eval" in line:
                expanded = [line]
                for name, values in loops.items():
                    expanded = [c.replace(f"${name}", v) for c in expanded for v in values] \
                        if f"${name}" in line else expanded
                for c in expanded:
                    words = shlex.split(c)
                    out.append(words[words.index("lab") + 1:])
    return out


def test_the_page_has_the_commands_of_every_table():
    train = [c for c in commands() if c[0] == "train"]
    recipes = {c[c.index("--config") + 1] for c in train}
    assert {f"recipes/roadmap_{d}_{b}.yaml" for d in ("cub", "sop", "inat") for b in ("resnet50", "deit_s")} <= recipes
    assert {"recipes/suprank_sop_resnet50.yaml", "recipes/suprank_inat_resnet50.yaml"} <= recipes
    seeds = {c[c.index("--seed") + 1] for c in train if "--seed" in c}
    assert seeds == {"0", "1", "2", "3", "4"}  # supp. Table 4: 5 runs per loss
    losses = {c[c.index("--loss") + 1] for c in train if "--loss" in c}
    assert {"fast_ap", "soft_bin_ap", "blackbox_ap", "smooth_ap", "roadmap", "roadmap_proxy", "sup_ap",
            "smooth_recall", "sup_recall", "rod_recall"} <= losses


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


def test_every_eval_command_parses():
    evals = [c for c in commands() if c[0] == "eval"]
    assert len(evals) == 3
    ks = [build_parser().parse_args(c).ks for c in evals]
    assert ks == [[1, 2, 4, 8], [1, 10, 100], [1, 4, 16, 32]]  # the R@k of Table 3 per dataset


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
