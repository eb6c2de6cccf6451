"""README's "Write your own loss", run as written: the loss its code block defines matches a plain loop,
values and gradients, on the PyTorch path and on the fused kernels (Triton's interpreter without a
GPU), with nothing in lab/ changed for it. The block is read from README.md, so the two cannot drift."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

from lab.core.normalize import cosine_scores, unit_rows
from lab.losses.engine import _triton, fused_sums, pair_sums, plan

from .reference import _sig

README = Path(__file__).resolve().parents[1] / "README.md"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def readme_loss() -> dict:
    """The names the README's block defines (its own example lines included)."""
    section = README.read_text().split("### Write your own loss", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, f"{README}:Write your own loss", "exec"), namespace)
    return namespace


def smooth_auc_loop(scores, targets, valid, tau):
    """1 - AUC of one query, one term at a time: for each positive k, the negatives j above it."""
    n = len(scores)
    pos = [k for k in range(n) if valid[k] and targets[k]]
    neg = [j for j in range(n) if valid[j] and not targets[j]]
    if not pos:
        return torch.zeros((), dtype=scores.dtype)
    total = torch.zeros((), dtype=scores.dtype)
    for k in pos:
        total = total + sum(_sig(scores[j] - scores[k], tau) for j in neg) / max(len(neg), 1)
    return total / len(pos)


def problem(dtype, seed=0):
    """Ties, a masked item, a query without positive, a query without negative."""
    g = torch.Generator().manual_seed(seed)
    scores = (torch.randint(-6, 7, (6, 9), generator=g) / 20).to(dtype)
    targets = torch.rand(6, 9, generator=g) < 0.4
    targets[0] = False
    targets[1] = True
    mask = torch.ones(6, 9, dtype=torch.bool)
    mask[2, 3] = False
    return scores, targets, mask


def loop_values_and_grads(scores, targets, mask, tau):
    s = scores.detach().double().requires_grad_()
    losses = torch.stack([smooth_auc_loop(s[q], targets[q].tolist(), mask[q].tolist(), tau)
                          for q in range(s.shape[0])])
    grad, = torch.autograd.grad(losses.sum(), s)
    return losses.detach(), grad


def values_and_grads(fn, scores, targets, mask, tau):
    s = scores.detach().to(DEVICE).requires_grad_()
    losses = fn(s, targets.to(DEVICE), mask=mask.to(DEVICE), reduction="none", tau=tau)
    grad, = torch.autograd.grad(losses.sum(), s)
    return losses.detach().cpu().double(), grad.cpu().double()


@pytest.fixture
def counted(monkeypatch):
    """How many sums each path computed: the test fails if a path it names was not the one taken."""
    calls = {"pytorch": 0, "fused": 0}
    for key, cls in (("pytorch", pair_sums.PairSums), ("fused", fused_sums.FusedPairSums)):
        def init(self, *args, _init=cls.__init__, _key=key, **kwargs):
            calls[_key] += 1
            _init(self, *args, **kwargs)
        monkeypatch.setattr(cls, "__init__", init)
    return calls


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_readme_loss_matches_its_loop_on_the_pytorch_path(dtype, monkeypatch, counted):
    monkeypatch.setenv(plan.FUSED_ENV, "0")
    smooth_auc = readme_loss()["smooth_auc"]
    counted.update(pytorch=0, fused=0)  # the block's own example ran on the PyTorch path (float64 checks)
    scores, targets, mask = problem(dtype)
    want, g_want = loop_values_and_grads(scores, targets, mask, 0.05)
    got, g_got = values_and_grads(smooth_auc, scores, targets, mask, 0.05)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else {}
    torch.testing.assert_close(got, want, **tol)
    torch.testing.assert_close(g_got, g_want, **tol)
    assert counted["pytorch"] > 0 and counted["fused"] == 0


@pytest.mark.skipif(_triton.triton is None and os.environ.get("RANKLAB_REQUIRE_TRITON") != "1",
                    reason="Triton is not installed: no fused kernels")
def test_the_readme_loss_matches_its_loop_on_the_fused_kernels(monkeypatch, counted):
    assert _triton.triton is not None, "RANKLAB_REQUIRE_TRITON=1 but Triton is not installed"
    monkeypatch.setenv(plan.FUSED_ENV, "1")
    smooth_auc = readme_loss()["smooth_auc"]
    counted.update(pytorch=0, fused=0)  # the block's own example ran on the PyTorch path (float64 checks)
    scores, targets, mask = problem(torch.float32, seed=1)
    want, g_want = loop_values_and_grads(scores, targets, mask, 0.05)
    got, g_got = values_and_grads(smooth_auc, scores, targets, mask, 0.05)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(g_got, g_want, rtol=1e-5, atol=1e-6)
    assert counted["fused"] > 0 and counted["pytorch"] == 0


def test_the_readme_class_is_the_loss_on_cosine_scores():
    """The embedding-level class: the batch against itself, the query left out."""
    names = readme_loss()
    g = torch.Generator().manual_seed(3)
    emb = torch.randn(12, 5, generator=g, dtype=torch.float64)
    labels = torch.arange(12) % 3
    u = unit_rows(emb, torch.float64)
    scores = cosine_scores(u, u)
    targets = labels[:, None] == labels[None, :]
    mask = ~torch.eye(12, dtype=torch.bool)
    want = torch.stack([smooth_auc_loop(scores[q], targets[q].tolist(), mask[q].tolist(), 0.01) for q in range(12)])
    torch.testing.assert_close(names["SmoothAUC"]()(emb, labels), want.mean())
    assert names["SmoothAUC"](tau=0.05).hparams == {"tau": 0.05, "reduction": "mean"}
