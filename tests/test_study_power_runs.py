"""The runner's two knobs for a power plan: train only some methods' new seeds, and record each run's
learning curve on the way without changing the run."""
import json

import pytest

from lab.__main__ import main
from lab.studies.running import runner
from lab.studies.running import spec as study_spec

RETRIEVAL = ("R@1", "R@2", "R@4", "R@8", "mAP@R", "mAP")


def test_methods_trains_only_the_named_methods(tmp_path):
    specs = study_spec.study_runs("methods", quick=True, seeds=2)
    chosen = specs[0].method
    data = runner.run_studies(["methods"], tmp_path, quick=True, seeds=2, log=lambda _: None,
                              methods=[chosen])["methods"]
    trained = {(r["method"], r["seed"]) for r in data["runs"].values()}
    assert trained == {(s.method, s.seed) for s in specs if s.method == chosen}
    # the others stay missing, and a later call without the filter trains exactly them
    left = runner.missing_runs("methods", data, quick=True, seeds=2)
    assert {s.method for s in left} == {s.method for s in specs} - {chosen} and left
    assert "--methods " + chosen in data["sessions"][-1]["command"]


def test_an_unknown_method_is_one_line_naming_the_choices(tmp_path):
    with pytest.raises(ValueError, match=r"methods: unknown method 'NoSuchAP'.*choose from: .*") as e:
        runner.run_studies(["methods"], tmp_path, quick=True, seeds=1, log=lambda _: None, methods=["NoSuchAP"])
    assert "\n" not in str(e.value)
    assert not (tmp_path / "methods.json").exists() or not json.loads((tmp_path / "methods.json").read_text())["runs"]


def test_a_curve_does_not_move_the_run(tmp_path):
    spec = study_spec.study_runs("methods", quick=True, seeds=1)[0]
    plain = runner.execute(spec)
    curved = runner.execute(spec, curve_every=1)
    steps = spec.config["steps"]
    assert [p["step"] for p in curved["curve"]] == list(range(steps + 1)) and curved["curve_every"] == 1
    for k in RETRIEVAL:  # the same run: its final numbers equal, bit for bit
        assert curved[k] == plain[k], k
        assert curved["curve"][-1][k] == plain[k], k  # the last point is the run's own end
    assert "curve" not in plain
    assert curved["key"] == plain["key"] == spec.key


def test_cli_rejects_a_negative_curve_step(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["study", "methods", "--quick", "--out", str(tmp_path), "--curve-every", "-5", "--no-render"])
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--curve-every must be >= 0 (0: no curve), got -5")
    assert not (tmp_path / "methods.json").exists()
