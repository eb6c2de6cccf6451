"""The block function's contract speaks (issue 47, item 6): ``per_query`` takes a loss's gradient from the
block's sums, so a block function whose values come from ``detached_scores`` (or the exact counts) alone
got an all-zero gradient, with no warning: a loss that trains nothing. Now it is one line."""
from __future__ import annotations

import pytest
import torch

import lab.losses as L
from lab.losses import functional as LF
from lab.losses.engine import Block, mean_over_positives, per_query


def problem(seed: int = 0, rows: int = 6, items: int = 10):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(rows, items, generator=g, dtype=torch.float64).requires_grad_()
    targets = torch.rand(rows, items, generator=g) < 0.4
    targets[:, 0] = True
    return scores, targets, torch.ones(rows, items, dtype=torch.bool)


def from_detached_scores(b: Block) -> torch.Tensor:  # the review's example: a hinge on the raw scores
    return torch.where(b.pos, (0.5 - b.detached_scores).clamp_min(0), 0.0).sum(1)


def from_exact_counts(b: Block) -> torch.Tensor:
    return mean_over_positives(b.count_at_least(b.all_items()), b)


def from_a_detached_sum(b: Block) -> torch.Tensor:
    return mean_over_positives(b.sigmoid_sums(b.negatives(), 0.1).detach(), b)


@pytest.mark.parametrize("block_fn", [from_detached_scores, from_exact_counts, from_a_detached_sum])
def test_a_block_function_without_gradient_is_one_line_not_a_zero_gradient(block_fn):
    scores, targets, mask = problem()
    with pytest.raises(ValueError) as info:  # before: no error, and an all-zero gradient
        per_query(block_fn, scores, targets, mask)
    message = str(info.value)
    assert type(info.value).__name__ == "NoGradientError"
    assert message.startswith(f"per_query: {block_fn.__qualname__} returned values with no gradient to the scores")
    assert "sigmoid_sums and h_minus_sums carry it" in message and "\n" not in message


@pytest.mark.parametrize("block_fn", [from_detached_scores, from_exact_counts, from_a_detached_sum])
def test_without_a_gradient_to_take_the_same_function_runs(block_fn):
    scores, targets, mask = problem()
    with torch.no_grad():
        values = per_query(block_fn, scores, targets, mask)
    assert values.shape == (6,) and torch.isfinite(values).all()
    per_query(block_fn, scores.detach(), targets, mask)  # scores that need no gradient: nothing to check


def test_the_gradient_is_checked_against_autograd_where_a_sum_carries_it():
    # The contract's other side: a block function through its sums gets the gradient autograd gives.
    scores, targets, mask = problem(1)

    def block_fn(b: Block) -> torch.Tensor:
        return mean_over_positives(b.sigmoid_sums(b.negatives(), 0.1), b)

    per_query(block_fn, scores, targets, mask).sum().backward()
    want = scores.detach().clone().requires_grad_()
    pos, neg = targets & mask, mask & ~targets
    sums = torch.sigmoid((want[:, None, :] - want[:, :, None]) / 0.1) * neg[:, None, :]  # [q, k, j]
    loop = (sums.sum(2) * pos).sum(1) / pos.sum(1)
    loop.sum().backward()
    torch.testing.assert_close(scores.grad, want.grad)


def test_a_chunk_without_positives_has_nothing_to_differentiate():
    # The graded losses form no sum for a chunk whose queries have no positive: no error, a zero gradient there.
    g = torch.Generator().manual_seed(2)
    scores = torch.randn(4, 8, generator=g, dtype=torch.float64).requires_grad_()
    relevance = torch.randint(0, 3, (4, 8), generator=g).to(torch.float64)
    relevance[1] = 0  # query 1: no positive
    for loss in (LF.sup_ndcg, LF.sup_hap):
        scores.grad = None
        loss(scores, relevance, chunk_size=1).backward()
        assert torch.equal(scores.grad[1], torch.zeros(8, dtype=torch.float64))
        assert scores.grad[[0, 2, 3]].abs().sum() > 0


@pytest.mark.parametrize("name", sorted(L.LOSSES))
def test_every_loss_keeps_its_gradient_contract(name):
    emb = torch.randn(16, 8, dtype=torch.float64, requires_grad=True)
    labels = torch.arange(16) % 4
    if name in ("sup_hap", "sup_ndcg", "happier", "rod_ndcg"):
        labels = torch.stack([labels, labels // 2], 1)
    L.build_loss(name, num_classes=4, embed_dim=8)(emb, labels).backward()
    assert emb.grad is not None and emb.grad.abs().sum() > 0
