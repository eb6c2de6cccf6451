"""The papers' tables as studies (issue 44, item 3): ROADMAP supp. Table 4 and SupRank Tables I-II declared from
recipes/, keyed as `python -m lab train --config RECIPE --loss L --seed S` keys its run, planned with --dry-run
(GPU hours from docs/benchmarks.md's measured step times only), and run end to end on tiny copies of CUB and SOP
in their published layouts, so that the page renders their section with paired tests, Holm and verdicts."""
import json
import re
from pathlib import Path

import pytest

from lab.cli import build_parser, config_from_args, main
from lab.studies.running import gpu_hours
from lab.studies.running.paper_studies import PAPER_STUDIES, paper_runs, setting_of
from lab.studies.running.spec import config_key
from lab.train.config import read_recipe

ROOT = Path(__file__).resolve().parents[1]


def test_table4_is_six_settings_by_five_losses_by_five_seeds_from_the_recipes():
    runs = paper_runs("table4")
    assert len(runs) == 150 and len({r.key for r in runs}) == 150
    assert sorted({r.params["setting"] for r in runs}) == sorted(
        f"{d}, {b}" for d in ("CUB", "SOP", "iNat") for b in ("ResNet-50", "DeiT-S"))
    assert {r.method for r in runs} == {"FastAP", "SoftBinAP", "BlackBoxAP", "SmoothAP", "ROADMAP"}
    assert all(r.config.get("eval_max_items") is None for r in runs)  # the whole test split, as the papers
    suprank = paper_runs("suprank")
    assert len(suprank) == 2 * 10 * 5 and {r.config["batch_size"] for r in suprank} == {256}


@pytest.mark.parametrize("study", sorted(PAPER_STUDIES))
def test_a_paper_runs_key_is_the_key_of_the_train_command_that_trains_it(study):
    """The same keys: a run of the study is the run `python -m lab train --config RECIPE --loss L --seed S` trains
    (a run trained by hand is found by the study, and the other way round)."""
    for stem in PAPER_STUDIES[study].recipes:
        recipe = ROOT / "recipes" / f"{stem}.yaml"
        setting = setting_of(read_recipe(recipe))
        for run in [r for r in paper_runs(study) if r.params["setting"] == setting][::6]:
            args = build_parser().parse_args(["train", "--config", str(recipe), "--loss", run.config["loss"],
                                              "--seed", str(run.seed)])
            assert config_key(config_from_args(args).to_dict()) == run.key, (stem, run.method, run.seed)


