"""RankLab's losses inside pytorch-metric-learning (PML), the installed version: its call, its miners' tuples,
its trainer (with a loss optimizer for the proxies), MultipleLosses, CrossBatchMemory, SelfSupervisedLoss and
DistributedLossWrapper (the last three through lab.losses.pml, which widens PML's class checks)."""
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

pml = pytest.importorskip("pytorch_metric_learning")  # the dev extra installs it
from pytorch_metric_learning import losses as pml_losses  # noqa: E402
from pytorch_metric_learning import miners, samplers, trainers  # noqa: E402
from pytorch_metric_learning.utils import distributed as pml_distributed  # noqa: E402

from lab.losses import LOSSES, ROADMAPProxy, SmoothAP, SupAP, build_loss  # noqa: E402
from lab.losses.pml import CrossBatchMemory, DistributedLossWrapper, SelfSupervisedLoss  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DIM, CLASSES, PER_CLASS = 8, 6, 4
logging.getLogger("PML").setLevel(logging.WARNING)


def batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(CLASSES).repeat_interleave(PER_CLASS)
    return torch.randn(len(labels), DIM, generator=generator), labels


def every_loss(name: str):
    return build_loss(name, num_classes=CLASSES, embed_dim=DIM)


def hand_mask(indices_tuple, rows: int, cols: int) -> torch.Tensor:
    """The entries a tuple keeps, by the rule of lab.losses.calls, with plain loops."""
    keep = [[False] * cols for _ in range(rows)]
    if len(indices_tuple) == 3:
        a, p, n = (t.tolist() for t in indices_tuple)
        pairs = list(zip(a, p)) + list(zip(a, n))
    else:
        a1, p, a2, n = (t.tolist() for t in indices_tuple)
        pairs = list(zip(a1, p)) + list(zip(a2, n))
    for i, j in pairs:
        keep[i][j] = True
    return torch.tensor(keep)


# ------------------------------------------------------------------------------------------ the call
@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("miner", ["pairs", "triplets"])
def test_a_miners_tuple_keeps_only_the_mined_comparisons(name, miner):
    emb, labels = batch()
    loss = every_loss(name)
    mined = (miners.MultiSimilarityMiner(epsilon=0.05) if miner == "pairs" else
             miners.TripletMarginMiner(margin=0.2, type_of_triplets="semihard"))(emb, labels)
    assert len(mined) == (4 if miner == "pairs" else 3) and len(mined[0]) > 0
    expected = loss(emb, labels, mask=hand_mask(mined, len(emb), len(emb)))
    torch.testing.assert_close(loss(emb, labels, mined), expected, rtol=0, atol=0)  # third, by position
    torch.testing.assert_close(loss(emb, labels, indices_tuple=mined), expected, rtol=0, atol=0)
    if name != "proxy_dg":  # L_DG* compares embeddings with proxies only: a tuple has nothing to restrict
        assert not torch.equal(expected, loss(emb, labels)), "the tuple should change which comparisons count"


def test_a_miners_tuple_and_a_mask_combine_and_the_gradient_follows():
    emb, labels = batch()
    mined = miners.MultiSimilarityMiner(epsilon=0.05)(emb, labels)
    mask = torch.rand(len(emb), len(emb), generator=torch.Generator().manual_seed(1)) > 0.3
    a = emb.clone().requires_grad_(True)
    b = emb.clone().requires_grad_(True)
    va = SupAP()(a, labels, mined, mask=mask)
    vb = SupAP()(b, labels, mask=mask & hand_mask(mined, len(emb), len(emb)))
    va.backward()
    vb.backward()
    torch.testing.assert_close(va, vb, rtol=0, atol=0)
    torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_pmls_reference_keywords_are_ours(name):
    emb, labels = batch()
    refs, ref_labels = batch(seed=1)
    loss = every_loss(name)
    ours = loss(emb, labels, ref_embeddings=refs, ref_labels=ref_labels)
    torch.testing.assert_close(loss(emb, labels, None, refs, ref_labels), ours, rtol=0, atol=0)
    torch.testing.assert_close(loss(emb, labels, ref_emb=refs, ref_labels=ref_labels), ours, rtol=0, atol=0)
    mined = miners.MultiSimilarityMiner(epsilon=0.05)(emb, labels, refs, ref_labels)  # rows: queries, cols: refs
    torch.testing.assert_close(loss(emb, labels, mined, refs, ref_labels),
                               loss(emb, labels, ref_embeddings=refs, ref_labels=ref_labels,
                                    mask=hand_mask(mined, len(emb), len(refs))), rtol=0, atol=0)


