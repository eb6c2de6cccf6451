"""The papers' own tables as studies: a grid of losses and seeds on the papers' recipes (``recipes/*.yaml``).

A paper-scale study is a set of settings, each a recipe of ``recipes/`` (the paper's backbone, dataset, batch,
schedule, and evaluation on the WHOLE test split), crossed with a grid of losses and seeds. Its runs are run specs
as the glyph studies' are: keyed by what they train (the key of ``python -m lab train --config RECIPE --loss L
--seed S``), trained by the same runner and executors (``--executor submitit`` sends each to a GPU of a cluster),
into ``results/paper/NAME.json``, and read back by the page with the same paired tests, Holm families and verdicts
(:mod:`lab.studies.reporting.paper_scale`). ``--base RECIPE`` restricts a study to one of its settings, or runs its
grid on a recipe of your own. ``--quick`` is the pipeline on tiny data: each dataset's ResNet-50 setting of CUB
and SOP shrunk to the small CNN on 32-pixel images for 3 steps (CI, fixtures in the datasets' own layouts).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ...train.config import read_recipe
from .paths import ROOT
from .spec import METHODS, QUICK_METHODS, QUICK_SEEDS, RunSpec, Seeds, seed_range, study_runs

RECIPES = ROOT / "recipes"
PAPER_FOLDER = "paper"  # results/paper/NAME.json
LOSSES = {**METHODS, "ROD-R@k": "rod_recall"}  # SupRank's recall loss with the calibration term (Table II)
DATASETS = {"cub": "CUB", "sop": "SOP", "inaturalist": "iNat"}
BACKBONES = {"resnet50": "ResNet-50", "deit_small_distilled_patch16_224": "DeiT-S"}
# The pipeline on tiny data (--quick): what changes in a recipe, and the settings kept.
QUICK = dict(model="small_cnn", pretrained=False, image_size=32, embed_dim=16, batch_size=8, m=2, epochs=0, steps=3,
             num_workers=0, probe_batches=2, eval_batch_size=64, eval_backend="torch")
QUICK_SETTINGS = ("CUB, ResNet-50", "SOP, ResNet-50")


@dataclass(frozen=True)
class PaperStudy:
    title: str
    recipes: tuple[str, ...]  # stems of recipes/*.yaml: the settings
    methods: tuple[str, ...]  # labels of LOSSES
    seeds: int = 5


PAPER_STUDIES: dict[str, PaperStudy] = {
    "table4": PaperStudy("ROADMAP supp. Table 4: the AP losses compared (B = 128, 5 runs each)",
                         tuple(f"roadmap_{d}_{b}" for b in ("resnet50", "deit_s") for d in ("cub", "sop", "inat")),
                         ("FastAP", "SoftBinAP", "BlackBoxAP", "SmoothAP", "ROADMAP")),
    "suprank": PaperStudy("SupRank Tables I-II: Sup-AP, Sup-R@k and the decomposability losses (B = 256)",
                          ("suprank_sop_resnet50", "suprank_inat_resnet50"),
                          ("FastAP", "SoftBinAP", "BlackBoxAP", "SmoothAP", "SupAP", "ROADMAP", "ROADMAP (L_DG*)",
                           "Smooth-R@k", "Sup-R@k", "ROD-R@k")),
}


def is_paper(name: str) -> bool:
    return name in PAPER_STUDIES


def setting_of(config: dict[str, Any]) -> str:
    """'CUB, ResNet-50': a recipe's dataset and backbone, as the papers' tables name them."""
    dataset, model = config.get("dataset", "glyphs"), config.get("model", "small_cnn")
    return f"{DATASETS.get(dataset, dataset)}, {BACKBONES.get(model, model)}"


def settings(name: str, base: Optional[Path] = None) -> list[tuple[str, dict[str, Any]]]:
    """(setting, recipe) of each of study ``name``'s settings; with ``base``, that recipe's only: one of the
    study's (by file name or setting), or a recipe of your own."""
    recipes = [(setting_of(r), r) for r in (read_recipe(RECIPES / f"{stem}.yaml")
                                            for stem in PAPER_STUDIES[name].recipes)]
    if base is None:
        return recipes
    own = read_recipe(base)
    return [(setting_of(own), own)]


def paper_runs(name: str, quick: bool = False, seeds: Seeds = None, base: Optional[Path] = None) -> list[RunSpec]:
    """Every run of paper-scale study ``name``: settings x methods x seeds (default 5; quick: 2 seeds, 2 methods,
    the CUB and SOP ResNet-50 settings, shrunk), setting by setting; ``params`` names the setting."""
    study = PAPER_STUDIES[name]
    chosen = settings(name, base)
    if quick:
        chosen = [(s, {**r, **QUICK}) for s, r in chosen if base is not None or s in QUICK_SETTINGS]
    methods = [m for m in study.methods if not quick or m in QUICK_METHODS]
    out = []
    for setting, recipe in chosen:
        for method in methods:
            loss = LOSSES[method]
            kwargs = recipe.get("loss_kwargs", {}) if loss == recipe.get("loss") else {}
            for seed in seed_range(seeds, QUICK_SEEDS if quick else study.seeds):
                config = {**recipe, "loss": loss, "loss_kwargs": dict(kwargs), "seed": seed, "progress": False,
                          "log_every": 10**9}
                out.append(RunSpec(name, method, seed, config, {"setting": setting}))
    return out


def runs_of(name: str, quick: bool = False, seeds: Seeds = None, protocol: str = "v1",
            base: Optional[Path] = None, planned: bool = False) -> list[RunSpec]:
    """The runs of any study: a paper-scale one's (:func:`paper_runs`) or a glyph study's (``spec.study_runs``,
    with its declared runs if ``planned``)."""
    if is_paper(name):
        return paper_runs(name, quick, seeds, base)
    if base is not None:
        raise ValueError(f"--base takes a paper-scale study ({', '.join(PAPER_STUDIES)}), not {name!r}: the glyph "
                         "studies' budget is fixed (lab/studies/running/spec.py)")
    return study_runs(name, quick, seeds, protocol, planned)
