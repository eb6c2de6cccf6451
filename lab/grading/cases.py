"""The inputs of the checks: ``Case`` (one call of a student function) and the families cases are built from.

A case holds the positional arguments of the student function, in the documented order
(e.g. ``scores, targets, mask, tau, rho, delta``). Names such as ``"ties-f32-s0"`` encode
the family, the dtype and the seed, so ``get_case(topic, name)`` rebuilds the very case a
failure message names. Which families and hyper-parameters a topic uses is in its record
(:mod:`lab.grading.topics`).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Optional

import torch
from torch import Tensor

DTYPES = {"f32": torch.float32, "f64": torch.float64}


@dataclass(frozen=True)
class Case:
    """One input of a check. ``case.args`` gives fresh copies, in the student signature's order."""

    topic: str
    name: str
    description: str
    arg_names: tuple[str, ...]
    values: tuple[Any, ...] = field(repr=False)
    grad: bool = False  # gradients are compared here (float64, no ties, no kinks)
    diff_arg: int = 0  # the argument gradients are taken with respect to
    reference: Optional[Callable] = field(default=None, repr=False, compare=False)

    @property
    def args(self) -> tuple[Any, ...]:
        return tuple(v.clone() if isinstance(v, Tensor) else v for v in self.values)

    @property
    def params(self) -> dict[str, Any]:
        return {n: v for n, v in zip(self.arg_names, self.values) if not isinstance(v, Tensor)}

    def get(self, name: str) -> Any:
        return self.values[self.arg_names.index(name)]

    def summary(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{self.description}" + (f"; {params}" if params else "")

    def reproduce(self, fn_name: str) -> str:
        return (f"    from lab.grading import get_case\n"
                f"    case = get_case({self.topic!r}, {self.name!r})\n"
                f"    {fn_name}(*case.args)   # ({', '.join(self.arg_names)})\n"
                f"    case.expected()   # the reference output")

    def expected(self) -> Tensor:
        """The lab's reference output on this case."""
        return self.reference(*self.args)


class Family(NamedTuple):
    """A kind of input. ``build(g, dtype, params)`` -> (tensors, their names, description, gradients
    comparable here); ``pinned`` fixes the hyper-parameters (an index into the topic's params)."""

    name: str
    build: Callable[..., tuple[tuple, tuple[str, ...], str, bool]]
    pinned: Optional[int] = None


def _generator(seed: int, family: str, dtype: str) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(f"{seed}/{family}/{dtype}".encode()))


# ----------------------------------------------------------------------- score-level problems
def _self_retrieval(g: torch.Generator, dtype: torch.dtype, sizes: list[int], dim: int = 3):
    """A batch that retrieves from itself: targets include the diagonal, the mask removes it."""
    labels = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    centres = torch.randn(len(sizes), dim, generator=g, dtype=torch.float64)
    emb = centres[labels] + 0.8 * torch.randn(len(labels), dim, generator=g, dtype=torch.float64)
    emb = emb / emb.norm(dim=1, keepdim=True)
    scores = (emb @ emb.T).clamp(-1, 1)
    scores.fill_diagonal_(1.0)
    targets = labels[:, None] == labels[None, :]
    mask = ~torch.eye(len(labels), dtype=torch.bool)
    return scores.to(dtype), targets, mask


def _hand(g, dtype):
    # Off every kink: no score on a hinge (alpha, beta) or a bin centre, no difference equal to delta.
    scores = torch.tensor([[0.93, 0.81, 0.74, 0.62, 0.55, 0.38], [0.23, 0.71, 0.14, 0.47, 0.35, 0.64]], dtype=dtype)
    targets = torch.tensor([[1, 0, 1, 0, 0, 1], [0, 1, 0, 0, 1, 0]], dtype=torch.bool)
    return scores, targets, torch.ones_like(targets), "2 hand-made queries x 6 items, distinct scores, nothing masked"


def _self(g, dtype):
    s, t, m = _self_retrieval(g, dtype, [3, 2, 4, 1, 2])
    return s, t, m, ("self-retrieval batch of 12 (classes of 3, 2, 4, 1, 2: the single-sample class has no positive), "
                     "the query itself masked")


def _ignored(g, dtype):
    s, t, m = _self_retrieval(g, dtype, [2, 3, 2, 3])
    m &= torch.rand(m.shape, generator=g) > 0.2
    return s, t, m, "self-retrieval batch of 10 with ~20% extra items masked out (ignored), besides the query itself"