def test_the_old_positional_references_still_work_with_a_deprecation_warning():
    emb, labels = batch()
    refs, ref_labels = batch(seed=1)
    with pytest.warns(DeprecationWarning, match="ref_embeddings=..., ref_labels=... by keyword"):
        old = SupAP()(emb, labels, refs, ref_labels)
    torch.testing.assert_close(old, SupAP()(emb, labels, ref_embeddings=refs, ref_labels=ref_labels))


@pytest.mark.parametrize("call, message", [
    (lambda e, y: SupAP()(e, y, (y, y)), r"^indices_tuple must be a miner's output, .* got a tuple of 2$"),
    (lambda e, y: SupAP()(e, y, [y] * 5), r"got a list of 5$"),
    (lambda e, y: SupAP()(e, y, (y, y + 100, y)), r"^indices_tuple\[1\] \(positives\) must hold indices in \[0, 24\)"),
    (lambda e, y: SupAP()(e, y, (y, y.float(), y)), r"^indices_tuple\[1\] \(positives\) must be a 1-D integer tensor"),
    (lambda e, y: SupAP()(e, y, (y, y[:3], y)), r"^indices_tuple's anchors, positives and negatives must have one"),
    (lambda e, y: SupAP()(e, y, (y, y[:3], y, y)), r"^indices_tuple's anchors1 and positives \(24, 3\)"),
    (lambda e, y: SupAP()(e, y, ref_emb=e, ref_embeddings=e, ref_labels=y), r"^give ref_emb or ref_embeddings"),
])
def test_a_bad_call_is_one_line_naming_the_argument(call, message):
    emb, labels = batch()
    with pytest.raises(ValueError, match=message) as info:
        call(emb, labels)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------------------------- PML's trainer
