"""The dashboard's settings: widget values -> checked -> one or two :class:`TrainConfig`.

Every bound lives here, so the sidebar widgets, the URL parser and the validation agree. A
setting the widgets cannot express wrongly (a range) is still checked, because a shared link
can carry anything. Errors are sentences for the page, never tracebacks.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import os
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.env import DATA_ENV, data_root, fast_mode
from ..data import DATASETS, EMBEDDED, GlyphDataset
from ..data.disk import SOURCES, find_root
from ..losses import LOSSES, loss_kwargs_of
from ..models import check_model_name
from ..models.timm_backbone import EXAMPLES
from ..train import TrainConfig
from ..train.footprint import human, needs
from ..viz.controls import Slider
from .served import model_refusal, refusal, session_memory
from .sliders import check_hparams, loss_defaults, loss_sliders

MODEL_EXAMPLES = ("small_cnn", *EXAMPLES)
# (min, max) of each number widget. Batches above 256 (small CNN, 32 px) or 64 (anything larger)
# would take seconds per step or gigabytes on a laptop CPU.
BOUNDS: dict[str, tuple[float, float]] = {
    "classes": (2, 1800), "batch_size": (4, 256), "m": (2, 32), "lr": (1e-5, 1.0), "seed": (0, 2**31 - 1),
    "steps": (1, 100_000), "steps_per_tick": (1, 50), "eval_every": (1, 10_000),
}
LR_SLIDER = Slider(BOUNDS["lr"][0], BOUNDS["lr"][1], 0.25, 1e-3, log=True, description="learning rate (Adam)")
SMALL_BATCH_LIMIT = 64  # timm models or disk datasets
GLYPH_INSTANCES = inspect.signature(GlyphDataset).parameters["instances_per_class"].default
DISK_IMAGE_SIZE = 64  # disk datasets at 64 px: the papers' 224 px is minutes per step on a CPU


@dataclass
class Settings:
    """What the sidebar shows. ``hparams`` hold the loss's hyper-parameters that differ from the
    paper's defaults (missing = default); ``*_b`` describe the second run of compare mode."""

    dataset: str = "glyphs"
    data_root: str = ""
    classes: int = field(default_factory=lambda: 12 if fast_mode() else 200)  # glyphs: train (and test) classes
    model: str = "small_cnn"
    loss: str = "roadmap"
    hparams: dict = field(default_factory=dict)
    compare: bool = False
    loss_b: str = "smooth_ap"
    hparams_b: dict = field(default_factory=dict)
    batch_size: int = field(default_factory=lambda: 16 if fast_mode() else 64)
    m: int = 4
    lr: float = 1e-3
    seed: int = 0
    steps: int = field(default_factory=lambda: 40 if fast_mode() else 1000)  # run length
    steps_per_tick: int = field(default_factory=lambda: 2 if fast_mode() else 3)
    eval_every: int = field(default_factory=lambda: 4 if fast_mode() else 25)

    def replace(self, **changes: Any) -> "Settings":
        return dataclasses.replace(self, **changes)


SHOWN_CHARS = 80  # of a value a page quotes (a link's, a typed path): 5,000 characters must not fill it
# Characters that start Markdown (CommonMark) or Streamlit's own syntax ($math$, :red[...]) in the
# text of st.warning / st.error: a backslash before each makes it literal.
MARKDOWN_SPECIAL = frozenset("\\`*_{}[]()<>#+-.!|~$:&")
# What a backslash does not stop: Streamlit turns ":material/x:" and ":smile:" into icons and GFM
# turns "https://...", "www...." and "a@b.c" into links after the escapes are read. An invisible
# word joiner (U+2060) after ":" and "@" and inside "www." breaks those patterns.
JOINER = "\u2060"


def shown(text: Any, quote: bool = True) -> str:
    """A value as a page quotes it: ``repr`` (``quote``) or as is, cut to ``SHOWN_CHARS``
    characters with the full length said."""
    text = str(text)
    if len(text) <= SHOWN_CHARS:
        return repr(text) if quote else text
    head = text[:SHOWN_CHARS]
    return f"{repr(head) if quote else head}… ({len(text):,} characters)"


