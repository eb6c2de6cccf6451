"""Cross-batch memory (XBM, Wang et al., CVPR 2020): a FIFO queue of past embeddings.

Embeddings drift slowly once training has warmed up, so embeddings of recent batches,
stored without gradient, are usable references: each query is ranked against the whole
memory, a much larger "batch" than fits in one forward pass. Use: enqueue the current batch,
then read; ``exclude_self`` drops each query's own stored copy (by dataset index, so a duplicate
image elsewhere in the memory still counts as a positive).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn


class CrossBatchMemory(nn.Module):
    """Ring buffer of ``size`` (embedding (D,), labels (L,), dataset index) entries.

    Buffers are part of the state dict, so a checkpoint resumes with the same memory. The write
    position and the fill are mirrored as Python ints (``_ptr``, ``_filled``; refreshed when a state
    dict is loaded): a step reads neither from the device (one wait per step on a GPU, issue 34).
    """

    def __init__(self, size: int, dim: int, num_levels: int = 1) -> None:
        super().__init__()
        if size < 1:
            raise ValueError(f"memory size must be >= 1, got {size}")
        self.size = size
        self.register_buffer("embeddings", torch.zeros(size, dim))
        self.register_buffer("labels", torch.zeros(size, num_levels, dtype=torch.long))
        self.register_buffer("indices", torch.full((size,), -1, dtype=torch.long))
        self.register_buffer("ptr", torch.zeros((), dtype=torch.long))  # next slot to write
        self.register_buffer("filled", torch.zeros((), dtype=torch.long))  # slots holding data
        self._ptr = self._filled = 0
        self.register_load_state_dict_post_hook(_mirror_after_load)

    @torch.no_grad()
    def enqueue(self, embeddings: Tensor, labels: Tensor, indices: Tensor) -> None:
        """embeddings (B, D), labels (B,) or (B, L), indices (B,): overwrite the oldest entries."""
        labels = labels.view(len(labels), -1)
        if len(embeddings) > self.size:  # only the newest `size` entries can survive anyway
            embeddings, labels, indices = embeddings[-self.size:], labels[-self.size:], indices[-self.size:]
        slots = torch.arange(self._ptr, self._ptr + len(embeddings), device=self.ptr.device) % self.size
        self.embeddings[slots] = embeddings.detach().to(self.embeddings.dtype)
        self.labels[slots] = labels.to(self.labels.device)
        self.indices[slots] = indices.to(self.indices.device)
        self._ptr = (self._ptr + len(embeddings)) % self.size
        self._filled = min(self.size, self._filled + len(embeddings))
        self.ptr.fill_(self._ptr)
        self.filled.fill_(self._filled)

    @torch.no_grad()
    def contents_after(self, embeddings: Tensor, labels: Tensor, indices: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """What ``get()`` would hold after ``enqueue`` (new entries first), without changing the memory.

        The trainer reads the memory this way and enqueues only when the step is committed, so
        an interrupted or failed step leaves the memory untouched.
        """
        labels = labels.view(len(labels), -1)
        if len(embeddings) > self.size:
            embeddings, labels, indices = embeddings[-self.size:], labels[-self.size:], indices[-self.size:]
        # The kept slots are known on the host: slices, not a boolean index (which waits for the device).
        kept = kept_slots(self._ptr, len(embeddings), self._filled, self.size)
        old_e, old_y, old_i = self.get()
        return (torch.cat([embeddings.detach().to(old_e.dtype), *(old_e[a:b] for a, b in kept)]),
                torch.cat([labels.to(old_y.device), *(old_y[a:b] for a, b in kept)]),
                torch.cat([indices.to(old_i.device), *(old_i[a:b] for a, b in kept)]))

    def get(self) -> tuple[Tensor, Tensor, Tensor]:
        """The stored (embeddings (M, D), labels (M, L), indices (M,)), M = entries filled so far."""
        n = self._filled
        return self.embeddings[:n], self.labels[:n], self.indices[:n]

    def extra_repr(self) -> str:
        return f"size={self.size}, dim={self.embeddings.shape[1]}, filled={self._filled}"


def _mirror_after_load(memory: CrossBatchMemory, incompatible_keys) -> None:
    memory._ptr, memory._filled = int(memory.ptr), int(memory.filled)  # once per load, not per step


def kept_slots(ptr: int, count: int, filled: int, size: int) -> list[tuple[int, int]]:
    """Ascending [start, stop) ranges of the slots below ``filled`` that writing ``count`` (<= size)
    entries from slot ``ptr`` (wrapping at ``size``) leaves alone."""
    end = ptr + count
    written = [(ptr, end)] if end <= size else [(0, end - size), (ptr, size)]
    kept, start = [], 0
    for a, b in written:
        if a > start:
            kept.append((start, min(a, filled)))
        start = max(start, b)
    kept.append((start, filled))
    return [(a, b) for a, b in kept if a < b]


def exclude_self(query_indices: Tensor, ref_indices: Tensor) -> Tensor:
    """(B, M) bool mask for the loss: False where a memory entry is the query's own image."""
    return query_indices[:, None].to(ref_indices.device) != ref_indices[None, :]
