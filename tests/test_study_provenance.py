"""Issue 33, part one: runs that carry their provenance, same seed = same run, and result keys that
survive the code growing (a new config field, a changed default, a record from before provenance)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
from pathlib import Path

import pytest
import torch

import lab.train
from lab.core import provenance as prov
from lab.studies.running import execution, runner
from lab.studies.running import spec as study_spec
from lab.train import Trainer, TrainConfig

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


# ---------------------------------------------------------------- provenance
def test_code_version_names_the_commit_and_only_the_package_files_that_changed(tmp_path):
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "a.py").write_text("x = 1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "r.json").write_text("{}\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "one")
    clean = prov.code_version(tmp_path, "lab")
    assert clean["commit"] == _git(tmp_path, "rev-parse", "HEAD") and clean["dirty"] is False
    (tmp_path / "results" / "r.json").write_text('{"runs": {}}\n')  # a study writing its results: not code
    assert prov.code_version(tmp_path, "lab")["dirty"] is False
    (tmp_path / "lab" / "a.py").write_text("x = 2\n")
    (tmp_path / "lab" / "b.py").write_text("y = 1\n")
    dirty = prov.code_version(tmp_path, "lab")
    assert dirty["dirty"] is True and dirty["dirty_files"] == ["lab/a.py", "lab/b.py"]
    assert dirty["source_hash"] != clean["source_hash"]
    (tmp_path / "lab" / "a.py").write_text("x = 1\n")
    (tmp_path / "lab" / "b.py").unlink()
    assert prov.code_version(tmp_path, "lab")["source_hash"] == clean["source_hash"]  # same code, same hash


def test_outside_a_git_checkout_the_source_hash_still_names_the_code(tmp_path):
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "a.py").write_text("x = 1\n")
    version = prov.code_version(tmp_path, "lab")
    assert version["commit"] is None and version["dirty"] is None
    expected = hashlib.sha1(b"a.py\0x = 1\n\0").hexdigest()[:16]  # the definition, written out
    assert version["source_hash"] == expected


def test_a_trained_run_records_its_code_libraries_device_times_and_session(tmp_path):
    data = runner.run_studies(["methods"], tmp_path, quick=True, seeds=1, log=lambda _: None)["methods"]
    session = data["sessions"][-1]["id"]
    assert len(data["runs"]) == len(study_spec.QUICK_METHODS)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    for key, rec in data["runs"].items():
        origin = rec["provenance"]
        if head.returncode == 0:
            assert origin["commit"] == head.stdout.strip() and isinstance(origin["dirty"], bool)
        assert origin["source_hash"] == prov.source_hash()
        assert origin["torch"] == torch.__version__ and origin["device"] == "cpu" and origin["threads"] == 1
        assert origin["session"] == session
        assert rec["started"] <= rec["finished"]
        assert rec["trained_config"] == TrainConfig.from_dict({**rec["config"], "device": "cpu"}).to_dict()
        assert study_spec.record_key(rec) == key  # the whole config keys the record as the spec does
        # issue 43: the libraries the evaluation and data use, the CPU kind, and a fingerprint of the data
        assert origin["faiss"] == prov.distribution_version("faiss-cpu", "faiss-gpu", "faiss-gpu-cu12",
                                                            "faiss-gpu-cu11", "faiss")
        assert origin["torchvision"] == prov.distribution_version("torchvision") and origin["torchvision"]
        assert origin["cpu_model"] == prov.cpu_model() and origin["cpu_model"]
        assert origin["cpu_features"] == prov.cpu_features()
        cfg = TrainConfig.from_dict(rec["config"])
        assert origin["dataset_hash"] == prov.dataset_hash(execution.run_datasets(cfg)) and origin["dataset_hash"]


def test_the_cpu_model_is_cpuinfos_model_name(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: X\nmodel name\t: Some CPU @ 2.00GHz\nflags\t: a b\n")
    assert prov.cpu_model(info) == "Some CPU @ 2.00GHz"
    assert prov.cpu_model(tmp_path / "missing") == (__import__("platform").processor() or None)


def test_the_cpu_features_are_its_vector_instruction_sets_sorted(tmp_path):
    """Two machines with one "model name" and one torch capability ("AVX512") trained different bits: the
    replay guard's machine and every record name the vector units (lab/studies/running/replay.py)."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t: fpu sse2 avx512f amx_tile fma avx2 lm avx512_fp16 sse\n"
                    "processor\t: 1\nflags\t: fpu sse2\n")
    assert prov.cpu_features(info) == "amx_tile avx2 avx512_fp16 avx512f fma sse sse2"
    info.write_text("processor\t: 0\nflags\t: fpu lm\n")
    assert prov.cpu_features(info) is None and prov.cpu_features(tmp_path / "missing") is None
    from lab.studies.running import replay

    assert replay.machine()["cpu_features"] == prov.cpu_features()