def _ties(g, dtype):
    s, t, m = _self_retrieval(g, torch.float64, [3, 3, 4, 1])
    # Values 0.05 + 0.1 k: many exact ties, and never on a hinge (alpha, beta) or a bin centre.
    s = (0.05 + 0.1 * torch.round((s - 0.05) / 0.1)).clamp(-0.95, 0.95)
    s.fill_diagonal_(1.0)
    # Query 0's best positive (item 1) tied with a negative of higher index (item 5): a sort that breaks
    # ties by position ranks the positive first; the lab puts the negative first.
    s[0, 1] = s[0, 5] = 0.95
    return s.to(dtype), t, m, "self-retrieval batch of 11 with scores rounded to 0.05 + 0.1k: many tied scores"


def _edge(g, dtype):
    scores = torch.rand(5, 8, generator=g, dtype=torch.float64) * 2 - 1
    targets = torch.rand(5, 8, generator=g) < 0.4
    mask = torch.ones(5, 8, dtype=torch.bool)
    targets[0] = False  # no positive at all
    mask[1, :] = False  # everything ignored
    targets[2] = False
    targets[2, 3] = True  # a single positive
    targets[3] = True
    targets[3, 6:] = False
    mask[3, 6:] = False  # positives only: no valid negative
    targets[4, :2] = True
    return scores.to(dtype), targets, mask, ("5 queries x 8 items: q0 without positive, q1 with every item masked, "
                                             "q2 with a single positive, q3 without negative, q4 random")


def _single(g, dtype):
    scores = torch.rand(1, 7, generator=g, dtype=torch.float64) * 2 - 1
    targets = torch.zeros(1, 7, dtype=torch.bool)
    targets[0, torch.randperm(7, generator=g)[:2]] = True
    return scores.to(dtype), targets, torch.ones_like(targets), "a single query with 2 positives among 7 items"


def _gallery(g, dtype):
    scores = torch.rand(6, 20, generator=g, dtype=torch.float64) * 2 - 1
    targets = torch.rand(6, 20, generator=g) < 0.3
    targets[:, 0] = True
    targets[5] = False  # a query without positive
    text = "6 queries against a gallery of 20 items, nothing masked, q5 without positive"
    return scores.to(dtype), targets, torch.ones_like(targets), text


def _large(g, dtype):
    s, t, m = _self_retrieval(g, dtype, [4] * 6 + [3, 1], dim=8)
    return s, t, m, "self-retrieval batch of 28 (6 classes of 4, one of 3, one of 1), the query itself masked"


def _extreme(g, dtype):
    # Off every kink of the default parameters (alpha, beta, the bin centres of num_bins = 10).
    levels = torch.tensor([0.99, 0.97, 0.93, 0.23, -0.27, -0.91, -0.95, -0.98], dtype=torch.float64)
    order = torch.stack([torch.randperm(8, generator=g) for _ in range(3)])
    scores = levels[order]
    by_level = torch.zeros(3, 8, dtype=torch.bool)  # [q, l]: is the item scored levels[l] a positive?
    by_level[0, :3] = by_level[1, 5:] = True  # q0 ranked perfectly, q1 upside down
    by_level[2, torch.randperm(8, generator=g)[:3]] = True
    targets = by_level.gather(1, order)
    return scores.to(dtype), targets, torch.ones_like(targets), (
        "3 queries x 8 items with scores near -1 and 1 (differences up to ±1.97: (s_j − s_k)/τ reaches ±197 at "
        "τ = 0.01, where exp overflows in float32); q0 ranked perfectly, q1 upside down")


def _scores(build: Callable, grad: bool = True) -> Callable:
    def family(g, dtype, params):
        scores, targets, mask, text = build(g, dtype)
        return (scores, targets, mask), ("scores", "targets", "mask"), text, grad
    return family


# Every score-level topic uses these; "extreme" always runs with the topic's first (default) parameters.
SCORE_FAMILIES: tuple[Family, ...] = (
    Family("hand", _scores(_hand)), Family("self", _scores(_self)), Family("ignored", _scores(_ignored)),
    Family("ties", _scores(_ties, grad=False)), Family("edge", _scores(_edge)), Family("single", _scores(_single)),
    Family("gallery", _scores(_gallery)), Family("large", _scores(_large)), Family("extreme", _scores(_extreme), 0))


# --------------------------------------------------------------------------- H^- arguments
def _away_from_kinks(t: Tensor, delta: float) -> Tensor:
    """Nudge values off t = 0 and t = delta, where H^- has a kink or a jump."""
    for kink in (0.0, delta):
        near = (t - kink).abs() < 2e-3
        t = torch.where(near, t + 4e-3, t)
    return t


def _grid(g, dtype, params):
    delta = params["delta"]
    t = torch.cat([torch.linspace(-0.3, 0.3, 61, dtype=torch.float64),
                   torch.tensor([0.0, delta, -delta, 2 * delta, 1.0], dtype=torch.float64)])
    return (t.to(dtype),), ("t",), "t = 61 points on [-0.3, 0.3] plus exactly 0, delta, -delta, 2 delta and 1", False


