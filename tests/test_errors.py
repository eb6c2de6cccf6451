"""Bad input gets a one-line error naming the file, flag or argument and what is accepted (issue 14,
part A): loss hyper-parameters checked and typed at the door, bad checkpoints and recipes, meta tensors."""
import inspect
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn

import lab.data
from lab import metrics
from lab.cli import build_parser, config_from_args, main
from lab.losses import (LOSSES, SmoothAP, UnknownHyperParameterError, build_loss, check_loss_kwargs, functional,
                        loss_kwargs_of)
from lab.losses.rod import HAPPIER, ROADMAPProxy
from lab.train import Trainer, TrainConfig, load_checkpoint, load_config
from lab.train.checkpoint import check_format
from tests._train_fixtures import small_model, tiny_config, tiny_splits

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--dataset", "glyphs", "--dataset-kwargs", "num_classes=12", "instances_per_class=4", "--batch-size", "16",
        "--embed-dim", "16", "--eval-backend", "torch", "--no-progress", "--device", "cpu", "--steps", "1"]


def fails(capsys, *argv) -> str:
    """Run the CLI; it must exit 2 with one error line and no traceback. Returns that line."""
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def no_datasets(monkeypatch):
    """Building any dataset fails the test: the error must come before the (slow) data."""
    def refuse(*args, **kwargs):
        raise AssertionError("a dataset was built before the bad setting was reported")
    monkeypatch.setattr(lab.data, "build_dataset", refuse)


def parse(*argv) -> TrainConfig:
    return config_from_args(build_parser().parse_args(["train", *map(str, argv)]))


# ------------------------------------------------------------------ loss hyper-parameters at the door
def test_loss_kwargs_from_flags_and_yaml_get_the_declared_types(tmp_path):
    # PyYAML (YAML 1.1) reads 1e-2 as the string '1e-2': it used to reach the loss as a string
    assert yaml.safe_load("1e-2") == "1e-2"
    assert parse("--loss", "smooth_ap", "--loss-kwargs", "tau=1e-2").loss_kwargs == {"tau": 0.01}
    recipe = tmp_path / "r.yaml"
    recipe.write_text("loss: sup_recall\nloss_kwargs: {tau: 1e-2, rho: 100, ks: [1, 4]}\n")
    cfg = load_config(recipe)
    assert cfg.loss_kwargs == {"tau": 0.01, "rho": 100.0, "ks": [1, 4]}
    assert type(cfg.loss_kwargs["rho"]) is float
    built = build_loss(cfg.loss, **cfg.loss_kwargs)
    assert built.hparams["tau"] == 0.01 and tuple(built.hparams["ks"]) == (1, 4)


@pytest.mark.parametrize("loss, given, expected", [
    ("smooth_ap", {"tau": "1e-2"}, {"tau": 0.01}),
    ("smooth_ap", {"tau": 1}, {"tau": 1.0}),
    ("smooth_ap", {"exact_rank_pos": "true", "chunk_size": "none"}, {"exact_rank_pos": True, "chunk_size": None}),
    ("fast_ap", {"num_bins": "20", "chunk_size": 8.0}, {"num_bins": 20, "chunk_size": 8}),
    ("sup_recall", {"ks": "1,2,4"}, {"ks": [1, 2, 4]}),
    ("sup_recall", {"ks": 4}, {"ks": [4]}),
    ("sup_hap", {"weights": [1, "0.5"], "relevance": "wap"}, {"weights": [1.0, 0.5], "relevance": "wap"}),
])
def test_check_loss_kwargs_converts_to_the_constructor_types(loss, given, expected):
    out = check_loss_kwargs(loss, given)
    assert out == expected
    assert [type(v) for v in out.values()] == [type(v) for v in expected.values()]