class Images:
    def __init__(self, n: int, labels=None, change: int | None = None):
        self.labels = torch.arange(n) // 2 if labels is None else labels
        self.n, self.change = n, change

    def __len__(self):
        return self.n

    def image(self, i: int):
        import numpy as np

        return np.full((4, 4), (i * 7 + (i == self.change)) % 256, dtype=np.uint8)


def test_the_dataset_hash_is_the_same_data_and_moves_with_sizes_labels_and_sampled_images():
    base = prov.dataset_hash({"train": Images(20), "test": Images(10)})
    assert base == prov.dataset_hash({"test": Images(10), "train": Images(20)})  # the order of the splits aside
    assert len(base) == 16
    assert prov.dataset_hash({"train": Images(21), "test": Images(10)}) != base
    assert prov.dataset_hash({"train": Images(20, labels=torch.arange(20)), "test": Images(10)}) != base
    assert prov.dataset_hash({"train": Images(20, change=19), "test": Images(10)}) != base  # a sampled image (last)
    assert prov.dataset_hash({"train": Images(20, change=1), "test": Images(10)}) == base  # one not sampled
    assert prov.dataset_hash({"train": object()}) is None  # unreadable: no hash, no error


def test_the_glyph_datasets_hash_is_stable_and_sees_the_config():
    cfg = TrainConfig.from_dict({**study_spec.QUICK_BASE, "loss": "roadmap", "loss_kwargs": {}, "seed": 0})
    first = prov.dataset_hash(execution.run_datasets(cfg))
    assert first == prov.dataset_hash(execution.run_datasets(cfg)) and first
    other = TrainConfig.from_dict({**study_spec.QUICK_BASE, "loss": "roadmap", "loss_kwargs": {}, "seed": 0,
                                   "dataset_kwargs": {"num_classes": 24, "instances_per_class": 6}})
    assert prov.dataset_hash(execution.run_datasets(other)) != first


def test_stored_records_without_the_new_fields_still_load_and_map_to_their_keys():
    """Issue 43: records from before the faiss, torchvision, CPU and data fields stay valid."""
    from lab.studies.reporting.code_versions import code_versions

    for path in [RESULTS / "v2" / f"{name}.json" for name in study_spec.V2_STUDIES]:
        data = json.loads(path.read_text())
        loaded = runner.load_results(path)["runs"]
        old = [r for r in data["runs"].values() if "dataset_hash" not in (r.get("provenance") or {})]
        assert old, path  # every stored record predates the fields
        assert {study_spec.record_key(r) for r in old} <= set(loaded)
        assert all(loaded[study_spec.record_key(r)]["key"] == study_spec.record_key(r) for r in old)
        assert code_versions(list(loaded.values())).startswith("**Code.**")


# ---------------------------------------------------------------- same seed, same run
def _weights(trainer: Trainer) -> bytes:
    return b"".join(p.detach().cpu().numpy().tobytes() for p in trainer.model.parameters())


def _quick(**changes) -> TrainConfig:
    return TrainConfig.from_dict({**study_spec.QUICK_BASE, "loss": "roadmap", "loss_kwargs": {}, "seed": 0,
                                  "steps": 6, **changes})


