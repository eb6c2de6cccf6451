"""The training configuration: one frozen dataclass; YAML recipes and CLI flags map onto it.

Parsed once, at the boundary: building a :class:`TrainConfig` (directly, ``from_dict`` or
``dataclasses.replace``) converts text to the fields' types (:func:`lab.core.convert.to_type`) and
checks every field, with a one-line error naming the field and what it accepts. A config that
exists is valid, so nothing downstream checks it again.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import typing
import warnings
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import yaml

from ..core.convert import to_type
from ..core.frozen import FrozenDict
from ..core.precision import MATMUL_PRECISIONS
from ..losses import LOSSES, check_loss_kwargs
from ..core.files import write_text_atomic
from .config_checks import check_fields

OPTIMIZERS = ("adam", "adamw")
SCHEDULERS = ("none", "multistep", "cosine")
SAMPLERS = ("m_per_class", "hierarchical")
AMP = ("auto", "none", "bf16", "fp16")
TRANSFORMS = ("small", "paper")
EVAL_BACKENDS = ("faiss", "torch")

RENAMED = {"chunk_size": "stage_size"}  # old config key -> its name now (recipes, saved checkpoints)
# A dict field and the field it belongs to: flags merge into a recipe's dict while the owner is
# the recipe's own (``--loss-kwargs lam=0.3`` changes lam only); naming another owner drops it.
MERGED = {"loss_kwargs": "loss", "dataset_kwargs": "dataset"}
# Keys that may change between a run and its resumption without changing its trajectory
# (how long it runs, where it writes, how often it reports, where it runs).
RESUME_FREE = frozenset({"steps", "epochs", "out", "checkpoint_every", "eval_every", "log_every", "progress",
                         "device", "num_workers", "eval_max_items", "eval_backend", "eval_batch_size"})


# What each TrainConfig field means: the one source for the CLI's `train --help` (lab.cli) and TrainConfig's
# docstring (the API reference), so the two cannot drift (tests/test_cli_help.py).
FIELD_HELP: dict[str, str] = {
    "dataset": "dataset name (python -m lab datasets lists them)",
    "data_root": "folder of a disk dataset; None: $RANKLAB_DATA or the dataset's usual places",
    "dataset_kwargs": "extra keywords of the dataset's builder (lab.data.build_dataset)",
    "transform": "image transform, 'small' or 'paper' (lab.data.build_transforms); None: the dataset's own",
    "image_size": "image side in pixels after the transform",
    "sampler": "batch sampler: m_per_class (batch_size / m classes of m images) or hierarchical",
    "batch_size": "global batch size (all ranks together); divisible by m",
    "m": "images per class in a batch",
    "num_workers": "DataLoader workers; None: 0 on the CPU, from the cores on CUDA (lab.train.runtime)",
    "model": "small_cnn or any timm model name",
    "embed_dim": "embedding dimension (the projection's output)",
    "pretrained": "timm backbone: pretrained weights when they can be had (else random init, with a warning)",
    "pooling": "pooling of the backbone's feature map: avg, max or gem (generalised mean)",
    "layer_norm": "LayerNorm (without affine) on the pooled features before the projection",
    "freeze_bn": "BatchNorm layers keep their running statistics (eval mode) while training",
    "loss": "rank loss name (lab.losses.LOSSES)",
    "loss_kwargs": "the loss's hyper-parameters, merged into the recipe's (lab.losses.loss_kwargs_of lists them)",
    "optimizer": "adam or adamw",
    "lr": "backbone learning rate",
    "lr_head": "learning rate of the head (pooling, projection); None: lr",
    "lr_loss": "learning rate of the loss's own parameters (e.g. proxies); None: lr_head",
    "weight_decay": "weight decay; None: the optimizer's default (Adam 0, AdamW 0.01)",
    "scheduler": "learning-rate schedule: none, multistep or cosine",
    "milestones": "multistep milestones (epochs if epochs > 0, else steps)",
    "gamma": "multistep factor (0.3: drop the learning rate by 70%)",
    "warmup_steps": "steps of linear learning-rate warm-up",
    "grad_clip": "clip the gradient norm to this; None: no clipping",
    "steps": "run length in steps (when epochs is 0)",
    "epochs": "run length in epochs (0: use steps)",
    "amp": "mixed precision: auto (bf16 autocast for a timm backbone on CUDA, else float32, decided as the Trainer "
           "is built, lab.train.runtime.resolve_amp, and recorded resolved), none, bf16 or fp16",
    "matmul_precision": "float32 matmuls in training steps: highest (IEEE) or high (TF32 on CUDA, ~3 digits per "
                        "input; python -m bench.tf32 measures the effect)",
    "xbm_size": "cross-batch memory size (0: off)",
    "xbm_start": "step from which the memory loss is added (the memory fills from step 0)",
    "xbm_weight": "weight of the memory loss",
    "stage_size": "staged backprop: images per re-forward stage (formerly chunk_size); None: off",
    "eval_every": "steps between evaluations (0: never)",
    "eval_split": "split evaluated: test (held-out classes) or train",
    "eval_max_items": "evaluate a fixed random subset of whole classes with about this many images; None: the "
                      "whole split",
    "eval_batch_size": "images per forward pass when embedding a split",
    "eval_backend": "similarities on the CPU: faiss or torch (the same numbers; torch where faiss is missing)",
    "probe_batches": "decomposability-gap probe: this many sampler batches of the train split",
    "seed": "random seed (same seed, same run: bitwise on the CPU)",
    "deterministic": "torch's deterministic algorithms: on CUDA the same seed gives the same run (slower); CPU "
                     "runs are deterministic already",
    "device": "auto, cpu, cuda, cuda:N or mps",
    "out": "output folder (config.yaml, metrics.jsonl, checkpoint.pt)",
    "checkpoint_every": "steps between checkpoints (0: at the end and on Ctrl-C only)",
    "log_every": "steps between lines of metrics.jsonl",
    "progress": "progress bars",
}


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of a training run. Defaults: the 2-core CPU lab (glyphs, small CNN, ROADMAP).

    Frozen: a changed run is a new config, ``dataclasses.replace(cfg, steps=10)``, checked as it is built.
    ``loss_kwargs`` and ``dataset_kwargs`` are read-only copies (:class:`lab.core.frozen.FrozenDict`), so
    that ``cfg.loss_kwargs["tau"] = -1`` cannot skip the checks either; ``to_dict`` gives plain dicts.

    Run length: ``epochs`` if > 0 (then ``milestones`` are in epochs too), else ``steps``.
    ``batch_size`` is the global batch (all ranks together) and must be divisible by ``m``.
    """

    # data
    dataset: str = "glyphs"
    data_root: Optional[str] = None
    dataset_kwargs: Mapping[str, Any] = field(default_factory=dict)
    transform: Optional[str] = None
    image_size: int = 32
    sampler: str = "m_per_class"
    batch_size: int = 128
    m: int = 4
    num_workers: Optional[int] = None
    # model
    model: str = "small_cnn"
    embed_dim: int = 64
    pretrained: bool = False
    pooling: str = "avg"
    layer_norm: bool = False
    freeze_bn: bool = False
    # loss
    loss: str = "roadmap"
    loss_kwargs: Mapping[str, Any] = field(default_factory=dict)
    # optimisation
    optimizer: str = "adam"
    lr: float = 1e-3
    lr_head: Optional[float] = None
    lr_loss: Optional[float] = None
    weight_decay: Optional[float] = None
    scheduler: str = "none"
    milestones: list[float] = field(default_factory=list)
    gamma: float = 0.3
    warmup_steps: int = 0
    grad_clip: Optional[float] = None
    steps: int = 1000
    epochs: float = 0.0
    amp: str = "auto"
    matmul_precision: str = "highest"
    # cross-batch memory (XBM) and staged backprop
    xbm_size: int = 0
    xbm_start: int = 0
    xbm_weight: float = 1.0
    stage_size: Optional[int] = None
    # evaluation and bookkeeping
    eval_every: int = 500
    eval_split: str = "test"
    eval_max_items: Optional[int] = None
    eval_batch_size: int = 256
    eval_backend: str = "faiss"
    probe_batches: int = 8
    seed: int = 0
    deterministic: bool = False
    device: str = "auto"
    out: Optional[str] = None
    checkpoint_every: int = 0
    log_every: int = 10
    progress: bool = True
    # The old name of ``stage_size`` (``chunk_size`` now means queries per chunk in the losses and
    # metrics only); accepted, with a DeprecationWarning, from code, recipes and checkpoints.
    chunk_size: InitVar[Optional[int]] = None

    def __post_init__(self, chunk_size: Optional[int] = None) -> None:
        # The only writes to a frozen config, while it is built: the deprecated name, the typed fields and
        # read-only copies of the two mappings (a caller's dict changed later does not change the config).
        if chunk_size is not None:
            warnings.warn("TrainConfig(chunk_size=...) is now stage_size (images per staged-backprop stage)",
                          DeprecationWarning, stacklevel=3)
            object.__setattr__(self, "stage_size", chunk_size)
        declared = hints(type(self))
        for f in dataclasses.fields(self):  # text (a flag, YAML's '1e-5') -> the field's declared type
            value = getattr(self, f.name)
            typed = to_type(f.name, value, declared[f.name])
            if typed is not value:
                object.__setattr__(self, f.name, typed)
        self._check()
        if self.loss in LOSSES:  # another name is refused by the Trainer (or is a loss module passed to it)
            object.__setattr__(self, "loss_kwargs", self._checked_loss_kwargs())  # '1e-2' from YAML -> 0.01
        for name in MERGED:
            object.__setattr__(self, name, FrozenDict(getattr(self, name)))
        if self.loss_kwargs.get("reduction", "mean") != "mean":
            raise ValueError(f"loss_kwargs: reduction must be 'mean' for training (one number per batch), "
                             f"got {self.loss_kwargs['reduction']!r}")

    def with_amp(self, amp: str) -> "TrainConfig":
        """This config with ``amp`` resolved (``"auto"`` -> the Trainer's choice): a copy of the checked values,
        not a second build; only the new value is checked."""
        if amp not in AMP:
            raise ValueError(f"amp must be one of {AMP}, got {amp!r}")
        resolved = copy.copy(self)
        object.__setattr__(resolved, "amp", amp)
        return resolved

    def _checked_loss_kwargs(self) -> dict[str, Any]:
        try:
            return check_loss_kwargs(self.loss, self.loss_kwargs)
        except ValueError as e:  # also UnknownHyperParameterError, which keeps its type
            raise type(e)(f"loss_kwargs: {e}") from None

    def _check(self) -> None:
        """Every field but the loss's hyper-parameters (``_checked_loss_kwargs``): once, as the config is built."""
        check_fields(self, {"optimizer": OPTIMIZERS, "scheduler": SCHEDULERS, "sampler": SAMPLERS, "amp": AMP,
                            "matmul_precision": MATMUL_PRECISIONS, "transform": (None, *TRANSFORMS),
                            "eval_backend": EVAL_BACKENDS, "eval_split": ("train", "test")})

    # ------------------------------------------------------------------ conversions
    def to_dict(self) -> dict[str, Any]:
        """Every field, the two mappings as plain dicts: what config.yaml, JSON records and study keys hold."""
        values = dataclasses.asdict(self)  # deep copies: nothing returned is shared with the config
        return {k: dict(v) if k in MERGED else v for k, v in values.items()}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "TrainConfig":
        """Build from a dict (e.g. a YAML recipe); unknown keys are an error naming the valid ones."""
        values = {RENAMED.get(k, k): v for k, v in values.items()}
        names = [f.name for f in dataclasses.fields(cls)]  # cls: a subclass may add fields
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(f"unknown config key(s) {unknown}; valid keys: {', '.join(names)}")
        return cls(**values)

    def save_yaml(self, path: Union[str, Path]) -> None:
        write_text_atomic(path, yaml.safe_dump(self.to_dict(), sort_keys=False))


