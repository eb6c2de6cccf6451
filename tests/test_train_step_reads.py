"""The Trainer's two read protocols (lab.train.step_reads): chosen once, when the trainer is built, and the
same contract to every caller on both: a step's record is handed out with floats in it, or not at all."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from torch import Tensor

from lab.train.step_reads import DeferredReads, ImmediateReads
from tests.test_train_host_reads import PlainLoss, PlainModel, make

LAB = Path(__file__).resolve().parents[1] / "lab"


def functions_using(path: Path, attribute: str, context: type = ast.Load) -> list[str]:
    """The functions of ``path`` (qualified by their class) that read (``ast.Load``) or set (``ast.Store``)
    ``.attribute``, once per use."""
    found = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, f"{scope}.{child.name}" if scope else child.name)
            else:
                if isinstance(child, ast.Attribute) and child.attr == attribute and isinstance(child.ctx, context):
                    found.append(scope)
                visit(child, scope)
    visit(ast.parse(path.read_text(), str(path)), "")
    return found


def test_the_read_protocol_is_chosen_once_when_the_trainer_is_built():
    """The plan's ``deferred_reads`` is read where the plan describes itself and once by the Trainer, where it
    chooses its protocol: no step, read or re-train asks again (they used to, in 8 places, and the re-train
    swapped the plan)."""
    readers = {f"{path.relative_to(LAB)}:{scope}" for path in sorted(LAB.rglob("*.py"))
               for scope in functions_using(path, "deferred_reads")}
    assert readers == {"train/runtime.py:RuntimePlan.describe", "train/trainer.py:Trainer.__init__"}, readers
    trainer = LAB / "train" / "trainer.py"
    assert functions_using(trainer, "deferred_reads") == ["Trainer.__init__"]
    assert functions_using(trainer, "plan", ast.Store) == ["Trainer.__init__"], "only __init__ sets self.plan"
    tree = ast.parse(trainer.read_text())
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not names & {"DeferredReads", "ImmediateReads"}, "the trainer never asks which protocol it has"


@pytest.mark.parametrize("deferred", [False, True])
def test_a_step_hands_out_its_record_with_floats_or_not_at_all(deferred):
    """Logging at steps 1, 3, 6: on the deferred protocol steps 2, 4, 5 hand out nothing (their numbers wait
    on the device); whatever is handed out, by a step, ``step(n)``, ``fit`` or the history, holds floats."""
    trainer = make(deferred, PlainLoss(), PlainModel(), steps=8)
    assert isinstance(trainer.reads, DeferredReads if deferred else ImmediateReads)
    handed = [trainer._train_step() for _ in range(5)]
    assert [r is None for r in handed] == ([False, True, False, True, True] if deferred else [False] * 5)
    handed += [trainer.step(1), trainer.fit()]  # 6, then 7 and 8 (not read until fit's end)
    assert [r["step"] for r in handed if r is not None] == ([1, 3, 6, 8] if deferred else [1, 2, 3, 4, 5, 6, 8])
    for record in [r for r in handed if r is not None] + trainer.history:
        assert not any(isinstance(v, Tensor) for v in record.values()), record
        assert all(isinstance(record[k], float) for k in ("loss", "loss_batch", "batch_ap", "grad_norm")), record
    assert [r["step"] for r in trainer.history] == list(range(1, 9))