def test_same_seed_same_code_same_device_gives_the_same_weights_bitwise():
    first, second = Trainer(_quick()), Trainer(_quick())
    first.step(6)
    second.step(6)
    assert _weights(first) == _weights(second)
    other = Trainer(_quick(seed=1))
    other.step(6)
    assert _weights(other) != _weights(first)  # the comparison can fail


def test_evaluating_during_training_does_not_change_the_trajectory(tmp_path):
    """The pilot evaluated every 250 steps, the study's runs never: evaluation must not move a run. Also
    the trainer's own schedule (fit with eval_every) and a resumption from a checkpoint part-way."""
    plain = Trainer(_quick())
    plain.step(6)
    between = Trainer(_quick())
    for _ in range(3):
        between.step(2)
        between.evaluate()
    scheduled = Trainer(_quick(eval_every=2))
    scheduled.fit()
    assert any(r.get("kind") == "eval" for r in scheduled.history)  # it did evaluate
    half = Trainer(_quick())
    half.step(3)
    half.save(tmp_path / "half.pt")
    resumed = Trainer(_quick())
    resumed.resume(tmp_path / "half.pt")
    resumed.step(3)
    assert _weights(between) == _weights(plain)
    assert _weights(scheduled) == _weights(plain)
    assert _weights(resumed) == _weights(plain)


# ---------------------------------------------------------------- keys
def _stored() -> list[tuple[str, str, Path]]:
    """(study, protocol, file) of every complete results file in results/."""
    out = [(n, "v1", RESULTS / f"{n}.json") for n in study_spec.ORDER]
    out += [(n, "v2", RESULTS / "v2" / f"{n}.json") for n in study_spec.V2_STUDIES]
    return [(n, p, f) for n, p, f in out if f.exists()]


def test_every_stored_run_is_found_by_todays_specs():
    assert _stored(), "results/ holds no study"
    for name, protocol, path in _stored():
        data = runner.load_results(path)
        assert not runner.missing_runs(name, data, protocol=protocol), (path, "plans runs it holds")
        raw = json.loads(path.read_text())["runs"]
        assert sorted(data["runs"]) == sorted(raw)  # the files are written under today's keys


def test_every_stored_record_is_a_run_todays_specs_plan():
    """The other direction, over every raw study file in results/ (GPU ones too): no record becomes an
    orphan whose key no spec plans (TrainConfig's amp default became "auto"; the specs state "none")."""
    files = [p for p in sorted(RESULTS.rglob("*.json")) if isinstance(json.loads(p.read_text()).get("runs"), dict)
             and "study" in json.loads(p.read_text())]
    assert len(files) >= len(_stored()) + 1, files  # the GPU file is read too
    for path in files:
        data = runner.load_results(path)
        protocol = "v2" if "v2" in path.relative_to(RESULTS).parts else "v1"
        seeds = max(r["seed"] for r in data["runs"].values()) + 1  # the power plan's looks add seeds
        planned = {s.key for s in study_spec.study_runs(data["study"], seeds=seeds, protocol=protocol,
                                                    planned=True)}  # ROD-R@k: declared
        assert set(data["runs"]) <= planned, (path, sorted(set(data["runs"]) - planned))
    pilot = json.loads((RESULTS / "v2" / "pilot.json").read_text())
    assert pilot["key"] == study_spec.config_key(study_spec.PILOT)


def _with_field(**defaults) -> type:
    """TrainConfig as if the code had grown: a new field, or another default for an existing one."""
    fields = [(k, type(v), dataclasses.field(default=v)) for k, v in defaults.items()]
    return dataclasses.make_dataclass("GrownConfig", fields, bases=(TrainConfig,), frozen=True)


