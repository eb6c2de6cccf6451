"""Parse once (issue 47, point 2): a hyper-parameter from the command line is checked where a user enters it,
once per layer (the config, the loss's constructor), on one TrainConfig and one built loss; a loss is checked
from its declarations and rules, with no computation on a dummy problem; the cross-parameter rule (ROADMAP's
alpha > beta) is a declared rule of the class, so a config refuses what the loss would refuse."""
from __future__ import annotations

import collections

import pytest

import lab.losses as L
from lab.core import hparams
from lab.losses import LOSSES, build_loss, check_loss_kwargs
from lab.train import TrainConfig
from lab.train import config as train_config
from lab.train import trainer as train_trainer


class Fit(Exception):
    """Raised where training would start: everything before the first step has happened."""


def test_tau_from_the_cli_meets_one_config_one_loss_and_one_check_per_layer(monkeypatch):
    counts: collections.Counter = collections.Counter()
    check, post, save = hparams.HParam.check, TrainConfig.__post_init__, L.RankLoss.save_hparams

    def counted_check(self, value):
        if self.name == "tau":
            counts["tau", value] += 1
        return check(self, value)

    def counted_post(self, *args, **kwargs):
        counts["TrainConfig"] += 1
        return post(self, *args, **kwargs)

    def counted_save(self, local_vars):
        counts[type(self).__name__] += 1
        return save(self, local_vars)

    def fit(self, *args, **kwargs):
        raise Fit

    monkeypatch.setattr(hparams.HParam, "check", counted_check)
    monkeypatch.setattr(TrainConfig, "__post_init__", counted_post)
    monkeypatch.setattr(L.RankLoss, "save_hparams", counted_save)
    monkeypatch.setattr(train_trainer.Trainer, "fit", fit)
    from lab.cli import main

    with pytest.raises(Fit):
        main(["train", "--loss", "smooth_ap", "--loss-kwargs", "tau=0.02", "--dataset", "digits", "--steps", "1",
              "--batch-size", "16", "--no-progress"])
    # Before: 3 configs (the parser's defaults, the run's, the resolved amp's), 2 losses (a throwaway one to check
    # the values, the Trainer's) and tau checked 4 times before the first step.
    assert counts["TrainConfig"] == 1
    assert counts["SmoothAP"] == 1
    assert counts["tau", 0.02] == 2  # the config's loss_kwargs, the loss's constructor


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_building_a_loss_computes_nothing(name, monkeypatch):
    calls = []
    classes, todo = set(), [L.RankLoss]
    while todo:  # every loss class, the parts of the composed ones (HAPPIER: SupHAP and L_DG*) among them
        klass = todo.pop()
        classes.add(klass)
        todo.extend(klass.__subclasses__())
    for klass in classes:
        if klass.__dict__.get("functional") is not None:
            def counted(*args, _inner=klass.functional, **kwargs):
                calls.append(1)
                return _inner(*args, **kwargs)
            monkeypatch.setattr(klass, "functional", staticmethod(counted))
    build_loss(name, num_classes=3, embed_dim=4)
    assert calls == []  # before: every loss ran its function on a dummy 1 x 2 problem at construction


def test_roadmap_thresholds_in_the_wrong_order_are_refused_by_the_config():
    # Before: the config took alpha < beta (each within its range) and only a throwaway loss built by the CLI
    # refused it; a config built in code (a notebook, a study) carried it to the Trainer.
    with pytest.raises(ValueError, match=r"loss_kwargs: for loss 'roadmap', alpha must be larger than beta"):
        TrainConfig(loss="roadmap", loss_kwargs={"alpha": 0.3, "beta": 0.5})
    with pytest.raises(ValueError, match="alpha must be larger than beta"):
        check_loss_kwargs("rod_recall", {"beta": 0.95})  # alpha's default (0.9) below the given beta
    assert check_loss_kwargs("roadmap", {"alpha": "0.95", "beta": 0.5}) == {"alpha": 0.95, "beta": 0.5}


@pytest.mark.parametrize("make, word", [
    (lambda: L.ROADMAP(alpha=0.3, beta=0.5), "alpha must be larger than beta"),
    (lambda: L.CalibrationLoss(alpha=0.5, beta=0.5), "alpha must be larger than beta"),
    (lambda: L.SmoothAP(tau=-1.0), "tau must be"),
    (lambda: L.SmoothAP(reduction="sum"), "reduction must be one of"),
    (lambda: L.SupAP(chunk_size=0), "chunk_size must be"),
    (lambda: L.SmoothRecall(ks=[0]), "ks must be"),
])
def test_the_constructor_refuses_from_its_declarations(make, word):
    with pytest.raises(ValueError, match=word):
        make()


def test_the_config_and_the_constructor_agree_on_every_declared_bound():
    """Property: for each loss and each declared hyper-parameter, a value just outside the range is refused by
    both doors and the bound itself accepted by both (one declaration, two doors)."""
    for name, cls in LOSSES.items():
        for key, p in cls.declared.items():
            for bad in (p.low - 1, p.high + 1) if p.kind is int else (p.low - abs(p.low) - 1, p.high * 2 + 1):
                with pytest.raises(ValueError):
                    check_loss_kwargs(name, {key: bad})
                with pytest.raises(ValueError):
                    build_loss(name, num_classes=3, embed_dim=4, **{key: bad})


def test_a_resolved_amp_is_a_copy_not_a_second_build(monkeypatch):
    cfg = TrainConfig(loss="smooth_ap", loss_kwargs={"tau": 0.02})
    built = []
    monkeypatch.setattr(TrainConfig, "__post_init__", lambda self, *a, **k: built.append(1))
    resolved = cfg.with_amp("none")
    assert built == [] and resolved.amp == "none" and cfg.amp == "auto"
    assert resolved.to_dict() == {**cfg.to_dict(), "amp": "none"}
    with pytest.raises(ValueError, match="amp must be one of"):
        cfg.with_amp("fp8")
    assert train_config.field_default(next(f for f in train_config.dataclasses.fields(TrainConfig)
                                           if f.name == "loss_kwargs")) == {}