def escape_markdown(text: str) -> str:
    """``text`` shown literally by Streamlit's Markdown: a backslash before every character that
    could start a link, an image, emphasis, code, HTML, maths or a colour directive, a word joiner
    where an autolink or an icon could start (``JOINER``); newlines become spaces (a value cannot
    start a heading or a list). What a reader sees is ``text`` (newlines as spaces)."""
    out = []
    for c in text.replace("www.", f"www{JOINER}."):
        out.append("\\" + c if c in MARKDOWN_SPECIAL else " " if c in "\r\n" else c)
        if c in ":@":
            out.append(JOINER)
    return "".join(out)


def eval_items() -> int:
    """Held-out images (whole classes) evaluated and shown: enough for stable R@1, cheap to embed."""
    return 64 if fast_mode() else 400


def max_batch_size(s: Settings) -> int:
    small = s.model == "small_cnn" and s.dataset in EMBEDDED
    return int(BOUNDS["batch_size"][1]) if small else SMALL_BATCH_LIMIT


def validate(s: Settings) -> list[str]:
    """Every reason these settings cannot train, as sentences; empty when they can."""
    errors = _number_errors(s)
    if s.dataset not in DATASETS:
        errors.append(f"unknown dataset {s.dataset!r}; choose one of: {', '.join(DATASETS)}")
    elif refusal(s.dataset, s.data_root):  # the operator's choice (lab.dashboard.served), before any path is read
        errors.append(refusal(s.dataset, s.data_root))
    elif s.dataset not in EMBEDDED:
        errors += _root_errors(s)
    errors += _model_errors(s.model)
    for loss, hparams in [(s.loss, s.hparams)] + ([(s.loss_b, s.hparams_b)] if s.compare else []):
        errors += _loss_errors(loss, hparams)
    if errors:
        return errors
    if s.batch_size % s.m:
        lower = s.batch_size - s.batch_size % s.m
        errors.append(f"batch size {s.batch_size} is not divisible by m = {s.m} (images per class in a batch): "
                      f"try {lower or s.m} or {lower + s.m}")
    if s.batch_size > max_batch_size(s):
        errors.append(f"batch size {s.batch_size} is too large for {s.model} on {s.dataset} on a CPU: at most "
                      f"{max_batch_size(s)}")
    if s.dataset == "glyphs":
        if s.m > GLYPH_INSTANCES:
            errors.append(f"m = {s.m} images per class, but each glyph class has {GLYPH_INSTANCES} images")
        if s.batch_size // s.m > s.classes:
            errors.append(f"a batch of {s.batch_size} with m = {s.m} needs {s.batch_size // s.m} classes, but only "
                          f"{s.classes} are selected: raise the classes, raise m or lower the batch size")
    return errors or _memory_errors(s)


def image_size(s: Settings) -> int:
    """The runs' image size: 32 px for the embedded datasets (as drawn), :data:`DISK_IMAGE_SIZE` from the disk."""
    return 32 if s.dataset in EMBEDDED else DISK_IMAGE_SIZE


def to_configs(s: Settings) -> list[TrainConfig]:
    """The TrainConfig of run A (and of run B in compare mode: same everything, its own loss).

    Evaluation is the dashboard's business (a few hundred held-out images at its own pace), so
    the trainer's own schedule is off. (Proxy losses get num_classes from the trainer.)
    """
    common = dict(
        dataset=s.dataset, data_root=s.data_root or None,
        dataset_kwargs={"num_classes": s.classes} if s.dataset == "glyphs" else {},
        image_size=image_size(s), model=s.model, batch_size=s.batch_size, m=s.m, lr=s.lr,
        seed=s.seed, steps=s.steps, eval_every=0, eval_max_items=eval_items(), eval_backend="torch",
        probe_batches=2 if fast_mode() else 4, progress=False, log_every=10**9,
    )
    runs = [(s.loss, s.hparams)] + ([(s.loss_b, s.hparams_b)] if s.compare else [])
    return [TrainConfig(**common, loss=loss, loss_kwargs=dict(hparams)) for loss, hparams in runs]


def run_labels(s: Settings) -> list[str]:
    return [f"A · {s.loss}"] + ([f"B · {s.loss_b}"] if s.compare else [])


# ------------------------------------------------------------------------------ checks
def _number_errors(s: Settings) -> list[str]:
    errors = []
    for name, (low, high) in BOUNDS.items():
        value = getattr(s, name)
        integer = name != "lr"
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and (not integer or float(value).is_integer()))
        if not ok or not low <= value <= high:
            kind = "an integer" if integer else "a number"
            errors.append(f"{name.replace('_', ' ')} must be {kind} in [{low:g}, {high:g}], got {value!r}")
    return errors


