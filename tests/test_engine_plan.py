"""One plan per loss call, passed down (issue 47, item 3): ``plan_for`` ran twice per SmoothAP forward on the
CPU (the count of positives planned its own row chunks) and four times on the accelerator path, and
``per_query`` asked ``runs_sync_free`` before planning and patched the widths after. Now ``per_query`` makes
one ``Plan`` that carries the row passes and the sync-free choice; nothing below it plans again."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import torch

import lab.losses as L
from lab.losses.engine import blocks, fused_sums, histograms, plan

ENGINE = Path(blocks.__file__).parent


@pytest.fixture
def plans(monkeypatch):
    """Every plan_for call of the engine, counted; ``plans.accelerator = True`` gives the plan an
    accelerator gets (sync_free), as the tests emulate it on CPU tensors."""
    class Spy:
        calls = 0
        accelerator = False

    real = plan.plan_for

    def counted(*args, **kwargs):
        Spy.calls += 1
        made = real(*args, **kwargs)
        return dataclasses.replace(made, sync_free=True) if Spy.accelerator else made
    for module in (blocks, histograms, plan):
        monkeypatch.setattr(module, "plan_for", counted)
    return Spy


def forward_and_backward(loss: torch.nn.Module, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(24, 8, generator=g, requires_grad=True)
    value = loss(emb, torch.arange(24) % 6)
    value.backward()
    return value.detach(), emb.grad


@pytest.mark.parametrize("name", ["smooth_ap", "sup_ap", "sup_recall"])
@pytest.mark.parametrize("path", ["cpu", "accelerator", "accelerator, fused"])
def test_one_plan_per_forward(name, path, plans, monkeypatch):
    if "fused" in path:
        if fused_sums.triton is None:
            pytest.skip("Triton is not installed: no fused kernels")
        monkeypatch.setenv(plan.FUSED_ENV, "1")  # the kernels in Triton's interpreter (conftest.py)
    loss = L.build_loss(name)
    plans.accelerator = path != "cpu"
    plans.calls = 0
    forward_and_backward(loss)
    assert plans.calls == 1, f"{name} on the {path} path: plan_for ran {plans.calls} times in one forward"


def test_the_plan_sized_for_its_positives_is_the_plan_made_for_them():
    # for_positives is arithmetic on the plan's numbers: it gives what plan_for gives with max_positives.
    for q, n, p, chunk in [(24, 24, 3, None), (4096, 4096, 3, None), (500, 300, 77, None), (64, 64, 5, 7)]:
        with L.memory_budget("1MB"):
            once = plan.plan_for(q, n, "cpu", chunk_size=chunk).for_positives(p)
            direct = plan.plan_for(q, n, "cpu", max_positives=p, chunk_size=chunk)
            rows = plan.plan_for(q, n, "cpu", work="rows").chunk_rows
        assert once == direct and once.row_pass_rows == rows, (q, n, p)


def test_the_sync_free_path_reads_its_widths_from_the_plan_alone(plans):
    # The values and gradients of the sync-free path (widths read up front) are those of the CPU path.
    loss = L.build_loss("sup_ap")
    plans.accelerator = False
    want = forward_and_backward(loss)
    plans.accelerator = True
    got = forward_and_backward(loss)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def module_constants(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text())
    return {t.id: node.lineno for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Name) and t.id.isupper()}


def test_each_engine_constant_has_one_name_and_one_home():
    # REGISTER_TILE_ENTRIES meant 2048 in one kernel file and 4096 in the other.
    homes: dict[str, list[str]] = {}
    for path in sorted(ENGINE.glob("*.py")):
        for name in module_constants(path):
            homes.setdefault(name, []).append(path.name)
    assert {name: files for name, files in homes.items() if len(files) > 1} == {}
    assert plan.SUMS_REGISTER_TILE_ENTRIES != plan.HISTOGRAM_REGISTER_TILE_ENTRIES


def test_the_kernels_compare_their_mode_with_names():
    # `if MODE == 2` read as nothing; the modes are the names the callers pass (SIGMOID, H_MINUS, STEP).
    tree = ast.parse((ENGINE / "fused_sums.py").read_text())
    literal = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare)
               and any(isinstance(n, ast.Name) and n.id == "MODE" for n in [node.left, *node.comparators])
               and any(isinstance(n, ast.Constant) for n in [node.left, *node.comparators])]
    assert literal == [], f"fused_sums.py compares MODE with a number at lines {literal}"
