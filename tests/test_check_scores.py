"""`check_scores`, the gate of every rank loss: it refuses NaN, infinities and scores beyond the loss
limit wherever they sit (either sign, any float dtype), and reads the largest |score| without making a
(Q, N) copy of the scores (an abs() temporary cost 10x the pass itself on a 4096 x 4096 block)."""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from lab.core.checks import LOSS_SCORE_LIMIT, check_scores

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _scores(dtype: torch.dtype, where: tuple[int, int], value: float) -> torch.Tensor:
    scores = torch.linspace(-0.9, 0.9, 5 * 7).reshape(5, 7).to(dtype)
    scores[where] = value
    return scores


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("where", [(0, 0), (2, 3), (4, 6)])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinities_are_refused_anywhere(dtype, where, value):
    targets = torch.zeros(5, 7, dtype=torch.bool)
    with pytest.raises(ValueError, match="scores contain NaN or infinity"):
        check_scores(_scores(dtype, where, value), targets, None)
    with pytest.raises(ValueError, match="scores contain NaN or infinity"):
        check_scores(_scores(dtype, where, value), targets, None, limit=None)  # the metrics' gate too


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_limit_holds_on_either_side_and_its_edge_is_accepted(dtype, sign):
    targets = torch.zeros(5, 7, dtype=torch.bool)
    edge = _scores(dtype, (3, 2), sign * LOSS_SCORE_LIMIT)
    check_scores(edge, targets, None)  # |score| == limit: accepted
    beyond = _scores(dtype, (3, 2), sign * LOSS_SCORE_LIMIT * 1.5)
    with pytest.raises(ValueError, match=r"got a largest \|score\| of 1\.5e\+06"):
        check_scores(beyond, targets, None)
    check_scores(beyond, targets, None, limit=None)  # metrics: any finite score
    small = _scores(dtype, (3, 2), sign * 0.5)
    assert check_scores(small, targets, None, limit=0.9)[0] is small  # no copy of a float32/64 input


class LargestFloatOutput(TorchDispatchMode):
    """numel of the largest floating-point tensor an op returns inside the mode in new memory (a view,
    such as detach()'s, shares its input's storage and is not counted)."""

    def __init__(self, *inputs: torch.Tensor):
        super().__init__()
        self.largest = 0
        self.known = {x.untyped_storage().data_ptr() for x in inputs}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor) and t.is_floating_point() \
                    and t.untyped_storage().data_ptr() not in self.known:
                self.largest = max(self.largest, t.numel())
        return out


def test_reading_the_largest_score_makes_no_copy_of_the_scores():
    scores = torch.rand(64, 256) * 2 - 1
    targets, mask = torch.rand(64, 256) > 0.5, torch.ones(64, 256, dtype=torch.bool)
    with LargestFloatOutput(scores) as seen:
        check_scores(scores, targets, mask)
    assert seen.largest < scores.numel()
    with LargestFloatOutput(scores) as seen:
        scores.abs().max()  # the probe sees such a copy
    assert seen.largest == scores.numel()
