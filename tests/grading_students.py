"""Student-style implementations, right and wrong, for tests/test_grading.py.

Written the way a student would (a Python loop over queries, boolean indexing, argsort),
independently of lab/grading/mistakes_*.py, so the tests show that the diagnosis
recognises mistakes in code it has never seen. ``bug=None`` is a correct implementation.
"""
from __future__ import annotations

import math

import torch

NAN = float("nan")


def h_minus(t, tau, rho, delta, bug=None):
    if bug == "no_temperature":
        sig, sig_d = torch.sigmoid(t), 1 / (1 + math.exp(-delta))
    elif bug == "tau_multiplied":
        sig, sig_d = torch.sigmoid(t * tau), 1 / (1 + math.exp(-delta * tau))
    elif bug == "manual_sigmoid":  # overflows in float32 for t/tau < -88
        sig, sig_d = 1 / (1 + torch.exp(-t / tau)), 1 / (1 + math.exp(-delta / tau))
    else:
        sig, sig_d = torch.sigmoid(t / tau), 1 / (1 + math.exp(-delta / tau))
    jump = 0.0 if bug == "no_jump" else 0.5
    lin = rho * (t - delta) + sig_d + jump
    if bug == "linear_one":
        lin = rho * (t - delta) + 1.5
    if bug == "linear_from_zero":
        lin = rho * t + sig_d + jump
    if bug == "slope_one":
        lin = (t - delta) + sig_d + jump
    if bug == "sigmoid":
        out = sig
    elif bug == "step":
        out = (t >= 0).to(t.dtype)
    elif bug == "delta_ignored":  # sigma(0) + 0.5 = 1 where the linear branch starts
        out = torch.where(t < 0, sig, rho * t + 1.0)
    elif bug == "no_linear":
        out = torch.where(t < 0, sig, sig + 0.5)
    else:
        left = (t <= 0) if bug == "tie_left" else (t < 0)
        out = torch.where(left, sig, torch.where(t <= delta, sig + jump, lin))
    if bug == "detached":
        out = out.detach()
    if bug == "numpy":
        return out.detach().numpy()
    if bug == "float64":
        return out.double()
    return out


def _surrogate_ap(scores, targets, mask, pos_step, neg_step, bug=None):
    """1 - mean_k rank+(k) / (rank+(k) + rank-(k)), one query at a time."""
    losses = []
    for q in range(scores.shape[0]):
        s, t, m = scores[q], targets[q], mask[q]
        pos = t if bug in ("query_as_positive", "forgot_mask") else t & m
        neg = ~t if bug == "forgot_mask" else ~t & m
        if bug == "neg_all":
            neg = neg | pos
        if pos.sum() == 0 and bug != "nan_no_positive":
            losses.append(s.sum() * 0)
            continue
        precisions = []
        for k in torch.nonzero(pos).flatten():
            others = pos.clone()
            others[k] = False
            start = 0.0 if bug == "off_by_one" else 1.0
            rank_pos = start + pos_step(s[others] - s[k]).sum()
            rank_neg = neg_step(s[neg] - s[k]).sum()
            if bug == "rank_without_one":  # rank(k) = sum over the other valid items, without the 1
                rank = pos_step(s[others] - s[k]).sum() + rank_neg
                precisions.append(rank_pos / rank)
                continue
            precisions.append(rank_pos / (rank_pos + rank_neg))
        total = torch.stack(precisions).sum() if precisions else s.sum() * 0
        ap = total / (m.sum() if bug == "divide_by_n" else pos.sum())
        losses.append(ap if bug == "returns_ap" else 1 - ap)
    out = torch.stack(losses)
    return out.mean() if bug == "mean" else out


def _in_float32(fn):
    """The student computes in float32 (scores.float()) and casts the result back."""
    def run(scores, *args, **kwargs):
        return fn(scores.float(), *args, **kwargs).to(scores.dtype)
    return run


def smooth_ap(scores, targets, mask, tau, bug=None):
    if bug == "float32":
        return _in_float32(smooth_ap)(scores, targets, mask, tau)
    if bug == "no_temperature":
        sig = lambda d: torch.sigmoid(d)  # noqa: E731
    elif bug == "tau_multiplied":
        sig = lambda d: torch.sigmoid(d * tau)  # noqa: E731
    else:
        sig = lambda d: torch.sigmoid(d / tau)  # noqa: E731
    pos_step = (lambda d: (d >= 0).to(d.dtype)) if bug == "exact_rank_pos" else sig
    return _surrogate_ap(scores, targets, mask, pos_step, sig, bug)