def test_dry_run_lists_every_run_its_key_and_gpu_hours_and_writes_nothing(tmp_path, capsys):
    main(["study", "table4", "--dry-run", "--out", str(tmp_path)])
    said = capsys.readouterr().out.splitlines()
    listed = [line for line in said if re.match(r"^  [0-9a-f]{16}  ", line)]
    assert said[0] == f"table4: 150 runs, 150 to train (into {tmp_path / 'paper' / 'table4.json'})"
    assert len(listed) == 150 and {line.split()[0] for line in listed} == {r.key for r in paper_runs("table4")}
    cub = next(line for line in listed if "CUB, ResNet-50: ROADMAP, seed 0" in line)
    steps = -(-200 * 5864 // 128)  # 200 epochs of CUB's 5,864 training images
    hours = steps / (24.3 * 224 ** 2 / 256 ** 2) / 3600  # the H200's resnet50 @224 rate, scaled to 256 px
    assert cub.endswith(f": {steps:,} steps, {hours:.2f} GPU h (scaled)")
    inat = next(line for line in listed if "iNat, ResNet-50: FastAP, seed 4" in line)
    assert inat.endswith(f"{-(-90 * 325846 // 128) / 24.3 / 3600:.2f} GPU h")  # 224 px, B = 128: as measured
    assert sum("DeiT-S" in line and line.endswith("no estimate") for line in listed) == 75
    assert "no estimate for 75 runs: no measured step time for deit_small_distilled_patch16_224 (bf16)" in said
    assert any(line.startswith("measured step times (docs/benchmarks.md, GPU > Training throughput") for line in said)
    assert not list(tmp_path.rglob("*.json"))


def test_the_step_times_are_docs_benchmarks_measured_ones():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    block = text.split("<!-- BEGIN gpu-train -->")[1].split("<!-- END gpu-train -->")[0]
    rows = {cells[0]: float(cells[2]) for cells in
            ([c.strip() for c in line.strip("|").split("|")] for line in block.splitlines() if line.startswith("| "))
            if re.match(r"^\d", cells[2])}
    assert rows["resnet50 @224 bf16, B = 128"] == next(m for m in gpu_hours.MEASURED if m.model == "resnet50"
                                                       ).steps_per_second
    assert rows["small_cnn, B = 256, 32 px"] == next(m for m in gpu_hours.MEASURED if m.model == "small_cnn"
                                                     ).steps_per_second
    assert "NVIDIA H200" in block and "2026-11-26" in block


def test_base_keeps_one_setting_and_is_refused_for_a_glyph_study(tmp_path, capsys):
    main(["study", "table4", "--dry-run", "--base", str(ROOT / "recipes/roadmap_sop_resnet50.yaml"), "--out",
          str(tmp_path)])
    listed = [line for line in capsys.readouterr().out.splitlines() if re.match(r"^  [0-9a-f]{16}  ", line)]
    assert len(listed) == 25 and all("SOP, ResNet-50:" in line for line in listed)
    for argv, said in ((["methods", "--base", "recipes/roadmap_cub_resnet50.yaml"], "--base takes a paper-scale"),
                       (["table4", "methods"], "name them in a call of their own")):
        with pytest.raises(SystemExit):
            main(["study", *argv, "--dry-run", "--out", str(tmp_path)])
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err


def _tiny_datasets(root: Path) -> Path:
    from tests._disk_fixtures import make_cub, make_sop

    make_cub(root / "CUB_200_2011", classes=(1, 2, 3, 4, 5, 101, 102, 103, 104), per_class=4,
             colour=lambda c, k: (40 * (c % 6), 30 * k, 200 - c))
    make_sop(root / "Stanford_Online_Products", [(c, 1 if c % 2 else 4, "bicycle" if c % 2 else "chair")
                                                 for c in range(1, 13)],
             per_class=3, first_test=7, colour=lambda c, k: (20 * c, 60 * k, 100))
    return root


@pytest.mark.slow
def test_table4_runs_end_to_end_on_tiny_cub_and_sop_and_the_page_renders_its_section(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RANKLAB_DATA", str(_tiny_datasets(tmp_path / "data")))
    out, docs = tmp_path / "results", tmp_path / "docs"
    main(["study", "table4", "--quick", "--out", str(out), "--docs", str(docs)])
    data = json.loads((out / "paper" / "table4.json").read_text())
    assert data["mode"] == "quick" and len(data["runs"]) == 8  # CUB and SOP (ResNet-50) x 2 losses x 2 seeds
    rec = next(r for r in data["runs"].values() if r["params"]["setting"] == "SOP, ResNet-50")
    assert rec["trained_config"]["dataset"] == "sop" and rec["trained_config"]["sampler"] == "hierarchical"
    assert rec["num_queries"] == 18  # the whole test split: 6 products x 3 images
    page = (docs / "results.md").read_text()
    section = page.split("## Paper scale: the papers' own tables")[1]
    assert "### ROADMAP supp. Table 4: the AP losses compared" in section and "QUICK MODE" in section
    for setting in ("CUB, ResNet-50", "SOP, ResNet-50"):
        part = section.split(f"#### {setting}")[1].split("####")[0]
        assert "| ROADMAP |" in part and "| SmoothAP |" in part and "| 2 |" in part
        assert "**Verdict: of the papers' 1 claim," in part and "| ROADMAP > SmoothAP |" in part
    assert "64.05 / 25.27" in section and "82.20 / 56.64" in section  # the paper's own numbers beside ours
    assert "All 8 runs done." in section
    assert "wrote" in capsys.readouterr().out