def _wide(g, dtype, params):
    t = _away_from_kinks(torch.rand(50, generator=g, dtype=torch.float64) * 4 - 2, params["delta"])
    return (t.to(dtype),), ("t",), "t = 50 random values in [-2, 2] (the linear branch reaches large values)", True


def _block(g, dtype, params):
    t = _away_from_kinks(torch.rand(3, 4, 5, generator=g, dtype=torch.float64) * 0.6 - 0.25, params["delta"])
    return (t.to(dtype),), ("t",), "t of shape (3, 4, 5) in [-0.25, 0.35], like a (query, positive, item) block", True


def _extreme_t(g, dtype, params):
    ends = torch.tensor([-2.0, -1.5, -1.0, -0.9, -0.5, 0.5, 0.9, 1.0, 1.5, 2.0], dtype=torch.float64)
    t = torch.cat([ends, _away_from_kinks(torch.rand(20, generator=g, dtype=torch.float64) * 4 - 2, params["delta"])])
    return (t.to(dtype),), ("t",), ("t = ±0.5 ... ±2 and 20 random values in [-2, 2] at the default τ = 0.01: "
                                    "t/τ reaches ±200, where exp(−t/τ) overflows in float32"), True


STEP_FAMILIES = (Family("grid", _grid), Family("wide", _wide), Family("block", _block),
                 Family("extreme", _extreme_t, 0))


# --------------------------------------------------------------------- soft-histogram arguments
def _histogram(kind: str) -> Callable:
    def family(g, dtype, params):
        q, n = 4, 9
        weights = (torch.rand(q, n, generator=g) < 0.5).double()
        if kind == "fastap":
            values = 2 - 2 * (torch.rand(q, n, generator=g, dtype=torch.float64) * 2 - 1)
            centres, width = torch.linspace(0, 4, 11, dtype=torch.float64), 0.4
            text = "squared distances in [0, 4], 11 centres 0, 0.4, ..., 4"
        elif kind == "outside":
            values = torch.rand(q, n, generator=g, dtype=torch.float64) * 6 - 1
            centres, width = torch.linspace(0, 4, 5, dtype=torch.float64), 1.0
            text = "values in [-1, 5], partly outside the 5 centres 0, 1, ..., 4"
        elif kind == "on-centre":
            values = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 2.25, 3.0, 3.75, 4.0], dtype=torch.float64).repeat(q, 1)
            centres, width = torch.linspace(0, 4, 5, dtype=torch.float64), 1.0
            text = "values exactly on bin centres and half-way between them"
        elif kind == "weights":
            values = torch.rand(q, n, generator=g, dtype=torch.float64) * 4
            weights = torch.rand(q, n, generator=g, dtype=torch.float64)
            centres, width = torch.linspace(0, 4, 9, dtype=torch.float64), 0.5
            text = "fractional weights in [0, 1], 9 centres"
        else:  # similarity space, centres from 1 down to -1 (Revaud et al.'s AP_Q)
            values = torch.rand(q, n, generator=g, dtype=torch.float64) * 2 - 1
            centres, width = torch.linspace(1, -1, 12, dtype=torch.float64), 2 / 11
            text = "similarities in [-1, 1], 12 centres from 1 down to -1"
        return ((values.to(dtype), centres.to(dtype), width, weights.to(dtype)),
                ("values", "centres", "width", "weights"), f"{q} x {n} values, {text}", kind != "on-centre")
    return family


HISTOGRAM_FAMILIES = tuple(Family(kind, _histogram(kind)) for kind in ("fastap", "outside", "on-centre", "weights",
                                                                       "similarity"))


def build_cases(topic: str, families: tuple[Family, ...], params: tuple[dict[str, Any], ...],
                reference: Callable, seed: int = 0) -> list[Case]:
    """A case per family and dtype, built deterministically from ``seed``; the parameters cycle."""
    out = []
    for i, family in enumerate(families):
        for j, (dname, dtype) in enumerate(DTYPES.items()):
            p = params[family.pinned if family.pinned is not None else (i + j + seed) % len(params)]
            tensors, names, text, grad = family.build(_generator(seed, family.name, dname), dtype, p)
            values = (*tensors, *p.values())
            shape = "x".join(map(str, values[0].shape))
            described = f"{text} [{dname.replace('f', 'float')}, shape {shape}]"
            out.append(Case(topic, f"{family.name}-{dname}-s{seed}", described,
                            (*names, *p), values, grad and dname == "f64", reference=reference))
    return out