def sup_ap(scores, targets, mask, tau, rho, delta, bug=None, h_bug=None):
    if bug == "float32":
        return _in_float32(sup_ap)(scores, targets, mask, tau, rho, delta)
    exact = (lambda d: (d > 0).to(d.dtype)) if bug == "strict" else (lambda d: (d >= 0).to(d.dtype))
    pos_step = (lambda d: torch.sigmoid(d / tau)) if bug == "sigmoid_rank_pos" else exact
    if bug == "sigmoid_rank_neg":
        neg_step = lambda d: torch.sigmoid(d / tau)  # noqa: E731
    elif bug == "step_rank_neg":
        neg_step = exact
    else:
        neg_step = lambda d: h_minus(d, tau, rho, delta, bug=h_bug)  # noqa: E731
    if bug == "detached":
        return _surrogate_ap(scores.detach(), targets, mask, pos_step, neg_step)
    if bug == "float":
        return float(_surrogate_ap(scores, targets, mask, pos_step, neg_step).mean())
    if bug == "crash":
        raise ValueError("shapes do not match")
    if bug == "where_nan_grad":
        pos = (targets & mask).to(scores.dtype)
        diff = scores[:, None, :] - scores[:, :, None]
        rank_pos = ((diff >= 0).to(scores.dtype) * pos[:, None, :]).sum(-1)
        rank_neg = (h_minus(diff, tau, rho, delta) * (~targets & mask)[:, None, :]).sum(-1)
        prec = torch.where(pos > 0, rank_pos / (rank_pos + rank_neg), torch.zeros_like(rank_neg))
        ap = prec.sum(1) / pos.sum(1)  # 0 / 0 for a query without positive
        return torch.where(pos.sum(1) > 0, 1 - ap, torch.zeros_like(ap))
    return _surrogate_ap(scores, targets, mask, pos_step, neg_step, bug)


def calibration(scores, targets, mask, alpha, beta, bug=None):
    if bug == "swapped":
        alpha, beta = beta, alpha
    out = []
    for q in range(scores.shape[0]):
        s, t, m = scores[q], targets[q], mask[q]
        pos_s = s[t] if bug in ("query_as_positive", "forgot_mask") else s[t & m]
        neg_s = s[~t] if bug == "forgot_mask" else s[~t & m]
        hinge = (lambda x: x) if bug == "no_hinge" else torch.relu
        if len(pos_s) == 0 and bug != "nonzero_no_positive":
            out.append(s.sum() * 0)
            continue
        reduce = torch.sum if bug == "sum" else torch.mean
        up = pos_s - alpha if bug == "hinge_sign_pos" else alpha - pos_s
        down = beta - neg_s if bug == "hinge_sign_neg" else neg_s - beta
        loss = reduce(hinge(up)) if len(pos_s) else s.sum() * 0
        if len(neg_s) or bug == "nan_no_negative":
            loss = loss + reduce(hinge(down))
        out.append(loss)
    return torch.stack(out)


def soft_histogram(values, centres, width, weights, bug=None):
    rows = []
    for q in range(values.shape[0]):
        d = values[q][:, None] - centres[None, :]  # (N, L)
        if bug == "width_double":
            k = torch.relu(1 - d.abs() / (2 * width))
        elif bug == "no_clamp":
            k = 1 - d.abs() / width
        elif bug == "hard":
            k = torch.zeros_like(d)
            k[torch.arange(len(d)), d.abs().argmin(1)] = 1.0
        else:
            k = torch.relu(1 - d.abs() / width)
        w = torch.ones_like(weights[q]) if bug == "ignores_weights" else weights[q]
        rows.append((w[:, None] * k).sum(0))
    out = torch.stack(rows)
    return out.T if bug == "transposed" else out


def fast_ap(scores, targets, mask, num_bins, bug=None, hist_bug=None):
    if bug == "float32":
        return _in_float32(fast_ap)(scores, targets, mask, num_bins)
    centres = torch.linspace(0, 4, num_bins if bug == "num_bins_centres" else num_bins + 1, dtype=scores.dtype)
    width = float(centres[1] - centres[0])
    if bug == "num_bins_step":  # num_bins centres, every 4 / num_bins from 0
        width = 4 / num_bins
        centres = width * torch.arange(num_bins, dtype=scores.dtype)
    if bug == "far_first":
        centres = centres.flip(0)
    dist = scores if bug == "raw_scores" else 2 - 2 * scores
    pos = (targets if bug == "query_as_positive" else targets & mask).to(scores.dtype)
    h_pos = soft_histogram(dist, centres, width, pos, bug=hist_bug)
    h = soft_histogram(dist, centres, width, mask.to(scores.dtype), bug=hist_bug)
    cum_pos, cum = torch.cumsum(h_pos, 1), torch.cumsum(h, 1)
    if bug == "nan_empty_prefix":
        terms = cum_pos * h_pos / cum
    else:
        terms = torch.where(cum > 0, cum_pos * h_pos / cum.clamp_min(1e-9), torch.zeros_like(cum))
    n = mask.sum(1).to(scores.dtype) if bug == "divide_by_n" else pos.sum(1)
    ap = terms.sum(1) if bug == "no_norm" else terms.sum(1) / n.clamp_min(1)
    return torch.where(pos.sum(1) > 0, 1 - ap, torch.zeros_like(ap))


