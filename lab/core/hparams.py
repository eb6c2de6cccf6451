"""The losses' hyper-parameters, each declared once: name, type, default, accepted range, meaning.

A loss module lists its own with :func:`declare` (``declare(TAU, RHO, DELTA)``, or
``NUM_BINS.but(default=20)`` where its paper's default differs). Everything else reads that
declaration: the function form's and the class's defaults (``tau: float = TAU.default``) and their
checks (``TAU.check(tau)``), ``lab.losses.check_loss_kwargs`` (the CLI and YAML recipes:
types converted and ranges checked at load), ``build_loss``, and the dashboard's sliders (``slider``).

The accepted ranges are where every loss stays finite in float32 and float64 (a hypothesis test
checks it, tests/test_hparams.py); ``slider`` is the narrower range worth exploring in the dashboard.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterator, Mapping, Optional


@dataclasses.dataclass(frozen=True)
class HParam:
    """One hyper-parameter. Accepted values: ``low <= value <= high``."""

    name: str
    kind: type  # float or int
    default: Any
    low: float
    high: float
    meaning: str
    slider: Optional[tuple[float, float]] = None
    # Where the value enters the loss, as a formula: the losses' docstrings show it (docstring_section).
    equation: str = ""

    def but(self, **changes: Any) -> "HParam":
        """The same declaration with some fields changed (e.g. another paper's default)."""
        return dataclasses.replace(self, **changes)

    def accepted(self) -> str:
        kind = "an integer" if self.kind is int else "a number"
        return f"{kind} in [{self.low:g}, {self.high:g}]"

    def check(self, value: Any) -> Any:
        """``value`` if it is accepted, else a ValueError naming the argument, the range and the meaning."""
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and self.kind is int:
            number = isinstance(value, int) or float(value).is_integer()
        ok = number and math.isfinite(value) and self.low <= value <= self.high
        if not ok:
            raise ValueError(f"{self.name} must be {self.accepted()} ({self.meaning}), got {value!r}")
        return value


class Declared(Mapping[str, HParam]):
    """The ordered hyper-parameters of one loss."""

    def __init__(self, *params: HParam) -> None:
        self._params = {p.name: p for p in params}

    def __getitem__(self, name: str) -> HParam:
        return self._params[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def __add__(self, other: "Declared") -> "Declared":
        return Declared(*self.values(), *(p for p in other.values() if p.name not in self))

    @property
    def sliders(self) -> dict[str, tuple[float, float]]:
        return {name: p.slider for name, p in self.items() if p.slider is not None}


def declare(*params: HParam) -> Declared:
    return Declared(*params)


def docstring_section(declared: Declared) -> str:
    """The "Hyper-parameters" section of a loss's docstring, generated from its declarations so that the two
    cannot drift: each name with its type, default, accepted range, meaning and equation (Markdown, for pdoc)."""
    if not declared:
        return ""
    lines = ["Hyper-parameters (generated from their declarations in `lab.core.hparams`):", ""]
    for p in declared.values():
        formula = f" Equation: `{p.equation}`." if p.equation else ""
        # The name in bold, not as code: pdoc would link it to an attribute of that name (hap_alpha) on another page.
        lines.append(f"- **{p.name}** ({p.kind.__name__}, default `{p.default!r}`, accepted "
                     f"[{p.low:g}, {p.high:g}]): {p.meaning}.{formula}")
    return "\n".join(lines)


# The shared vocabulary of the papers. Defaults are the papers' settings.
TAU = HParam("tau", float, 0.01, 1e-6, 100.0, "temperature of the sigmoid that replaces the step H, "
             "ROADMAP Eq. 3", slider=(1e-3, 1.0), equation="H(t) ~ sigma(t / tau)")
RHO = HParam("rho", float, 100.0, 0.0, 1e6, "slope of H^- for a negative more than delta above the "
             "positive, ROADMAP Eq. 4", slider=(1.0, 1e4),  # four decades: a log slider, 100 mid-track
             equation="H^-(t) = rho * (t - delta) + sigma(delta / tau) + 0.5 for t > delta")
DELTA = HParam("delta", float, 0.05, 0.0, 10.0, "score gap where H^- turns from the sigmoid to the "
               "line, ROADMAP Eq. 4", slider=(0.0, 0.5),
               equation="H^-(t) = sigma(t / tau) + 0.5 on [0, delta], the line of slope rho beyond")
LAM = HParam("lam", float, 0.5, 0.0, 1.0, "weight of the decomposability term, (1 - lam) L_rank + "
             "lam L_DG, ROADMAP Eq. 2", slider=(0.0, 1.0), equation="L = (1 - lam) * L_rank + lam * L_DG")
CAL_ALPHA = HParam("alpha", float, 0.9, -1.0, 1.0, "calibration threshold: a positive scoring above "
                   "it costs nothing, ROADMAP Eq. 7", slider=(-1.0, 1.0),
                   equation="L_DG = mean over positives of [alpha - s]_+ + mean over negatives of [s - beta]_+")
CAL_BETA = HParam("beta", float, 0.6, -1.0, 1.0, "calibration threshold: a negative scoring below it "
                  "costs nothing, ROADMAP Eq. 7", slider=(-1.0, 1.0),
                  equation="L_DG = mean over positives of [alpha - s]_+ + mean over negatives of [s - beta]_+")
TAU_STAR = HParam("tau_star", float, 1.0, 1e-3, 100.0, "temperature of the sigmoid on rank - k, "
                  "SupRank Eq. 16", slider=(0.01, 10.0),
                  equation="R@k ~ sum over positives p of sigma((k - rank(p)) / tau_star) / min(|P|, k)")
NUM_BINS = HParam("num_bins", int, 10, 2, 10_000, "number of histogram bins, FastAP Eq. 14 and "
                  "AP_Q's Q", slider=(2, 100),
                  equation="FastAP: num_bins + 1 bin centres over d = 2 - 2s in [0, 4], kernel width 4 / num_bins")
LAMBDA_VAL = HParam("lambda_val", float, 4.0, 1e-3, 1e4, "interpolation strength of the blackbox "
                    "backward pass, Vlastelica et al.", slider=(0.1, 100.0),
                    equation="dL/ds = -(r(s) - r(s + lambda_val * dL/dr)) / lambda_val")
MARGIN = HParam("margin", float, 0.02, 0.0, 1.0, "score margin added to the negatives, BlackBox AP",
                slider=(0.0, 0.5), equation="rank(k) of positive k computed at s_k - margin")
ETA = HParam("eta", float, 0.05, 1e-4, 10.0, "temperature of the proxy softmax of L_DG*, SupRank "
             "Eq. 8", slider=(0.01, 1.0), equation="L_DG* = -log softmax_y(cos(v, p_z) / eta)")
HAP_ALPHA = HParam("hap_alpha", float, 1.0, 0.0, 10.0, "exponent of the level weight (l / L)^alpha "
                   "of H-AP's relevance, SupRank Eq. 20 (HAPPIER_F: > 1)", slider=(0.0, 10.0),
                   equation="level weight (l / L)^hap_alpha")
