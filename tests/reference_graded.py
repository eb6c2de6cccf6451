"""Plain-loop versions of SupRank's R@k, H-AP, NDCG, ASI and L_DG* equations, written from the
paper independently of lab/. One query at a time, 1-D lists; they keep autograd where it matters.
"""
from __future__ import annotations

import math
from collections import Counter

import torch

from tests.reference import h_minus_loop


def assert_same_values_and_grads(got, want, wrt):
    """got and want agree, and so do the gradients of their sums with respect to ``wrt``."""
    torch.testing.assert_close(got, want)
    g_got, = torch.autograd.grad(got.sum(), wrt, retain_graph=True)
    g_want, = torch.autograd.grad(want.sum(), wrt, retain_graph=True)
    torch.testing.assert_close(g_got, g_want)


def level_loop(query_labels, item_labels):
    """Deepest shared label column (finest first) as a semantic level L - i, 0 if none."""
    num = len(query_labels)
    for i in range(num):
        if query_labels[i] == item_labels[i]:
            return num - i
    return 0


def hap_relevance_loop(levels, valid, num, alpha):
    """Eq. 20: (l / L)^alpha / |Omega^(l)|."""
    out = []
    for level, v in zip(levels, valid):
        size = sum(1 for x, w in zip(levels, valid) if w and x == level)
        out.append((level / num) ** alpha / size if v and level > 0 else 0.0)
    return out


def wap_relevance_loop(levels, valid, weights):
    """Property 1: rel(k) = sum_{p=1..l} w_p / |Omega^(+,p)|; weights[p] for paper level p = 1..L."""
    out = []
    for level, v in zip(levels, valid):
        rel = 0.0
        if v:
            for p in range(1, level + 1):
                rel += weights[p] / sum(1 for x, w in zip(levels, valid) if w and x >= p)
        out.append(rel)
    return out


def _rank(scores, valid, k):
    return 1 + sum(1 for j in range(len(scores)) if j != k and valid[j] and scores[j] >= scores[k])


def h_ap_loop(scores, rel, valid):
    """Eq. 18-19."""
    pos = [k for k in range(len(scores)) if valid[k] and rel[k] > 0]
    total = 0.0
    for k in pos:
        h_rank = rel[k] + sum(min(rel[k], rel[j]) for j in pos if j != k and scores[j] >= scores[k])
        total += h_rank / _rank(scores, valid, k)
    return total / sum(rel[k] for k in pos)


def idcg_loop(rel, valid):
    ideal = sorted((float(r) for r, v in zip(rel, valid) if v), reverse=True)
    return sum(r / math.log2(1 + i) for i, r in enumerate(ideal, start=1))


def ndcg_loop(scores, rel, valid):
    """Eq. 23 with rank(k) = 1 + #{j != k : s_j >= s_k}."""
    pos = [k for k in range(len(scores)) if valid[k] and rel[k] > 0]
    dcg = sum(rel[k] / math.log2(1 + _rank(scores, valid, k)) for k in pos)
    return dcg / idcg_loop(rel, valid)


def asi_loop(scores, rel, valid):
    """Appendix C-A1; items of equal relevance interchangeable, tied scores worst (least relevant) first."""
    items = [k for k in range(len(scores)) if valid[k]]
    ranked = [rel[k] for k in sorted(items, key=lambda k: (-float(scores[k]), float(rel[k])))]
    ideal = sorted((rel[k] for k in items), reverse=True)
    num_pos = sum(1 for r in ideal if r > 0)
    total = 0.0
    for n in range(1, num_pos + 1):
        common = Counter(ranked[:n]) & Counter(ideal[:n])
        total += sum(common.values()) / n
    return total / num_pos


def sup_graded_loop(scores, rel, valid, tau, rho, delta):
    """Per positive k: (H-rank^+, rank^+ + rank^-_s) of Eq. 18, 3 and 5 with graded relevance."""
    n = len(scores)
    pos = [k for k in range(n) if valid[k] and rel[k] > 0]
    out = []
    for k in pos:
        h_rank = rel[k] + sum(min(rel[k], rel[j]) for j in pos if j != k and scores[j] >= scores[k])
        rank_pos = 1 + sum(1 for j in pos if j != k and rel[j] >= rel[k] and scores[j] >= scores[k])
        rank_neg = 0.0
        for j in range(n):
            if valid[j] and rel[j] < rel[k]:
                rank_neg = rank_neg + h_minus_loop(scores[j] - scores[k], tau, rho, delta)
        out.append((k, h_rank, rank_pos + rank_neg))
    return out


def sup_hap_loop(scores, rel, valid, tau=0.01, rho=100.0, delta=0.05):
    """1 - Eq. 21 for one query."""
    terms = sup_graded_loop(scores, rel, valid, tau, rho, delta)
    return 1 - sum(h / r for _, h, r in terms) / sum(rel[k] for k, _, _ in terms)


def sup_ndcg_loop(scores, rel, valid, tau=0.01, rho=100.0, delta=0.05):
    """1 - Eq. 24 for one query."""
    terms = sup_graded_loop(scores, rel, valid, tau, rho, delta)
    dcg = sum(rel[k] / torch.log2(1 + torch.as_tensor(r, dtype=torch.float64)) for k, _, r in terms)
    return 1 - dcg / idcg_loop(rel, valid)


def recall_loop_from_ranks(ranks, ks, tau_star):
    """Eq. 16 averaged over ks, soft count of positives in the top k capped at k."""
    total = 0.0
    for k in ks:
        hits = sum(torch.sigmoid(torch.as_tensor((k - r) / tau_star)) for r in ranks)
        total = total + torch.clamp(torch.as_tensor(hits), max=k) / min(k, len(ranks))
    return 1 - total / len(ks)


def smooth_recall_loop(scores, targets, valid, tau, tau_star, ks):
    n = len(scores)
    pos = [p for p in range(n) if valid[p] and targets[p]]
    ranks = [1 + sum(torch.sigmoid((scores[j] - scores[p]) / tau) for j in range(n) if j != p and valid[j])
             for p in pos]
    return recall_loop_from_ranks(ranks, ks, tau_star)


def sup_recall_loop(scores, targets, valid, tau, rho, delta, tau_star, ks):
    n = len(scores)
    pos = [p for p in range(n) if valid[p] and targets[p]]
    ranks = []
    for p in pos:
        rank = 1 + sum(1 for j in pos if j != p and scores[j] >= scores[p])
        for j in range(n):
            if valid[j] and not targets[j]:
                rank = rank + h_minus_loop(scores[j] - scores[p], tau, rho, delta)
        ranks.append(rank)
    return recall_loop_from_ranks(ranks, ks, tau_star)


def proxy_loss_loop(embedding, label, proxies, eta):
    """Eq. 8 for one embedding: -log softmax of cos(v, p_z) / eta at the true class."""
    def cos(a, b):
        return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))

    logits = [cos(embedding, p) / eta for p in proxies]
    return -(logits[label] - math.log(sum(math.exp(z) for z in logits)))
