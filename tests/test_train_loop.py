"""lab.train: config checks, step()/fit(), learning-rate groups and schedule, logs, evaluation, export."""
import json

import numpy as np
import pytest
import torch
from tests._train_fixtures import TinySet, small_model, tiny_config, tiny_splits

from lab.losses import build_loss
from lab.train import Trainer, TrainConfig, class_subset, config_diff, load_config
from lab.train.optim import lr_factor


def make(cfg=None, **changes):
    train, test = tiny_splits()
    return Trainer(cfg or tiny_config(**changes), train_set=train, test_set=test, model=small_model())


# ---------------------------------------------------------------------------------------- config
def test_batch_size_must_be_divisible_by_m():
    with pytest.raises(ValueError, match=r"batch_size \(30\) must be divisible by m \(4\)"):
        TrainConfig(batch_size=30, m=4)


def test_unknown_key_and_bad_choice_list_the_valid_ones(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("batchsize: 64\n")
    with pytest.raises(ValueError, match="unknown config key.*batchsize.*valid keys: .*batch_size"):
        load_config(recipe)
    with pytest.raises(ValueError, match=r"optimizer must be one of \('adam', 'adamw'\)"):
        TrainConfig(optimizer="sgd")


def test_yaml_numbers_get_the_field_types(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("lr: 1e-5\nepochs: 30\nsteps: 100.0\nmilestones: [30, 70]\n")
    cfg = load_config(recipe, batch_size=64, lr_head=None)
    assert cfg.lr == 1e-5 and isinstance(cfg.epochs, float) and cfg.steps == 100 and cfg.batch_size == 64
    assert cfg.lr_head is None  # None overrides mean "not given"


def test_config_diff_ignores_run_length_and_output_keys():
    a = TrainConfig().to_dict()
    b = TrainConfig(steps=5, out="x", lr=0.5, batch_size=64).to_dict()
    assert set(config_diff(a, b)) == {"lr", "batch_size"}


# ---------------------------------------------------------------------------------------- stepping
def test_step_keeps_the_loader_iterator_alive_across_calls():
    trainer = make()
    m = trainer.step(2)
    it = trainer.stream._it
    m = trainer.step(1)
    assert trainer.stream._it is it  # no new DataLoader iterator between dashboard ticks
    assert m["step"] == 3 and trainer.position == 3
    for key in ("loss", "loss_batch", "batch_ap", "lr", "grad_norm", "seconds_per_step", "images_per_second"):
        assert np.isfinite(m[key]), key


def test_epochs_roll_over_and_the_loss_goes_down():
    trainer = make(steps=40, lr=3e-3)
    first = trainer.step()["loss"]
    trainer.fit()
    assert trainer.epoch >= 1 and trainer.step_count == 40
    late = np.mean([h["loss"] for h in trainer.history[-5:]])
    assert late < first


@pytest.mark.parametrize("loss", ["proxy_dg", "roadmap_proxy"])
def test_learning_rate_groups_for_backbone_head_and_loss_parameters(loss):
    """Proxy losses own parameters (one proxy per training class): their own group, lr_loss."""
    train, test = tiny_splits()
    trainer = Trainer(tiny_config(loss=loss, lr=1e-3, lr_head=2e-3, lr_loss=5e-2), train_set=train, test_set=test,
                      model=small_model())
    groups = {g["name"]: g["lr"] for g in trainer.optimizer.param_groups}
    assert groups == {"backbone": 1e-3, "head": 2e-3, "loss": 5e-2}
    proxies = [p.detach().clone() for p in trainer.loss_fn.parameters()]
    assert proxies and proxies[0].shape == (12, 16)  # 12 training classes, 16-d embeddings
    trainer.step()
    assert not torch.equal(proxies[0], next(trainer.loss_fn.parameters()))  # trained


def test_schedule_warmup_multistep_in_epochs_and_cosine():
    cfg = tiny_config(scheduler="multistep", milestones=[1, 2], gamma=0.5, epochs=3, warmup_steps=2)
    spe = 4
    factors = [lr_factor(s, cfg, 12, [m * spe for m in cfg.milestones]) for s in range(12)]
    assert factors[:2] == [0.5, 1.0] and factors[3] == 1.0 and factors[4] == 0.5 and factors[8] == 0.25
    cos = tiny_config(scheduler="cosine")
    assert lr_factor(0, cos, 10, []) == 1.0 and lr_factor(10, cos, 10, []) == pytest.approx(0.0)
    trainer = make(scheduler="multistep", milestones=[1], gamma=0.1, epochs=2.0)
    trainer.step(trainer.steps_per_epoch)
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-4)


def test_bf16_autocast_keeps_the_loss_in_float32():
    class DtypeSpy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner, self.seen = build_loss("roadmap"), []

        def forward(self, emb, *args, **kwargs):
            self.seen.append((emb.dtype, torch.is_autocast_enabled("cpu")))
            return self.inner(emb, *args, **kwargs)

    train, test = tiny_splits()
    trainer = Trainer(tiny_config(amp="bf16"), train_set=train, test_set=test, model=small_model(), loss=DtypeSpy())
    assert np.isfinite(trainer.step()["loss"])
    assert trainer.loss_fn.seen == [(torch.float32, False)]


# ---------------------------------------------------------------------------------------- outputs
def test_fit_writes_config_metrics_and_checkpoint(tmp_path):
    trainer = make(steps=4, eval_every=2, log_every=1, out=str(tmp_path))
    result = trainer.fit()
    assert {"R@1", "mAP@R", "decomposability_gap", "loss"} <= set(result)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines if r["kind"] == "train"] == [1, 2, 3, 4]
    assert [r["step"] for r in lines if r["kind"] == "eval"] == [2, 4]
    assert load_config(tmp_path / "config.yaml") == trainer.config
    assert (tmp_path / "checkpoint.pt").exists()


