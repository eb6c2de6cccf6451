"""What each study trains: one fixed budget, the grids of methods and values, the run specs.

The budget was fixed before any result was looked at (docs/results.md, "Budget"): every
run of a study gets the same steps, batch, sampler, model and learning rate; each loss keeps
its default hyper-parameters from :mod:`lab.losses` (the papers' values). Quick mode shrinks
the data and the steps and keeps two points per grid, so that CI runs a study in seconds.
"""
from __future__ import annotations

import hashlib
import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from ... import train  # train.TrainConfig read at each call: the tests grow it (tests/test_study_provenance.py)
from ...losses import LOSSES
from ...train.config import RENAMED, _plain

# The full budget: the small CNN on glyphs, batch 128 = 32 classes x 4, Adam 1e-3, 300 steps
# (~2.6 epochs of the 14,752 training images): ~2-3 min per run on one busy core. Float32 stated
# (amp="none"): every stored run trained so, KEY_BASELINE hashes it so, and TrainConfig's default is
# now "auto", which the key would hash (a run on a GPU stays float32, as its CPU twin).
FULL_BASE: dict[str, Any] = dict(
    dataset="glyphs", dataset_kwargs={}, model="small_cnn", embed_dim=64, optimizer="adam", lr=1e-3,
    batch_size=128, m=4, steps=300, eval_every=0, eval_max_items=2000, probe_batches=8, eval_backend="faiss",
    device="cpu", progress=False, log_every=10**9, amp="none")
# Quick (CI): 24 classes x 8 images per split, batch 16, 3 steps: the numbers mean nothing.
QUICK_BASE: dict[str, Any] = dict(
    FULL_BASE, dataset_kwargs={"num_classes": 24, "instances_per_class": 8}, embed_dim=16, batch_size=16,
    steps=3, eval_max_items=None, probe_batches=2, eval_batch_size=64, eval_backend="torch")
FULL_SEEDS, QUICK_SEEDS = 3, 2

# Protocol v2 (issue 21), fixed before any of its results: every image of the test split queries all
# the others (14,672 images, 1,834 classes never trained on); mAP@R is the primary metric; 5 seeds, as
# in the papers; the batch composition and the losses' defaults of v1. The number of steps is where a
# pilot run of the papers' best loss plateaus (``PILOT``, ``plateau_step``); V2_STEPS holds its value.
PROTOCOLS = ("v1", "v2")
V2_STUDIES = ("methods", "batch_size", "gap")  # v1's other studies answer other questions: kept as they are
V2_SEEDS = 5
V2_STEPS = 5500  # the pilot's plateau_step (results/v2/pilot.json: its curve, mAP@R 0.660 there)
V2_BASE: dict[str, Any] = dict(FULL_BASE, eval_max_items=None)
# The pilot: ROADMAP (the papers' best), seed 0, evaluated on the whole split every PILOT_EVERY steps.
# At most 8,000 steps: the first pilot stopped at 4,000, where the rule had no answer yet (mAP@R still
# gained 0.007 between steps 3,000 and 4,000), and was continued on the same trajectory; the rule
# itself is unchanged. The pilot stops as soon as the rule answers.
PILOT: dict[str, Any] = dict(V2_BASE, loss="roadmap", loss_kwargs={}, seed=0, steps=8000)
PILOT_FIRST_STEPS = 4000  # the pilot's length as first fixed (the page says it was lengthened)
PILOT_EVERY = 250
# The plateau rule: the budget is the first evaluated step s after which mAP@R never gains more than
# PLATEAU_GAIN (absolute) at any evaluation within the next PLATEAU_WINDOW steps.
PLATEAU_WINDOW, PLATEAU_GAIN = 1000, 0.005
# The row order of ROADMAP supp. Table 4 (SupAP's row from Table 2), bottom row first: a description, not a claim.
# The papers' own mAP@R does not keep it: BlackBoxAP is below SoftBinAP in 7 of 11 dataset x backbone settings
# (reporting.paper_claims.below_in). Protocol v2 tests the papers' claims (reporting.paper_claims.CLAIMS); this
# order only lays out the descriptive rank table and plot.
PAPER_ORDER = ("FastAP", "SoftBinAP", "BlackBoxAP", "SmoothAP", "SupAP", "ROADMAP")

