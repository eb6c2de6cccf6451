"""Widget specs for the losses' hyper-parameters, read off their declarations.

Each loss class lists its hyper-parameters in ``declared`` (:mod:`lab.core.hparams`: default =
the paper's setting, slider range, meaning). :func:`loss_sliders` turns them into
:class:`lab.viz.controls.Slider` specs (the notebooks' knob type), so the dashboard never keeps
a second copy of a range, a default or an explanation.
:func:`slider_options` gives the value grid of a log slider (Streamlit has no log slider).
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Optional

from ..losses import LOSSES
from ..viz.controls import Slider

LOG_RATIO = 50.0  # a range spanning more than this factor (with low > 0) gets a log scale
LINEAR_STEPS = 100  # a linear slider moves in 1/100 of its range
LOG_STEP = 0.05  # log sliders: tenths of a half decade (1.00, 1.12, 1.26, ... per decade)


def loss_defaults(loss: str) -> dict[str, Any]:
    """The constructor defaults (the paper's values) of every parameter of loss ``loss``."""
    cls = _loss_class(loss)
    return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
            if p.default is not inspect.Parameter.empty}


def loss_sliders(loss: str) -> dict[str, Slider]:
    """{hyper-parameter: Slider} for the declared hyper-parameters of ``loss`` that have a slider
    range, valued at the declared default, with the paper's meaning as the tooltip."""
    specs = {}
    for name, hp in _loss_class(loss).declared.items():
        if hp.slider is None:
            continue
        (low, high), value = hp.slider, hp.default
        integer = isinstance(value, int) and not isinstance(value, bool)
        log = low > 0 and high / low > LOG_RATIO
        if integer:
            step: float = 1
        elif log:
            step = LOG_STEP
        else:
            step = _round_step((high - low) / LINEAR_STEPS)
        specs[name] = Slider(float(low), float(high), step, value, log=log, integer=integer,
                             description=_describe(name, low, high), help=hp.meaning)
    return specs


def needs_num_classes(loss: str) -> bool:
    """True for the losses with one learnable proxy per class (they need num_classes, embed_dim)."""
    return bool(getattr(_loss_class(loss), "needs_num_classes", False))


def calibration_thresholds(loss: str, hparams: Optional[dict[str, float]] = None) -> tuple[float, float, bool]:
    """(alpha, beta, own): the calibration thresholds ROADMAP Eq. 7 uses for ``loss`` when it has them
    (own=True), else the CalibrationLoss defaults as a reference (own=False)."""
    ranges = getattr(_loss_class(loss), "hparam_ranges", {})
    if "alpha" in ranges and "beta" in ranges:
        values = {**loss_defaults(loss), **(hparams or {})}
        return float(values["alpha"]), float(values["beta"]), True
    reference = loss_defaults("calibration")
    return float(reference["alpha"]), float(reference["beta"]), False


def check_hparams(loss: str, hparams: dict[str, Any]) -> list[str]:
    """Messages for unknown names and out-of-range values (empty: fine)."""
    specs = loss_sliders(loss)
    errors = []
    for name, value in hparams.items():
        if name not in specs:
            errors.append(f"{loss} has no hyper-parameter {name!r}; it has: {', '.join(specs) or 'none'}")
        elif (not isinstance(value, (int, float)) or isinstance(value, bool)
              or not specs[name].min <= value <= specs[name].max):
            errors.append(f"{loss}: {name} must be a number in [{specs[name].min:g}, {specs[name].max:g}], "
                          f"got {value!r}")
    return errors


def slider_options(spec: Slider, extra: Optional[float] = None) -> list[float]:
    """The values a log slider offers: a geometric grid from min to max (``step`` in decades),
    plus the default and ``extra`` (e.g. a value from a shared link), sorted."""
    lo, hi = math.log10(spec.min), math.log10(spec.max)
    count = int(round((hi - lo) / spec.step))
    values = {_round_sig(10 ** (lo + i * (hi - lo) / count)) for i in range(count + 1)}
    values |= {float(spec.value)} | ({float(extra)} if extra is not None else set())
    if spec.integer:
        values = {float(round(v)) for v in values}
    return sorted(v for v in values if spec.min <= v <= spec.max)


def _loss_class(loss: str):
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; choose one of: {', '.join(sorted(LOSSES))}")
    return LOSSES[loss]


def _round_step(step: float) -> float:
    """1, 2 or 5 times a power of ten, at most ``step``: readable slider values."""
    power = 10 ** math.floor(math.log10(step))
    return max(m * power for m in (1, 2, 5) if m * power <= step)


def _round_sig(x: float, digits: int = 3) -> float:
    return float(f"{x:.{digits}g}")


def _describe(name: str, low: float, high: float) -> str:
    symbols = {"tau": "τ", "rho": "ρ", "delta": "δ", "alpha": "α", "beta": "β", "lam": "λ", "eta": "η",
               "tau_star": "τ*", "lambda_val": "λ", "hap_alpha": "α"}
    where = f"{name}, {low:g} to {high:g}" if name in symbols else f"{low:g} to {high:g}"
    return f"{symbols.get(name, name)} ({where})"
