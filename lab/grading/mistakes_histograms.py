"""Known wrong versions of soft histogram binning and FastAP, with the feedback each one earns."""
from __future__ import annotations

import torch
from torch import Tensor

from .topic import Mistake


def soft_hist(values, centres, width, weights, *, kernel="ok", weighting="ok", normalise=False) -> Tensor:
    d = values[..., None] - centres
    if kernel == "hard":
        k = torch.nn.functional.one_hot(d.abs().argmin(-1), len(centres)).to(values.dtype)
    else:
        span = {"ok": width, "double": 2 * width, "half": width / 2}.get(kernel, width)
        k = 1 - (d if kernel == "no_abs" else d.abs()) / span
        k = k if kernel == "no_clamp" else k.clamp_min(0)
    w = {"ok": weights, "ignored": torch.ones_like(weights), "mask": (weights > 0).to(values.dtype)}[weighting]
    h = (k * w.to(values.dtype)[..., None]).sum(-2)
    return h / h.sum(-1, keepdim=True).clamp_min(1e-12) if normalise else h


def _hist(**opts):
    return lambda values, centres, width, weights: soft_hist(values, centres, width, weights, **opts)


SOFT_HISTOGRAM = [
    Mistake("no_clamp", "the triangular kernel is max(0, 1 − |v − c|/Δ): clamp it at 0, or far-away values add "
            "negative counts to every bin (FastAP supp. Eq. 23).", _hist(kernel="no_clamp")),
    Mistake("no_abs", "the kernel depends on the distance |v − c| to the centre: you forgot the absolute value.",
            _hist(kernel="no_abs")),
    Mistake("width_double", "the kernel's half-width is Δ = width itself (support [c − Δ, c + Δ]), so each value "
            "splits a total of 1 between its two nearest bins; you divided by 2Δ.", _hist(kernel="double")),
    Mistake("width_half", "the kernel's half-width is Δ = width itself; you divided by Δ/2, so a value half-way "
            "between two centres counts for nothing.", _hist(kernel="half")),
    Mistake("ignores_weights", "you forgot the weights: each value contributes weight × kernel (weights select the "
            "positives for h⁺, the valid items for h).", _hist(weighting="ignored")),
    Mistake("weights_as_mask", "multiply the kernel by the weight itself; you used the weights only as a mask "
            "(w > 0), which is wrong for fractional weights.", _hist(weighting="mask")),
    Mistake("hard", "that is hard binning (each value counted in its nearest bin): it has no gradient. Use the "
            "triangular kernel, which splits each value between its two nearest bins.", _hist(kernel="hard")),
    Mistake("normalised", "return counts, not a normalised histogram: FastAP's h_j are (soft) numbers of items.",
            _hist(normalise=True)),
]


def fast_ap_loss(scores, targets, mask, num_bins, *, mask_pos=True, mask_neg=True, values="sq", centres="ok",
                 far_first=False, exclusive=False, empty="clamp", zero_empty=True, norm="pos", as_ap=False,
                 hist=soft_hist, valid_is_mask=False) -> Tensor:
    pos = (targets & mask if mask_pos else targets)
    valid = mask if valid_is_mask else pos | (~targets & mask if mask_neg else ~targets)
    v = {"sq": 2 - 2 * scores, "raw": scores, "one_minus": 1 - scores}[values]
    if centres == "L":  # num_bins centres spanning [0, 4]
        c, width = torch.linspace(0, 4, num_bins, dtype=scores.dtype), 4 / (num_bins - 1)
    elif centres == "L_width":  # num_bins centres spanning [0, 4], but the spacing of num_bins + 1
        c, width = torch.linspace(0, 4, num_bins, dtype=scores.dtype), 4 / num_bins
    elif centres == "arange":  # num_bins centres 0, 4/num_bins, ..., 4 - 4/num_bins: the last one missing
        c, width = torch.arange(num_bins, dtype=scores.dtype) * (4 / num_bins), 4 / num_bins
    else:
        c, width = torch.linspace(0, 4, num_bins + 1, dtype=scores.dtype), 4 / num_bins
    if far_first:
        c = c.flip(0)
    h_pos = hist(v, c, width, pos.to(scores.dtype))
    h_all = hist(v, c, width, valid.to(scores.dtype))
    cum_pos, cum_all = h_pos.cumsum(-1), h_all.cumsum(-1)
    if exclusive:
        cum_pos, cum_all = cum_pos - h_pos, cum_all - h_all
    # An empty prefix (H_j <= 0) handled by a clamp, by torch.where, or not at all (0 / 0 = NaN).
    if empty == "where":
        terms = torch.where(cum_all > 0, cum_pos * h_pos / cum_all.clamp_min(1e-12), torch.zeros_like(cum_all))
    else:
        terms = cum_pos * h_pos / (cum_all.clamp_min(1e-12) if empty == "clamp" else cum_all)
    count = {"pos": pos.sum(1), "items": valid.sum(1), "none": torch.ones_like(pos.sum(1))}[norm].to(scores.dtype)
    ap = terms.sum(-1) / (count.clamp_min(1) if zero_empty else count)
    out = ap if as_ap else 1 - ap
    return torch.where(pos.any(1), out, torch.zeros_like(out)) if zero_empty else out


