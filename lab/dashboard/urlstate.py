"""Settings <-> URL query parameters, so a teacher can send a link that opens on a setting.

``to_query`` writes the core settings always (a link keeps its meaning if defaults change; in
compare mode the second loss is one of them) and the others, hyper-parameters included, only
when they differ from the defaults (short links).
``from_query`` never fails and never replaces a value silently: an unknown key is dropped, an
unknown name (dataset, model, loss), a dataset or folder the server does not offer, a model larger
than it builds (:mod:`lab.dashboard.served`) or a malformed or non-finite number becomes the default, an
out-of-range number is clamped to a value that can train, each with a sentence naming the key and
the value used. Numbers are read as the command line reads them (:func:`lab.core.convert.to_type`:
``steps=1e3`` is 1000, digits other than ASCII's are not numbers). A link's
value is quoted cut to ``SHOWN_CHARS`` (``settings.shown``); the page shows the notes as plain
text (``escape_markdown``): a value is never a live link or a remote image inside the app's note.
``sid`` (:data:`SID`) is not a setting: it names the page's training session (``session_registry``).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from ..core.convert import to_type
from ..data import DATASETS
from ..losses import LOSSES
from ..models import check_model_name
from .served import allowed_root, model_refusal, refusal
from .sliders import loss_defaults, loss_sliders
from .settings import BOUNDS, GLYPH_INSTANCES, Settings, max_batch_size, shown

SID = "sid"  # query key of the page's training session (see ``session_registry``)


# query key -> (Settings field, type). Short keys: links get pasted into slides and chats.
FIELDS: dict[str, tuple[str, type]] = {
    "dataset": ("dataset", str), "root": ("data_root", str), "classes": ("classes", int), "model": ("model", str),
    "loss": ("loss", str), "compare": ("compare", bool), "loss_b": ("loss_b", str),
    "batch": ("batch_size", int), "m": ("m", int), "lr": ("lr", float), "seed": ("seed", int),
    "steps": ("steps", int), "tick": ("steps_per_tick", int), "eval": ("eval_every", int),
}
KINDS = {int: "an integer", float: "a number", bool: "true or false"}
ALWAYS = ("dataset", "model", "loss", "batch", "m", "lr", "seed")
PREFIX = {"hparams": "a.", "hparams_b": "b."}  # "a.tau=0.05": tau of run A's loss


def to_query(s: Settings) -> dict[str, str]:
    """{key: text} for ``st.query_params``."""
    defaults = Settings()
    out = {}
    for key, (name, _) in FIELDS.items():
        value = getattr(s, name)
        if key in ALWAYS or value != getattr(defaults, name) or (key == "loss_b" and s.compare):
            out[key] = _text(value)
    for attr, loss in (("hparams", s.loss), ("hparams_b", s.loss_b)):
        if attr == "hparams_b" and not s.compare:
            continue
        paper = loss_defaults(loss)
        for name, value in getattr(s, attr).items():
            if value != paper.get(name):
                out[PREFIX[attr] + name] = _text(value)
    return out


def from_query(params: Mapping[str, Any]) -> tuple[Settings, list[str]]:
    """(settings, notes): the defaults overridden by what ``params`` holds and makes sense."""
    defaults = Settings()
    values: dict[str, Any] = {}
    notes: list[str] = []
    hparam_text: dict[str, dict[str, str]] = {"hparams": {}, "hparams_b": {}}
    clamped: dict[str, str] = {}  # field -> its key, for the numbers a link had outside their range
    for key, raw in params.items():
        text = raw[-1] if isinstance(raw, (list, tuple)) else str(raw)  # a repeated key: the last wins
        attr = next((a for a, p in PREFIX.items() if key.startswith(p)), None)
        if attr is not None:
            hparam_text[attr][key[len(PREFIX[attr]):]] = text
        elif key == SID:
            continue
        elif key not in FIELDS:
            notes.append(f"ignored the unknown link parameter {shown(key)}")
        else:
            name, kind = FIELDS[key]
            default = getattr(defaults, name)
            try:
                value = to_type(key, text, kind)  # as the command line reads it
            except ValueError:
                notes.append(f"{key}={shown(text)} is not {KINDS.get(kind, 'a valid value')}: using the default "
                             f"{_text(default)}")
                continue
            problem = _name_problem(name, value)
            if problem:
                notes.append(f"{key}={shown(text)}: {problem}: using the default {_text(default)}")
                continue
            values[name] = _clamp(key, name, value, default, notes)
            if values[name] != value:
                clamped[name] = key
    _served(values, notes)
    s = _trainable(defaults.replace(**values), clamped, notes)
    for attr, loss in (("hparams", s.loss), ("hparams_b", s.loss_b)):
        parsed = _hparams(loss, hparam_text[attr], PREFIX[attr], notes)
        s = s.replace(**{attr: parsed})
    return s, notes


def _name_problem(name: str, value: Any) -> str:
    """Why a named choice (dataset, model, loss) cannot be used; empty when it can."""
    if name == "dataset" and value not in DATASETS:
        return f"unknown dataset (choose one of: {', '.join(DATASETS)})"
    if name in ("loss", "loss_b") and value not in LOSSES:
        return "unknown loss (the Loss menu lists them)"
    if name == "model":
        try:
            check_model_name(value)  # imports timm only for names other than small_cnn
        except ValueError:
            return "unknown model (small_cnn or a timm model name)"
        return model_refusal(value) or ""
    return ""


def _served(values: dict[str, Any], notes: list[str]) -> None:
    """A dataset and folder this server offers (``served``), else the default dataset, with a note."""
    dataset, root = values.get("dataset", Settings().dataset), str(values.get("data_root", ""))
    why = refusal(dataset, root)
    if why is not None:
        values.pop("dataset", None)
        values.pop("data_root", None)
        notes.append(f"dataset={shown(dataset)} root={shown(root)}: {why}: using the default {Settings().dataset}")
        return
    values["data_root"] = allowed_root(dataset, root)


TRAIN_CLASSES = {"digits": 5}  # the embedded datasets' training classes (glyphs: the link's classes)


def _trainable(s: Settings, clamped: dict[str, str], notes: list[str]) -> Settings:
    """A batch size or m clamped from a link, made to fit each other, the dataset and the model: the value
    used is one that trains (m at most a glyph class's images; the batch a multiple of m, within the
    model's limit and the classes there are). Its note says the value finally used."""
    m, batch = s.m, s.batch_size
    if "m" in clamped and s.dataset == "glyphs" and m > GLYPH_INSTANCES:
        m = _refit(notes, clamped["m"], GLYPH_INSTANCES, f"a glyph class has {GLYPH_INSTANCES} images")
    if "batch_size" in clamped:
        classes = s.classes if s.dataset == "glyphs" else TRAIN_CLASSES.get(s.dataset)
        low = -(-int(BOUNDS["batch_size"][0]) // m) * m  # the multiples of m the bounds and the data allow
        high = min(max_batch_size(s), classes * m if classes else 10**9) // m * m
        fitted = min(max(batch, low), high) // m * m if low <= high else batch
        if fitted != batch:
            batch = _refit(notes, clamped["batch_size"], fitted, f"{s.model} on {s.dataset} with m = {m} trains "
                                                                 f"batches of {fitted} at most, in multiples of m")
    return s.replace(m=m, batch_size=batch)


def _refit(notes: list[str], key: str, value: int, why: str) -> int:
    """Replace the clamp's note on ``key`` (its last) by one that gives ``value`` and ``why``."""
    at = max(i for i, n in enumerate(notes) if n.startswith(f"{key}="))
    notes[at] = notes[at].rsplit(": using ", 1)[0] + f"; {why}: using {value}"
    return value


def _hparams(loss: str, texts: dict[str, str], prefix: str, notes: list[str]) -> dict[str, float]:
    if not texts:
        return {}
    specs, paper, out = loss_sliders(loss), loss_defaults(loss), {}
    for name, text in texts.items():
        if name not in specs:
            notes.append(f"ignored {prefix}{shown(name, quote=False)}: {loss} has no hyper-parameter {shown(name)}")
            continue
        try:
            value = to_type(prefix + name, text, float)  # as the command line reads it
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            notes.append(f"{prefix}{name}={shown(text)} is not a finite number: using the default {paper[name]:g}")
            continue
        spec = specs[name]
        used, why = value, ""
        if not spec.min <= value <= spec.max:
            used, why = min(max(value, spec.min), spec.max), f"is outside [{spec.min:g}, {spec.max:g}]"
        if spec.integer:
            why = why or ("is not an integer" if used != round(used) else "")
            used = int(round(used))
        if why:
            notes.append(f"{prefix}{name}={shown(text, quote=False)} {why}: using {used:g}")
        out[name] = used
    return out


def _clamp(key: str, name: str, value: Any, default: Any, notes: list[str]) -> Any:
    if name not in BOUNDS:
        return value
    if isinstance(value, float) and not math.isfinite(value):
        notes.append(f"{key}={value} is not a finite number: using the default {_text(default)}")
        return default
    low, high = BOUNDS[name]
    if not low <= value <= high:
        clamped = type(value)(min(max(value, low), high))
        notes.append(f"{key}={shown(_text(value), quote=False)} is outside [{low:g}, {high:g}]: using {_text(clamped)}")
        return clamped
    return value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
