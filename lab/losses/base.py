"""What every rank loss shares: input checks, the chunked (query, positive, item) engine,
the reduction over queries, and the embedding-level ``nn.Module`` wrapper.

Score level: ``scores`` (Q, N) similarities (higher = closer), ``targets`` (Q, N) bool
relevance, ``mask`` (Q, N) bool (False = item ignored, e.g. the query itself).
"""
from __future__ import annotations

import inspect
import warnings
from typing import Callable, NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

REDUCTIONS = ("mean", "none")
# Entries of one (queries, positives, items) block. 2**22 float32 = 16 MB per intermediate.
MAX_BLOCK_ELEMENTS = 2**22


# ----------------------------------------------------------------------------- input checks
def _as_bool(name: str, x: Tensor, shape: torch.Size, device: torch.device) -> Tensor:
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.shape != shape:
        raise ValueError(f"{name} must have the shape of scores {tuple(shape)}, got {tuple(x.shape)}")
    if x.device != device:
        raise ValueError(f"{name} is on {x.device} but scores are on {device}; put them on one device")
    if x.dtype == torch.bool:
        return x
    if x.is_floating_point() or x.is_complex() or not ((x == 0) | (x == 1)).all():
        raise ValueError(f"{name} must be a bool tensor (or integers 0/1), got dtype {x.dtype}")
    return x.bool()


def check_scores(scores: Tensor, targets: Tensor, mask: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """Validate score-level inputs; return (float scores, bool targets, bool mask).

    Half-precision scores are promoted to float32: a rank loss sums thousands of terms.
    """
    if not isinstance(scores, Tensor):
        raise ValueError(f"scores must be a torch.Tensor, got {type(scores).__name__}")
    if scores.dim() != 2:
        raise ValueError(f"scores must be 2-D (queries, items), got shape {tuple(scores.shape)}")
    if scores.numel() == 0:
        raise ValueError(f"scores is empty (shape {tuple(scores.shape)}): need at least one query and one item")
    if not scores.is_floating_point():
        raise ValueError(f"scores must be a floating-point tensor, got dtype {scores.dtype}")
    if not torch.isfinite(scores).all():
        raise ValueError("scores contain NaN or infinity; check the embeddings that produced them")
    if scores.dtype in (torch.float16, torch.bfloat16):
        scores = scores.float()
    targets = _as_bool("targets", targets, scores.shape, scores.device)
    mask = torch.ones_like(targets) if mask is None else _as_bool("mask", mask, scores.shape, scores.device)
    return scores, targets, mask


def check_reduction(reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")


def check_unit_interval(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and 0 <= value <= 1):
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")


def check_chunk_size(chunk_size: Optional[int]) -> None:
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size >= 1):
        raise ValueError(f"chunk_size must be None or an integer >= 1, got {chunk_size!r}")


# ------------------------------------------------------------------------------- reduction
def reduce(losses: Tensor, has_positive: Tensor, reduction: str) -> Tensor:
    """``"none"``: (Q,) with 0 for queries without positive; ``"mean"``: mean over the others."""
    losses = torch.where(has_positive, losses, torch.zeros_like(losses))
    if reduction == "none":
        return losses
    count = int(has_positive.sum())
    if count == 0:
        warnings.warn(
            "no query has a positive item in this batch: the loss is 0. Sample several "
            "items per class (e.g. MPerClassBatchSampler) so each query has a positive.",
            RuntimeWarning,
            stacklevel=3,
        )
        return losses.sum() * 0.0  # keeps the graph, so backward() still works
    return losses.sum() / count


# ------------------------------------------------------------------------ chunked engine
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


# ------------------------------------------------------------------ embedding-level module
def check_embeddings(name: str, x: Tensor) -> None:
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D tensor (batch, dim), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be floating point, got dtype {x.dtype}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} contain NaN or infinity (did the model diverge?)")


