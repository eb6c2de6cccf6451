"""Plain-loop re-implementations of the papers' definitions, written independently of lab/.

Slow on purpose: one Python loop per sum of the equations, so a reader can check each line
against the paper. They operate on 1-D score lists of a single query and keep autograd.
"""
from __future__ import annotations

import math

import torch


def _sig(x, tau):
    return 1.0 / (1.0 + torch.exp(-x / tau))


def ap_loop(scores, targets, valid=None):
    """ROADMAP Eq. 1 and 3 with H(0) = 1."""
    n = len(scores)
    valid = [True] * n if valid is None else valid
    pos = [k for k in range(n) if valid[k] and targets[k]]
    if not pos:
        return None
    total = 0.0
    for k in pos:
        rank_pos = 1 + sum(1 for j in pos if j != k and scores[j] >= scores[k])
        rank_neg = sum(1 for j in range(n) if valid[j] and not targets[j] and scores[j] >= scores[k])
        total += rank_pos / (rank_pos + rank_neg)
    return total / len(pos)


def smooth_ap_loop(scores, targets, valid, tau, exact_rank_pos=False):
    n = len(scores)
    pos = [k for k in range(n) if valid[k] and targets[k]]
    if not pos:
        return torch.zeros(())
    total = 0
    for k in pos:
        rank_pos, rank_all = 1.0, 1.0
        for j in range(n):
            if j == k or not valid[j]:
                continue
            if targets[j] and exact_rank_pos:
                step = float(scores[j] >= scores[k])
            else:
                step = _sig(scores[j] - scores[k], tau)
            rank_all = rank_all + step
            if targets[j]:
                rank_pos = rank_pos + step
        total = total + rank_pos / rank_all
    return 1 - total / len(pos)


def h_minus_loop(t, tau, rho, delta):
    if t < 0:
        return _sig(t, tau)
    if t <= delta:
        return _sig(t, tau) + 0.5
    return rho * (t - delta) + 1.0 / (1.0 + math.exp(-delta / tau)) + 0.5


def sup_ap_loop(scores, targets, valid, tau, rho, delta):
    n = len(scores)
    pos = [k for k in range(n) if valid[k] and targets[k]]
    if not pos:
        return torch.zeros(())
    total = 0
    for k in pos:
        rank_pos = 1 + sum(1 for j in pos if j != k and scores[j] >= scores[k])
        rank_neg = 0
        for j in range(n):
            if valid[j] and not targets[j]:
                rank_neg = rank_neg + h_minus_loop(scores[j] - scores[k], tau, rho, delta)
        total = total + rank_pos / (rank_pos + rank_neg)
    return 1 - total / len(pos)


def calibration_loop(scores, targets, valid, alpha, beta):
    pos = [s for s, t, v in zip(scores, targets, valid) if v and t]
    neg = [s for s, t, v in zip(scores, targets, valid) if v and not t]
    if not pos:
        return torch.zeros(())
    loss = sum(torch.clamp(alpha - s, min=0) for s in pos) / len(pos)
    if neg:
        loss = loss + sum(torch.clamp(s - beta, min=0) for s in neg) / len(neg)
    return loss


def _histogram_ap_loop(values, targets, valid, centres, width):
    """FastAP Eq. 14 / AP_Q with explicit loops over bins and items; bins ordered best-first."""
    num_pos = sum(1 for t, v in zip(targets, valid) if t and v)
    if num_pos == 0:
        return torch.zeros(())
    cum_pos, cum_all, total = 0, 0, 0
    for c in centres:
        h_pos, h_all = 0, 0
        for x, t, v in zip(values, targets, valid):
            if not v:
                continue
            w = torch.relu(1 - torch.abs(x - c) / width)  # slope 0 at a kink
            h_all = h_all + w
            if t:
                h_pos = h_pos + w
        cum_pos, cum_all = cum_pos + h_pos, cum_all + h_all
        if float(cum_all.detach()) > 0:
            total = total + cum_pos * h_pos / cum_all
    return 1 - total / num_pos


def fast_ap_loop(scores, targets, valid, num_bins):
    width = 4.0 / num_bins
    centres = [width * i for i in range(num_bins + 1)]
    return _histogram_ap_loop([2 - 2 * s for s in scores], targets, valid, centres, width)


def soft_bin_ap_loop(scores, targets, valid, num_bins):
    width = 2.0 / (num_bins - 1)
    centres = [1 - width * i for i in range(num_bins)]
    return _histogram_ap_loop(list(scores), targets, valid, centres, width)


def ranked_list(scores, targets, valid):
    """Relevance flags of the valid items sorted by decreasing score (assumes no ties)."""
    items = sorted((float(s), bool(t)) for s, t, v in zip(scores, targets, valid) if v)
    return [t for _, t in reversed(items)]


def map_at_r_loop(scores, targets, valid):
    rel = ranked_list(scores, targets, valid)
    r = sum(rel)
    if r == 0:
        return None
    total, hits = 0.0, 0
    for i in range(r):
        if rel[i]:
            hits += 1
            total += hits / (i + 1)
    return total / r


def recall_loop(scores, targets, valid, k):
    rel = ranked_list(scores, targets, valid)
    return None if not any(rel) else float(any(rel[:k]))


def true_recall_loop(scores, targets, valid, k):
    rel = ranked_list(scores, targets, valid)
    return None if not any(rel) else sum(rel[:k]) / min(k, sum(rel))
