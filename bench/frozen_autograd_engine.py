"""THE OLD AUTOGRAD LOSS ENGINE (commit 802a172), FROZEN AS A BASELINE AND ORACLE — not part of the package.

The engine the losses ran on before the fused engine with hand-written gradients replaced it: a
frozen copy of ``lab/losses/engine.py`` and of the score-level loss functions that used it
(smooth_ap, sup_ap, smooth_recall, sup_recall, fast_ap, soft_bin_ap, sup_hap, sup_ndcg,
calibration, roadmap, rod_recall with rod.rod_calibrated, and core.steps' soft_histogram /
histogram_ap) as they were at commit 802a172, before the fused engine replaced them. The code
below each file marker is copied unchanged; only the imports were gathered here. Used by the
tests (the fast paths must give the same values and gradients) and by ``bench/losses.py``
(speed-up of the new engine, same run). Never import it from ``lab``.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Sequence

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from lab.core.checks import check_chunk_size, check_ks, check_positive, check_reduction, check_scores
from lab.core.graded_ranks import exact_graded_ranks
from lab.core.hparams import LAM, NUM_BINS
from lab.core.relevance import ideal_dcg
from lab.core.steps import check_h_minus, h_minus, heaviside, sigmoid
from lab.losses.base import reduce
from lab.losses.calibration import check_thresholds
from lab.losses.rod import rod_mix
from lab.losses.sup_hap import check_graded_loss

check_num_bins = NUM_BINS.check  # the engine's own checks moved to the declarations (lab.core.hparams)


def check_unit_interval(name: str, value: float) -> None:
    LAM.check(value)  # only ever called for lam

# -------------------- lab/losses/engine.py --------------------------------------------------

# Entries of one (queries, positives, items) block. 2**22 float32 = 16 MB per intermediate.
MAX_BLOCK_ELEMENTS = 2**22



def map_query_chunks(fn: Callable[..., Tensor], tensors: tuple[Tensor, ...], chunk_size: int) -> Tensor:
    """Apply ``fn`` to row chunks of ``tensors`` and concatenate its (chunk,) outputs.

    With several chunks and gradients on, each chunk is checkpointed: its big
    intermediates are freed after the forward and recomputed in the backward, so peak
    memory is that of one chunk rather than of all of them.
    """
    num_queries = tensors[0].shape[0]
    if chunk_size >= num_queries:
        return fn(*tensors)
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    out = []
    for start in range(0, num_queries, chunk_size):
        part = tuple(t[start : start + chunk_size] for t in tensors)
        out.append(checkpoint(fn, *part, use_reentrant=False) if needs_grad else fn(*part))
    return torch.cat(out)



class Block(NamedTuple):
    """One chunk of queries seen from their positives. P = most positives of a query in the chunk.

    diff[q, p, j] = s_j - s_k for the p-th positive k of query q and every item j: the
    argument of the step function in rank(k) = 1 + sum_j H(s_j - s_k).
    """

    scores: Tensor  # (c, N)
    pos: Tensor  # (c, N) bool, positive and not masked
    valid: Tensor  # (c, N) bool, not masked
    pos_index: Tensor  # (c, P) item index of each positive (padding: arbitrary)
    pos_valid: Tensor  # (c, P) bool, False on padding
    num_pos: Tensor  # (c,)
    diff: Tensor  # (c, P, N)
    relevance: Optional[Tensor] = None  # (c, N) graded relevance, when per_query was given one



def positive_block(scores: Tensor, pos: Tensor, valid: Tensor, relevance: Optional[Tensor] = None) -> Block:
    num_pos = pos.sum(1)
    width = max(int(num_pos.max()), 1)
    # A stable descending sort of the 0/1 flags puts each query's positives first.
    pos_index = torch.sort(pos.to(torch.uint8), dim=1, descending=True, stable=True).indices[:, :width]
    pos_valid = torch.arange(width, device=scores.device) < num_pos[:, None]
    pos_scores = scores.gather(1, pos_index)
    diff = scores[:, None, :] - pos_scores[:, :, None]
    return Block(scores, pos, valid, pos_index, pos_valid, num_pos, diff, relevance)



def auto_chunk_size(pos: Tensor, num_items: int, chunk_size: Optional[int]) -> int:
    """Queries per chunk so that one (chunk, P, N) block holds at most MAX_BLOCK_ELEMENTS."""
    check_chunk_size(chunk_size)
    if chunk_size is not None:
        return chunk_size
    widest = max(int(pos.sum(1).max()), 1)
    return max(1, MAX_BLOCK_ELEMENTS // (widest * num_items))



def per_query(
    block_fn: Callable[[Block], Tensor],
    scores: Tensor,
    targets: Tensor,
    mask: Tensor,
    chunk_size: Optional[int] = None,
    relevance: Optional[Tensor] = None,
) -> Tensor:
    """(Q,) per-query values of ``block_fn`` computed over chunked positive blocks.

    ``relevance`` (Q, N), optional, is chunked with the rows and reaches ``block_fn`` as
    ``block.relevance`` (graded losses: SupRank Eq. 21, 24).
    """
    pos = targets & mask

    def run(s: Tensor, p: Tensor, v: Tensor, *rel: Tensor) -> Tensor:
        return block_fn(positive_block(s, p, v, *rel))

    size = auto_chunk_size(pos, scores.shape[1], chunk_size)
    extra = () if relevance is None else (relevance,)
    return map_query_chunks(run, (scores, pos, mask, *extra), size)



def sum_items(values: Tensor, weights: Tensor) -> Tensor:
    """sum_j values[q, p, j] * weights[q, j] -> (c, P), as a batched mat-vec (no (c, P, N) temporary)."""
    return torch.bmm(values, weights.to(values.dtype)[:, :, None]).squeeze(-1)



def mean_over_positives(values: Tensor, block: Block) -> Tensor:
    """Average of a (c, P) per-positive quantity over each query's real positives -> (c,)."""
    values = torch.where(block.pos_valid, values, torch.zeros_like(values))
    return values.sum(1) / block.num_pos.clamp_min(1).to(values.dtype)



