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

    Buffers are part of the state dict, so a checkpoint resumes with the same memory.
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

    @torch.no_grad()
    def enqueue(self, embeddings: Tensor, labels: Tensor, indices: Tensor) -> None:
        """embeddings (B, D), labels (B,) or (B, L), indices (B,): overwrite the oldest entries."""
        labels = labels.view(len(labels), -1)
        if len(embeddings) > self.size:  # only the newest `size` entries can survive anyway
            embeddings, labels, indices = embeddings[-self.size:], labels[-self.size:], indices[-self.size:]
        slots = (int(self.ptr) + torch.arange(len(embeddings), device=self.ptr.device)) % self.size
        self.embeddings[slots] = embeddings.detach().to(self.embeddings.dtype)
        self.labels[slots] = labels.to(self.labels.device)
        self.indices[slots] = indices.to(self.indices.device)
        self.ptr.fill_((int(self.ptr) + len(embeddings)) % self.size)
        self.filled.fill_(min(self.size, int(self.filled) + len(embeddings)))

    @torch.no_grad()
    def contents_after(self, embeddings: Tensor, labels: Tensor, indices: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """What ``get()`` would hold after ``enqueue`` (new entries first), without changing the memory.

        The trainer reads the memory this way and enqueues only when the step is committed, so
        an interrupted or failed step leaves the memory untouched.
        """
        labels = labels.view(len(labels), -1)
        if len(embeddings) > self.size:
            embeddings, labels, indices = embeddings[-self.size:], labels[-self.size:], indices[-self.size:]
        n = int(self.filled)
        overwritten = (int(self.ptr) + torch.arange(len(embeddings), device=self.ptr.device)) % self.size
        keep = torch.ones(n, dtype=torch.bool, device=self.ptr.device)
        keep[overwritten[overwritten < n]] = False
        old_e, old_y, old_i = self.get()
        return (torch.cat([embeddings.detach().to(old_e.dtype), old_e[keep]]),
                torch.cat([labels.to(old_y.device), old_y[keep]]),
                torch.cat([indices.to(old_i.device), old_i[keep]]))

    def get(self) -> tuple[Tensor, Tensor, Tensor]:
        """The stored (embeddings (M, D), labels (M, L), indices (M,)), M = entries filled so far."""
        n = int(self.filled)
        return self.embeddings[:n], self.labels[:n], self.indices[:n]

    def extra_repr(self) -> str:
        return f"size={self.size}, dim={self.embeddings.shape[1]}, filled={int(self.filled)}"


def exclude_self(query_indices: Tensor, ref_indices: Tensor) -> Tensor:
    """(B, M) bool mask for the loss: False where a memory entry is the query's own image."""
    return query_indices[:, None].to(ref_indices.device) != ref_indices[None, :]
