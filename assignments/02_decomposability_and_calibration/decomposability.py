"""Assignment 2 — retrieval metrics, the decomposability gap and the calibration loss.

Fill in the three functions marked TODO. Conventions (as in the rest of the lab):
  scores  (Q, N) float tensor, similarity of each query to each item (higher = closer)
  targets (Q, N) bool tensor, True if the item is a positive for the query
  mask    (Q, N) bool tensor, False = the item is ignored (e.g. the query itself)
Positives are ``targets & mask``, negatives ``~targets & mask``; masked items are not ranked.

Ranks are pessimistic with ties: rank(k) = number of valid items j with s_j >= s_k
(k itself included), so a positive tied with a negative counts as ranked below it.
For R@k, positives tied with each other do not push each other down: the best positive's
place is 1 + the number of negatives scoring at least as high (rank - rank⁺ + 1).
Metrics return NaN for a query without positive; the loss returns 0 for it.
"""
from __future__ import annotations

import torch
from torch import Tensor


def ranks(scores: Tensor, targets: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Given: (rank, rank⁺, positives), each (Q, N). rank[q, k] = #valid j with s_j >= s_k,
    rank⁺[q, k] = #positives j with s_j >= s_k. Entries of masked items are meaningless."""
    pos = targets & mask
    above = scores[:, None, :] >= scores[:, :, None]
    rank = (above & mask[:, None, :]).sum(-1).to(scores.dtype)
    rank_pos = (above & pos[:, None, :]).sum(-1).to(scores.dtype)
    return rank, rank_pos, pos


def map_at_r(scores: Tensor, targets: Tensor, mask: Tensor) -> Tensor:
    """mAP@R of each query (Musgrave et al.; ROADMAP supp. Eq. 11) -> (Q,), NaN without positive.

    R = number of positives of the query. mAP@R = (1/R) Σ_{i=1..R} P(i), where P(i) is the
    precision at rank i if the i-th retrieved item is a positive, and 0 otherwise.
    """
    ### BEGIN SOLUTION
    rank, rank_pos, pos = ranks(scores, targets, mask)
    num_pos = pos.sum(1, keepdim=True).to(scores.dtype)
    counted = pos & (rank <= num_pos)
    precision = torch.where(counted, rank_pos / rank.clamp_min(1), torch.zeros_like(rank))
    out = precision.sum(1) / num_pos[:, 0].clamp_min(1)
    return torch.where(num_pos[:, 0] > 0, out, torch.full_like(out, float("nan")))
    ### END SOLUTION


def recall_at_k(scores: Tensor, targets: Tensor, mask: Tensor, k: int) -> Tensor:
    """R@k of each query as used in image retrieval (ROADMAP supp. Eq. 10) -> (Q,).

    1.0 if at least one positive is among the k best-ranked items, else 0.0; NaN for a query
    without positive. Ties are broken against the query (a tied negative first), but two
    positives tied at the top are both hits: a positive's place is rank - rank⁺ + 1 at best.
    """
    ### BEGIN SOLUTION
    rank, rank_pos, pos = ranks(scores, targets, mask)
    hit = (pos & (rank - rank_pos + 1 <= k)).any(1).to(scores.dtype)
    return torch.where(pos.any(1), hit, torch.full_like(hit, float("nan")))
    ### END SOLUTION


def calibration(scores: Tensor, targets: Tensor, mask: Tensor, alpha: float, beta: float) -> Tensor:
    """ROADMAP's calibration loss (Eq. 7) per query -> (Q,); 0 for a query without positive.

    L = mean over positives of [alpha − s]₊  +  mean over negatives of [s − beta]₊
    ([x]₊ = max(0, x)). A query without negative gets only the positive term.
    """
    ### BEGIN SOLUTION
    pos = (targets & mask).to(scores.dtype)
    neg = (~targets & mask).to(scores.dtype)
    pos_term = ((alpha - scores).clamp_min(0) * pos).sum(1) / pos.sum(1).clamp_min(1)
    neg_term = ((scores - beta).clamp_min(0) * neg).sum(1) / neg.sum(1).clamp_min(1)
    loss = pos_term + neg_term
    return torch.where(pos.sum(1) > 0, loss, torch.zeros_like(loss))
    ### END SOLUTION