@pytest.mark.parametrize("loss, given, message", [
    ("smooth_ap", {"tau": "abc"}, "hyper-parameter 'tau' of loss 'smooth_ap' must be a number, got 'abc'"),
    ("smooth_ap", {"tau": True}, "must be a number, got True"),
    ("fast_ap", {"num_bins": 2.5}, "'num_bins' of loss 'fast_ap' must be an integer, got 2.5"),
    ("smooth_ap", {"exact_rank_pos": "maybe"}, "must be true or false, got 'maybe'"),
    ("sup_recall", {"ks": "1,x"}, "'ks' of loss 'sup_recall' must be an integer, got 'x'"),
])
def test_check_loss_kwargs_refuses_values_of_another_type(loss, given, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_loss_kwargs(loss, given)


def test_a_misspelt_hyper_parameter_fails_before_any_dataset_with_a_suggestion(capsys, tmp_path, no_datasets):
    err = fails(capsys, "train", *TINY, "--loss", "smooth_ap", "--loss-kwargs", "tua=0.01", "--out", tmp_path / "r")
    assert err == ("python -m lab train: error: loss_kwargs: unknown hyper-parameter 'tua' for loss 'smooth_ap'; "
                   "did you mean 'tau'? accepted: tau, exact_rank_pos, include_self, reduction, chunk_size")
    assert not (tmp_path / "r").exists()


def test_an_out_of_range_value_fails_before_any_dataset(capsys, no_datasets):
    err = fails(capsys, "train", *TINY, "--loss", "sup_ap", "--loss-kwargs", "tau=-1")
    assert "loss_kwargs: for loss 'sup_ap', tau must be a number in [1e-06, 100] (temperature" in err
    assert err.endswith("got -1.0")


def test_a_recipe_with_an_unknown_hyper_parameter_names_it(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("loss: roadmap\nloss_kwargs: {lamda: 0.3}\n")
    with pytest.raises(ValueError, match="unknown hyper-parameter 'lamda' for loss 'roadmap'; did you mean 'lam'"):
        load_config(recipe)


def test_loss_kwargs_merge_into_the_recipes_and_another_loss_drops_them(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("loss: roadmap\nloss_kwargs: {tau: 0.02, lam: 0.5}\n")
    assert parse("--config", recipe, "--loss-kwargs", "lam=0.3").loss_kwargs == {"tau": 0.02, "lam": 0.3}
    assert parse("--config", recipe, "--loss", "roadmap").loss_kwargs == {"tau": 0.02, "lam": 0.5}
    assert parse("--config", recipe).loss_kwargs == {"tau": 0.02, "lam": 0.5}
    # the recipe's lam is ROADMAP's: SmoothAP gets only what the flags give it
    assert parse("--config", recipe, "--loss", "smooth_ap", "--loss-kwargs", "tau=0.05").loss_kwargs == {"tau": 0.05}
    assert parse("--config", recipe, "--loss", "smooth_ap").loss_kwargs == {}


def test_resuming_merges_loss_kwargs_into_the_checkpoints_config(tmp_path, capsys):
    train, test = tiny_splits()
    cfg = tiny_config(out=str(tmp_path), loss_kwargs={"tau": 0.02, "lam": 0.5})
    Trainer(cfg, train_set=train, test_set=test, model=small_model()).save()
    merged = parse("--resume", tmp_path / "checkpoint.pt", "--loss-kwargs", "lam=0.3")
    assert merged.loss_kwargs == {"tau": 0.02, "lam": 0.3}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_every_loss_says_which_keywords_it_accepts(name):
    cls, accepted = LOSSES[name], loss_kwargs_of(name)
    sizes = {"num_classes": 3, "embed_dim": 4} if cls.needs_num_classes else {}
    loss = build_loss(name, **sizes, **accepted)  # every listed keyword, at its default, is accepted
    assert set(loss.hparams) - {"num_classes", "embed_dim"} <= set(accepted)
    listed = ", ".join(accepted)
    with pytest.raises(UnknownHyperParameterError, match=f"unknown hyper-parameter 'bogus' for loss '{name}'; "
                                                         f"accepted: {listed}$"):
        build_loss(name, **sizes, bogus=1)
    with pytest.raises(UnknownHyperParameterError, match=f"'bogus' for {cls.__name__};.*accepted: .*{listed}$"):
        cls(**sizes, bogus=1)


def test_the_class_form_lists_the_accepted_names_and_a_close_match():
    with pytest.raises(UnknownHyperParameterError) as info:
        SmoothAP(tua=0.1)
    assert str(info.value) == ("unknown hyper-parameter 'tua' for SmoothAP; did you mean 'tau'? accepted: tau, "
                               "exact_rank_pos, include_self, reduction, chunk_size")
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)  # what Python raises; bad input
    with pytest.raises(UnknownHyperParameterError, match="'taux' for ROADMAPProxy; did you mean 'tau'"):
        ROADMAPProxy(3, 4, taux=1.0)  # **rank_hparams are SupAP's keywords
    assert HAPPIER(3, 4, alpha=2.0).rank_loss.alpha == 2.0  # keywords a constructor passes on still pass
    with pytest.raises(TypeError, match="missing"):  # other signature errors stay Python's own
        HAPPIER(tau=0.1)


def test_training_needs_the_mean_reduction():
    with pytest.raises(ValueError, match="loss_kwargs: reduction must be 'mean' for training"):
        TrainConfig(loss="smooth_ap", loss_kwargs={"reduction": "none"})


# ------------------------------------------------------------------ checkpoints
@pytest.fixture(scope="module")
def real_checkpoint(tmp_path_factory) -> bytes:
    out = tmp_path_factory.mktemp("run")
    train, test = tiny_splits()
    Trainer(tiny_config(out=str(out)), train_set=train, test_set=test, model=small_model()).fit(steps=1)
    return (out / "checkpoint.pt").read_bytes()


def bad_checkpoint(kind: str, folder: Path, real: bytes) -> Path:
    path = folder / "checkpoint.pt"
    if kind == "garbage":
        path.write_bytes(bytes(range(256)) * 8)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind.startswith("truncated"):
        path.write_bytes(real[: {"truncated_half": len(real) // 2, "truncated_tail": len(real) - 10,
                                 "truncated_head": 100}[kind]])
    elif kind == "pickled_module":
        torch.save(nn.Linear(2, 2), path)
    elif kind == "state_dict":
        torch.save(nn.Linear(2, 2).state_dict(), path)
    elif kind == "other_dict":
        torch.save({"step": 3, "weights": torch.zeros(2)}, path)
    elif kind == "old_format":
        path.write_bytes(real)
        older = {k: v for k, v in torch.load(path, weights_only=True).items() if k != "sha256"}  # no checksum then
        torch.save({**older, "format": 0}, path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "text":
        path.write_text("lr: 0.1\n")
    return path


CORRUPT = ["garbage", "empty", "truncated_half", "truncated_tail", "truncated_head", "pickled_module", "state_dict",
           "other_dict", "old_format", "folder", "text"]
WHY = {"garbage": "damaged, cut short", "empty": "the file is empty", "truncated_half": "damaged, cut short",
       "truncated_tail": "damaged, cut short", "truncated_head": "damaged, cut short",
       "pickled_module": "pickled Python objects", "state_dict": "a model's state_dict",
       "other_dict": "it has no format",
       "old_format": "format 0; this version reads format 1", "folder": "it is a folder",
       "text": "damaged, cut short or not a PyTorch file"}


@pytest.mark.parametrize("kind", CORRUPT)
def test_a_bad_checkpoint_is_a_one_line_error_naming_the_file(kind, tmp_path, real_checkpoint, capsys):
    path = bad_checkpoint(kind, tmp_path, real_checkpoint)
    with pytest.raises(ValueError) as info:
        check_format(load_checkpoint(path), path)
    message = str(info.value)
    assert message.startswith(f"{path} is not a RankLab checkpoint (expected a file written by `python -m lab train "
                              "--out`") and WHY[kind] in message and "\n" not in message
    assert fails(capsys, "eval", "--checkpoint", path) == f"python -m lab eval: error: {message}"
    assert fails(capsys, "train", "--resume", path) == f"python -m lab train: error: {message}"


def test_a_missing_checkpoint_and_a_run_folder(tmp_path, real_checkpoint, capsys):
    assert "error: no checkpoint at" in fails(capsys, "eval", "--checkpoint", tmp_path / "missing.pt")
    (tmp_path / "checkpoint.pt").write_bytes(real_checkpoint)
    assert f"it is a folder; did you mean {tmp_path / 'checkpoint.pt'}?" in fails(capsys, "eval", "--checkpoint",
                                                                                   tmp_path)
    assert check_format(load_checkpoint(tmp_path / "checkpoint.pt"), "x")["step"] == 1  # the good one loads


@pytest.mark.slow
def test_the_cli_process_exits_2_with_one_line_and_no_traceback(tmp_path):
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint at all")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "lab", "eval", "--checkpoint", str(tmp_path / "bad.pt")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [f"python -m lab eval: error: {tmp_path / 'bad.pt'} is not a RankLab checkpoint "
                                        "(expected a file written by `python -m lab train --out` or Trainer.save): "
                                        "the file is damaged, cut short or not a PyTorch file"]


# ------------------------------------------------------------------ recipes, flags, folders
@pytest.mark.parametrize("text, expected", [
    ("loss: roadmap\n\tlr: 0.1\n", "r.yaml:2:1: not valid YAML: found character '\\t' that cannot start any token "
                                   "(YAML indents with spaces, not tabs)"),
    ("loss: roadmap\nmilestones: [10, 20\n", "r.yaml:3:1: not valid YAML: expected ',' or ']', but got '<stream end>'"),
    ("- loss: roadmap\n- lr: 0.1\n", "r.yaml: a recipe must be a YAML mapping of config keys (key: value lines), "
                                     "got a list"),
    ("loss: roadmap\nloss_kwargs: [0.5]\n", "loss_kwargs must be a mapping of names to values (e.g. {tau: 0.01}), "
                                           "got list"),
    ("batchsize: 32\n", "unknown config key(s) ['batchsize']"),
])
def test_a_malformed_recipe_is_one_line_naming_the_file_and_line(text, expected, tmp_path, capsys, no_datasets):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text)
    err = fails(capsys, "train", "--config", recipe)
    assert err.startswith("python -m lab train: error: ") and expected in err


def test_a_missing_or_binary_recipe(tmp_path, capsys):
    assert "no recipe at" in fails(capsys, "train", "--config", tmp_path / "nope.yaml")
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00binary")
    assert "bin.yaml is not a text file" in fails(capsys, "train", "--config", tmp_path / "bin.yaml")


def test_out_pointing_at_a_file_fails_before_any_dataset(tmp_path, capsys, no_datasets):
    (tmp_path / "taken").write_text("a file")
    err = fails(capsys, "train", *TINY, "--out", tmp_path / "taken")
    assert f"--out {tmp_path / 'taken'} is an existing file: give a folder" in err
    err = fails(capsys, "train", *TINY, "--out", tmp_path / "taken" / "run")
    assert f"is inside {tmp_path / 'taken'}, which is a file" in err


@pytest.mark.parametrize("item, expected", [
    ("tau", "--loss-kwargs expects KEY=VALUE pairs (e.g. --loss-kwargs tau=0.01), got 'tau'"),
    ("tau=[1,", "--loss-kwargs tau=[1,: '[1,' is not a value"),
])
def test_a_malformed_key_value_flag(item, expected, capsys, no_datasets):
    assert expected in fails(capsys, "train", *TINY, "--loss-kwargs", item)


def test_ctrl_c_exits_130_without_a_traceback(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr("lab.cli.datasets", interrupted)
    with pytest.raises(SystemExit) as info:
        main(["datasets"])
    assert info.value.code == 130 and "Traceback" not in capsys.readouterr().err


# ------------------------------------------------------------------ tensors without data
def _meta_variants(*tensors):
    """For each position, the arguments with that one tensor moved to the meta device."""
    for i, t in enumerate(tensors):
        yield i, [x.to("meta") if j == i else x for j, x in enumerate(tensors)]


def _score_args(fn):
    second = list(inspect.signature(fn).parameters)[1]
    scores = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4]])
    targets = torch.tensor([[True, False, True], [False, True, False]])
    return [scores, targets.float() if second == "relevance" else targets], ["scores", second]


