"""The training configuration: one plain dataclass; YAML recipes and CLI flags map onto it."""
from __future__ import annotations

import dataclasses
import typing
import warnings
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import yaml

OPTIMIZERS = ("adam", "adamw")
SCHEDULERS = ("none", "multistep", "cosine")
SAMPLERS = ("m_per_class", "hierarchical")
AMP = ("none", "bf16", "fp16")
TRANSFORMS = ("small", "paper")
EVAL_BACKENDS = ("faiss", "torch")

RENAMED = {"chunk_size": "stage_size"}  # old config key -> its name now (recipes, saved checkpoints)
# Keys that may change between a run and its resumption without changing its trajectory
# (how long it runs, where it writes, how often it reports, where it runs).
RESUME_FREE = frozenset({"steps", "epochs", "out", "checkpoint_every", "eval_every", "log_every", "progress",
                         "device", "num_workers", "eval_max_items", "eval_backend", "eval_batch_size"})


@dataclass
class TrainConfig:
    """Every setting of a training run. Defaults: the 2-core CPU lab (glyphs, small CNN, ROADMAP).

    Run length: ``epochs`` if > 0 (then ``milestones`` are in epochs too), else ``steps``.
    ``batch_size`` is the global batch (all ranks together) and must be divisible by ``m``.
    """

    # data
    dataset: str = "glyphs"
    data_root: Optional[str] = None
    dataset_kwargs: dict = field(default_factory=dict)
    transform: Optional[str] = None  # lab.data.build_transforms kind, "small" | "paper"; None: the dataset's own
    image_size: int = 32
    sampler: str = "m_per_class"
    batch_size: int = 128
    m: int = 4  # images per class in a batch
    num_workers: int = 0
    # model
    model: str = "small_cnn"
    embed_dim: int = 64
    pretrained: bool = False
    pooling: str = "avg"
    layer_norm: bool = False
    freeze_bn: bool = False
    # loss
    loss: str = "roadmap"
    loss_kwargs: dict = field(default_factory=dict)
    # optimisation
    optimizer: str = "adam"
    lr: float = 1e-3  # backbone
    lr_head: Optional[float] = None  # None: same as lr
    lr_loss: Optional[float] = None  # parameters owned by the loss (e.g. proxies); None: same as lr_head
    weight_decay: Optional[float] = None  # None: the optimizer's default (Adam 0, AdamW 0.01)
    scheduler: str = "none"
    milestones: list = field(default_factory=list)
    gamma: float = 0.3  # multistep factor ("drop the learning rate by 70%")
    warmup_steps: int = 0
    grad_clip: Optional[float] = None
    steps: int = 1000
    epochs: float = 0.0
    amp: str = "none"
    # cross-batch memory (XBM) and staged backprop
    xbm_size: int = 0  # 0: off
    xbm_start: int = 0  # step from which the memory loss is added (the memory fills from step 0)
    xbm_weight: float = 1.0
    stage_size: Optional[int] = None  # staged backprop: images per re-forward stage; None: off
    # evaluation and bookkeeping
    eval_every: int = 500
    eval_split: str = "test"
    eval_max_items: Optional[int] = None  # evaluate on a fixed subset of classes with ~this many images
    eval_batch_size: int = 256
    eval_backend: str = "faiss"
    probe_batches: int = 8  # decomposability-gap probe: this many sampler batches of the train split
    seed: int = 0
    device: str = "auto"
    out: Optional[str] = None
    checkpoint_every: int = 0
    log_every: int = 10
    progress: bool = True
    # The old name of ``stage_size`` (``chunk_size`` now means queries per chunk in the losses and
    # metrics only); accepted, with a DeprecationWarning, from code, recipes and checkpoints.
    chunk_size: InitVar[Optional[int]] = None

    def __post_init__(self, chunk_size: Optional[int] = None) -> None:
        if chunk_size is not None:
            warnings.warn("TrainConfig(chunk_size=...) is now stage_size (images per staged-backprop stage)",
                          DeprecationWarning, stacklevel=3)
            self.stage_size = chunk_size
        self.validate()

    def validate(self) -> None:
        choices = {"optimizer": OPTIMIZERS, "scheduler": SCHEDULERS, "sampler": SAMPLERS, "amp": AMP,
                   "transform": (None, *TRANSFORMS), "eval_backend": EVAL_BACKENDS, "eval_split": ("train", "test")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("batch_size", "m", "embed_dim", "image_size", "eval_batch_size", "probe_batches"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.batch_size % self.m:
            raise ValueError(f"batch_size ({self.batch_size}) must be divisible by m ({self.m}), the images "
                             f"per class: e.g. batch_size={self.batch_size - self.batch_size % self.m or self.m}")
        if self.epochs <= 0 and self.steps < 1:
            raise ValueError(f"steps must be >= 1 when epochs is 0, got steps={self.steps}")
        for name in ("lr", "lr_head", "lr_loss", "weight_decay", "grad_clip", "xbm_weight"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and value >= 0):
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        for name in ("xbm_size", "xbm_start", "warmup_steps", "num_workers", "checkpoint_every", "eval_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.stage_size is not None and self.stage_size < 1:
            raise ValueError(f"stage_size must be None or >= 1, got {self.stage_size!r}")
        if self.log_every < 1:
            raise ValueError(f"log_every must be >= 1, got {self.log_every!r}")
        if sorted(self.milestones) != list(self.milestones):
            raise ValueError(f"milestones must be increasing, got {self.milestones!r}")

    # ------------------------------------------------------------------ conversions
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "TrainConfig":
        """Build from a dict (e.g. a YAML recipe); unknown keys are an error naming the valid ones."""
        values = {RENAMED.get(k, k): v for k, v in values.items()}
        unknown = sorted(set(values) - set(field_names()))
        if unknown:
            raise ValueError(f"unknown config key(s) {unknown}; valid keys: {', '.join(field_names())}")
        return cls(**{k: coerce(k, v) for k, v in values.items()})

    def save_yaml(self, path: Union[str, Path]) -> None:
        Path(path).write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))


def field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(TrainConfig)]


def field_type(name: str) -> Any:
    """The runtime type of a field: Optional[X] -> X."""
    hint = typing.get_type_hints(TrainConfig)[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if typing.get_origin(hint) is Union else hint


def coerce(name: str, value: Any) -> Any:
    """YAML reads 1e-5 as a string and 30 as an int; give each field its declared type."""
    kind = field_type(name)
    if value is None or kind in (dict, list) or isinstance(value, bool):
        return value
    if kind is float and isinstance(value, (int, str)):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{name} must be a number, got {value!r}") from None
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def load_config(path: Union[str, Path, None] = None, **overrides: Any) -> TrainConfig:
    """A YAML recipe (or the defaults) with ``overrides`` (None values are ignored) on top."""
    values: dict[str, Any] = {}
    if path is not None:
        loaded = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: a recipe must be a YAML mapping of config keys, got {type(loaded).__name__}")
        values.update(loaded)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return TrainConfig.from_dict(values)


def config_diff(saved: dict[str, Any], current: dict[str, Any], ignore=RESUME_FREE) -> dict[str, tuple]:
    """{key: (saved, current)} for the keys that differ and change the training trajectory."""
    keys = (set(saved) | set(current)) - set(ignore)
    return {k: (saved.get(k), current.get(k)) for k in sorted(keys) if saved.get(k) != current.get(k)}
