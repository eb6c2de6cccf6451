"""Staged backprop (Revaud et al. supp. Alg. 1): parameter gradients equal the full batch's.

Exact only when each image's embedding depends on that image alone: BatchNorm is frozen
(eval-mode statistics) here; in train mode BN would use per-chunk statistics (ghost BN).
"""
import pytest
import torch

from lab.losses import build_loss
from lab.train import Trainer
from tests._train_fixtures import DropoutMLP, small_model, tiny_config, tiny_splits


def gradients_after_one_step(model_fn, loss_name="roadmap", **changes):
    train, test = tiny_splits()
    trainer = Trainer(tiny_config(**changes), train_set=train, test_set=test, model=model_fn(),
                      loss=build_loss(loss_name))
    trainer.step()  # the optimizer step moves the parameters, not the gradients it read: those compare
    return {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}, trainer


@pytest.mark.parametrize("loss_name", ["roadmap", "fast_ap"])
@pytest.mark.parametrize("stage_size", [5, 8])
def test_staged_gradients_equal_full_batch(stage_size, loss_name):
    full, _ = gradients_after_one_step(small_model, loss_name)
    staged, _ = gradients_after_one_step(small_model, loss_name, stage_size=stage_size)
    assert full.keys() == staged.keys() and len(full) > 0
    for name in full:
        torch.testing.assert_close(staged[name], full[name], rtol=1e-4, atol=1e-6, msg=name)


def test_staged_with_memory_loss_equals_full_batch():
    full, a = gradients_after_one_step(small_model, xbm_size=40)
    staged, b = gradients_after_one_step(small_model, xbm_size=40, stage_size=4)
    for name in full:
        torch.testing.assert_close(staged[name], full[name], rtol=1e-4, atol=1e-6, msg=name)
    assert int(a.memory.filled) == int(b.memory.filled) == 16


def test_staged_replays_dropout_exactly():
    """Stage 3 must re-draw stage 1's dropout masks. Reference: the same chunked forward WITH
    graph, from the same state of the run's generators, and one ordinary backward."""
    train, test = tiny_splits()
    trainer = Trainer(tiny_config(stage_size=6), train_set=train, test_set=test, model=DropoutMLP(),
                      loss=build_loss("roadmap"))
    start = trainer.random.state()
    images, labels, _ = trainer.stream.next()
    trainer.stream.seek(0, 0)
    model = trainer.model.train()
    with trainer.random.owned():  # the run's generators, as its steps draw them
        emb = torch.cat([model(chunk) for chunk in images.split(6)])
    build_loss("roadmap")(emb, labels).backward()
    reference = {n: p.grad.clone() for n, p in model.named_parameters()}

    trainer.random.set_state(start)
    trainer.step()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, reference[name], rtol=1e-4, atol=1e-6, msg=name)


def test_staged_updates_batchnorm_statistics_once_per_chunk():
    _, trainer = gradients_after_one_step(lambda: small_model(freeze_bn=False), stage_size=8)
    counts = {int(m.num_batches_tracked) for m in trainer.model.batch_norms()}
    assert counts == {2}  # two chunks re-forwarded once each; the no-graph pass left no trace


def test_the_old_name_chunk_size_still_sets_stage_size():
    # stage_size was called chunk_size, a name the losses and metrics use for queries per chunk.
    from lab.cli import build_parser, config_from_args
    from lab.train import TrainConfig

    with pytest.warns(DeprecationWarning, match="stage_size"):
        assert TrainConfig(stage_size=None, chunk_size=6).stage_size == 6
    assert TrainConfig.from_dict({"chunk_size": 5}).stage_size == 5  # old recipes and checkpoints
    args = build_parser().parse_args(["train", "--chunk-size", "7"])
    assert config_from_args(args).stage_size == 7
    assert "chunk_size" not in TrainConfig().to_dict() and TrainConfig().to_dict()["stage_size"] is None
