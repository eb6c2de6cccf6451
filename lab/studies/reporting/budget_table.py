"""The page's budget table: what every run of a protocol shares (data, model, optimisation, batches, steps,
losses, evaluation, seeds, grids), read from the specs, never typed in."""
from __future__ import annotations

from typing import Optional

from ...data import build_dataset
from ..running import spec
from ..running.spec import (ALPHA, BATCH_SIZES, BINS, FULL_BASE, HPARAMS, METHODS, QUICK_BASE, V2_BASE, XBM_FRACTION,
                            XBM_WARMUP)
from .stats import table


def budget_table(quick: bool, seeds: int, n_train: Optional[int], protocol: str = "v1") -> str:
    """The setting / value table of a protocol's budget: data, model, optimisation, batches, steps, losses,
    evaluation, seeds, grids, compute (``n_train``: the training split's size, None if unknown)."""
    base = QUICK_BASE if quick else FULL_BASE if protocol == "v1" else dict(V2_BASE, steps=spec.V2_STEPS or 0)
    images = f"{n_train:,} training images" if n_train else "the training split"
    data = (f"glyphs ({images}; test classes held out)"
            + (f", {base['dataset_kwargs']}" if base["dataset_kwargs"] else ""))
    rows = [
        ["data", data],
        ["model", f"{base['model']}, {base['embed_dim']}-d embeddings, trained from scratch"],
        ["optimisation", f"{base['optimizer']}, lr {base['lr']:g} (backbone and head), no schedule, no weight decay"],
        ["batches", f"{base['batch_size']} = {base['batch_size'] // base['m']} classes x m = {base['m']} images"],
        ["steps", (f"{base['steps']} per run (study 2: the same {base['steps'] * base['batch_size']:,} images at every "
                   "batch size, so steps = that / B)" + (" — where the pilot's learning curve plateaus" if
                                                         protocol == "v2" else ""))
         if base["steps"] else "not fixed yet: the pilot fixes them (`python -m lab study pilot`)"],
        ["losses", "each loss's defaults in `lab.losses` (the papers' values: τ = 0.01, ρ = 100, λ = 0.5, α = 0.9, "
                   "β = 0.6; L_DG* with λ = 0.1; FastAP 10 bins, SoftBinAP 20)"],
        ["evaluation", "held-out test classes, every image querying all others (full gallery): " +
         ("the whole test split" if base["eval_max_items"] is None else
          f"a fixed random subset of ~{base['eval_max_items']:,} images of whole test classes, drawn from the run's "
          "seed (so paired runs share it)")],
        ["seeds", f"{', '.join(map(str, range(seeds)))} (the seed fixes initial weights, batches, augmentations"
                  + (" and evaluation classes)" if base["eval_max_items"] is not None else ")")],
        ["grids", f"study 1: {len(METHODS)} losses; study 2: B ∈ {BATCH_SIZES}" + ("; study 5: the runs of study 2"
         if protocol == "v2" else "; study 3: " + "; ".join(f"{p} ∈ {v}" for p, _, v in HPARAMS) +
         f" (margin via β, α = {ALPHA}); study 4: bins ∈ {BINS}; study 6: memory of "
         f"{round(XBM_FRACTION * 14752):,} embeddings, loss on it from {XBM_WARMUP:.0%} of the steps")],
        ["compute", "1 torch thread per run, 2 runs in parallel (`--jobs 2`) on the 2 shared cores"],
    ]
    return table(["setting", "value"], rows)


def train_images(quick: bool) -> Optional[int]:
    """The number of training images of the studies' glyphs (quick or full), None if it cannot be built."""
    try:
        return len(build_dataset("glyphs", "train", **(QUICK_BASE if quick else FULL_BASE)["dataset_kwargs"]))
    except Exception:  # noqa: BLE001 - the page is still worth writing without the count
        return None