SCORE_LEVEL = [getattr(functional, n) for n in functional.__all__] + \
    [getattr(metrics, n) for n in metrics.__all__ if callable(getattr(metrics, n))
     and list(inspect.signature(getattr(metrics, n)).parameters)[:1] == ["scores"]
     and list(inspect.signature(getattr(metrics, n)).parameters)[2] == "mask"]


@pytest.mark.parametrize("fn", SCORE_LEVEL, ids=lambda f: f"{f.__module__.split('.')[1]}.{f.__name__}")
def test_score_level_losses_and_metrics_refuse_meta_tensors(fn):
    args, names = _score_args(fn)
    for i, variant in _meta_variants(*args):
        with pytest.raises(ValueError, match=f"^{names[i]} is a meta tensor"):
            fn(*variant)
    with pytest.raises(ValueError, match="^mask is a meta tensor"):
        fn(*args, mask=torch.ones(2, 3, dtype=torch.bool, device="meta"))


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_embedding_level_losses_refuse_meta_tensors(name):
    loss = build_loss(name, num_classes=4, embed_dim=8)
    embeddings, labels = torch.randn(8, 8), torch.arange(4).repeat_interleave(2)
    for i, variant in _meta_variants(embeddings, labels):
        with pytest.raises(ValueError, match=f"^{['embeddings', 'labels'][i]} is a meta tensor"):
            loss(*variant)


