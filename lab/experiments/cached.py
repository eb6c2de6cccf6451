"""The reproduction study's raw results as the notebooks' result rows: mean ± std over seeds.

``python -m lab study`` trains the papers' comparisons on the glyphs, 3 seeds per setting, and
keeps one record per run in ``results/NAME.json`` (the format of :mod:`lab.studies.running.runner`:
``{"study", "mode", "runs": {key: record}}``, a record holding its ``config``, ``seed``,
``method``, ``params``, the test metrics and the decomposability gaps). The notebooks' full-mode
runs are the same configurations, so a notebook reads these instead of retraining them. This
module reads the file; it does not import :mod:`lab.studies`, which sits a layer above.

* :func:`study_rows`: every setting of a study (records grouped by method and varied params);
  :func:`rows_of` the same of records already read.
* :func:`cached_rows`: the rows of given run configurations, matched field by field (the seed
  and how a run reports aside), or None when the study did not train one of them.
* :func:`seed_spread`: how much a metric moves from seed to seed in a study, for one run and for
  the same-seed difference of two runs (what a one-seed comparison must be read against).

A row has ``loss``, ``loss_kwargs``, ``method``, ``params``, ``batch_size``, ``steps``,
``eval_max_items`` (None: the whole test split was ranked), ``seeds``,
the mean over seeds of R@1/2/4/8, mAP@R, ``gap`` (training probe, as a notebook run's) and
``gap_heldout``, ``seconds``, and ``std`` / ``values``: {metric: sample std (ddof=1)} and {metric:
[one value per seed]}, and ``source`` (the file).
"""
from __future__ import annotations

import inspect
import itertools
import json
import math
import statistics
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from ..core.env import project_root
from ..metrics import RETRIEVAL_KEYS

RESULTS_DIR = project_root() / "results"  # the checkout's; installed from a wheel, the current folder's
# Record field -> row key. A notebook run's "gap" is the trainer's probe of training batches.
FIELDS = {**{k: k for k in RETRIEVAL_KEYS}, "gap": "gap_train_probe", "gap_heldout": "gap_heldout",
          "seconds": "seconds"}
# Config fields that say how a run reports or where it runs, not what it trains.
NOT_COMPARED = ("seed", "progress", "log_every", "out", "device", "num_workers", "eval_batch_size",
                "checkpoint_every")


def study_records(study: str, results_dir: Optional[Path] = None) -> list[dict[str, Any]]:
    """Every finished run of ``results/STUDY.json``; [] when the file is missing or holds
    quick-mode (CI-sized) runs, whose numbers mean nothing."""
    path = Path(results_dir or RESULTS_DIR) / f"{study}.json"
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    return list(data.get("runs", {}).values()) if data.get("mode") == "full" else []


def _field(record: dict[str, Any], name: str) -> Any:
    return record[name] if name in record else record.get("params", {}).get(name)


def summarise(records: Sequence[dict[str, Any]], study: str) -> dict[str, Any]:
    """One row from the records of one setting (one per seed, in seed order); ``study`` names its
    file under results/ (``"batch_size"``, ``"v2/batch_size"``)."""
    records = sorted(records, key=lambda r: r["seed"])
    first = records[0]
    values = {key: [float(r[name]) for r in records] for key, name in FIELDS.items() if name in first}
    return {"loss": first["loss"], "loss_kwargs": dict(first["loss_kwargs"]),
            "method": first.get("method", first["loss"]),
            "params": dict(first.get("params", {})), "batch_size": first["batch_size"], "steps": first["steps"],
            "eval_max_items": first["config"].get("eval_max_items"),
            "seeds": [r["seed"] for r in records], **{k: statistics.fmean(v) for k, v in values.items()},
            "std": {k: statistics.stdev(v) if len(v) > 1 else 0.0 for k, v in values.items()}, "values": values,
            "source": f"results/{study}.json"}


def study_rows(study: str, results_dir: Optional[Path] = None, **match: Any) -> list[dict[str, Any]]:
    """mean ± std over seeds of every setting of ``study`` whose records match ``match`` (record
    fields or varied params: ``method="ROADMAP"``, ``batch_size=32``, ``num_bins=10``), sorted by
    method, then by the values of the varied params."""
    return rows_of(study_records(study, results_dir), study, **match)