def train_with_pml(loss, *, loss_optimizer: bool, iterations: int = 3):
    """PML's MetricLossOnly with a miner on a tiny dataset; returns the trunk and the losses' calls."""
    torch.manual_seed(0)
    emb, labels = batch()
    data = torch.utils.data.TensorDataset(emb, labels)
    trunk = torch.nn.Linear(DIM, DIM)
    optimizers = {"trunk_optimizer": torch.optim.SGD(trunk.parameters(), lr=0.1)}
    if loss_optimizer:  # the documented recipe: PML's trainer steps "<loss name>_optimizer"
        optimizers["metric_loss_optimizer"] = torch.optim.SGD(loss.parameters(), lr=0.1)
    calls = []
    loss.register_forward_hook(lambda module, args, output: calls.append((args, output.detach())))
    trainer = trainers.MetricLossOnly(
        models={"trunk": trunk}, optimizers=optimizers, batch_size=12, loss_funcs={"metric_loss": loss},
        mining_funcs={"tuple_miner": miners.MultiSimilarityMiner(epsilon=0.05)}, dataset=data,
        sampler=samplers.MPerClassSampler(labels, 4, length_before_new_iter=12 * iterations),
        dataloader_num_workers=0, data_device=torch.device("cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PML's progress bar formats a tensor that requires grad
        trainer.train(num_epochs=1)
    assert len(calls) == trainer.iterations_per_epoch >= 2  # the loss was called at every iteration
    return trunk, calls


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_every_loss_trains_in_pmls_metric_loss_only_with_a_miner(name):
    loss = every_loss(name)
    torch.manual_seed(0)
    before = torch.nn.Linear(DIM, DIM).weight.detach().clone()  # the trunk's initial weights
    trunk, calls = train_with_pml(loss, loss_optimizer=False)  # proxies fixed, so each call can be recomputed
    for args, output in list(calls):  # a snapshot: the recomputations below are calls too
        emb, labels, mined = args
        assert isinstance(mined, tuple) and len(mined) == 4  # PML's trainer passed the miner's pairs third
        assert torch.isfinite(output)
        with torch.no_grad():
            expected = loss(emb, labels, mask=hand_mask(mined, len(emb), len(emb)))
        torch.testing.assert_close(output, expected, rtol=0, atol=0)
    assert not torch.equal(trunk.weight.detach(), before), "the trunk should have trained"


def test_the_proxies_train_in_pmls_trainer_with_a_loss_optimizer():
    trained, untouched = (ROADMAPProxy(num_classes=CLASSES, embed_dim=DIM) for _ in range(2))
    start = trained.decomposability_loss.proxies.detach().clone()
    untouched.load_state_dict(trained.state_dict())
    train_with_pml(trained, loss_optimizer=True)
    train_with_pml(untouched, loss_optimizer=False)
    assert (trained.decomposability_loss.proxies.detach() - start).abs().max() > 1e-3
    # Without a loss optimizer PML's trainer never steps the proxies: why the README's recipe gives one.
    assert torch.equal(untouched.decomposability_loss.proxies.detach(), start)


def test_pmls_multiple_losses_weighs_ours_with_the_miners_tuple():
    emb, labels = batch()
    mined = miners.MultiSimilarityMiner(epsilon=0.05)(emb, labels)
    smooth, sup = SmoothAP(), SupAP()
    combined = pml_losses.MultipleLosses([smooth, sup], weights=[0.3, 0.7])(emb, labels, mined)
    torch.testing.assert_close(combined, 0.3 * smooth(emb, labels, mined) + 0.7 * sup(emb, labels, mined))


# ------------------------------------------------------------------------------ PML's loss wrappers
def test_pmls_cross_batch_memory_refuses_ours_by_name_and_the_widened_one_ranks_the_memory():
    with pytest.raises(Exception, match="CrossBatchMemory not supported for SupAP"):
        pml_losses.CrossBatchMemory(SupAP(), embedding_size=DIM, memory_size=48)
    xbm = CrossBatchMemory(SupAP(), embedding_size=DIM, memory_size=48)
    (e1, y1), (e2, y2) = batch(0), batch(1)
    xbm(e1, y1)
    value = xbm(e2, y2)
    memory, memory_labels = torch.cat([e1, e2]), torch.cat([y1, y2])
    not_self = torch.ones(len(e2), len(memory), dtype=torch.bool)
    not_self[torch.arange(len(e2)), len(e1) + torch.arange(len(e2))] = False  # each query's own copy
    expected = SupAP()(e2, y2, ref_embeddings=memory, ref_labels=memory_labels, mask=not_self)
    torch.testing.assert_close(value, expected, rtol=1e-6, atol=1e-7)


def test_a_subclass_of_ours_is_accepted_too():
    class MySupAP(SupAP):
        pass

    CrossBatchMemory(MySupAP(), embedding_size=DIM, memory_size=48)


def test_pmls_self_supervised_loss_refuses_ours_by_name_and_the_widened_one_pairs_the_views():
    with pytest.raises(Exception, match="SelfSupervisedLoss not supported for SmoothAP"):
        pml_losses.SelfSupervisedLoss(SmoothAP())
    emb, _ = batch()
    views = emb + 0.3 * torch.randn(emb.shape, generator=torch.Generator().manual_seed(2))
    ids = torch.arange(len(emb))
    value = SelfSupervisedLoss(SmoothAP())(emb, views)
    torch.testing.assert_close(value, SmoothAP()(torch.cat([emb, views]), torch.cat([ids, ids])))


def test_pmls_distributed_wrapper_refuses_ours_by_type_and_the_widened_one_calls_it():
    with pytest.raises(TypeError, match="must extend BaseMetricLossFunction"):
        pml_distributed.DistributedLossWrapper(SupAP())
    emb, labels = batch()
    with pytest.warns(UserWarning, match="non-distributed setting"):
        value = DistributedLossWrapper(SupAP())(emb, labels)
    torch.testing.assert_close(value, SupAP()(emb, labels))
    assert isinstance(DistributedLossWrapper(pml_losses.ContrastiveLoss()).loss, pml_losses.ContrastiveLoss)


@pytest.mark.slow
def test_the_distributed_wrapper_on_two_ranks_gives_the_global_batchs_loss(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "--module", "tests.pml_ddp_worker", str(tmp_path)], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    from tests.pml_ddp_worker import global_batch
    emb, labels = global_batch()
    whole = emb.clone().requires_grad_(True)
    global_loss = SupAP()(whole, labels)
    global_loss.backward()
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        half = slice(rank * 8, (rank + 1) * 8)
        # Plain: each rank the global batch's loss times the world size (DDP's average then gives its gradient).
        torch.testing.assert_close(got[False]["loss"], 2 * global_loss.detach(), rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(got[False]["grad"], 2 * whole.grad[half], rtol=1e-5, atol=1e-7)
        # Efficient: the local queries rank the global batch, their own copies masked, times the world size.
        others = torch.cat([emb[half], emb[8 - half.start: 16 - half.start]])
        other_labels = torch.cat([labels[half], labels[8 - half.start: 16 - half.start]])
        not_self = torch.ones(8, 16, dtype=torch.bool)
        not_self[torch.arange(8), torch.arange(8)] = False
        local = emb[half].clone().requires_grad_(True)
        expected = 2 * SupAP()(local, labels[half], ref_embeddings=others, ref_labels=other_labels, mask=not_self)
        torch.testing.assert_close(got[True]["loss"], expected.detach(), rtol=1e-6, atol=1e-7)
