"""The engine of the rank losses: per-query losses computed in chunks of queries, gradient included.

Every loss here is a sum over queries of a function of that query's row of scores. So each chunk's
gradient can be taken right after its forward pass: only the (Q, N) gradient is kept for the
backward pass, which multiplies it by the incoming per-query weights. Nothing of a chunk outlives
it, so nothing is checkpointed or recomputed (except the sigmoid tiles of a row with so many
positives that they exceed the budget, see ``pair_sums``).

A rank loss needs, for each positive k of a query, sums over items j of a step surrogate of
s_j - s_k (ROADMAP Eq. 3). ``Block`` gives a chunk's positives (the anchors) and these sums:
- on CUDA, from the fused Triton kernels of ``fused_sums``, which never store the
  (query, anchor, item) block;
- elsewhere, from the PyTorch tiles of ``pair_sums``.
Memory per chunk stays below ``block_budget`` whatever the number of positives. The budget comes
from the device (``lab.core.budget``): cache-sized on a CPU, a share of the free memory on a GPU.
"""
from __future__ import annotations

import contextlib
from typing import Callable, NamedTuple, Optional, Union

import torch
from torch import Tensor

from ..core import budget
from ..core.checks import check_chunk_size
from . import fused_sums
from .pair_sums import TILE_ELEMENTS, PairSums, count_at_least

# Bytes per entry of a chunk's (queries, positives, items) block: the float32 block itself and the
# tile it is computed in. The CPU's default budget (32 MB) gives blocks of 2**22 entries (16 MB).
BYTES_PER_ENTRY = 8
MIN_BLOCK_ELEMENTS = 2**16
# (c, N) tensors a chunk holds at once on the fused path, where no block exists (masks, compacted
# items, gathered scores, the gradient): its chunks are sized by the rows alone.
ROW_TENSORS = 16


