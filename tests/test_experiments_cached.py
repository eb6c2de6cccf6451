"""The reproduction study's raw results read as notebook rows (lab.experiments.cached), and full
mode reading them instead of retraining: checked against the committed results/*.json with plain
loops over the file."""
import json
import math
from pathlib import Path

import pytest

from lab.experiments import cached, runs
from lab.studies.reporting.stats import summarise

RESULTS = Path(__file__).resolve().parents[1] / "results"
pytestmark = pytest.mark.skipif(not (RESULTS / "methods.json").exists(), reason="no raw results in results/")


def raw(study):
    return list(json.loads((RESULTS / f"{study}.json").read_text())["runs"].values())


def plain_mean_std(values):
    n = len(values)
    mean = sum(values) / n
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


@pytest.fixture
def no_training(monkeypatch):
    def train(*args, **kwargs):
        raise AssertionError(f"trained {args} {kwargs}: results/ holds this run")

    monkeypatch.setattr(runs, "train_and_evaluate", train)


def test_loss_comparison_in_full_mode_is_the_study_json(no_training):
    rows = runs.loss_comparison(fast=False)
    assert [r["method"] for r in rows] == ["SmoothAP", "SupAP", "ROADMAP"]
    for row in rows:
        mine = sorted((r for r in raw("methods") if r["method"] == row["method"]), key=lambda r: r["seed"])
        assert row["seeds"] == [r["seed"] for r in mine] == [0, 1, 2]
        for metric, field in (("R@1", "R@1"), ("mAP@R", "mAP@R"), ("gap", "gap_train_probe")):
            mean, std = plain_mean_std([r[field] for r in mine])
            assert row[metric] == pytest.approx(mean) and row["std"][metric] == pytest.approx(std)
            assert row["values"][metric] == [r[field] for r in mine]
        assert row["steps"] == 300 and row["batch_size"] == 128 and row["source"] == "results/methods.json"
        assert row["R@1"] == pytest.approx(summarise(raw("methods"), "R@1", method=row["method"]).mean)  # as the study


def test_every_full_mode_comparison_reads_results(no_training):
    """Full mode never retrains a run that results/ holds: same configuration, field by field."""
    sizes = runs.batch_size_study(fast=False)
    assert [(r["loss"], r["batch_size"], r["steps"]) for r in sizes[:2]] == [("sup_ap", 32, 1200),
                                                                             ("roadmap", 32, 1200)]
    bins = runs.bins_study(fast=False)
    assert [(r["loss"], r["num_bins"]) for r in bins[:2]] == [("fast_ap", 2), ("fast_ap", 5)] and len(bins) == 10
    ten = next(r for r in bins if r["loss"] == "fast_ap" and r["num_bins"] == 10)  # the default: {} in the study
    assert ten["R@1"] == pytest.approx(sum(r["R@1"] for r in raw("bins") if r["method"] == "FastAP"
                                           and r["params"]["num_bins"] == 10) / 3)
    assert [r["method"] for r in runs.recall_study(fast=False)] == ["Smooth-R@k", "Sup-R@k", "ROADMAP"]


def test_one_seed_is_that_seed_and_retrain_or_another_setting_trains(monkeypatch):
    one = runs.loss_comparison(["roadmap"], fast=False, seed=1)[0]
    record = next(r for r in raw("methods") if r["method"] == "ROADMAP" and r["seed"] == 1)
    assert one["seeds"] == [1] and one["R@1"] == record["R@1"] and one["std"]["R@1"] == 0.0
    calls = []
    monkeypatch.setattr(runs, "train_and_evaluate",
                        lambda loss, kw=None, **o: calls.append((loss, kw, o)) or {"loss": loss})
    runs.loss_comparison(["roadmap"], fast=False, retrain=True)
    runs.loss_comparison(["roadmap"], fast=False, lr=0.01)  # not a configuration of the study
    runs.recall_study(fast=True)  # fast mode always trains (CI exercises the training path)
    assert [c[0] for c in calls] == ["roadmap", "roadmap", "smooth_recall", "sup_recall", "roadmap"]
    assert calls[1][2] == {"fast": False, "retrain": False, "lr": 0.01}
    assert calls[0][2]["retrain"] is True  # retrained live, not loaded from a shipped checkpoint