def _root_errors(s: Settings) -> list[str]:
    root = s.data_root.strip() or None
    if s.dataset == "folder":
        if root is None or not os.path.isdir(os.path.expanduser(root)):
            return [f"the folder dataset needs a root folder with one sub-folder per class "
                    f"(got {shown(root) if root else None}). {SOURCES['folder'][2]}"]
        return []
    if find_root(s.dataset, root) is None:
        where = f"under {shown(root)}" if root else f"(no root given and ${DATA_ENV} unset)" if data_root() is None \
            else f"under ${DATA_ENV}={str(data_root())!r}"
        return [f"{s.dataset} was not found {where}. {SOURCES[s.dataset][2]}"]
    return []


def _model_errors(model: str) -> list[str]:
    try:
        check_model_name(model)  # imports timm only for names other than small_cnn
    except ValueError as e:
        return [str(e)]
    too_large = model_refusal(model)  # the operator's limit (lab.dashboard.served), before anything is built
    return [too_large] if too_large else []


def _memory_errors(s: Settings) -> list[str]:
    """The session's runs against its share of the server's memory (lab.dashboard.served.session_memory)."""
    try:
        share, amount, why = session_memory()
    except ValueError as e:  # the operator's malformed value: no run starts, and the page says why
        return [str(e)]
    one = _run_ask(s.model, _channels(s.dataset), image_size(s), s.batch_size, s.m)
    runs = 2 if s.compare else 1  # run B differs by its loss only, which the estimate leaves out
    if one.nbytes * runs <= share:
        return []
    each = f"each of the two runs {_gb(one.nbytes)}; " if runs > 1 else ""
    return [f"these settings ask for at least {_gb(one.nbytes * runs)} of memory ({each}the largest part: "
            f"{one.what}, {human(one.biggest)}), but this server gives a session {amount} ({why}): choose a smaller "
            f"model or batch" + (", or one run instead of two" if runs > 1 else "")]


def session_ask(configs: list[TrainConfig]) -> int:
    """The bytes a session of these runs holds in its worker, the trainer's estimate of each (what
    :class:`lab.dashboard.pool.Pool` reserves for it)."""
    return sum(_run_ask(c.model, _channels(c.dataset), c.image_size, c.batch_size, c.m).nbytes for c in configs)


def _channels(dataset: str) -> int:
    """The channels of a dataset's images as the trainer reads them: grey glyphs and digits, RGB from the disk."""
    return 1 if dataset in EMBEDDED else 3


@dataclass(frozen=True)
class _Ask:
    nbytes: int
    what: str  # its largest item
    biggest: int


@functools.lru_cache(maxsize=64)
def _run_ask(model: str, channels: int, size: int, batch_size: int, m: int) -> _Ask:
    """The trainer's estimate of one run (:func:`lab.train.footprint.needs`) from the settings that size it,
    built on the meta device, once per such settings (a rerun of the page builds no config); the images a
    dataset holds are left out."""
    cfg = TrainConfig(model=model, image_size=size, batch_size=batch_size, m=m, eval_max_items=eval_items())
    items = needs(cfg, torch.empty(channels, size, size, device="meta"))
    big = max(items, key=lambda n: n.nbytes)
    return _Ask(sum(n.nbytes for n in items), big.what, big.nbytes)


def _gb(nbytes: int) -> str:
    """Two decimals: an ask just above the share must not read as the same number ("4.0 GB, but ... 4.0 GB")."""
    return f"{nbytes / 1e9:.2f} GB"


def _loss_errors(loss: str, hparams: dict[str, Any]) -> list[str]:
    if loss not in LOSSES:
        return [f"unknown loss {loss!r}; choose one of: {', '.join(sorted(LOSSES))}"]
    errors = check_hparams(loss, hparams)
    if errors:
        return errors
    values = {name: hparams.get(name, loss_defaults(loss)[name]) for name in loss_sliders(loss)}
    try:  # the loss's own check over its defaults (ranges, then its rules: ROADMAP's alpha > beta), no loss built
        LOSSES[loss].check_hparams({**loss_kwargs_of(loss), **values})
    except ValueError as e:
        return [f"{loss}: {e}"]
    return []
