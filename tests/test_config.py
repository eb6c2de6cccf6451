"""TrainConfig is parsed once, at the boundary (issue 35, item 5): frozen, converted from text by the
one converter (lab.core.convert.to_type) and checked once as it is built, whichever way it is built."""
from __future__ import annotations

import dataclasses
import typing
from typing import Optional

import pytest

import lab.losses
from lab.cli import build_parser, config_from_args
from lab.core.convert import to_type
from lab.losses import loss_registry as registry
from lab.train import TrainConfig
from lab.train import config as train_config


def test_a_config_is_frozen_and_changes_by_replace():
    cfg = TrainConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.steps = 5
    changed = dataclasses.replace(cfg, steps=5)
    assert (changed.steps, cfg.steps) == (5, TrainConfig().steps)
    with pytest.raises(ValueError, match="steps must be >= 1 when epochs is 0, got steps=0"):
        dataclasses.replace(cfg, steps=0)  # replace builds a config: it is checked too


def test_the_kwargs_mappings_are_read_only_so_no_change_skips_the_checks():
    given = {"tau": 0.01}
    cfg = TrainConfig(loss="smooth_ap", loss_kwargs=given, dataset_kwargs={"num_classes": 12})
    with pytest.raises(TypeError, match="does not support item assignment"):
        cfg.loss_kwargs["tau"] = -1.0  # the config checked tau > 0 as it was built
    with pytest.raises(TypeError):
        cfg.dataset_kwargs["num_classes"] = 0
    with pytest.raises(TypeError):
        del cfg.loss_kwargs["tau"]
    assert not hasattr(cfg.loss_kwargs, "update") and not hasattr(cfg.loss_kwargs, "pop")
    given["tau"] = -1.0  # the caller's dict is not the config's
    assert cfg.loss_kwargs == {"tau": 0.01} and {"tau": 0.01} == cfg.loss_kwargs
    with pytest.raises(ValueError, match="tau"):
        dataclasses.replace(cfg, loss_kwargs={**cfg.loss_kwargs, "tau": -1.0})  # a change is a checked config


@pytest.mark.parametrize("values", [
    {}, {"loss": "sup_recall", "loss_kwargs": {"tau": "1e-2", "rho": 100, "ks": [1, 4]}},
    {"dataset_kwargs": {"num_classes": 12, "instances_per_class": 4}, "milestones": [10, 20]}])
def test_read_only_kwargs_serialise_pickle_and_unpack_as_plain_dicts(values):
    import copy
    import json
    import pickle

    import yaml

    cfg = TrainConfig.from_dict(values)
    plain = cfg.to_dict()
    for name in ("loss_kwargs", "dataset_kwargs"):
        assert type(plain[name]) is dict and plain[name] == dict(getattr(cfg, name))
    text = yaml.safe_dump(plain, sort_keys=False)  # config.yaml; a dict subclass would not dump
    assert yaml.safe_load(text) == plain == json.loads(json.dumps(plain))
    assert TrainConfig.from_dict(yaml.safe_load(text)) == cfg
    plain["loss_kwargs"]["tau"] = -1.0  # a copy: the config is unchanged
    assert cfg.loss_kwargs.get("tau") != -1.0 and cfg.to_dict()["loss_kwargs"] == dict(cfg.loss_kwargs)
    for twin in (pickle.loads(pickle.dumps(cfg)), copy.deepcopy(cfg), dataclasses.replace(cfg)):
        assert twin == cfg and twin.to_dict() == cfg.to_dict()
        with pytest.raises(TypeError):
            twin.loss_kwargs["tau"] = 1.0
    hparams = lab.losses.build_loss(cfg.loss, num_classes=2, embed_dim=4, **cfg.loss_kwargs).hparams
    assert all(hparams[k] == v or list(hparams[k]) == v for k, v in cfg.loss_kwargs.items())


@pytest.fixture
def loss_checks(monkeypatch) -> list:
    calls = []
    real = train_config.check_loss_kwargs
    monkeypatch.setattr(train_config, "check_loss_kwargs", lambda *a: calls.append(a) or real(*a))
    return calls


def test_the_loss_kwargs_are_checked_once_per_config_built(loss_checks):
    cfg = TrainConfig(loss="sup_ap", loss_kwargs={"tau": "1e-2"})
    assert cfg.loss_kwargs == {"tau": 0.01} and len(loss_checks) == 1
    TrainConfig.from_dict({"loss": "sup_ap", "loss_kwargs": {"tau": "1e-2"}})
    assert len(loss_checks) == 2


def test_the_cli_builds_the_config_of_a_run_once(loss_checks):
    """The flags and the evaluation default go into one TrainConfig (they were three
    configs built one from the other, each checked again)."""
    args = build_parser().parse_args(["train", "--loss", "sup_ap", "--loss-kwargs", "tau=0.05", "--device", "cpu"])
    loss_checks.clear()  # the parser built the defaults' config for its help text
    cfg = config_from_args(args)
    assert cfg.loss_kwargs == {"tau": 0.05} and cfg.amp == "auto" and len(loss_checks) == 1  # the Trainer resolves it


@pytest.mark.parametrize("field, text, expected", [
    ("pretrained", "no", False), ("pretrained", "true", True), ("steps", "30", 30), ("steps", 1e3, 1000),
    ("lr", "1e-5", 1e-5), ("epochs", 30, 30.0), ("num_workers", "none", None), ("milestones", [30, 70], [30, 70])])
def test_yaml_and_flag_text_get_the_declared_type_of_each_field(field, text, expected):
    """One converter for recipes (from_dict) and flags. 'no' for a bool used to pass through as a
    (true) string, '30' for an int as text, and --eval-max-items 1e3 was refused by int()."""
    value = getattr(TrainConfig.from_dict({field: text}), field)
    assert value == expected and type(value) is type(expected)
    flag = f"--{field.replace('_', '-')}"
    if field not in ("pretrained", "milestones"):  # --pretrained/--no-pretrained, --milestones N N
        assert getattr(config_from_args(build_parser().parse_args(["train", flag, str(text)])), field) == expected


@pytest.mark.parametrize("values, message", [
    ({"pretrained": "maybe"}, "pretrained must be true or false, got 'maybe'"),
    ({"batch_size": 12.5}, "batch_size must be an integer, got 12.5"),
    ({"lr": "fast"}, "lr must be a number, got 'fast'"),
    ({"dataset": 3}, "dataset must be a string, got 3")])
def test_a_value_of_the_wrong_type_is_one_line_naming_the_field(values, message):
    with pytest.raises(ValueError) as info:
        TrainConfig.from_dict(values)
    assert str(info.value) == message


def test_one_converter_serves_the_config_and_the_losses():
    assert to_type("x", "1,2,4", typing.Sequence[int]) == [1, 2, 4]
    assert to_type("x", "null", Optional[float]) is None
    assert to_type("x", {"a": 1}, dict) == {"a": 1}  # a type it does not convert passes through
    source = (train_config.__file__, registry.__file__)
    for path in source:
        text = open(path, encoding="utf-8").read()
        assert "to_type(" in text and "def _convert" not in text and "def coerce" not in text, path


def test_the_registry_is_its_own_module_and_the_package_face_keeps_its_names():
    assert lab.losses.LOSSES is registry.LOSSES and lab.losses.build_loss is registry.build_loss
    assert lab.losses.check_loss_kwargs is registry.check_loss_kwargs
    assert set(lab.losses.__all__) >= {"LOSSES", "build_loss", "check_loss_kwargs", "loss_kwargs_of",
                                        *(cls.__name__ for cls in registry.LOSSES.values())}