# Study 1 (ROADMAP Table 1-2, supp. Table 4; SupRank Tables I-II): label -> loss name.
METHODS = {"FastAP": "fast_ap", "SoftBinAP": "soft_bin_ap", "BlackBoxAP": "blackbox_ap", "SmoothAP": "smooth_ap",
           "SupAP": "sup_ap", "ROADMAP": "roadmap", "ROADMAP (L_DG*)": "roadmap_proxy",
           "Smooth-R@k": "smooth_recall", "Sup-R@k": "sup_recall"}
QUICK_METHODS = ("SmoothAP", "ROADMAP")
# Declared, not trained yet: SupRank Table II's ROD-R@k (Sup-R@k + the calibration loss L_DG, Eq. 17), whose claim
# over Sup-R@k needs study 1's 5 seeds of it. Not in METHODS, so that study 1 stays complete without them;
# ``planned_runs`` gives their specs (the same config as study 1's other runs, the loss aside).
PLANNED_METHODS = {"ROD-R@k": "rod_recall"}
BATCH_SIZES = (32, 64, 128, 256)  # ROADMAP Fig. 5 / supp. Table 6
BINS = (2, 5, 10, 20, 40)  # FastAP Fig. 4b
# Study 3: (parameter, loss it is varied on, values). lam=0 *is* SupAP and lam=1 the
# calibration loss alone (ROADMAP Eq. 2); rho and tau are SupAP's (supp. Fig. 12, SupRank Fig. 7b).
HPARAMS = (("lam", "roadmap", (0.0, 0.1, 0.5, 0.9, 1.0)), ("rho", "sup_ap", (0.0, 10.0, 100.0, 10000.0)),
           ("margin", "roadmap", (0.1, 0.3, 0.6)), ("tau", "sup_ap", (0.001, 0.01, 0.05, 0.5)))
ALPHA = 0.9  # the margin alpha - beta is varied through beta, alpha fixed at the paper's 0.9
XBM_FRACTION = 4096 / 14752  # memory: 4,096 embeddings, ~28 % of the training set (paper: 17-100 %)
XBM_WARMUP = 0.1  # the memory loss starts after 10 % of the steps (XBM's warm-up)


@dataclass(frozen=True)
class RunSpec:
    """One training run of a study: its display ``method``, the varied ``params`` and the config."""

    study: str
    method: str
    seed: int
    config: dict = field(hash=False)  # TrainConfig fields
    params: dict = field(default_factory=dict, hash=False)  # e.g. {"batch_size": 32}, {"lam": 0.1}

    @property
    def setting(self) -> str:
        """'ROADMAP, batch_size = 64': the method and the varied params, as the page names a setting ('CUB,
        ResNet-50: ROADMAP' for a paper-scale study's run, whose params name its recipe's setting)."""
        varied = ", ".join([self.method] + [f"{k} = {v}" for k, v in sorted(self.params.items()) if k != "setting"])
        return f"{self.params['setting']}: {varied}" if "setting" in self.params else varied

    @property
    def key(self) -> str:
        """Identical configs share a key, so a run needed by two studies is trained once."""
        return config_key(self.config)


# What a run's key hashes (issue 33): the fields whose value differs from the TrainConfig defaults of the day
# keys were frozen (2026-11-26), not today's whole config. A field added later is hashed only where it
# differs from its own default (a new field's default must keep old runs' behaviour), and a default changed
# later changes what an omitted field means, never a stored run's key. Never edit this dict.
KEY_BASELINE: dict[str, Any] = {
    "dataset": "glyphs", "data_root": None, "dataset_kwargs": {}, "transform": None, "image_size": 32,
    "sampler": "m_per_class", "batch_size": 128, "m": 4, "model": "small_cnn", "embed_dim": 64, "pretrained": False,
    "pooling": "avg", "layer_norm": False, "freeze_bn": False, "loss": "roadmap", "loss_kwargs": {},
    "optimizer": "adam", "lr": 0.001, "lr_head": None, "lr_loss": None, "weight_decay": None, "scheduler": "none",
    "milestones": [], "gamma": 0.3, "warmup_steps": 0, "grad_clip": None, "steps": 1000, "epochs": 0.0,
    "amp": "none", "xbm_size": 0, "xbm_start": 0, "xbm_weight": 1.0, "stage_size": None, "eval_split": "test",
    "eval_max_items": None, "eval_backend": "faiss", "probe_batches": 8, "seed": 0}