def test_comparable_configs_fill_in_defaults_and_ignore_how_a_run_reports():
    base = runs.notebook_config("fast_ap", fast=False).to_dict()
    assert cached.comparable({**base, "loss_kwargs": {"num_bins": 10}}) == cached.comparable(base)  # FastAP default
    assert cached.comparable({**base, "loss_kwargs": {"num_bins": 20}}) != cached.comparable(base)
    assert cached.comparable({**base, "seed": 4, "progress": False, "device": "cpu"}) == cached.comparable(base)
    assert cached.comparable({**base, "steps": 301}) != cached.comparable(base)


def test_a_notebooks_amp_auto_compares_as_the_float32_its_small_cnn_trains_in():
    """TrainConfig's amp default became "auto": a notebook's config must still find the study records,
    those written before (no amp: the default "auto" now) and after (the specs state amp "none")."""
    base = runs.notebook_config("fast_ap", fast=False).to_dict()
    assert base["amp"] == "auto"
    before = {k: v for k, v in base.items() if k != "amp"}
    assert cached.comparable({**base, "amp": "none"}) == cached.comparable(base) == cached.comparable(before)
    assert cached.comparable({**base, "amp": "bf16"}) != cached.comparable(base)


def test_study_rows_group_by_method_and_params():
    rows = cached.study_rows("bins", method="SoftBinAP")
    bins = [r["params"]["num_bins"] for r in rows]
    assert bins == sorted(bins) == [2, 5, 10, 20, 40]
    two = rows[0]
    values = sorted((r["seed"], r["R@1"]) for r in raw("bins")
                    if r["method"] == "SoftBinAP" and r["params"]["num_bins"] == 2)
    assert two["values"]["R@1"] == [v for _, v in values]
    assert two["R@1"] == pytest.approx(plain_mean_std(two["values"]["R@1"])[0])


def test_missing_or_quick_results_are_not_read(tmp_path):
    assert cached.study_records("methods", tmp_path) == [] and cached.study_rows("methods", tmp_path) == []
    quick = {"study": "methods", "mode": "quick", "runs": {"k": raw("methods")[0]}}
    (tmp_path / "methods.json").write_text(json.dumps(quick))
    assert cached.study_records("methods", tmp_path) == []  # CI-sized numbers mean nothing
    config = runs.notebook_config("roadmap", fast=False).to_dict()
    assert cached.cached_rows("methods", [config], results_dir=tmp_path) is None
    assert cached.cached_rows("methods", [config]) is not None


def test_source_note_says_where_numbers_come_from():
    rows = runs.loss_comparison(fast=False)
    note = runs.source_note(rows, "methods", "loss_comparison(retrain=True)")
    assert "results/methods.json, 3 seeds" in note and "python -m lab study methods" in note
    assert "loss_comparison(retrain=True)" in note
    trained = [{"loss": "roadmap", "steps": 3, "seed": 0, "source": "trained"}]
    assert runs.source_note(trained, "methods", "x").startswith("Trained in this kernel: 3 steps per run, seed 0")


def test_seed_spread_is_the_pooled_std_of_one_run_and_of_same_seed_differences():
    spread = cached.seed_spread("methods", ["mAP@R"])
    by_method = {}
    for r in raw("methods"):
        by_method.setdefault(r["method"], {})[r["seed"]] = r["mAP@R"]
    single = [plain_mean_std(list(v.values()))[1] ** 2 for v in by_method.values()]
    paired = []
    methods = sorted(by_method)
    for i, a in enumerate(methods):
        for b in methods[i + 1:]:
            seeds = sorted(by_method[a])
            paired.append(plain_mean_std([by_method[a][s] - by_method[b][s] for s in seeds])[1] ** 2)
    assert spread["single"]["mAP@R"] == pytest.approx(math.sqrt(sum(single) / len(single)))
    assert spread["paired"]["mAP@R"] == pytest.approx(math.sqrt(sum(paired) / len(paired)))
    assert spread["settings"] == len(by_method) and spread["seeds"] == 3 and spread["source"] == "results/methods.json"
    assert 0 < spread["paired"]["mAP@R"] and 0 < spread["single"]["mAP@R"] < 0.05  # about a point, not ten
