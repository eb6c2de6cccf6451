"""Settings <-> URL query parameters, so a teacher can send a link that opens on a setting.

``to_query`` writes the core settings always (a link keeps its meaning if defaults change; in
compare mode the second loss is one of them) and the others, hyper-parameters included, only
when they differ from the defaults (short links).
``from_query`` never fails: an unknown key, a malformed value or an out-of-range number is
dropped or clamped, with a sentence saying so.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from ..losses import LOSSES
from .hparams import loss_defaults, loss_sliders
from .settings import BOUNDS, Settings


def _bool(text: str) -> bool:
    """'1'/'true'/'yes'/'on' or '0'/'false'/'no'/'off'/''; anything else is a ValueError."""
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(text)


# query key -> (Settings field, parser). Short keys: links get pasted into slides and chats.
FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "dataset": ("dataset", str), "root": ("data_root", str), "classes": ("classes", int), "model": ("model", str),
    "loss": ("loss", str), "compare": ("compare", _bool), "loss_b": ("loss_b", str),
    "batch": ("batch_size", int), "m": ("m", int), "lr": ("lr", float), "seed": ("seed", int),
    "steps": ("steps", int), "tick": ("steps_per_tick", int), "eval": ("eval_every", int),
}
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
    values: dict[str, Any] = {}
    notes: list[str] = []
    hparam_text: dict[str, dict[str, str]] = {"hparams": {}, "hparams_b": {}}
    for key, raw in params.items():
        text = raw[-1] if isinstance(raw, (list, tuple)) else str(raw)  # a repeated key: the last wins
        attr = next((a for a, p in PREFIX.items() if key.startswith(p)), None)
        if attr is not None:
            hparam_text[attr][key[len(PREFIX[attr]):]] = text
        elif key not in FIELDS:
            notes.append(f"ignored the unknown link parameter {key!r}")
        else:
            name, parse = FIELDS[key]
            try:
                values[name] = _clamp(name, parse(text), notes)
            except ValueError:
                notes.append(f"ignored {key}={text!r}: not a valid {parse.__name__ if parse in (int, float) else 'value'}")
    s = Settings().replace(**values)
    for attr, loss in (("hparams", s.loss), ("hparams_b", s.loss_b)):
        parsed = _hparams(loss, hparam_text[attr], PREFIX[attr], notes)
        s = s.replace(**{attr: parsed})
    return s, notes


def _hparams(loss: str, texts: dict[str, str], prefix: str, notes: list[str]) -> dict[str, float]:
    if not texts:
        return {}
    if loss not in LOSSES:
        notes.append(f"ignored the {prefix}* hyper-parameters: unknown loss {loss!r}")
        return {}
    specs, out = loss_sliders(loss), {}
    for name, text in texts.items():
        if name not in specs:
            notes.append(f"ignored {prefix}{name}: {loss} has no hyper-parameter {name!r}")
            continue
        try:
            value = float(text)
        except ValueError:
            notes.append(f"ignored {prefix}{name}={text!r}: not a number")
            continue
        spec = specs[name]
        if not spec.min <= value <= spec.max:
            notes.append(f"{prefix}{name}={value:g} is outside [{spec.min:g}, {spec.max:g}]: clamped")
            value = min(max(value, spec.min), spec.max)
        out[name] = int(round(value)) if spec.integer else value
    return out


def _clamp(name: str, value: Any, notes: list[str]) -> Any:
    if name not in BOUNDS:
        return value
    low, high = BOUNDS[name]
    if not low <= value <= high:
        clamped = type(value)(min(max(value, low), high))
        notes.append(f"{name.replace('_', ' ')}={value} is outside [{low:g}, {high:g}]: using {clamped}")
        return clamped
    return value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