def check_labels(name: str, labels: Tensor, size: int, device: torch.device) -> Tensor:
    """Labels are (B,) or hierarchical (B, L) integers, finest level first."""
    if not isinstance(labels, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of integer class ids, got {type(labels).__name__}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer tensor of class ids, got dtype {labels.dtype}")
    if labels.dim() not in (1, 2) or labels.shape[0] != size:
        raise ValueError(f"{name} must have shape ({size},) or ({size}, levels), got {tuple(labels.shape)}")
    if labels.dim() == 2 and labels.shape[1] == 0:
        raise ValueError(f"{name} has zero label levels: need at least one column")
    if labels.device != device:
        raise ValueError(f"{name} is on {labels.device} but the embeddings are on {device}")
    return labels


def pairwise_inputs(
    embeddings: Tensor,
    labels: Tensor,
    ref_embeddings: Optional[Tensor] = None,
    ref_labels: Optional[Tensor] = None,
    mask: Optional[Tensor] = None,
    include_self: bool = False,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Cosine scores (Q, N), query labels, reference labels and the item mask.

    Without references the batch retrieves from itself and the query is masked out, unless
    ``include_self`` (the reference repositories' objective: the query is its own top positive).
    """
    check_embeddings("embeddings", embeddings)
    labels = check_labels("labels", labels, embeddings.shape[0], embeddings.device)
    if (ref_embeddings is None) != (ref_labels is None):
        raise ValueError("ref_embeddings and ref_labels must be given together (or neither)")
    if ref_embeddings is None:
        ref_embeddings, ref_labels = embeddings, labels
        self_retrieval = True
    else:
        check_embeddings("ref_embeddings", ref_embeddings)
        if ref_embeddings.shape[1] != embeddings.shape[1]:
            raise ValueError(
                f"ref_embeddings have dim {ref_embeddings.shape[1]} but embeddings have dim {embeddings.shape[1]}"
            )
        if ref_embeddings.device != embeddings.device:
            raise ValueError(f"ref_embeddings are on {ref_embeddings.device}, embeddings on {embeddings.device}")
        ref_labels = check_labels("ref_labels", ref_labels, ref_embeddings.shape[0], embeddings.device)
        if ref_labels.dim() != labels.dim() or ref_labels.shape[1:] != labels.shape[1:]:
            raise ValueError(f"ref_labels levels {tuple(ref_labels.shape)} do not match labels {tuple(labels.shape)}")
        self_retrieval = False
    with torch.autocast(device_type=embeddings.device.type, enabled=False):
        q = F.normalize(embeddings.float() if embeddings.dtype != torch.float64 else embeddings, dim=1)
        r = F.normalize(ref_embeddings.to(q.dtype), dim=1)
        scores = q @ r.T
    shape = scores.shape
    if mask is not None:
        mask = _as_bool("mask", mask, shape, scores.device)
    if self_retrieval and not include_self:
        not_self = ~torch.eye(shape[0], dtype=torch.bool, device=scores.device)
        mask = not_self if mask is None else mask & not_self
    if mask is None:
        mask = torch.ones(shape, dtype=torch.bool, device=scores.device)
    return scores, labels, ref_labels, mask


def fine(labels: Tensor) -> Tensor:
    """The finest label level: labels itself if (B,), column 0 if (B, L)."""
    return labels if labels.dim() == 1 else labels[:, 0]


class RankLoss(nn.Module):
    """Base of the embedding-level losses: ``loss = Cls(**hparams)(embeddings, labels)``.

    Subclasses set ``functional = staticmethod(score_level_loss)`` and store their hyper-parameters
    with ``self.save_hparams(locals())``; ``hparams`` is what gets passed to ``functional``.
    """

    functional: Callable[..., Tensor]
    # True when the constructor needs ``num_classes`` and ``embed_dim`` (learnable proxies).
    needs_num_classes: bool = False
    # Constructor arguments that configure forward() (e.g. how relevance is built), not ``functional``.
    forward_hparams: tuple[str, ...] = ()

    def save_hparams(self, local_vars: dict) -> None:
        skip = ("self", "include_self", *self.forward_hparams)
        names = [n for n in inspect.signature(type(self).__init__).parameters if n not in skip]
        self.hparams = {n: local_vars[n] for n in names}
        self.include_self = bool(local_vars.get("include_self", False))
        # Fail at construction, not at step 1: run the checks on a tiny dummy problem.
        self.functional(torch.tensor([[0.5, 0.1]]), torch.tensor([[True, False]]), **self.hparams)

    def targets(self, labels: Tensor, ref_labels: Tensor) -> Tensor:
        """Binary relevance: same finest-level class."""
        return fine(labels)[:, None] == fine(ref_labels)[None, :]

    def targets_for(self, labels: Tensor, ref_labels: Tensor, mask: Tensor) -> Tensor:
        """What forward() gives ``functional``: ``targets`` by default. Graded losses override it,
        since their relevance is normalised over the items the mask keeps (SupRank Eq. 20)."""
        return self.targets(labels, ref_labels)

    def forward(
        self,
        embeddings: Tensor,
        labels: Tensor,
        ref_embeddings: Optional[Tensor] = None,
        ref_labels: Optional[Tensor] = None,
        *,
        mask: Optional[Tensor] = None,
    ) -> Tensor:
        """embeddings (B, D), labels (B,) or (B, L); refs (M, D), (M,) or (M, L); mask (B, M) bool."""
        scores, labels, ref_labels, mask = pairwise_inputs(
            embeddings, labels, ref_embeddings, ref_labels, mask, self.include_self
        )
        return self.functional(scores, self.targets_for(labels, ref_labels, mask), mask=mask, **self.hparams)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.hparams.items())