# -------------------- lab/losses/smooth_ap.py -----------------------------------------------

def smooth_ap(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    tau: float = 0.01,
    exact_rank_pos: bool = False,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - SmoothAP. scores, targets, mask: (Q, N). Returns a scalar, or (Q,) with reduction="none".

    rank(k) = 1 + sum_{j != k} sigma((s_j - s_k) / tau) and the same sum over positives for
    rank^+(k); AP = mean over positives of rank^+(k) / rank(k) (ROADMAP Eq. 1 with H = sigma).
    ``exact_rank_pos=True`` keeps the exact step for positive-positive comparisons: the
    intermediate loss of ROADMAP supp. Fig. 8a (no more opposite gradients on positives, but
    still vanishing ones). Only (query, positive, item) triples are formed: memory
    O(Q * P * N), in chunks.
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    check_positive("tau", tau)

    def block_loss(b: Block) -> Tensor:
        step = sigmoid(b.diff, tau)
        if exact_rank_pos:
            with torch.no_grad():
                rank_pos = sum_items(heaviside(b.diff), b.pos)  # k itself: H(0) = 1
            rank_all = rank_pos + sum_items(step, b.valid & ~b.pos)
        else:
            # The item k itself contributes sigma(0) = 0.5 to both sums; "1 + sum_{j != k}" = 0.5 + sum_j.
            rank_all = 0.5 + sum_items(step, b.valid)
            rank_pos = 0.5 + sum_items(step, b.pos)
        return 1.0 - mean_over_positives(rank_pos / rank_all, b)

    losses = per_query(block_loss, scores, targets, mask, chunk_size)
    return reduce(losses, (targets & mask).any(1), reduction)



# -------------------- lab/losses/sup_ap.py --------------------------------------------------

def sup_ranks(b: Block, tau: float, rho: float, delta: float) -> tuple[Tensor, Tensor]:
    """(rank^+, rank^-_s) of each positive, both (c, P) (ROADMAP Eq. 3 and 5).

    rank^+ counts positives with s_j >= s_k (k itself included) with the exact step and no
    gradient: its gradient would push positives down (ROADMAP Sec. 3.1). rank^-_s sums H^-
    over negatives and carries all the gradient.
    """
    with torch.no_grad():
        rank_pos = sum_items(heaviside(b.diff), b.pos)
    rank_neg = sum_items(h_minus(b.diff, tau, rho, delta), b.valid & ~b.pos)
    return rank_pos, rank_neg



def sup_ap(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    tau: float = 0.01,
    rho: float = 100.0,
    delta: float = 0.05,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - Sup-AP. scores, targets, mask: (Q, N). Scalar, or (Q,) with reduction="none".

    Sup-AP = mean over positives k of rank^+(k) / (rank^+(k) + rank^-_s(k)). Because
    H^- >= H, the loss is an upper bound of the exact AP loss 1 - AP (ROADMAP Sec. 3.1).
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    check_h_minus(tau, rho, delta)

    def block_loss(b: Block) -> Tensor:
        rank_pos, rank_neg = sup_ranks(b, tau, rho, delta)
        # clamp only matters on padding rows (0 / 0); real positives have rank^+ >= 1.
        return 1.0 - mean_over_positives(rank_pos / (rank_pos + rank_neg).clamp_min(1.0), b)

    losses = per_query(block_loss, scores, targets, mask, chunk_size)
    return reduce(losses, (targets & mask).any(1), reduction)



# -------------------- lab/losses/recall.py --------------------------------------------------

DEFAULT_KS = (1, 2, 4, 8, 16)



def recall_loss_from_ranks(ranks: Tensor, b: Block, ks: tuple[int, ...], tau_star: float) -> Tensor:
    """1 - mean over k of sum_p sigma((k - rank(p)) / tau_star) / min(|P|, k). ranks (c, P) -> (c,).

    The soft count of positives in the top k is capped at k (as in Patel et al.'s code), so the
    estimated recall never exceeds 1 when soft ranks of tied positives are below k.
    """
    kk = torch.tensor(ks, dtype=ranks.dtype, device=ranks.device)
    soft_hits = sigmoid(kk - ranks[:, :, None], tau_star) * b.pos_valid[:, :, None]  # (c, P, K)
    hits = torch.minimum(soft_hits.sum(1), kk)  # (c, K)
    recall = hits / torch.minimum(kk, b.num_pos[:, None].to(kk.dtype)).clamp_min(1)
    return 1.0 - recall.mean(1)



def _recall_loss(scores: Tensor, targets: Tensor, mask: Optional[Tensor], reduction: str, ks: Sequence[int],
                 tau_star: float, chunk_size: Optional[int], rank_fn: Callable[[Block], Tensor]) -> Tensor:
    """Shared body of the two R@k losses; ``rank_fn`` gives the (c, P) ranks of a block's positives."""
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    check_positive("tau_star", tau_star)
    ks = check_ks(ks)
    losses = per_query(lambda b: recall_loss_from_ranks(rank_fn(b), b, ks, tau_star), scores, targets, mask, chunk_size)
    return reduce(losses, (targets & mask).any(1), reduction)



def smooth_recall(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    tau: float = 0.01,
    tau_star: float = 1.0,
    ks: Sequence[int] = DEFAULT_KS,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - Smooth-R@k (Patel et al.'s RS@k). scores, targets, mask: (Q, N). Scalar or (Q,).

    rank(p) = 1 + sum_{j != p} sigma((s_j - s_p) / tau) over every kept item (positives too);
    tau = 0.01 ranks, tau_star = 1 counts the positives in the top k. Memory O(Q * P * N), chunked.
    """
    check_positive("tau", tau)

    def ranks(b: Block) -> Tensor:
        return 0.5 + sum_items(sigmoid(b.diff, tau), b.valid)  # p itself adds sigma(0) = 0.5

    return _recall_loss(scores, targets, mask, reduction, ks, tau_star, chunk_size, ranks)



def sup_recall(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    tau: float = 0.01,
    rho: float = 100.0,
    delta: float = 0.05,
    tau_star: float = 1.0,
    ks: Sequence[int] = DEFAULT_KS,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - Sup-R@k (Eq. 16, averaged over ``ks``). scores, targets, mask: (Q, N). Scalar or (Q,).

    rank(p) = rank^+(p) (exact, no gradient) + rank^-_s(p) (H^- over negatives, Eq. 4-5): a
    negative above a positive keeps receiving gradient (slope rho) however far above it is.
    """
    check_h_minus(tau, rho, delta)

    def ranks(b: Block) -> Tensor:
        rank_pos, rank_neg = sup_ranks(b, tau, rho, delta)
        return rank_pos + rank_neg

    return _recall_loss(scores, targets, mask, reduction, ks, tau_star, chunk_size, ranks)



# -------------------- lab/losses/fast_ap.py -------------------------------------------------

def binned_ap_loss(values: Tensor, targets: Tensor, mask: Tensor, centres: Tensor, width: float,
                   reduction: str, chunk_size: Optional[int]) -> Tensor:
    """1 - histogram AP per query, chunked so one (chunk, N, bins) kernel stays bounded."""
    check_chunk_size(chunk_size)
    pos = targets & mask
    if chunk_size is None:
        chunk_size = max(1, MAX_BLOCK_ELEMENTS // (values.shape[1] * len(centres)))

    def run(v: Tensor, p: Tensor, m: Tensor) -> Tensor:
        return 1.0 - histogram_ap(v, centres, width, p, m)

    losses = map_query_chunks(run, (values, pos, mask), chunk_size)
    return reduce(losses, pos.any(1), reduction)



def fast_ap(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    num_bins: int = 10,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - FastAP (Eq. 14). scores, targets, mask: (Q, N); scores are cosine similarities.

    Squared distances d = 2 - 2s of unit vectors lie in [0, 4]; ``num_bins`` intervals give
    num_bins + 1 bin centres 0, 4/num_bins, ..., 4 and a triangular kernel of width
    4/num_bins (supp. C.1). Few bins = wide bins = a margin (Fig. 4c).
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    check_num_bins(num_bins)
    centres = torch.linspace(0.0, 4.0, num_bins + 1, dtype=scores.dtype, device=scores.device)
    return binned_ap_loss(2.0 - 2.0 * scores, targets, mask, centres, 4.0 / num_bins, reduction, chunk_size)



# -------------------- lab/losses/soft_bin_ap.py ---------------------------------------------

def soft_bin_ap(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    num_bins: int = 20,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - AP_Q (Revaud supp. Eq. 1-3). scores, targets, mask: (Q, N), scores in [-1, 1].

    ``num_bins`` centres from 1 down to -1, triangular kernel of width 2 / (num_bins - 1)
    (supp. Eq. 7); precision from cumulative soft counts, recall increments from per-bin ones.
    A query without positive gets loss 0 (the reference returns NaN).
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    check_num_bins(num_bins)
    centres = torch.linspace(1.0, -1.0, num_bins, dtype=scores.dtype, device=scores.device)
    return binned_ap_loss(scores, targets, mask, centres, 2.0 / (num_bins - 1), reduction, chunk_size)



# -------------------- lab/losses/sup_hap.py -------------------------------------------------

def graded_sup_ranks(b: Block, tau: float, rho: float, delta: float) -> tuple[Tensor, Tensor, Tensor]:
    """(H-rank^+, rank^+, rank^-_s) of each positive k under graded relevance, all (c, P) (Eq. 18, 3, 5).

    H-rank^+ and rank^+(k) = 1 + #{j != k : rel(j) >= rel(k), s_j >= s_k} are exact, without
    gradient, and computed by sorting (no (c, P, N) tensor). rank^-_s(k) sums H^-(s_j - s_k)
    over the items with rel(j) < rel(k) (negatives and less relevant positives): the
    instances SupRank penalises for being ranked above k.
    """
    exact = exact_graded_ranks(b.scores, b.relevance, b.valid)
    rel_k = b.relevance.gather(1, b.pos_index)[:, :, None]  # (c, P, 1)
    lower = (b.relevance[:, None, :] < rel_k) & b.valid[:, None, :]
    rank_neg = (h_minus(b.diff, tau, rho, delta) * lower).sum(-1)
    return exact.h_rank_plus.gather(1, b.pos_index), exact.rank_plus.gather(1, b.pos_index), rank_neg



def sup_hap(
    scores: Tensor,
    relevance: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    tau: float = 0.01,
    rho: float = 100.0,
    delta: float = 0.05,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - Sup-H-AP (Eq. 21). scores, relevance (float >= 0, 0 = negative), mask: (Q, N).

    Sup-H-AP = (1 / sum_k rel(k)) * sum over positives k of H-rank^+(k) / (rank^+(k) + rank^-_s(k)),
    with H-rank^+ and rank^+ exact (no gradient) and rank^-_s over the items of strictly lower
    relevance (H^-). H^- >= H makes the loss an upper bound of 1 - H-AP. With 0/1 relevance
    it equals Sup-AP. Memory O(Q * P * N), P = items with relevance > 0, in chunks of queries.
    Returns a scalar, or (Q,) with reduction="none" (0 for queries without positive).
    """
    scores, relevance, mask, pos = check_graded_loss(scores, relevance, mask, reduction, tau, rho, delta)

    def block_loss(b: Block) -> Tensor:
        h_rank, rank_pos, rank_neg = graded_sup_ranks(b, tau, rho, delta)
        terms = torch.where(b.pos_valid, h_rank / (rank_pos + rank_neg).clamp_min(1.0), 0.0)
        total_rel = (b.relevance * b.pos).sum(1)
        return 1.0 - terms.sum(1) / torch.where(total_rel > 0, total_rel, torch.ones_like(total_rel))

    losses = per_query(block_loss, scores, pos, mask, chunk_size, relevance=relevance)
    return reduce(losses, pos.any(1), reduction)



# -------------------- lab/losses/sup_ndcg.py ------------------------------------------------

def sup_ndcg(
    scores: Tensor,
    relevance: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    tau: float = 0.01,
    rho: float = 100.0,
    delta: float = 0.05,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - Sup-NDCG (Eq. 24). scores, relevance (float >= 0, 0 = negative), mask: (Q, N).

    DCG_s = sum over positives k of rel(k) / log2(1 + rank^+(k) + rank^-_s(k)), rank^+ over items
    of relevance >= rel(k) (exact), rank^-_s over items of lower relevance (H^-); divided by the
    exact iDCG (relevances sorted in decreasing order). rank_s >= rank, so the loss upper-bounds
    1 - NDCG. Embedding-level losses use rel = 2^l - 1; any relevance >= 0 works here.
    Returns a scalar, or (Q,) with reduction="none" (0 for queries without positive).
    """
    scores, relevance, mask, pos = check_graded_loss(scores, relevance, mask, reduction, tau, rho, delta)

    def block_dcg(b: Block) -> Tensor:
        _, rank_pos, rank_neg = graded_sup_ranks(b, tau, rho, delta)
        gain = torch.where(b.pos_valid, b.relevance.gather(1, b.pos_index), 0.0)
        # clamp: padding columns have rank 0; real positives have rank^+ >= 1.
        return (gain / torch.log2(1.0 + (rank_pos + rank_neg).clamp_min(1.0))).sum(1)

    dcg = per_query(block_dcg, scores, pos, mask, chunk_size, relevance=relevance)
    idcg = ideal_dcg(relevance)
    losses = 1.0 - dcg / torch.where(idcg > 0, idcg, torch.ones_like(idcg))
    return reduce(losses, pos.any(1), reduction)



# -------------------- lab/losses/calibration.py ------------------------------------------------
def calibration(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    alpha: float = 0.9,
    beta: float = 0.6,
) -> Tensor:
    """Per query: mean over positives of [alpha - s]_+ plus mean over negatives of [s - beta]_+.

    scores, targets, mask: (Q, N). Pushes positive scores above alpha and negative scores
    below beta in every batch, which bounds the decomposability gap (ROADMAP Eq. 9).
    A query without negatives gets only the positive term.
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    check_thresholds(alpha, beta)
    pos = (targets & mask).to(scores.dtype)
    neg = (~targets & mask).to(scores.dtype)
    pos_term = (torch.relu(alpha - scores) * pos).sum(1) / pos.sum(1).clamp_min(1)
    neg_term = (torch.relu(scores - beta) * neg).sum(1) / neg.sum(1).clamp_min(1)
    return reduce(pos_term + neg_term, pos.sum(1) > 0, reduction)


# -------------------- lab/losses/rod.py -------------------------------------------------------
def rod_calibrated(rank_loss: Callable[..., Tensor], scores: Tensor, targets: Tensor, *, mask: Optional[Tensor],
                   reduction: str, lam: float, alpha: float, beta: float, **rank_kwargs) -> Tensor:
    """Score level: ``rod_mix`` of ``rank_loss`` and the calibration loss L_DG (ROADMAP Eq. 7), query by
    query, then reduced. scores, targets, mask (Q, N); ``rank_kwargs`` go to ``rank_loss``."""
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    check_unit_interval("lam", lam)
    rank_term = rank_loss(scores, targets, mask=mask, reduction="none", **rank_kwargs)
    calib_term = calibration(scores, targets, mask=mask, reduction="none", alpha=alpha, beta=beta)
    return reduce(rod_mix(rank_term, calib_term, lam), (targets & mask).any(1), reduction)


# -------------------- lab/losses/roadmap.py -------------------------------------------------

def roadmap(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    lam: float = 0.5,
    tau: float = 0.01,
    rho: float = 100.0,
    delta: float = 0.05,
    alpha: float = 0.9,
    beta: float = 0.6,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """L_ROADMAP = (1 - lam) * L_SupAP + lam * L_calibr. (ROADMAP Eq. 2). scores etc. (Q, N)."""
    return rod_calibrated(sup_ap, scores, targets, mask=mask, reduction=reduction, lam=lam, alpha=alpha, beta=beta,
                          tau=tau, rho=rho, delta=delta, chunk_size=chunk_size)



# -------------------- lab/losses/rod_recall.py ----------------------------------------------

def rod_recall(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    lam: float = 0.5,
    tau: float = 0.01,
    rho: float = 100.0,
    delta: float = 0.05,
    tau_star: float = 1.0,
    ks: Sequence[int] = DEFAULT_KS,
    alpha: float = 0.9,
    beta: float = 0.6,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """L_ROD-R@k = (1 - lam) * L_Sup-R@k + lam * L_DG (Eq. 17). scores, targets, mask: (Q, N).

    With the proxy decomposability loss L_DG* instead (Tab. II), use
    ``RODLoss(SupRecall(), ProxyDecompositionLoss(num_classes, embed_dim), lam=0.1)``.
    """
    return rod_calibrated(sup_recall, scores, targets, mask=mask, reduction=reduction, lam=lam, alpha=alpha, beta=beta,
                          tau=tau, rho=rho, delta=delta, tau_star=tau_star, ks=ks, chunk_size=chunk_size)



# -------------------- lab/core/steps.py -----------------------------------------------------

def soft_histogram(values: Tensor, centres: Tensor, width: float, weights: Tensor) -> Tensor:
    """Weighted soft bin counts with the triangular kernel max(0, 1 - |v - c| / width).

    values, weights: (Q, N); centres: (L,). Returns (Q, L). With width = the spacing of the
    centres every value in range splits a total weight of 1 between its two nearest bins
    (FastAP supp. Eq. 22-23, Revaud et al. supp. Eq. 7).
    """
    kernel = torch.relu(1 - (values[..., None] - centres).abs() / width)  # (Q, N, L)
    return torch.einsum("qnl,qn->ql", kernel, weights.to(kernel.dtype))



def histogram_ap(values: Tensor, centres: Tensor, width: float, pos: Tensor, valid: Tensor) -> Tensor:
    """AP from soft histograms, bins ordered best-first: (1/N+) sum_l H+_l h+_l / H_l -> (Q,).

    h+/h: soft counts of positives / of all valid items per bin; H+/H their cumulative sums
    (FastAP Eq. 14; Revaud's AP_Q, Eq. 1-3 of the supplementary, is the same expression).
    """
    h_pos = soft_histogram(values, centres, width, pos)
    h_all = soft_histogram(values, centres, width, valid)
    # An empty prefix has H = H+ = h+ = 0: the term is 0, and clamp keeps its gradient finite.
    terms = h_pos.cumsum(-1) * h_pos / h_all.cumsum(-1).clamp_min(1e-12)
    return terms.sum(-1) / pos.sum(-1).clamp_min(1).to(terms.dtype)