def _ranked_flags(s, t, m, bug):
    """Relevance flags of the query's valid items in ranked order, via argsort (ties by sort order)."""
    keep = m | t if bug == "query_as_positive" else (torch.ones_like(m) if bug == "forgot_mask" else m)
    order = torch.argsort(s[keep], descending=True, stable=True)
    return t[keep][order].to(s.dtype)


def _pessimistic_flags(s, t, m, bug):
    """Ranks by comparisons, ties pessimistic: rank(i) = #valid j with s_j >= s_i."""
    keep = m | t if bug == "query_as_positive" else (torch.ones_like(m) if bug == "forgot_mask" else m)
    s, t = s[keep], t[keep]
    rank = (s[None, :] >= s[:, None]).sum(1).to(s.dtype)
    rank_pos = ((s[None, :] >= s[:, None]) & t[None, :]).sum(1).to(s.dtype)
    return rank, rank_pos, t


def average_precision(scores, targets, mask, bug=None):
    if bug == "inplace":
        scores[~mask] = -2.0  # "push masked items to the bottom" -- in the caller's tensor
        mask = torch.ones_like(mask)
    out = []
    for q in range(scores.shape[0]):
        s, t, m = scores[q], targets[q], mask[q]
        if bug == "argsort":
            rel = _ranked_flags(s, t, m, bug)
            rank = torch.arange(1, len(rel) + 1, dtype=s.dtype)
            prec, rel_b = rel.cumsum(0) / rank, rel.bool()
        else:
            rank, rank_pos, rel_b = _pessimistic_flags(s, t, m, bug)
            if bug == "no_one":  # counts the items above k, k excluded: 0 / 0 for the first positive
                rank, rank_pos = rank - 1, rank_pos - 1
            prec = rank_pos / (rank - 1 if bug == "zero_based" else rank)
        n_pos = rel_b.sum()
        if n_pos == 0:
            out.append(torch.tensor(0.0 if bug == "zero_no_positive" else NAN, dtype=s.dtype))
            continue
        if bug == "first_positive":  # stops at the best-ranked positive
            out.append(prec[rel_b][rank[rel_b].argmin()])
            continue
        ap = prec[rel_b].sum() / (len(rel_b) if bug == "divide_by_n" else n_pos)
        out.append(1 - ap if bug == "returns_loss" else ap)
    return torch.stack(out)


def map_at_r(scores, targets, mask, bug=None):
    out = []
    for q in range(scores.shape[0]):
        rank, rank_pos, rel = _pessimistic_flags(scores[q], targets[q], mask[q], bug)
        r = int(rel.sum())
        if r == 0:
            out.append(torch.tensor(NAN, dtype=scores.dtype))
            continue
        cut = r + 1 if bug == "cutoff_plus_one" else r
        in_top = rel & (rank <= (len(rank) if bug == "full_ap" else cut))
        total = (rank_pos / rank)[in_top].sum()
        out.append(total / (in_top.sum() if bug == "divide_by_hits" else r))
    return torch.stack(out)


def recall_at_k(scores, targets, mask, k, bug=None):
    out = []
    for q in range(scores.shape[0]):
        if bug == "topk":
            rel = _ranked_flags(scores[q], targets[q], mask[q], bug)
            hits = rel[:k].sum()
        else:
            rank, rank_pos, rel = _pessimistic_flags(scores[q], targets[q], mask[q], bug)
            # A positive's place: the negatives scoring >= it first, then the positives before it
            # (those scoring higher, and the tied ones of lower index: ties among positives in any order).
            s = scores[q][mask[q] | targets[q] if bug == "query_as_positive" else
                          (torch.ones_like(mask[q]) if bug == "forgot_mask" else mask[q])]
            i = torch.arange(len(s))
            before = (s[None, :] > s[:, None]) | ((s[None, :] == s[:, None]) & (i[None, :] <= i[:, None]))
            place = rank - rank_pos + (before & rel[None, :]).sum(1).to(s.dtype)
            hits = (rel & (place <= (k + 1 if bug == "top_k_plus_one" else k))).sum().to(scores.dtype)
        n_pos = (targets[q] & mask[q]).sum() if bug != "query_as_positive" else targets[q].sum()
        if n_pos == 0:
            out.append(torch.tensor(NAN, dtype=scores.dtype))
        elif bug == "fraction":
            out.append(hits / n_pos)
        else:
            out.append((hits > 0).to(scores.dtype))
    return torch.stack(out)