def _fast(**opts):
    return lambda scores, targets, mask, num_bins: fast_ap_loss(scores, targets, mask, num_bins, **opts)


FAST_AP = [
    Mistake("forgot_mask", "you forgot the mask: items with mask = False (the query itself, ignored items) must be "
            "left out of both histograms.", _fast(mask_pos=False, mask_neg=False)),
    Mistake("query_as_positive", "your FastAP counts the query as its own positive: the positive histogram h⁺ uses "
            "`targets & mask`.", _fast(mask_pos=False)),
    Mistake("query_as_positive_h", "your FastAP counts the query as its own positive: the positive histogram h⁺ uses "
            "`targets & mask`.", _fast(mask_pos=False, valid_is_mask=True)),
    Mistake("raw_scores", "bin the squared distance d = 2 − 2s of unit vectors (in [0, 4]), not the similarity s "
            "itself (FastAP supp. C.1).", _fast(values="raw")),
    Mistake("one_minus", "bin the squared Euclidean distance of unit vectors, d = ‖x − y‖² = 2 − 2s, not 1 − s.",
            _fast(values="one_minus")),
] + [
    Mistake(f"num_bins_centres_{layout}", "the lab's convention: num_bins intervals of width 4/num_bins, i.e. "
            "num_bins + 1 centres 0, 4/num_bins, ..., 4 (torch.linspace(0, 4, num_bins + 1)); "
            "you used num_bins centres.",
            _fast(centres=layout)) for layout in ("L", "L_width", "arange")
] + [
    Mistake("no_normalisation", "FastAP = (1/N⁺) Σ_j H⁺_j h⁺_j / H_j: you forgot the 1/N⁺ — divide the sum by the "
            "number of positives N⁺ of the query (Eq. 14), which makes FastAP ≤ 1.", _fast(norm="none")),
    Mistake("far_first", "the cumulative sums H_j, H⁺_j run from the closest bin (distance 0) outward; yours start "
            "from the farthest bin.", _fast(far_first=True)),
    Mistake("exclusive_cumsum", "H_j = Σ_{k ≤ j} h_k includes bin j itself; your cumulative sums stop one bin early.",
            _fast(exclusive=True)),
    Mistake("nan_empty_prefix", "your FastAP is NaN when the first bins are empty (H_j = 0 gives 0/0): such a "
            "term is 0 — clamp H_j (e.g. .clamp_min(1e-12)) or skip empty prefixes.", _fast(empty="none")),
    Mistake("nan_no_positive", "the loss is NaN when a query has no positive (division by N⁺ = 0): return 0 "
            "for such a query.", _fast(zero_empty=False)),
    Mistake("norm_items", "wrong normalisation: FastAP = (1/N⁺) Σ_j H⁺_j h⁺_j / H_j divides by the number of "
            "positives N⁺, not by the number of items (Eq. 14).", _fast(norm="items")),
    Mistake("returns_ap", "you return FastAP, not the loss: return 1 − FastAP per query.", _fast(as_ap=True)),
] + [Mistake(f"fast_{m.key}_{empty}", f"your histograms are wrong — {m.message} Fix soft_histogram first: "
             "check_soft_histogram(soft_histogram) pinpoints it.", _fast(hist=m.fn, empty=empty))
     for m in SOFT_HISTOGRAM
     if m.key in ("no_clamp", "no_abs", "width_double", "width_half", "ignores_weights", "normalised")
     for empty in ("clamp", "where")]  # a broken histogram can make H_j < 0: both guards are common