def test_evaluate_is_full_gallery_and_does_not_move_the_run():
    a, b = make(), make()
    a.step(2)
    b.step(1)
    result = b.evaluate()  # evaluation between two steps must not change the trajectory
    b.step(1)
    assert result["num_queries"] == len(b.test_set)
    assert 0 <= result["R@1"] <= 1 and 0 <= result["mAP@R"] <= 1
    assert all(torch.equal(p, q) for p, q in zip(a.model.parameters(), b.model.parameters()))



def test_a_copy_of_the_model_is_evaluated_as_of_its_step():
    """evaluate(model=, step=): the copy's evaluation after a step is the model's before it, bit for bit, with
    its step in the record (the dashboard evaluates the untrained model after step 1); the live model moves on."""
    import copy

    a = make()
    before = a.evaluate()
    initial = copy.deepcopy(a.model)
    a.step(1)
    later = a.evaluate(model=initial, step=0)
    assert later == before and later["step"] == 0
    assert [(r["kind"], r["step"]) for r in a.history] == [("eval", 0), ("train", 1), ("eval", 0)]
    now = a.evaluate()
    assert now["step"] == 1 and now["decomposability_gap"] != before["decomposability_gap"]  # the live model trained
    for model, step in ((initial, None), (None, 0)):
        with pytest.raises(ValueError, match="model and step go together"):
            a.evaluate(model=model, step=step)

def test_embed_and_export(tmp_path):
    trainer = make()
    emb, labels = trainer.embed("test")
    assert emb.shape == (len(trainer.test_set), 16) and torch.equal(labels, trainer.test_set.labels)
    path = trainer.export_embeddings(tmp_path / "e.npz")
    saved = np.load(path)
    assert np.allclose(saved["embeddings"], emb.numpy()) and list(saved["level_names"]) == ["fine", "coarse"]
    with pytest.raises(ValueError, match=".npz or .pt"):
        trainer.export_embeddings(tmp_path / "e.csv")


def test_class_subset_keeps_whole_classes():
    labels = TinySet(classes=10, per_class=6).labels
    idx = class_subset(labels, 20, seed=0)
    fine = labels[idx, 0]
    assert 20 <= len(idx) < 26 and all(int((fine == c).sum()) == 6 for c in fine.unique())
    assert class_subset(labels, None) is None


def test_decomposability_probe_is_fixed():
    trainer = make()
    ids, batch_ids = trainer.probe
    assert len(ids) == 2 * 16 and batch_ids.tolist() == [0] * 16 + [1] * 16
    assert trainer.decomposability_gap() == trainer.decomposability_gap()
