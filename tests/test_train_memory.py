"""Cross-batch memory: FIFO contents, reading before committing, and self-exclusion by index."""
import pytest
import torch

from lab.losses import build_loss
from lab.train import CrossBatchMemory, Trainer, exclude_self
from tests._train_fixtures import ScriptedLoss, small_model, tiny_config, tiny_splits


def test_fifo_keeps_the_newest_entries():
    mem = CrossBatchMemory(size=5, dim=2, num_levels=1)
    for start in (0, 3, 6):  # 9 entries through a memory of 5
        idx = torch.arange(start, start + 3)
        mem.enqueue(idx[:, None].float().expand(3, 2), idx, idx)
    emb, labels, indices = mem.get()
    assert sorted(indices.tolist()) == [4, 5, 6, 7, 8]
    assert torch.equal(emb[:, 0].long(), indices) and torch.equal(labels[:, 0], indices)


def test_contents_after_equals_enqueue_then_get_without_changing_the_memory():
    mem = CrossBatchMemory(size=7, dim=3)
    torch.manual_seed(0)
    for step in range(4):
        e, y, i = torch.randn(3, 3), torch.randint(0, 4, (3,)), torch.arange(3 * step, 3 * step + 3)
        before = [t.clone() for t in mem.get()]
        preview = mem.contents_after(e, y, i)
        assert all(torch.equal(a, b) for a, b in zip(before, mem.get()))  # nothing written yet
        mem.enqueue(e, y, i)
        after = mem.get()
        order_p, order_a = preview[2].argsort(), after[2].argsort()
        for p, a in zip(preview, after):
            assert torch.equal(p[order_p], a[order_a])


def test_exclude_self_masks_only_the_same_dataset_index():
    query_idx = torch.tensor([10, 11])
    ref_idx = torch.tensor([11, 10, 12, 10])  # 10 stored twice (two past batches), 12 a duplicate image
    assert exclude_self(query_idx, ref_idx).tolist() == [[True, False, True, False], [False, True, True, True]]


def test_trainer_memory_loss_excludes_each_query_own_copy():
    train, test = tiny_splits()
    spy = ScriptedLoss(build_loss("roadmap"))
    trainer = Trainer(tiny_config(xbm_size=40, xbm_start=1), train_set=train, test_set=test, model=small_model(),
                      loss=spy)
    first = trainer.step()
    assert len(spy.calls) == 1 and "loss_memory" not in first  # before xbm_start: batch loss only
    assert int(trainer.memory.filled) == 16  # ... but the memory fills from step 0
    second = trainer.step()
    batch_call, memory_call = spy.calls[1], spy.calls[2]
    assert batch_call["refs"] is None and memory_call["refs"].shape == (32, 16)
    batches = trainer.stream.batch_sampler.global_batches()  # epoch 0, one process: the global batches
    first_idx, query_idx = torch.tensor(batches[0]), torch.tensor(batches[1])
    # Enqueued, then read: the memory holds this batch and the previous one; a query's own
    # copies (this batch's, and the previous batch's if the sampler repeated the image) are out.
    ref_idx = torch.cat([query_idx, first_idx])
    assert torch.equal(memory_call["mask"], query_idx[:, None] != ref_idx[None, :])
    assert int((~memory_call["mask"]).sum()) >= 16
    assert second["loss"] == pytest.approx(second["loss_batch"] + second["loss_memory"], rel=1e-6)
