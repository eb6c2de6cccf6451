"""The chunked (query, positive, item) engine of the rank losses.

A rank loss needs, for each positive k of a query, the differences s_j - s_k to every item j
(ROADMAP Eq. 3). ``per_query`` forms them in (chunk, P, N) blocks, P the most positives of a
query in the chunk, sized so a block holds at most ``MAX_BLOCK_ELEMENTS`` entries, and
checkpoints each chunk so the backward pass holds one block at a time.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from ..core.checks import check_chunk_size

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