def rows_of(records: Iterable[dict[str, Any]], study: str, **match: Any) -> list[dict[str, Any]]:
    """:func:`study_rows` of given records (one per run, with ``method`` and ``params``) of the
    study whose file is results/``study``.json."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if all(_field(r, k) == v for k, v in match.items()):
            groups.setdefault(json.dumps([r.get("method"), r.get("params", {})], sort_keys=True), []).append(r)
    order = sorted(groups.values(), key=lambda rs: (rs[0].get("method", ""), sorted(rs[0].get("params", {}).items())))
    return [summarise(records, study) for records in order]


def comparable(config: dict[str, Any]) -> dict[str, Any]:
    """A run configuration as it decides what is trained: every TrainConfig field filled in, the
    loss's default hyper-parameters written out, reporting fields and the seed left out."""
    from ..losses import LOSSES
    from ..train import TrainConfig  # the trainer's package, imported only when a config is compared
    from ..train.runtime import resolve_amp

    # amp "auto" (a notebook's, or a record's written before the default) as it trains: float32 for these runs
    full = resolve_amp(TrainConfig.from_dict(config))[0].to_dict()
    cls = LOSSES.get(full["loss"])
    params = inspect.signature(cls.__init__).parameters if cls is not None else {}
    defaults = {name: p.default for name, p in params.items() if p.default is not inspect.Parameter.empty}
    full["loss_kwargs"] = {**defaults, **full["loss_kwargs"]}
    return {k: v for k, v in full.items() if k not in NOT_COMPARED}


def cached_rows(study: str, configs: Iterable[dict[str, Any]], seeds: Optional[Sequence[int]] = None,
                results_dir: Optional[Path] = None) -> Optional[list[dict[str, Any]]]:
    """The study's row of each run configuration (TrainConfig fields), in order: the records
    whose configuration equals it (:func:`comparable`), over ``seeds`` (default: every seed the
    study has). None when the study lacks one of them: the caller then trains it."""
    records = study_records(study, results_dir)
    keyed = [(comparable(r["config"]), r) for r in records]
    rows = []
    for config in configs:
        want = comparable(config)
        mine = [r for c, r in keyed if c == want and (seeds is None or r["seed"] in seeds)]
        if not mine:
            return None
        rows.append(summarise(mine, study))
    return rows


def seed_spread(study: str = "methods", metrics: Sequence[str] = ("R@1", "mAP@R"),
                results_dir: Optional[Path] = None) -> dict[str, Any]:
    """How much ``metrics`` vary from seed to seed among the settings of ``study``:

    * ``single[m]``: the pooled std over seeds of one setting (root mean square of the settings'
      sample stds): how far one run's value may land from another seed's;
    * ``paired[m]``: the pooled std over seeds of the difference between two settings trained
      from the same seed (every pair of settings with the same seeds): how far a one-seed
      comparison of two losses may land from another seed's.

    With ``settings``, ``seeds`` (per setting), ``steps``, ``batch_size`` and ``source``. {} when the
    study has no full-mode results or fewer than 2 seeds per setting."""
    rows = [r for r in study_rows(study, results_dir) if len(r["seeds"]) > 1]
    if not rows:
        return {}
    single, paired = {}, {}
    for m in metrics:
        single[m] = math.sqrt(statistics.fmean(r["std"][m] ** 2 for r in rows))
        pairs = [statistics.stdev(x - y for x, y in zip(a["values"][m], b["values"][m]))
                 for a, b in itertools.combinations(rows, 2) if a["seeds"] == b["seeds"]]
        if pairs:
            paired[m] = math.sqrt(statistics.fmean(v ** 2 for v in pairs))
    return {"single": single, "paired": paired, "settings": len(rows), "seeds": len(rows[0]["seeds"]),
            "steps": sorted({r["steps"] for r in rows}), "batch_size": sorted({r["batch_size"] for r in rows}),
            "source": rows[0]["source"]}


# What the untrained model and its evaluation depend on: the weights' initialisation (model, width,
# seed, input data) and which test images are ranked. The loss, steps and batch size do not.
STEP0_FIELDS = ("dataset", "dataset_kwargs", "model", "embed_dim", "seed", "eval_max_items")


def stored_step0(config: dict[str, Any], results_dir: Optional[Path] = None) -> Optional[dict[str, Any]]:
    """R@1/2/4/8 and mAP@R of the untrained model of ``config`` (a TrainConfig dict) as protocol
    v2's pilot stored them (``results/v2/pilot.json``, its step-0 evaluation, the whole test split),
    with ``source``; None when there is no pilot or it is of another model, seed or evaluation."""
    path = Path(results_dir or RESULTS_DIR) / "v2" / "pilot.json"
    if not path.exists():
        return None
    pilot = json.loads(path.read_text())
    if any(pilot["config"].get(f) != config.get(f) for f in STEP0_FIELDS):
        return None
    first = next((point for point in pilot.get("curve", []) if point.get("step") == 0), None)
    if first is None:
        return None
    return {**{k: float(first[k]) for k in (*RETRIEVAL_KEYS,)},
            "source": f"results/v2/pilot.json, step 0 ({first['num_queries']:,} queries)"}
