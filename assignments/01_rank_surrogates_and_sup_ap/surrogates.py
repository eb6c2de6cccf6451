"""Assignment 1 — rank surrogates and Sup-AP. Fill in the four functions marked TODO.

Conventions (the same as in the rest of the lab):
  scores  (Q, N) float tensor, similarity of each query to each item (higher = closer)
  targets (Q, N) bool tensor, True if the item is a positive (same class) for the query
  mask    (Q, N) bool tensor, False = the item is ignored (e.g. the query itself)
Only the items with mask = True take part in a query's ranking: positives are
``targets & mask`` and negatives ``~targets & mask``.

Use torch only (no numpy, no loops over items if you can avoid them), keep the dtype of
``scores``, and do not modify the inputs in place. Run the self-check cells of the
notebook (they call ``lab.grading.check_*``) after each function.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor


def average_precision(scores: Tensor, targets: Tensor, mask: Tensor) -> Tensor:
    """Exact AP of each query (ROADMAP Eq. 1 with the step H of Eq. 3) -> (Q,).

    AP = mean over the positives k of rank⁺(k) / rank(k), where
      rank(k)  = number of valid items j with s_j >= s_k   (k itself included),
      rank⁺(k) = number of positives j with s_j >= s_k     (k itself included).
    Ties are pessimistic (H(0) = 1). A query without positive has no AP: return NaN for it.
    """
    ### BEGIN SOLUTION
    pos = targets & mask
    # above[q, k, j] = item j scores at least as high as item k (the Heaviside of Eq. 3)
    above = scores[:, None, :] >= scores[:, :, None]
    rank = (above & mask[:, None, :]).sum(-1).to(scores.dtype)
    rank_pos = (above & pos[:, None, :]).sum(-1).to(scores.dtype)
    precision = torch.where(pos, rank_pos / rank.clamp_min(1), torch.zeros_like(rank))
    num_pos = pos.sum(1).to(scores.dtype)
    ap = precision.sum(1) / num_pos.clamp_min(1)
    return torch.where(num_pos > 0, ap, torch.full_like(ap, float("nan")))
    ### END SOLUTION


def h_minus(t: Tensor, tau: float, rho: float, delta: float) -> Tensor:
    """SupRank's surrogate H⁻ of the step, elementwise (ROADMAP Eq. 4). Same shape as t.

      H⁻(t) = σ(t/τ)                          if t < 0
              σ(t/τ) + 0.5                    if 0 <= t <= δ
              ρ (t − δ) + σ(δ/τ) + 0.5        if t > δ
    """
    ### BEGIN SOLUTION
    sig = torch.sigmoid(t / tau)
    sig_delta = 1.0 / (1.0 + math.exp(-delta / tau))
    linear = rho * (t - delta) + sig_delta + 0.5
    return torch.where(t < 0, sig, torch.where(t <= delta, sig + 0.5, linear))
    ### END SOLUTION


def _pairs(scores: Tensor, targets: Tensor, mask: Tensor):
    """Helper given to students: diff[q, k, j] = s_j − s_k and the positive / negative masks."""
    pos = targets & mask
    neg = ~targets & mask
    diff = scores[:, None, :] - scores[:, :, None]
    not_self = ~torch.eye(scores.shape[1], dtype=torch.bool, device=scores.device)
    return diff, pos, neg, not_self


def smooth_ap(scores: Tensor, targets: Tensor, mask: Tensor, tau: float) -> Tensor:
    """1 − SmoothAP per query -> (Q,); 0 for a query without positive.

    Every step H of the AP is replaced by the sigmoid σ(t/τ) (Brown et al., 2020):
      rank(k)  = 1 + Σ_{j valid, j ≠ k} σ((s_j − s_k)/τ)
      rank⁺(k) = 1 + Σ_{j positive, j ≠ k} σ((s_j − s_k)/τ)
    """
    ### BEGIN SOLUTION
    diff, pos, neg, not_self = _pairs(scores, targets, mask)
    step = torch.sigmoid(diff / tau) * not_self
    rank_pos = 1 + (step * pos[:, None, :]).sum(-1)
    rank = rank_pos + (step * neg[:, None, :]).sum(-1)
    precision = torch.where(pos, rank_pos / rank, torch.zeros_like(rank))
    num_pos = pos.sum(1)
    loss = 1 - precision.sum(1) / num_pos.clamp_min(1).to(scores.dtype)
    return torch.where(num_pos > 0, loss, torch.zeros_like(loss))
    ### END SOLUTION


def sup_ap(scores: Tensor, targets: Tensor, mask: Tensor, tau: float, rho: float, delta: float) -> Tensor:
    """1 − Sup-AP per query -> (Q,); 0 for a query without positive (ROADMAP Eq. 5).

      rank⁺(k)   = 1 + Σ_{j positive, j ≠ k} H(s_j − s_k)     exact step, no gradient
      rank⁻_s(k) = Σ_{j negative} H⁻(s_j − s_k)                your h_minus
      Sup-AP     = mean over positives k of rank⁺(k) / (rank⁺(k) + rank⁻_s(k))
    """
    ### BEGIN SOLUTION
    diff, pos, neg, not_self = _pairs(scores, targets, mask)
    with torch.no_grad():
        rank_pos = 1 + ((diff >= 0) & pos[:, None, :] & not_self).sum(-1).to(scores.dtype)
    rank_neg = (h_minus(diff, tau, rho, delta) * neg[:, None, :]).sum(-1)
    precision = torch.where(pos, rank_pos / (rank_pos + rank_neg), torch.zeros_like(rank_neg))
    num_pos = pos.sum(1)
    loss = 1 - precision.sum(1) / num_pos.clamp_min(1).to(scores.dtype)
    return torch.where(num_pos > 0, loss, torch.zeros_like(loss))
    ### END SOLUTION
