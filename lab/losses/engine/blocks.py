"""The block loop of the rank losses: per-query losses computed in chunks of queries, gradient included.

Every loss here is a sum over queries of a function of that query's row of scores. So each chunk's
gradient can be taken right after its forward pass: only the (Q, N) gradient is kept for the
backward pass, which multiplies it by the incoming per-query weights. Nothing of a chunk outlives
it, so nothing is checkpointed or recomputed (except the sigmoid tiles of a row with so many
positives that they exceed the block, see ``pair_sums``).

A rank loss needs, for each positive k of a query, sums over items j of a step surrogate of
s_j - s_k (ROADMAP Eq. 3). ``Block`` gives a chunk's positives (the anchors) and these sums, from
the fused Triton kernels of ``fused_sums`` (which never store the (query, anchor, item) block) or
from the PyTorch tiles of ``pair_sums``, as the call's ``plan.Plan`` says. Memory per chunk stays
within the plan's block whatever the number of positives.

On an accelerator no host synchronisation happens per chunk on the binary losses' path: the
widths of the compacted positives and items are read once per call (one device wait), so the
device's queue never drains between chunks (``Plan.sync_free``). On a CPU, where a read costs
nothing, each chunk compacts with ``nonzero`` at its own width, which is cheaper there.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import torch
from torch import Tensor

from ...core.checks import check_chunk_size
from . import fused_sums, pair_sums
from .plan import Plan, plan_for


class _WithGradient(torch.autograd.Function):
    """(Q,) losses whose (Q, N) gradient with respect to the scores was computed beforehand."""

    @staticmethod
    def forward(ctx, scores: Tensor, losses: Tensor, grad: Tensor) -> Tensor:
        ctx.save_for_backward(grad)
        return losses

    @staticmethod
    def backward(ctx, grad_losses: Tensor):
        grad, = ctx.saved_tensors
        return grad_losses[:, None] * grad, None, None


def with_gradient(scores: Tensor, losses: Tensor, grad: Tensor) -> Tensor:
    """``losses`` (Q,), computed without autograd, as a function of ``scores`` with gradient ``grad`` (Q, N)."""
    return _WithGradient.apply(scores, losses, grad)


def row_chunks(num_rows: int, num_items: int, device: torch.device, rows: Optional[int] = None) -> list[slice]:
    """Slices of ``rows`` rows (default: as a plan sizes them) for (Q, N) passes: cache-sized on a CPU, as
    many rows as the memory budget allows elsewhere (each slice is a few kernel launches)."""
    step = rows or plan_for(num_rows, num_items, device, work="rows").row_pass_rows
    return [slice(start, start + step) for start in range(0, num_rows, step)]


def count_rows(flags: Tensor, rows: Optional[int] = None) -> Tensor:
    """flags.sum(1) of a (Q, N) bool mask -> (Q,) int32, over chunks of ``rows`` rows (a call's
    ``Plan.row_pass_rows``; planned here when not given). A sum of a bool mask first copies it to
    integers: at Q = N = 4096 a 64 MB copy in one piece (page faults and cache misses included) took
    ~30 ms of smooth_ap's call on a CPU, cache-sized chunks ~2 ms."""
    counts = flags.new_empty(flags.shape[0], dtype=torch.int32)
    chunks = row_chunks(*flags.shape, flags.device, rows)
    # One buffer for every chunk: a new temporary per chunk can go back to the OS and be faulted in again.
    buffer = flags.new_empty(min(chunks[0].stop, flags.shape[0]) if chunks else 0, flags.shape[1], dtype=torch.int32)
    for rows in chunks:
        out = counts[rows]
        torch.sum(buffer[: len(out)].copy_(flags[rows]), 1, dtype=torch.int32, out=out)
    return counts