def test_stored_runs_are_still_found_after_a_config_field_is_added(monkeypatch):
    monkeypatch.setattr(lab.train, "TrainConfig", _with_field(label_smoothing=0.0))
    assert "label_smoothing" in lab.train.TrainConfig().to_dict()
    for name, protocol, path in _stored():
        assert not runner.missing_runs(name, runner.load_results(path), protocol=protocol), path
    spec = study_spec.study_runs("methods", protocol="v2")[0]
    moved = study_spec.config_key({**spec.config, "label_smoothing": 0.1})
    assert moved != spec.key  # the new field, set, is another run


def test_a_changed_default_moves_the_runs_that_relied_on_it_and_no_stored_key(monkeypatch):
    """gamma (the multistep factor) is left out of every study config: with another default the specs
    mean other runs (they must be trained), while each stored record keeps the key of what it trained."""
    stored = {path: sorted(runner.load_results(path)["runs"]) for _, _, path in _stored()}
    specs = study_spec.study_runs("methods", protocol="v2")
    before = [s.key for s in specs]
    monkeypatch.setattr(lab.train, "TrainConfig", _with_field(gamma=0.5))
    assert lab.train.TrainConfig().gamma == 0.5
    assert not set(before) & {s.key for s in specs}
    assert {path: sorted(runner.load_results(path)["runs"]) for path in stored} == stored


def test_a_key_is_what_the_run_trains():
    spec = study_spec.study_runs("methods", protocol="v2")[0]
    key = spec.key
    for reporting in ({"eval_every": 250}, {"device": "cuda"}, {"progress": True}, {"log_every": 1}, {"out": "x"}):
        assert study_spec.config_key({**spec.config, **reporting}) == key, reporting
    assert study_spec.config_key({**spec.config, "gamma": 0.3}) == key  # a field given at its default
    for trained in ({"lr": 2e-3}, {"seed": 7}, {"loss_kwargs": {"num_bins": 20}}, {"eval_max_items": 100}):
        assert study_spec.config_key({**spec.config, **trained}) != key, trained


def test_a_results_file_with_two_records_of_one_run_is_an_error_naming_it(tmp_path):
    spec = study_spec.study_runs("methods", quick=True)[0]
    rec = {"config": spec.config, "method": spec.method, "seed": spec.seed}
    path = tmp_path / "methods.json"
    path.write_text(json.dumps({"runs": {"a": rec, "b": {**rec, "config": {**spec.config, "eval_every": 5}}}}))
    with pytest.raises(ValueError, match=r"methods\.json: two records of one run"):
        runner.load_results(path)
    path.write_text('{"runs": {')
    with pytest.raises(ValueError, match=r"methods\.json: not a results file"):
        runner.load_results(path)


# ---------------------------------------------------------------- a loss definition changed mid-study
class _TorchBefore4e0c22f:
    """torch as lab.core.steps saw it before 4e0c22f: its three ``torch.relu(x)`` were ``x.clamp_min(0)``
    (h_minus's linear branch, soft_histogram's and neighbour_bin's kernels), nothing else differed."""

    relu = staticmethod(lambda x: x.clamp_min(0))

    def __getattr__(self, name: str):
        return getattr(torch, name)


def test_the_definitions_before_4e0c22f_train_every_study_loss_to_the_same_weights(monkeypatch):
    """Protocol v2's runs were trained on the CPU, 30 of study 1's before 4e0c22f changed the loss
    definitions (clamp_min -> relu) and 15 after. On the CPU path the change cannot move a run: each
    study loss, trained with the definitions of before and of after, ends bitwise on the same weights."""
    import lab.core.steps as steps

    source = Path(steps.__file__).read_text()
    assert source.count("torch.relu(") == 3 and "clamp_min(0)" not in source  # what the patch stands for
    for loss in study_spec.METHODS.values():
        config = _quick(loss=loss, steps=3)
        after = Trainer(config)
        after.step(3)
        with monkeypatch.context() as patch:
            patch.setattr(steps, "torch", _TorchBefore4e0c22f())
            before = Trainer(config)
            before.step(3)
        assert _weights(before) == _weights(after), loss