# How a run reports, where it runs and how often it evaluates: not what it trains or measures. (Evaluation
# does not change a trajectory, tests/test_study_provenance.py, so a run with a learning curve is the run.)
NOT_KEYED = frozenset({"progress", "log_every", "out", "device", "num_workers", "eval_batch_size",
                       "checkpoint_every", "eval_every"})


def config_key(config: dict[str, Any], train_config: Optional[type] = None) -> str:
    """The key of the run ``config`` (TrainConfig fields) trains today: equal keys, equal runs.

    ``train_config`` (default lab.train.TrainConfig) fills the defaults, so that a field given at its
    default and a field left out are the same run; the tests pass a TrainConfig with a field added."""
    train_config = train_config or train.TrainConfig
    try:  # remembered: building and checking a TrainConfig is 2 ms, and one page asks ~1,700 keys of ~100 configs
        memo: Optional[tuple[str, type]] = (json.dumps(config, sort_keys=True), train_config)
    except TypeError:  # a value JSON cannot hold (a Path): computed, not remembered
        memo = None
    if memo in _KEYS:
        return _KEYS[memo]
    key = _hash(_trained(train_config.from_dict(config).to_dict(), train_config))
    if memo is not None and len(_KEYS) < 2**16:
        _KEYS[memo] = key
    return key


_KEYS: dict[tuple[str, type], str] = {}  # (config as JSON, the TrainConfig class) -> its key


def record_key(record: dict[str, Any], train_config: Optional[type] = None) -> str:
    """The key of the run a stored record trained. A record since provenance holds its whole config
    (``trained_config``); an older one holds the study's config, its other fields at the defaults of
    its day, which were KEY_BASELINE's (every stored run was found under them when keys were frozen)."""
    train_config = train_config or train.TrainConfig
    if "trained_config" in record:
        return _hash(_trained(record["trained_config"], train_config))
    given = {RENAMED.get(k, k) for k in record["config"]}
    full = train_config.from_dict(record["config"]).to_dict()
    return _hash(_trained({**full, **{k: v for k, v in KEY_BASELINE.items() if k not in given}}, train_config))


def _trained(full: dict[str, Any], train_config: type) -> dict[str, Any]:
    """The fields of a whole config that say what the run trains and measures, where they differ from
    KEY_BASELINE (a field added since: from its default). A renamed field keeps its baseline name."""
    old_name = {new: old for old, new in RENAMED.items() if old in KEY_BASELINE}
    full = {old_name.get(k, k): v for k, v in full.items()}
    defaults = {old_name.get(k, k): v for k, v in train_config().to_dict().items()}
    return {k: _plain(v) for k, v in full.items() if k not in NOT_KEYED and
            _plain(v) != _plain(KEY_BASELINE[k] if k in KEY_BASELINE else defaults.get(k))}