def max_block_elements(device: Union[torch.device, str, None] = None) -> int:
    """Entries of the largest block the memory budget of ``device`` allows."""
    return max(1, budget.budget_bytes(device) // BYTES_PER_ENTRY)


def block_budget(num_queries: int, num_items: int, device: Union[torch.device, str, None] = None) -> int:
    """Entries a chunk's pair block may hold: what a batch with 4 samples per class (3 positives per
    query) needs, 3 Q N, at least MIN_BLOCK_ELEMENTS, at most what the device's budget allows. A batch
    of one or two classes, whose queries have ~N positives, is cut into more chunks and tiles, and
    needs no more memory."""
    return min(max_block_elements(device), max(MIN_BLOCK_ELEMENTS, 3 * num_queries * num_items))


class _WithGradient(torch.autograd.Function):
    """(Q,) losses whose (Q, N) gradient with respect to the scores was computed in the forward."""

    @staticmethod
    def forward(ctx, scores: Tensor, compute: Callable[[], tuple[Tensor, Tensor]]) -> Tensor:
        losses, grad = compute()
        ctx.save_for_backward(grad)
        return losses

    @staticmethod
    def backward(ctx, grad_losses: Tensor):
        grad, = ctx.saved_tensors
        return grad_losses[:, None] * grad, None


def row_chunks(num_rows: int, num_items: int, device: Union[torch.device, str, None] = None) -> list[slice]:
    """Slices of rows for (Q, N) passes: about TILE_ELEMENTS entries each on a CPU (they stay in
    cache), as many as the memory budget allows elsewhere (each slice is a few kernel launches)."""
    limit = max_block_elements(device)
    if budget.uses_cache_blocks(device):
        limit = min(limit, TILE_ELEMENTS)
    step = max(1, limit // max(num_items, 1))
    return [slice(start, start + step) for start in range(0, num_rows, step)]


def with_gradient(scores: Tensor, losses: Tensor, grad: Tensor) -> Tensor:
    """``losses`` (Q,), computed without autograd, as a function of ``scores`` with gradient ``grad`` (Q, N)."""
    return _WithGradient.apply(scores, lambda: (losses, grad))


def compact(flags: Tensor, count: Tensor) -> tuple[Tensor, Tensor]:
    """Column indices of each row's True entries, in order, padded with 0 -> (index, present), (c, W).
    ``count`` (c,) is flags.sum(1)."""
    width = max(int(count.max()), 1)
    rows, columns = flags.nonzero(as_tuple=True)  # row-major: each row's columns in order
    if int(count.min()) == width:  # every row has the same count (e.g. m samples per class)
        index = columns.view(flags.shape[0], width)
    else:
        starts = (count.cumsum(0) - count).long()
        slot = torch.arange(len(rows), device=flags.device) - starts[rows]
        index = torch.zeros(flags.shape[0], width, dtype=torch.long, device=flags.device)
        index[rows, slot] = columns
    return index, torch.arange(width, device=flags.device) < count[:, None]


class Items(NamedTuple):
    """The items j of a sum: their scores (c, M), -inf for those left out, and their column in the
    row (c, M), or None when they are the row itself (M = N)."""

    scores: Tensor
    index: Optional[Tensor]


class Block:
    """One chunk of queries and its positives, the anchors k of the sums. P = most positives of a
    query in the chunk; anchor columns beyond a query's own count are padding.

    The sums (``sigmoid_sums``, ``h_minus_sums``) are what carries the gradient: ``scores`` is
    detached, and ``backward_into`` chains d loss / d sums back to the scores by hand.
    """

    def __init__(self, scores: Tensor, pos: Tensor, valid: Tensor, budget: int, relevance: Optional[Tensor] = None,
                 num_pos: Optional[Tensor] = None, need_grad: bool = False, tracked: Optional[list] = None,
                 fused: bool = False) -> None:
        self.scores = scores  # (c, N), detached
        self.pos = pos  # (c, N) bool, positive and not masked
        self.valid = valid  # (c, N) bool, not masked
        self.relevance = relevance  # (c, N) graded relevance, when per_query was given one
        self.budget, self.need_grad, self.fused = budget, need_grad, fused
        self.num_pos = pos.sum(1, dtype=torch.int32) if num_pos is None else num_pos  # (c,)
        self.pos_index, self.pos_valid = compact(pos, self.num_pos)  # (c, P); pos_valid False on padding
        self.anchors = scores.gather(1, self.pos_index)  # (c, P) positives' scores (padding: a finite score)
        self.tracked = [] if tracked is None else tracked  # (sums leaf, PairSums, items index, anchor index)

    def level(self, anchors: Tensor) -> "Block":
        """The same chunk with other anchors (c, N) bool, e.g. the positives of one relevance value."""
        return Block(self.scores, anchors, self.valid, self.budget, self.relevance, need_grad=self.need_grad,
                     tracked=self.tracked, fused=self.fused)

    # ------------------------------------------------------------------------------ items
    def items(self, keep: Tensor, count: Optional[Tensor] = None) -> Items:
        """The items ``keep`` (c, N) marks (``count`` = keep.sum(1) if known); gathered into fewer
        columns when few are kept, so a sum over negatives costs what the negatives cost."""
        count = keep.sum(1, dtype=torch.int32) if count is None else count
        if int(count.max()) <= 0.75 * keep.shape[1]:
            index, present = compact(keep, count)
            return Items(self.scores.gather(1, index).masked_fill_(~present, float("-inf")), index)
        return Items(self.scores.masked_fill(~keep, float("-inf")), None)

    def all_items(self) -> Items:
        """Every kept item (the query's row without its masked items)."""
        return self.items(self.valid)

    def negatives(self) -> Items:
        """The kept items that are not positives."""
        keep = self.valid & ~self.pos
        return self.items(keep, keep.sum(1, dtype=torch.int32))

    def positives(self) -> Items:
        """The positives themselves as items (P columns)."""
        return Items(self.anchors.masked_fill(~self.pos_valid, float("-inf")), self.pos_index)

    # ------------------------------------------------------------------------------- sums
    def sums(self, items: Items, tau: float, rho: Optional[float] = None, delta: Optional[float] = None) -> Tensor:
        sums_class = fused_sums.FusedPairSums if self.fused else PairSums
        pair_sums = sums_class(items.scores, self.anchors, tau, rho, delta, self.need_grad, self.budget)
        if not self.need_grad:
            return pair_sums.sums
        leaf = pair_sums.sums.requires_grad_()
        self.tracked.append((leaf, pair_sums, items.index, self.pos_index))
        return leaf

    def sigmoid_sums(self, items: Items, tau: float) -> Tensor:
        """sum over ``items`` j of sigma((s_j - s_k) / tau) for every anchor k -> (c, P)."""
        return self.sums(items, tau)

    def h_minus_sums(self, items: Items, tau: float, rho: float, delta: float) -> Tensor:
        """sum over ``items`` j of H^-(s_j - s_k) for every anchor k -> (c, P)."""
        return self.sums(items, tau, rho, delta)

    def count_at_least(self, items: Items) -> Tensor:
        """#{items j : s_j >= s_k} for every anchor k (exact step, H(0) = 1, no gradient) -> (c, P)."""
        if self.fused:
            return fused_sums.count_at_least(items.scores, self.anchors)
        return count_at_least(items.scores, self.anchors, self.budget)

    def backward_into(self, grad: Tensor, losses: Tensor) -> None:
        """Add d losses.sum() / d scores to ``grad`` (c, N): autograd from the losses to the sums
        (small tensors), then each sum's analytic gradient."""
        if not losses.requires_grad:
            return
        leaves = [entry[0] for entry in self.tracked]
        grads = torch.autograd.grad(losses.sum(), leaves, allow_unused=True)
        for (_, pair_sums, item_index, anchor_index), grad_sums in zip(self.tracked, grads):
            if grad_sums is None:
                continue
            if item_index is None:
                grad_anchors = pair_sums.backward(grad_sums, grad)
            else:
                grad_items = torch.zeros_like(pair_sums.items)
                grad_anchors = pair_sums.backward(grad_sums, grad_items)
                grad.scatter_add_(1, item_index, grad_items)
            grad.scatter_add_(1, anchor_index, grad_anchors)


def per_query(
    block_fn: Callable[[Block], Tensor],
    scores: Tensor,
    targets: Tensor,
    mask: Tensor,
    chunk_size: Optional[int] = None,
    relevance: Optional[Tensor] = None,
) -> Tensor:
    """(Q,) per-query values of ``block_fn`` over chunks of queries, differentiable in ``scores``.

    Chunks hold ``chunk_size`` queries. By default, on the PyTorch path, as many as keep a
    (chunk, P, N) block within ``block_budget``; on the fused path, which holds no block, as many
    as keep ROW_TENSORS (chunk, N) tensors within the budget. ``block_fn`` reaches the scores
    through the block's sums only. ``relevance`` (Q, N), optional, reaches it as
    ``block.relevance`` (graded losses: SupRank Eq. 21, 24).
    """
    check_chunk_size(chunk_size)
    pos = targets & mask
    num_pos = pos.sum(1, dtype=torch.int32)
    block_entries = block_budget(*scores.shape, device=scores.device)
    fused = fused_sums.use_fused(scores)
    if chunk_size is None:
        if fused:
            chunk_size = max(1, max_block_elements(scores.device) // (ROW_TENSORS * scores.shape[1]))
        else:
            chunk_size = max(1, block_entries // (max(int(num_pos.max()), 1) * scores.shape[1]))
    starts = range(0, scores.shape[0], chunk_size)

    def run(grad: Optional[Tensor]) -> Tensor:
        losses = []
        for start in starts:
            rows = slice(start, start + chunk_size)
            b = Block(scores[rows].detach(), pos[rows], mask[rows], block_entries,
                      None if relevance is None else relevance[rows], num_pos[rows], need_grad=grad is not None,
                      fused=fused)
            with torch.enable_grad() if grad is not None else contextlib.nullcontext():
                out = block_fn(b)
                if grad is not None:
                    b.backward_into(grad[rows], out)
            losses.append(out.detach())
        return torch.cat(losses)

    with torch.autocast(device_type=scores.device.type, enabled=False):
        if not (torch.is_grad_enabled() and scores.requires_grad):
            with torch.no_grad():
                return run(None)

        def compute() -> tuple[Tensor, Tensor]:
            grad = torch.zeros_like(scores)
            return run(grad), grad

        return _WithGradient.apply(scores, compute)


def mean_over_positives(values: Tensor, block: Block) -> Tensor:
    """Average of a (c, P) per-positive quantity over each query's real positives -> (c,)."""
    values = torch.where(block.pos_valid, values, torch.zeros_like(values))
    return values.sum(1) / block.num_pos.clamp_min(1).to(values.dtype)