def test_the_definitions_before_4e0c22f_give_the_same_values_and_slopes_at_the_kinks(monkeypatch):
    """The definitions themselves, on scores that sit exactly on the kinks (t = delta, |v - c| = width)."""
    import lab.core.steps as steps

    centres = torch.linspace(1.0, -1.0, 5, dtype=torch.float64)  # width 0.5
    values = torch.tensor([[1.0, 0.5, 0.25, -0.75, 0.05, 0.0, -1.0, 0.3]], dtype=torch.float64)

    def run():
        t = values.clone().requires_grad_(True)
        h = steps.h_minus(t, tau=0.01, rho=100.0, delta=0.05)
        hist = steps.soft_histogram(t, centres, 0.5, torch.ones_like(t))
        index, weight, _ = steps.neighbour_bin(t, steps.nearest_bins(t, centres), 1, centres, 0.5)
        (h.sum() + (hist * torch.arange(1.0, 6.0, dtype=hist.dtype)).sum() + weight.sum()).backward()
        return h.detach(), hist.detach(), weight.detach(), t.grad

    after = run()
    monkeypatch.setattr(steps, "torch", _TorchBefore4e0c22f())
    before = run()
    for a, b in zip(after, before):
        assert torch.equal(a, b), (a, b)


def test_reading_stored_runs_evaluates_the_config_annotations_once(monkeypatch):
    """Keying a record builds its config; typing.get_type_hints per field of each made the dashboard's first
    Reproduction view take 38 s (8.6 s of 11.6 s of study 1 in it)."""
    import typing

    from lab.train import config as train_config

    calls = []
    real = typing.get_type_hints
    monkeypatch.setattr(typing, "get_type_hints", lambda *a, **k: calls.append(a) or real(*a, **k))
    train_config.hints.cache_clear()
    for _, _, path in _stored()[:3]:
        runner.load_results(path)
    assert 0 < len(calls) <= 2  # TrainConfig (and a subclass a test made), not once per field of every run


def test_deterministic_turns_on_torchs_deterministic_algorithms_and_keeps_the_cpu_run():
    """--deterministic (a TrainConfig field added after keys were frozen: the stored runs stay found, above)."""
    import argparse

    from lab.cli import add_config_flags

    parser = argparse.ArgumentParser()
    add_config_flags(parser)
    assert parser.parse_args(["--deterministic"]).deterministic is True
    was = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark,
           torch.backends.cudnn.deterministic)
    try:
        plain = Trainer(_quick(steps=3))
        plain.step(3)
        assert not torch.are_deterministic_algorithms_enabled()
        chosen = Trainer(_quick(steps=3, deterministic=True))
        assert torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic
        chosen.step(3)
        assert _weights(chosen) == _weights(plain)  # on the CPU the run was deterministic already
    finally:
        torch.use_deterministic_algorithms(was[0])
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = was[1], was[2]
    spec = study_spec.study_runs("methods", protocol="v2")[0]
    assert study_spec.config_key({**spec.config, "deterministic": True}) != spec.key
    assert study_spec.config_key({**spec.config, "deterministic": False}) == spec.key