def _fields_section() -> str:
    lines = ["Fields (generated from `FIELD_HELP`, which `python -m lab train --help` shows too):", ""]
    for f in dataclasses.fields(TrainConfig):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        lines.append(f"- **{f.name}** (default `{default!r}`): {FIELD_HELP[f.name]}")
    return "\n".join(lines)


TrainConfig.__doc__ = f"{inspect.cleandoc(TrainConfig.__doc__)}\n\n{_fields_section()}"


def field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(TrainConfig)]


def field_type(name: str, config: Optional[type] = None) -> Any:
    """The runtime type of a field of ``config`` (default TrainConfig): Optional[X] -> X, Mapping[...] -> Mapping."""
    hint = hints(config or TrainConfig)[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if typing.get_origin(hint) is Union else typing.get_origin(hint) or hint


def field_default(f: dataclasses.Field) -> Any:
    """A field's default as declared (a fresh value for a default_factory), without building a config."""
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


@functools.lru_cache(maxsize=8)
def hints(config: type) -> dict[str, Any]:
    """{field: its annotation} of a config class (Optional[int], list, ...): what :func:`to_type` converts to."""
    # get_type_hints evaluates every annotation string again (~1 ms): once per class, not once per field
    # of every config built (reading results/ builds ~400 configs to key their runs).
    return typing.get_type_hints(config)


def merge_overrides(values: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``values`` (a recipe, a checkpoint's config) with ``overrides`` on top; None = not given.

    ``loss_kwargs`` and ``dataset_kwargs`` merge key by key into the recipe's while ``loss`` /
    ``dataset`` stay the recipe's; with another loss (dataset) the recipe's dict is dropped,
    since its keys are the other loss's hyper-parameters.
    """
    given = {RENAMED.get(k, k): v for k, v in overrides.items() if v is not None}
    merged = {RENAMED.get(k, k): v for k, v in values.items()}
    defaults = TrainConfig.__dataclass_fields__
    for name, owner in MERGED.items():
        if owner in given and given[owner] != merged.get(owner, defaults[owner].default):
            merged.pop(name, None)  # the recipe's dict belongs to its own loss / dataset
        elif name in given and isinstance(merged.get(name), dict) and isinstance(given[name], dict):
            given[name] = {**merged[name], **given[name]}
    return {**merged, **given}


def read_recipe(path: Union[str, Path]) -> dict[str, Any]:
    """The mapping in a YAML recipe; a missing, unreadable or malformed file is a one-line error
    naming the file (and the line and column of a YAML error)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no recipe at {path}" + (" (it is a folder)" if path.is_dir() else "") +
                                "; recipes/*.yaml are the shipped ones")
    try:
        text = path.read_text(encoding="utf-8")
        loaded = yaml.safe_load(text)
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a text file: a recipe is YAML (see recipes/*.yaml)") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = " ".join(str(getattr(e, "problem", None) or e).split())  # one line
        line = text.splitlines()[mark.line] if mark is not None and mark.line < len(text.splitlines()) else ""
        tab = " (YAML indents with spaces, not tabs)" if "\t" in line else ""
        raise ValueError(f"{where}: not valid YAML: {problem}{tab}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: a recipe must be a YAML mapping of config keys (key: value lines), "
                         f"got a {type(loaded).__name__}")
    return loaded


def load_config(path: Union[str, Path, None] = None, **overrides: Any) -> TrainConfig:
    """A YAML recipe (or the defaults) with ``overrides`` (None values are ignored) on top;
    ``loss_kwargs`` overrides merge into the recipe's (see :func:`merge_overrides`)."""
    values = read_recipe(path) if path is not None else {}
    return TrainConfig.from_dict(merge_overrides(values, overrides))


def check_out_dir(out: Union[str, Path, None]) -> None:
    """``out`` can become a run folder: it is a folder, or missing below a folder (not a file)."""
    if out is None:
        return
    for path in (Path(out), *Path(out).parents):
        if path.exists():
            if not path.is_dir():
                what = "is an existing file" if path == Path(out) else f"is inside {path}, which is a file"
                raise ValueError(f"--out {out} {what}: give a folder (it receives config.yaml, metrics.jsonl "
                                 "and checkpoint.pt)")
            return


# Fields whose default changed: a config saved without the field was trained with its default of then, not
# today's. amp's default became "auto" (resolved by the Trainer); a config saved before amp existed trained float32.
SAVED_DEFAULTS = {"amp": "none"}


def config_diff(saved: dict[str, Any], current: dict[str, Any], ignore=RESUME_FREE) -> dict[str, tuple]:
    """{key: (saved, current)} for the keys that differ and change the training trajectory
    (a tuple equals the list of its items: loss_kwargs values are lists since they are typed)."""
    keys = (set(saved) | set(current)) - set(ignore)
    # A field missing from one side (a config saved before the field existed) holds its default there: a new
    # field must not make every earlier checkpoint impossible to resume.
    defaults = {f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
                for f in dataclasses.fields(TrainConfig)}
    old = {RENAMED.get(k, k): v for k, v in saved.items()}
    saved, current = {**defaults, **SAVED_DEFAULTS, **old}, {**defaults, **current}
    keys = {RENAMED.get(k, k) for k in keys}
    return {k: (saved.get(k), current.get(k)) for k in sorted(keys) if _plain(saved.get(k)) != _plain(current.get(k))}


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value