def compact(flags: Tensor, width: Optional[int] = None, count: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
    """Column indices of each row's True entries, in order, padded with 0 -> (index, present), (c, W).

    With ``width`` (at least every row's count; W = width) no host synchronisation: each True entry
    is written at its rank among its row's, the others into a spare column that is dropped. Without
    it (W = the largest count), the counts are read and ``nonzero`` gathers the columns: cheaper on a
    CPU, where reading a value costs nothing. ``count`` (c,) = flags.sum(1), if the caller has it: on
    a CPU each count of a (c, N) bool mask first copies it to integers (counted twice per block, they
    made smooth_ap slower at B = 4096; docs/benchmarks.md, "Two checkouts side by side").
    """
    if width is not None:
        rank = flags.cumsum(1)
        slot = torch.where(flags, rank - 1, width)
        index = torch.zeros(flags.shape[0], width + 1, dtype=torch.long, device=flags.device)
        index.scatter_(1, slot, torch.arange(flags.shape[1], device=flags.device).expand_as(slot))
        return index[:, :width], torch.arange(width, device=flags.device) < rank[:, -1:]
    count = flags.sum(1, dtype=torch.int32) if count is None else count
    width = max(int(count.max()), 1) if flags.numel() else 1
    rows, columns = flags.nonzero(as_tuple=True)  # row-major: each row's columns in order
    if flags.numel() and int(count.min()) == width:  # every row has the same count (e.g. m samples per class)
        index = columns.view(flags.shape[0], width)
    else:
        slot = torch.arange(len(rows), device=flags.device) - (count.cumsum(0) - count)[rows]
        index = torch.zeros(flags.shape[0], width, dtype=torch.long, device=flags.device)
        index[rows, slot] = columns
    return index, torch.arange(width, device=flags.device) < count[:, None]


class Items(NamedTuple):
    """The items j of a sum: their scores (c, M), -inf for those left out, and their column in the
    row (c, M), or None when they are the row itself (M = N)."""

    scores: Tensor
    index: Optional[Tensor]


class Widths(NamedTuple):
    """The most positives, kept items and kept negatives of a query in the call: the compaction widths,
    read once per call where a read waits for the device (``Plan.sync_free``)."""

    positives: int
    kept: int
    negatives: int


class Block:
    """One chunk of queries and its positives, the anchors k of the sums. P = most positives of a
    query in the chunk (in the call when ``Plan.sync_free``); anchor columns beyond a query's own
    count are padding.

    The sums (``sigmoid_sums``, ``h_minus_sums``) are what carries the gradient: ``backward_into``
    chains d loss / d sums back to the scores by hand. ``detached_scores`` carries none: a loss that
    computes with it gets no gradient through it (exact ranks only, as Sup-H-AP's).
    """

    def __init__(self, detached_scores: Tensor, pos: Tensor, valid: Tensor, plan: Plan,
                 widths: Optional[Widths] = None, relevance: Optional[Tensor] = None, need_grad: bool = False,
                 tracked: Optional[list] = None, num_pos: Optional[Tensor] = None) -> None:
        self.detached_scores = detached_scores  # (c, N), no gradient
        self.pos = pos  # (c, N) bool, positive and not masked
        self.valid = valid  # (c, N) bool, not masked
        self.relevance = relevance  # (c, N) graded relevance, when per_query was given one
        self.plan, self.widths, self.need_grad = plan, widths, need_grad
        self.num_pos = pos.sum(1, dtype=torch.int32) if num_pos is None else num_pos  # (c,), given by per_query
        # (c, P); pos_valid False on padding
        self.pos_index, self.pos_valid = compact(pos, None if widths is None else widths.positives, self.num_pos)
        self.anchors = detached_scores.gather(1, self.pos_index)  # (c, P) positives' scores (padding: finite)
        self.tracked = [] if tracked is None else tracked  # (sums leaf, PairSums, items index, anchor index)

    def level(self, anchors: Tensor) -> "Block":
        """The same chunk with other anchors (c, N) bool, e.g. the positives of one relevance value."""
        return Block(self.detached_scores, anchors, self.valid, self.plan, self.widths, self.relevance,
                     self.need_grad, self.tracked)

    # ------------------------------------------------------------------------------ items
    def items(self, keep: Tensor, width: Optional[int] = None) -> Items:
        """The items ``keep`` (c, N) marks, at most ``width`` per row (read from ``keep`` if not given);
        gathered into fewer columns when few are kept, so a sum over negatives costs what the
        negatives cost."""
        count = None if width is not None else keep.sum(1, dtype=torch.int32)  # one count, compact reuses it
        width = width if count is None else max(int(count.max()), 1)
        if width <= 0.75 * keep.shape[1]:
            index, present = compact(keep, width if count is None else None, count)
            return Items(self.detached_scores.gather(1, index).masked_fill_(~present, float("-inf")), index)
        return Items(self.detached_scores.masked_fill(~keep, float("-inf")), None)

    def all_items(self) -> Items:
        """Every kept item (the query's row without its masked items)."""
        return self.items(self.valid, None if self.widths is None else self.widths.kept)

    def negatives(self) -> Items:
        """The kept items that are not positives."""
        return self.items(self.valid & ~self.pos, None if self.widths is None else self.widths.negatives)

    def positives(self) -> Items:
        """The positives themselves as items (P columns)."""
        return Items(self.anchors.masked_fill(~self.pos_valid, float("-inf")), self.pos_index)

    # ------------------------------------------------------------------------------- sums
    def sigmoid_sums(self, items: Items, tau: float) -> Tensor:
        """sum over ``items`` j of sigma((s_j - s_k) / tau) for every anchor k -> (c, P)."""
        return self._tracked(items, self._sums_class(items.scores, self.anchors, tau, None, None, self.need_grad,
                                                     self.plan.block_entries, self.plan.tile_entries))

    def h_minus_sums(self, items: Items, tau: float, rho: float, delta: float) -> Tensor:
        """sum over ``items`` j of H^-(s_j - s_k) for every anchor k -> (c, P)."""
        return self._tracked(items, self._sums_class(items.scores, self.anchors, tau, rho, delta, self.need_grad,
                                                     self.plan.block_entries, self.plan.tile_entries))

    @property
    def _sums_class(self) -> type:
        return fused_sums.FusedPairSums if self.plan.fused else pair_sums.PairSums

    def _tracked(self, items: Items, sums) -> Tensor:
        """The (c, P) sums, as a leaf that ``backward_into`` follows back to the scores."""
        if not self.need_grad:
            return sums.sums
        leaf = sums.sums.requires_grad_()
        self.tracked.append((leaf, sums, items.index, self.pos_index))
        return leaf

    def count_at_least(self, items: Items) -> Tensor:
        """#{items j : s_j >= s_k} for every anchor k (exact step, H(0) = 1, no gradient) -> (c, P)."""
        if self.plan.fused:
            return fused_sums.count_at_least(items.scores, self.anchors)
        return pair_sums.count_at_least(items.scores, self.anchors, self.plan.tile_entries)

    def backward_into(self, grad: Tensor, losses: Tensor) -> None:
        """Add d losses.sum() / d scores to ``grad`` (c, N): autograd from the losses to the sums
        (small tensors), then each sum's analytic gradient."""
        if not losses.requires_grad:
            return
        leaves = [entry[0] for entry in self.tracked]
        grads = torch.autograd.grad(losses.sum(), leaves, allow_unused=True)
        for (_, sums, item_index, anchor_index), grad_sums in zip(self.tracked, grads):
            if grad_sums is None:
                continue
            if item_index is None:
                grad_anchors = sums.backward(grad_sums, grad)
            else:
                grad_items = torch.zeros_like(sums.items)
                grad_anchors = sums.backward(grad_sums, grad_items)
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

    The call's ``plan`` sizes the chunks (``chunk_size`` queries if given). ``block_fn`` reaches the
    scores through the block's sums only: where a gradient is needed and its values carry none, a
    :class:`NoGradientError` says so (an all-zero gradient would train nothing, silently).
    ``relevance`` (Q, N), optional, reaches it as ``block.relevance`` (graded losses: SupRank Eq. 21, 24).
    """
    check_chunk_size(chunk_size)
    pos = targets & mask
    # The call's one plan. Nothing below asks the device or the environment again: the counts run in its
    # row passes, the widths follow its sync_free, its chunks are sized for the positives once counted.
    plan = plan_for(*scores.shape, scores.device, scores.dtype, chunk_size=chunk_size)
    # The call's one host read. Sync-free (an accelerator): every chunk's compaction widths, read up front.
    # A CPU's chunks compact themselves and need only the most positives: three (Q, N) counts more
    # cost it ~0.15 s a call at Q = N = 4096 (docs/benchmarks.md, "Two checkouts side by side").
    num_pos = count_rows(pos, plan.row_pass_rows)
    widths: Optional[Widths] = None
    if plan.sync_free:
        counts = [num_pos, count_rows(mask, plan.row_pass_rows), count_rows(mask & ~pos, plan.row_pass_rows)]
        widths = Widths(*(max(w, 1) for w in torch.stack(counts).amax(1).tolist())) if scores.numel() else \
            Widths(1, 1, 1)
        most_positives = widths.positives
    else:
        most_positives = max(int(num_pos.max()), 1) if scores.numel() else 1
    plan = plan.for_positives(most_positives)
    step = plan.chunk_rows
    need_grad = torch.is_grad_enabled() and scores.requires_grad
    grad = torch.zeros_like(scores) if need_grad else None
    losses = []
    with torch.autocast(device_type=scores.device.type, enabled=False), torch.set_grad_enabled(need_grad):
        for start in range(0, scores.shape[0], step):
            rows = slice(start, start + step)
            b = Block(scores[rows].detach(), pos[rows], mask[rows], plan, widths,
                      None if relevance is None else relevance[rows], need_grad, num_pos=num_pos[rows])
            out = block_fn(b)
            if need_grad:
                check_gradient_reached(out, b, block_fn)
                b.backward_into(grad[rows], out)
            losses.append(out.detach())
    losses = torch.cat(losses) if losses else scores.new_zeros(0)
    return with_gradient(scores, losses, grad) if need_grad else losses


class NoGradientError(ValueError):
    """A block function whose values carry no gradient to the scores, where one is needed."""


def check_gradient_reached(out: Tensor, block: Block, block_fn: Callable) -> None:
    """One line, not an all-zero gradient, when ``block_fn`` reached the scores without a sum that carries
    their gradient (it computed from ``detached_scores`` or ``count_at_least`` only, or detached a sum).
    A chunk without any positive has nothing to differentiate (the graded losses form no sum there)."""
    if block.tracked and out.requires_grad:
        return
    if bool(block.pos.any()):  # read only here, off the usual path: no wait on the device per chunk
        name = getattr(block_fn, "__qualname__", repr(block_fn))
        raise NoGradientError(f"per_query: {name} returned values with no gradient to the scores, which need one: "
                              "only the block's sigmoid_sums and h_minus_sums carry it (detached_scores and "
                              "count_at_least carry none); its gradient would be all zeros")


def mean_over_positives(values: Tensor, block: Block) -> Tensor:
    """Average of a (c, P) per-positive quantity over each query's real positives -> (c,)."""
    values = torch.where(block.pos_valid, values, torch.zeros_like(values))
    return values.sum(1) / block.num_pos.clamp_min(1).to(values.dtype)