def _hash(fields: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def _config(base: dict, loss: str, seed: int, loss_kwargs: dict | None = None, **changes: Any) -> dict[str, Any]:
    return {**base, "loss": loss, "loss_kwargs": dict(loss_kwargs or {}), "seed": seed, **changes}


def _methods(base: dict, seeds: range, quick: bool) -> list[RunSpec]:
    labels = QUICK_METHODS if quick else tuple(METHODS)
    return [RunSpec("methods", m, s, _config(base, METHODS[m], s)) for m in labels for s in seeds]


def _batch_size(base: dict, seeds: range, quick: bool, study: str = "batch_size") -> list[RunSpec]:
    # Same images seen at every batch size (the papers train a fixed number of epochs), so the
    # step count scales as 1/B: B=32 gets 4x the steps of B=128.
    sizes = (8, 16) if quick else BATCH_SIZES
    images = base["steps"] * base["batch_size"]
    return [RunSpec(study, m, s, _config(base, METHODS[m], s, batch_size=b, steps=max(1, images // b)),
                    {"batch_size": b}) for b in sizes for m in ("SupAP", "ROADMAP") for s in seeds]


def _hparams(base: dict, seeds: range, quick: bool) -> list[RunSpec]:
    out = []
    for name, loss, values in HPARAMS:
        for value in ((values[0], values[-1]) if quick else values):
            if name == "lam" and value == 0.0:
                loss_name, kwargs = "sup_ap", {}  # L_ROADMAP with lam = 0 is L_SupAP, term for term
            elif name == "margin":
                loss_name, kwargs = loss, {"alpha": ALPHA, "beta": round(ALPHA - value, 6)}
            else:
                loss_name, kwargs = loss, {name: value}
            label = "SupAP" if loss_name == "sup_ap" else "ROADMAP"
            out += [RunSpec("hparams", label, s, _config(base, loss_name, s, _defaults(loss_name, kwargs)),
                            {"param": name, "value": value}) for s in seeds]
    return out


def _defaults(loss: str, kwargs: dict) -> dict:
    """Leave out values equal to the loss's default, so that e.g. rho=100 is *the* SupAP run."""
    params = inspect.signature(LOSSES[loss].__init__).parameters
    return {k: v for k, v in kwargs.items() if k not in params or params[k].default != v}


def _bins(base: dict, seeds: range, quick: bool) -> list[RunSpec]:
    counts = (4, 10) if quick else BINS
    return [RunSpec("bins", m, s, _config(base, METHODS[m], s, _defaults(METHODS[m], {"num_bins": n})), {"num_bins": n})
            for m in ("FastAP", "SoftBinAP") for n in counts for s in seeds]


def _gap(base: dict, seeds: range, quick: bool) -> list[RunSpec]:
    return _batch_size(base, seeds, quick, study="gap")  # the same runs: the gap is measured on each


def _memory(base: dict, seeds: range, quick: bool) -> list[RunSpec]:
    steps = base["steps"]
    size = 64 if quick else round(XBM_FRACTION * 14752)
    xbm = dict(xbm_size=size, xbm_start=int(XBM_WARMUP * steps))
    return [RunSpec("memory", "ROADMAP", s, _config(base, "roadmap", s)) for s in seeds] + \
           [RunSpec("memory", "SupAP + XBM", s, _config(base, "sup_ap", s, **xbm), {"xbm_size": size}) for s in seeds]


STUDIES: dict[str, Callable[[dict, range, bool], list[RunSpec]]] = {
    "methods": _methods, "batch_size": _batch_size, "hparams": _hparams, "bins": _bins, "gap": _gap,
    "memory": _memory}
# Cheapest-first is not the point: the study the brief ranks first runs first.
ORDER = ("methods", "batch_size", "gap", "memory", "bins", "hparams")


def plateau_step(curve: list[tuple[int, float]], window: int = PLATEAU_WINDOW,
                 gain: float = PLATEAU_GAIN) -> int | None:
    """The plateau rule on a learning curve [(step, mAP@R), ...] in increasing steps: the first step s
    whose every later value within ``window`` steps is below value(s) + ``gain``, judged only where
    the curve reaches s + window. None when no step qualifies yet."""
    for i, (step, value) in enumerate(curve):
        if step + window > curve[-1][0]:
            return None
        ahead = [v for s, v in curve[i + 1:] if s <= step + window]
        if max(ahead, default=value) < value + gain:
            return step
    return None


def base_config(quick: bool = False, protocol: str = "v1") -> dict[str, Any]:
    """The budget every run of a study shares: quick (CI), v1, or v2 (which needs the pilot's steps)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if quick or protocol == "v1":
        return QUICK_BASE if quick else FULL_BASE
    if V2_STEPS is None:
        raise ValueError("protocol v2 has no budget yet: run its pilot first (python -m lab study pilot)")
    return dict(V2_BASE, steps=V2_STEPS)


def planned_runs(protocol: str = "v2", seeds: Seeds = None, quick: bool = False) -> list[RunSpec]:
    """The runs declared for study 1 and not trained yet (PLANNED_METHODS), as its runs would be: protocol v2's
    seeds 0-4, the ones its claim declares (of ``seeds`` only, if given); none under protocol v1."""
    if protocol != "v2" and not quick:
        return []
    base = base_config(quick, protocol)
    chosen = [s for s in seed_range(seeds, QUICK_SEEDS if quick else V2_SEEDS) if quick or s < V2_SEEDS]
    return [RunSpec("methods", m, s, _config(base, loss, s)) for m, loss in PLANNED_METHODS.items() for s in chosen]


# The seeds of a call: a count N (seeds 0..N-1), a range (``--seeds A-B``: A..B, e.g. a node's share of more
# seeds), or None (the study's default count).
Seeds = Union[int, range, None]


def seed_range(seeds: Seeds, default: int) -> range:
    """``seeds`` as the range of seeds it names (``default`` seeds 0..default-1 for None)."""
    if isinstance(seeds, range):
        if len(seeds) < 1 or seeds.start < 0 or seeds.step != 1:
            raise ValueError(f"seeds must be a range A-B with 0 <= A <= B, got {seeds}")
        return seeds
    n = default if seeds is None else seeds
    if n < 1:
        raise ValueError(f"seeds must be >= 1, got {n}")
    return range(n)


def parse_seeds(text: str) -> int | range:
    """``--seeds``: N (seeds 0..N-1) or A-B (seeds A..B, both included); one line naming the flag otherwise."""
    count, dash, last = text.strip().partition("-")
    try:
        first, end = int(count), int(last) if dash else None
    except ValueError:
        first, end = -1, None
    if (dash and (end is None or not 0 <= first <= end)) or (not dash and first < 1):
        raise ValueError(f"--seeds expects N (seeds 0..N-1, N >= 1) or A-B (seeds A..B, 0 <= A <= B), got {text!r}")
    return range(first, end + 1) if dash else first


def seeds_text(seeds: Seeds) -> str:
    """The flag's value that names ``seeds`` (``3``, ``5-9``)."""
    if isinstance(seeds, range):
        return str(seeds.stop) if seeds.start == 0 else f"{seeds.start}-{seeds.stop - 1}"
    return str(seeds)


def study_runs(name: str, quick: bool = False, seeds: Seeds = None, protocol: str = "v1",
               planned: bool = False) -> list[RunSpec]:
    """The runs of study ``name`` (see STUDIES) under ``protocol``, for ``seeds`` (a count N: seeds 0..N-1, or a
    range of seeds; default: v1 3, v2 5, quick 2); with ``planned``, study 1's declared runs too (planned_runs:
    trained only when named, ``--methods ROD-R@k``)."""
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; choose one of: {', '.join(ORDER)} (or all)")
    if protocol == "v2" and name not in V2_STUDIES:
        raise ValueError(f"protocol v2 re-runs {', '.join(V2_STUDIES)}; {name!r} stays a v1 study")
    default = QUICK_SEEDS if quick else (V2_SEEDS if protocol == "v2" else FULL_SEEDS)
    runs = STUDIES[name](base_config(quick, protocol), seed_range(seeds, default), quick)
    return runs + (planned_runs(protocol, seeds, quick) if planned and name == "methods" else [])


def missing_runs(name: str, data: dict[str, Any], quick: bool = False, seeds: Seeds = None,
                 protocol: str = "v1") -> list[RunSpec]:
    """The runs of study ``name`` that ``data`` (its raw results) does not hold yet."""
    return [s for s in study_runs(name, quick, seeds, protocol) if s.key not in data.get("runs", {})]