def test_embedding_level_metrics_refuse_meta_tensors():
    embeddings, labels = torch.randn(8, 8), torch.arange(4).repeat_interleave(2)
    for i, variant in _meta_variants(embeddings, labels):
        with pytest.raises(ValueError, match=f"^{['query_emb', 'query_labels'][i]} is a meta tensor"):
            metrics.retrieval_metrics(*variant, backend="torch")
        with pytest.raises(ValueError, match=f"^{['embeddings', 'labels'][i]} is a meta tensor"):
            metrics.decomposability_gap(*variant, torch.zeros(8, dtype=torch.long))


def test_sparse_and_nested_scores_are_refused():
    scores, targets = torch.eye(3), torch.eye(3, dtype=torch.bool)
    with pytest.raises(ValueError, match="scores must be a dense tensor, got layout torch.sparse_coo: use .to_dense()"):
        functional.smooth_ap(scores.to_sparse(), targets)
    with warnings.catch_warnings():  # nested tensors are a prototype: torch says so
        warnings.simplefilter("ignore")
        nested = torch.nested.nested_tensor([scores[0], scores[1, :2]])
    with pytest.raises(ValueError, match="scores is a nested tensor"):
        functional.smooth_ap(nested, targets)


def test_a_resume_does_not_see_a_tuple_and_its_list_as_different_configs():
    from lab.train.config import config_diff

    assert config_diff({"loss_kwargs": {"ks": (1, 2)}}, {"loss_kwargs": {"ks": [1, 2]}}) == {}
    assert config_diff({"loss_kwargs": {"ks": (1, 2)}}, {"loss_kwargs": {"ks": [1, 4]}}) != {}