# ---------------------------------------------------------------- what the page says of the code
def test_the_page_counts_the_runs_of_each_code_version_and_those_before_a_definition_change():
    from lab.studies.reporting.code_versions import DefinitionChange, code_versions

    change = DefinitionChange("abc1234", "2026-11-26 04:00:00", "x -> y", "it cannot move them")
    origin = {"commit": "f" * 40, "dirty": False, "torch": "2.14.1", "device": "cpu"}
    records = ([{"key": f"old{i}", "finished": f"2026-11-2{5 + (i > 2)} 0{i}:00:00"} for i in range(5)]
               + [{"key": "new", "finished": "2026-11-27 10:00:00", "provenance": origin},
                  {"key": "dirty", "finished": "2026-11-27 11:00:00", "provenance": {**origin, "dirty": True}}])
    text = code_versions(records + records[:1], [change])  # a run listed twice counts once
    assert "1 at fffffff; 1 at fffffff with uncommitted changes to lab/" in text
    assert "2 runs recorded their code" in text and "(2 with torch 2.14.1 on cpu)" in text
    old = [r for r in records if "provenance" not in r]
    before = sum(r["finished"] < change.date for r in old)  # by hand: 3 on the 25th, and 03:00 on the 26th
    assert before == 4 and f"{before} of the {len(records)} finished before abc1234" in text
    assert f"{len(records) - before} after: it cannot move them" in text
    # issue 43: how many carry the new fields, and the re-runs as the stronger evidence
    assert "0 of the 7 record the faiss and torchvision versions, the CPU model and a hash of the data" in text
    fuller = records + [{"key": "full", "provenance": {**origin, "dataset_hash": "0" * 16, "faiss": None}}]
    assert "1 of the 8 record the faiss" in code_versions(fuller, [change])
    rerun = {"provenance": {"commit": "e" * 40}}
    again = [{**records[0], "method": "FastAP", "seed": 0, "curve_rerun": {**rerun, "exact": ["R@1", "mAP"]}},
             {**records[1], "method": "Sup-R@k", "seed": 0, "curve_rerun": {**rerun, "exact": [], "checked": {}}},
             {**records[2], "method": "Smooth-R@k", "seed": 0, "curve_rerun": {**rerun, "exact": [],
                                                                              "checked": {"train_at": "x"}}}]
    text = code_versions(again, [change])
    assert ("Stronger evidence than these fields: 2 stored runs trained again at eeeeeee (1 thread, CPU) reproduced "
            "their stored numbers (FastAP seed 0: R@1, mAP bit for bit, the rest within the rounding of the "
            "evaluation's summation change; Smooth-R@k seed 0: the same final weights") in text


def test_the_pilot_replay_paragraph_says_which_runs_are_the_same_and_what_threads_moved():
    from lab.studies.reporting.code_versions import pilot_replay

    run = dict(step=250, measured="2026-11-26 19:00")
    data = {"pilot": {"step": 250, "mAP@R": 0.40}, "runs": [
        dict(run, commit="aaaaaaa", threads=1, **{"mAP@R": 0.39}, weights_sha1="w1"),
        dict(run, commit="bbbbbbb", threads=1, **{"mAP@R": 0.39}, weights_sha1="w1"),
        dict(run, commit="aaaaaaa", threads=2, **{"mAP@R": 0.3975}, weights_sha1="w2")]}
    text = pilot_replay(data)
    assert "Bitwise the same weights: aaaaaaa with 1 thread and bbbbbbb with 1 thread." in text
    assert "None of them reproduces the pilot's value" in text and "by up to 0.75 pt" in text
    data["runs"][2]["mAP@R"] = 0.40
    assert "1 of them reproduces the pilot's value" in pilot_replay(data)
    assert pilot_replay({}) == ""


def test_a_checkpoint_saved_before_a_field_existed_still_resumes():
    """config_diff read a field missing from a saved config as None: adding `deterministic` refused to resume
    every earlier checkpoint ('deterministic: None in the checkpoint vs False now')."""
    from lab.train.config import config_diff

    now = TrainConfig().to_dict()
    before = {k: v for k, v in now.items() if k != "deterministic"}
    assert config_diff(before, now) == {} and config_diff(now, before) == {}
    assert config_diff(before, {**now, "deterministic": True}) == {"deterministic": (False, True)}
    assert config_diff({**before, "lr": 0.1}, now) == {"lr": (0.1, 0.001)}  # a real difference still counts


def test_a_checkpoint_saved_before_amp_existed_was_float32_not_todays_auto():
    """amp's default became "auto", resolved by the Trainer ("none" on a CPU): a config saved without amp
    trained float32, so it resumes into a float32 trainer and not into a bf16 one."""
    from lab.train.config import config_diff

    resolved = {**TrainConfig().to_dict(), "amp": "none"}  # what a CPU Trainer's config holds
    before = {k: v for k, v in resolved.items() if k != "amp"}
    assert config_diff(before, resolved) == {}
    assert config_diff(before, {**resolved, "amp": "bf16"}) == {"amp": ("none", "bf16")}
