"""Known wrong versions of H⁻, SmoothAP, Sup-AP and the calibration loss, with the feedback each earns.

Each variant has the student signature of its topic. The checks run them on a failing case
and report the mistake whose output the student's matches (see ``CheckRunner.diagnose`` in
:mod:`lab.grading.check_runner`).
The variants are written for clarity with (Q, N, N) pair tensors: cases are small.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Callable

import torch
from torch import Tensor

from ..ranking import h_minus as ref_h_minus
from .topic import Mistake


# ------------------------------------------------------------------------------------- H^-
def _h(t, tau, rho, delta, *, jump=0.5, temp="divide", tie_left=False, linear="ok"):
    scaled = {"divide": lambda x: x / tau, "none": lambda x: x, "multiply": lambda x: x * tau}[temp]
    sig = torch.sigmoid(scaled(t))
    sig_delta = 1.0 / (1.0 + math.exp(-scaled(delta)))
    start = {"ok": sig_delta + jump, "one": 1.0 + jump, "half": jump, "sig_t": sig + jump}.get(linear, sig_delta + jump)
    slope = 1.0 if linear == "slope_one" else rho
    lin = slope * ((t if linear == "from0" else t - delta).clamp_min(0)) + start
    if linear == "none":
        lin = sig + jump
    left = t <= 0 if tie_left else t < 0
    return torch.where(left, sig, torch.where(t <= delta, sig + jump, lin))


H_MINUS = [
    Mistake("h_no_jump", "H⁻ must jump by +0.5 at t = 0: on [0, δ] it is σ(t/τ) + 0.5 (ROADMAP Eq. 4). Without "
            "the jump H⁻ < H (the Heaviside) just right of 0, and Sup-AP no longer upper-bounds 1 − AP.",
            partial(_h, jump=0.0)),
    Mistake("h_sigmoid", "you return the plain sigmoid σ(t/τ) everywhere: that is SmoothAP's surrogate. H⁻ adds 0.5 "
            "on [0, δ] and continues linearly with slope ρ beyond δ (ROADMAP Eq. 4).",
            lambda t, tau, rho, delta: torch.sigmoid(t / tau)),
    Mistake("h_no_temperature", "you forgot the temperature: use σ(t/τ), not σ(t) (also in σ(δ/τ)).",
            partial(_h, temp="none")),
    Mistake("h_tau_multiplied", "you multiplied by the temperature: the sigmoid's argument is t/τ, not t·τ (also in "
            "σ(δ/τ)). With τ = 0.01, t/τ makes the sigmoid steep; t·τ makes it almost flat at 0.5.",
            partial(_h, temp="multiply")),
    Mistake("h_slope_one", "beyond δ the slope of H⁻ is ρ: ρ(t − δ) + σ(δ/τ) + 0.5. Yours has slope 1 (ρ is missing), "
            "so a negative ranked far above a positive gets ρ times less gradient than Sup-AP gives it.",
            partial(_h, linear="slope_one")),
    Mistake("h_no_linear_branch", "H⁻ is not σ(t/τ) + 0.5 for every t ≥ 0: beyond δ it continues linearly, "
            "ρ(t − δ) + σ(δ/τ) + 0.5 (ROADMAP Eq. 4). Without that branch a negative ranked far above a positive gets "
            "no gradient (the sigmoid is flat there).", partial(_h, linear="none")),
    Mistake("h_delta_ignored", "you ignored δ: H⁻ is σ(t/τ) + 0.5 on [0, δ] and the linear branch starts at t = δ, "
            "ρ(t − δ) + σ(δ/τ) + 0.5. Yours starts at t = 0 (as if δ = 0).",
            lambda t, tau, rho, delta: _h(t, tau, rho, 0.0)),
    Mistake("h_tie_left", "a tie (t = 0 exactly) must use the branch σ(t/τ) + 0.5, since H(0) = 1: use the plain "
            "sigmoid only for t < 0 (strictly).", partial(_h, tie_left=True)),
    Mistake("h_linear_start_one", "the linear branch must start where the middle branch ends: ρ(t − δ) + σ(δ/τ) + 0.5, "
            "not ρ(t − δ) + 1.5 (σ(δ/τ) is not 1 unless δ ≫ τ).", partial(_h, linear="one")),
    Mistake("h_linear_start_half", "the linear branch must start where the middle branch ends: "
            "ρ(t − δ) + σ(δ/τ) + 0.5; you dropped σ(δ/τ), so H⁻ jumps down at t = δ.", partial(_h, linear="half")),
    Mistake("h_linear_sig_t", "beyond δ use the constant σ(δ/τ) + 0.5 plus ρ(t − δ); you used σ(t/τ), which keeps "
            "changing with t.", partial(_h, linear="sig_t")),
    Mistake("h_linear_from_zero", "the linear branch is ρ(t − δ) + σ(δ/τ) + 0.5: you used ρ·t, so H⁻ jumps up by ρδ "
            "at t = δ.", partial(_h, linear="from0")),
    Mistake("h_step", "you return the exact step H(t): it has no gradient. H⁻ is the smooth surrogate of "
            "ROADMAP Eq. 4.", lambda t, tau, rho, delta: (t >= 0).to(t.dtype)),
    Mistake("h_reversed", "H⁻ is evaluated at −t: check the sign — H⁻(t) grows with t = s_j − s_k.",
            lambda t, tau, rho, delta: ref_h_minus(-t, tau, rho, delta)),
]


# ------------------------------------------------------------------- AP-shaped surrogates
def _sigmoid(tau):
    return lambda d: torch.sigmoid(d / tau)


def _step(d):
    return (d >= 0).to(d.dtype)


def _strict_step(d):
    return (d > 0).to(d.dtype)


def ap_loss(scores, targets, mask, step_pos, step_neg, *, mask_pos=True, mask_neg=True, self_pos=1.0,
            include_k=False, neg_all=False, reversed_=False, zero_empty=True, norm="pos", as_ap=False,
            rank_one=True) -> Tensor:
    """1 - mean over positives k of rank+(k) / rank(k), rank = rank+ + rank-, configurable the wrong ways."""
    pos = targets & mask if mask_pos else targets.clone()
    neg = ~targets & mask if mask_neg else ~targets
    diff = scores[:, None, :] - scores[:, :, None]  # [q, k, j] = s_j - s_k
    if reversed_:
        diff = -diff
    others = pos[:, None, :].expand_as(diff)
    if not include_k:
        others = others & ~torch.eye(scores.shape[1], dtype=torch.bool)
    above_pos = (step_pos(diff) * others).sum(-1)
    rank_pos = self_pos + above_pos
    neg_items = (neg | pos) if neg_all else neg
    rank_neg = (step_neg(diff) * neg_items[:, None, :]).sum(-1)
    rank = rank_pos + rank_neg if rank_one else above_pos + rank_neg  # the 1 of rank(k) is k itself
    prec = torch.where(pos, rank_pos / rank, torch.zeros_like(rank_pos))
    denom = {"pos": pos.sum(1), "items": (pos | neg).sum(1), "sum": torch.ones_like(pos.sum(1))}[norm]
    ap = prec.sum(1) / denom.to(scores.dtype)
    out = ap if as_ap else 1 - ap
    return torch.where(pos.any(1), out, torch.zeros_like(out)) if zero_empty else out


_COMMON_AP = {  # mistakes shared by SmoothAP and Sup-AP: (key, message, ap_loss options)
    "forgot_mask": ("you forgot the mask: items with mask = False (the query itself, ignored items) must be left "
                    "out of every count, positives and negatives alike.", dict(mask_pos=False, mask_neg=False)),
    "query_as_positive": ("your loss counts the query as its own positive: positives are `targets & mask`. The mask "
                          "removes the query (and ignored items) from the positives too, not only from the negatives.",
                          dict(mask_pos=False)),
    "nan_no_positive": ("the loss is NaN when a query has no positive (0 / 0 when averaging over its positives): "
                        "return 0 for such a query (the lab's convention for reduction='none').",
                        dict(zero_empty=False)),
    "returns_ap": ("you return the AP, not the loss: return 1 − AP per query (the loss to minimise).",
                   dict(as_ap=True)),
    "norm_items": ("wrong normalisation: average the per-positive precisions over the positives of the query "
                   "(|P|), not over all its items.", dict(norm="items")),
    "norm_sum": ("wrong normalisation: you sum the per-positive precisions; AP is their mean over the positives.",
                 dict(norm="sum")),
    "neg_all": ("rank⁻ must sum over the negatives only; you also summed over the positives "
                "(they are in rank⁺ already).", dict(neg_all=True)),
    "rank_no_self": ("your ranks are off by one: rank⁺(k) = 1 + #other positives above k — the 1 is k itself, which "
                     "you left out (ROADMAP Eq. 1).", dict(self_pos=0.0)),
    "rank_without_one": ("your rank(k) lacks its 1: rank(k) = 1 + Σ_{j ≠ k} over every valid item (the 1 is k "
                         "itself). Your rank⁺(k) has it, your rank(k) does not, so the precision rank⁺/rank exceeds 1 "
                         "when k is ranked first.", dict(rank_one=False)),
}


def _with_common(build: Callable[..., Callable], skip: tuple[str, ...] = ()) -> list[Mistake]:
    return [Mistake(k, msg, build(**opts)) for k, (msg, opts) in _COMMON_AP.items() if k not in skip]


def _smooth(**opts):
    def fn(scores, targets, mask, tau):
        return ap_loss(scores, targets, mask, _sigmoid(tau), _sigmoid(tau), **opts)
    return fn


def _smooth_with(step_pos=None, step_neg=None, **opts):
    def fn(scores, targets, mask, tau):
        return ap_loss(scores, targets, mask, (step_pos or _sigmoid)(tau), (step_neg or _sigmoid)(tau), **opts)
    return fn


SMOOTH_AP = _with_common(_smooth) + [
    Mistake("no_temperature", "you forgot the temperature: SmoothAP uses σ((s_j − s_k)/τ), not σ(s_j − s_k).",
            _smooth_with(step_pos=lambda tau: torch.sigmoid, step_neg=lambda tau: torch.sigmoid)),
    Mistake("tau_multiplied", "you multiplied by the temperature: SmoothAP uses σ((s_j − s_k)/τ), "
            "not σ((s_j − s_k)·τ). "
            "With τ = 0.01 the division makes the sigmoid steep, close to the step; the product makes it flat.",
            _smooth_with(step_pos=lambda tau: lambda d: torch.sigmoid(d * tau),
                         step_neg=lambda tau: lambda d: torch.sigmoid(d * tau))),
    Mistake("reversed", "your comparison is reversed: rank(k) counts the items scored ABOVE k, i.e. σ((s_j − s_k)/τ) "
            "with s_j the other item.", _smooth(reversed_=True)),
    Mistake("rank_includes_k", "your ranks are off by one half: rank(k) = 1 + Σ_{j≠k} σ(...). Summing over every j "
            "also adds σ(0) = 0.5 for k itself, on top of the 1.", _smooth(include_k=True)),
    Mistake("exact_rank_pos", "you used the exact step for rank⁺: SmoothAP uses the sigmoid for every comparison. "
            "(Exact rank⁺ is the intermediate loss of ROADMAP supp. Fig. 8a — and the Sup-AP exercise.)",
            _smooth_with(step_pos=lambda tau: _step)),
]


def _sup(step_pos="step", step_neg="h", **opts):
    """Sup-AP with rank+ built on ``step_pos`` and rank- on ``step_neg`` (a name or a wrong H^-)."""
    def fn(scores, targets, mask, tau, rho, delta):
        steps = {"step": _step, "strict": _strict_step, "sigmoid": _sigmoid(tau),
                 "h": lambda d: ref_h_minus(d, tau, rho, delta)}
        neg = steps[step_neg] if isinstance(step_neg, str) else (lambda d: step_neg(d, tau, rho, delta))
        return ap_loss(scores, targets, mask, steps[step_pos], neg, **opts)
    return fn


SUP_AP = _with_common(_sup) + [
    Mistake("sigmoid_rank_pos", "rank⁺ should use the exact step H(s_j − s_k) = [s_j ≥ s_k], not the sigmoid "
            "(ROADMAP Eq. 5): a smooth rank⁺ gives positives gradients that push them down (supp. A.1).",
            _sup(step_pos="sigmoid")),
    Mistake("h_rank_pos", "rank⁺ should use the exact step H, not H⁻: H⁻ is for rank⁻ (the negatives) only.",
            _sup(step_pos="h")),
    Mistake("strict_rank_pos", "a positive tied with k counts as ranked above it (H(0) = 1): use s_j ≥ s_k in rank⁺, "
            "not s_j > s_k.", _sup(step_pos="strict")),
    Mistake("sigmoid_rank_neg", "rank⁻ must use H⁻ (ROADMAP Eq. 4), not the plain sigmoid: the sigmoid's gradient "
            "vanishes for a negative ranked well above a positive.", _sup(step_neg="sigmoid")),
    Mistake("step_rank_neg", "rank⁻ must use H⁻ (ROADMAP Eq. 4), not the exact step H: with H the loss is piecewise "
            "constant in the negatives' scores and gives them no gradient. Only rank⁺ uses the exact step.",
            _sup(step_neg="step")),
    Mistake("rank_pos_twice", "your ranks are off by one: rank⁺(k) = 1 + #(other positives j ≠ k with s_j ≥ s_k). "
            "Summing H over every positive already counts k itself (H(0) = 1); adding 1 counts it twice.",
            _sup(include_k=True)),
    Mistake("reversed", "your comparisons are reversed: rank(k) counts the items scored ABOVE k, H(s_j − s_k) with "
            "s_j the other item.", _sup(reversed_=True)),
] + [Mistake(f"sup_{m.key}", f"rank⁻ uses a wrong H⁻ — {m.message} Fix h_minus first: check_h_minus(h_minus) "
             "pinpoints it.", _sup(step_neg=m.fn)) for m in H_MINUS if m.key not in ("h_step", "h_sigmoid")]


# ---------------------------------------------------------------------------- calibration
def calibration_loss(scores, targets, mask, alpha, beta, *, mask_pos=True, mask_neg=True, swap=False, hinge="ok",
                     norm="mean", zero_empty=True, nan_no_neg=False, terms="both") -> Tensor:
    if swap:
        alpha, beta = beta, alpha
    pos = (targets & mask if mask_pos else targets).to(scores.dtype)
    neg = (~targets & mask if mask_neg else ~targets).to(scores.dtype)
    up, down = alpha - scores, scores - beta
    if hinge in ("sign", "sign_pos"):
        up = -up
    if hinge in ("sign", "sign_neg"):
        down = -down
    if hinge != "none":
        up, down = up.clamp_min(0), down.clamp_min(0)
    if norm == "sum":
        total = (up * pos).sum(1) * (terms != "neg") + (down * neg).sum(1) * (terms != "pos")
    elif norm == "items":
        total = ((up * pos).sum(1) + (down * neg).sum(1)) / (pos + neg).sum(1).clamp_min(1)
    else:
        neg_count = neg.sum(1) if nan_no_neg else neg.sum(1).clamp_min(1)
        total = (up * pos).sum(1) / pos.sum(1).clamp_min(1) * (terms != "neg") + \
            (down * neg).sum(1) / neg_count * (terms != "pos")
    return torch.where(pos.sum(1) > 0, total, torch.zeros_like(total)) if zero_empty else total


def _cal(**opts):
    return lambda scores, targets, mask, alpha, beta: calibration_loss(scores, targets, mask, alpha, beta, **opts)


CALIBRATION = [
    Mistake("forgot_mask", "you forgot the mask: items with mask = False (the query itself, ignored items) must not "
            "enter either term.", _cal(mask_pos=False, mask_neg=False)),
    Mistake("query_as_positive", "your loss counts the query as its own positive: positives are `targets & mask`, so "
            "the mask must be applied to the positive term too.", _cal(mask_pos=False)),
    Mistake("swapped", "alpha and beta are swapped: positives are pushed above α, negatives below β (α > β), "
            "ROADMAP Eq. 7.", _cal(swap=True)),
    Mistake("no_hinge", "[x]₊ is a hinge: clamp each term at 0 (max(0, α − s) and max(0, s − β)). Without it, "
            "positives far above α lower the loss and compensate violations.", _cal(hinge="none")),
    Mistake("hinge_sign", "the hinges point the wrong way: positives pay [α − s]₊ (penalised when BELOW α), "
            "negatives pay [s − β]₊ (penalised when ABOVE β).", _cal(hinge="sign")),
    Mistake("hinge_sign_pos", "the positives' hinge points the wrong way: a positive pays [α − s]₊, penalised when its "
            "score is BELOW α; you wrote [s − α]₊, which penalises positives scored high.", _cal(hinge="sign_pos")),
    Mistake("hinge_sign_neg", "the negatives' hinge points the wrong way: a negative pays [s − β]₊, penalised when its "
            "score is ABOVE β; you wrote [β − s]₊, which penalises negatives scored low.", _cal(hinge="sign_neg")),
    Mistake("sum_not_mean", "wrong normalisation: ROADMAP Eq. 7 averages — mean of [α − s]₊ over the positives plus "
            "mean of [s − β]₊ over the negatives, not sums.", _cal(norm="sum")),
    Mistake("one_mean", "wrong normalisation: average the positive term over the positives and the negative term "
            "over the negatives separately, not both over all items.", _cal(norm="items")),
    Mistake("nan_no_negative", "the loss is NaN when a query has no negative (0 / 0): that query gets only the "
            "positive term.", _cal(nan_no_neg=True)),
    Mistake("nonzero_no_positive", "a query without positive must get loss 0 (the lab's convention: it is left out "
            "of the mean); yours still counts its negative term.", _cal(zero_empty=False)),
    Mistake("pos_term_only", "you only have the positive term: add the mean of [s − β]₊ over the negatives.",
            _cal(terms="pos")),
    Mistake("neg_term_only", "you only have the negative term: add the mean of [α − s]₊ over the positives.",
            _cal(terms="neg")),
]
