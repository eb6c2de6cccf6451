"""The models the notebooks train for their figures ship as checkpoints (issue 36, N-6): each is still
its recipe (a few steps re-trained from today's code agree with its fingerprint), is verified when
read, evaluates as it says, is what the notebooks and docs/figures.md show (C-4), and one flag
retrains it. Also nb 04's untrained-model line (the study's stored step 0) and nb 05's and nb 06's
figures (C-1)."""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from lab.experiments import checkpoints as ck
from lab.experiments import runs
from lab.experiments.cached import RESULTS_DIR, stored_step0
from lab.experiments.hierarchical_runs import LEVEL_METRICS, hierarchical_overrides
from lab.train.checkpoint import DamagedCheckpointError
from lab.viz import comparisons

ROOT = Path(__file__).resolve().parents[1]
NAMES = list(ck.RECIPES)


def test_every_recipe_is_the_config_a_notebook_run_builds():
    assert ck.recipe_config("roadmap").to_dict() == runs.notebook_config("roadmap", fast=False).to_dict()
    for loss in ("smooth_ap", "happier"):
        built = runs.notebook_config(loss, fast=False, **hierarchical_overrides(False))
        assert ck.recipe_of(built) == f"hierarchical_{loss}"
    assert ck.recipe_of(runs.notebook_config("roadmap", fast=True)) is None  # fast runs train, in seconds
    assert ck.recipe_of(runs.notebook_config("roadmap", fast=False, lr=2e-3)) is None


def test_a_notebooks_config_finds_its_shipped_checkpoint_whatever_its_amp_says():
    """The files hold amp "none" (the default when they were made), a notebook's config the default "auto":
    compared as the Trainer would train them here (float32 for the small CNN), they are the same run."""
    from lab.experiments import shipped

    wanted = runs.notebook_config("roadmap", fast=False)
    assert wanted.amp == "auto"
    found = shipped.find(wanted)
    assert found is not None and found[0].name == "roadmap.pt"
    assert shipped.find(dataclasses.replace(wanted, amp="bf16")) is None  # the comparison can fail


@pytest.mark.parametrize("name", NAMES)
def test_the_shipped_checkpoint_is_still_its_recipe(name):
    result = ck.check(name)  # its first steps re-trained from today's recipe and code
    assert result["config"], (f"{name}: the recipe changed since the file was made: "
                              f"`python -m lab.experiments.checkpoints make {name}`")
    assert result["losses"], (name, result["stored_losses"], result["losses_now"])
    assert result["bitwise"] is not False  # None: another torch or processor made the file


def tiny_recipe(monkeypatch, **changes):
    """Recipe 'roadmap' shrunk to fast-mode settings (seconds), with ``changes``."""
    monkeypatch.setattr(ck, "recipe_config", lambda name: runs.notebook_config("roadmap", fast=True, **changes))


def test_make_then_check_and_a_changed_recipe_fails_the_check(monkeypatch, tmp_path, capsys):
    tiny_recipe(monkeypatch)
    path = ck.make("roadmap", tmp_path)
    assert path == tmp_path / "roadmap.pt" and not list(tmp_path.glob("*.tmp*"))  # written whole, nothing left
    state = ck.read("roadmap", tmp_path)
    assert state["step"] == 3 and len(state["fingerprint"]["losses"]) == ck.FINGERPRINT_STEPS
    assert state["made"]["command"] == "python -m lab.experiments.checkpoints make roadmap"
    same = ck.check("roadmap", tmp_path)
    assert same["config"] and same["losses"] and same["bitwise"] is True
    tiny_recipe(monkeypatch, lr=1e-2)  # the recipe's learning rate changed: the first steps' losses move
    changed = ck.check("roadmap", tmp_path)
    assert not changed["config"] and not changed["losses"] and changed["bitwise"] is False
    assert ck.main(["check", "roadmap", "--folder", str(tmp_path)]) == 1
    assert "DIFFERS" in capsys.readouterr().out


def test_a_damaged_checkpoint_is_refused(tmp_path):
    shutil.copy(ck.path_of("roadmap"), tmp_path / "roadmap.pt")
    state = torch.load(tmp_path / "roadmap.pt", weights_only=True)
    first = next(iter(state["model"]))
    state["model"][first] = state["model"][first] + 1e-3  # the values change, the stored sha256 does not
    torch.save(state, tmp_path / "roadmap.pt")
    with pytest.raises(DamagedCheckpointError, match="sha256"):
        ck.read("roadmap", tmp_path)


def test_a_notebook_run_loads_the_checkpoint_unless_retrain(monkeypatch):
    trainer = runs.trained_model("roadmap", fast=False)
    assert trainer.checkpoint == ck.path_of("roadmap") and trainer.step_count == 300
    shipped = ck.read("roadmap")["model"]
    assert all(torch.equal(v, shipped[k]) for k, v in trainer.model.state_dict().items())
    trained = []
    monkeypatch.setattr(runs, "train_with_text_progress", lambda t, steps, progress=True: trained.append(steps))
    runs._trained.cache_clear()
    fresh = runs.trained_model("roadmap", fast=False, retrain=True)
    assert trained == [300] and getattr(fresh, "checkpoint", None) is None  # retrain: trained, not loaded
    runs._trained.cache_clear()


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_the_stored_evaluation_is_the_weights_evaluation(name):
    trainer = ck.load_trainer(ck.recipe_config(name))
    now, stored = runs.evaluate_trainer(trainer), ck.read(name)["metrics"]
    for key in (*runs.RETRIEVAL, *(k for k in runs.HIERARCHICAL if k in stored), "gap", "gap_heldout"):
        assert now[key] == pytest.approx(stored[key], abs=1e-6), key


def measured_numbers(figure: str) -> dict[str, dict[str, float]]:
    """{loss: {metric: value}} of docs/figures.md's measured sentence of ``figure``."""
    text = (ROOT / "docs" / "figures.md").read_text().split(f"<!-- figure: {figure} -->", 1)[1]
    sentence = next(line for line in text.splitlines() if line.startswith("*Measured:*"))
    out = {}
    for loss, numbers in re.findall(r"(\w+): ((?:[\w@-]+ [\d.]+(?:, )?)+)", sentence.split("(%", 1)[0]):
        out[loss] = {k: float(v) for k, v in re.findall(r"([\w@-]+) ([\d.]+)", numbers)}
    return out


def test_docs_figures_show_the_shipped_hierarchical_models():
    """C-4: docs/figures.md and notebook 05 show the same two runs (the shipped checkpoints)."""
    doc = measured_numbers("hierarchical_levels")
    assert set(doc) == {"smooth_ap", "happier"}
    for loss in doc:
        stored = ck.read(f"hierarchical_{loss}")["metrics"]
        assert doc[loss] == {m: round(100 * stored[m], 1) for m in LEVEL_METRICS}, loss


def test_notebooks_pass_one_flag_to_every_trained_model():
    for name in ("02", "04", "05"):
        source = next((ROOT / "notebooks").glob(f"{name}_*.py")).read_text()
        assert "\nRETRAIN = False\n" in source, name
        calls = re.findall(r"(?:trained_model|train_and_evaluate|hierarchical_study|hierarchical_model)\(([^)]*)\)",
                           source.split("## Exercises", 1)[0])
        assert calls and all("retrain=RETRAIN" in c for c in calls), (name, calls)


def test_the_untrained_line_is_the_pilots_step_0_on_the_whole_split():
    config = runs.notebook_config("roadmap", fast=False, eval_max_items=None).to_dict()
    stored = stored_step0(config)
    pilot = json.loads((RESULTS_DIR / "v2" / "pilot.json").read_text())["curve"]
    step0 = next(p for p in pilot if p["step"] == 0)
    assert {k: stored[k] for k in runs.RETRIEVAL} == {k: step0[k] for k in runs.RETRIEVAL}
    assert "pilot" in stored["source"] and f"{step0['num_queries']:,}" in stored["source"]
    assert runs.untrained_metrics(fast=False, eval_max_items=None) == stored
    assert stored_step0({**config, "seed": 1}) is None  # another initialisation
    assert stored_step0({**config, "eval_max_items": 2000}) is None  # another evaluation: computed instead


def test_level_metrics_panels_share_one_scale():
    """C-1: single runs, no error bar: a 0.1-point difference must not fill its panel as a 3.9-point one."""
    rows = [{"loss": "smooth_ap", "steps": 150, "seed": 0, "R@1": 0.876, "NDCG": 0.771},
            {"loss": "happier", "steps": 150, "seed": 0, "R@1": 0.837, "NDCG": 0.772}]
    fig = comparisons.plot_level_metrics(rows)
    spans = [fig.layout[f"yaxis{i or ''}"].range for i in (0, 2)]
    assert spans[0][1] - spans[0][0] == pytest.approx(spans[1][1] - spans[1][0])
    for (lo, hi), metric in zip(spans, ("R@1", "NDCG")):
        assert all(lo <= r[metric] <= hi for r in rows)
    assert "same" in fig.layout.title.text
    zoomed = comparisons.plot_metric_points(rows, ["R@1", "NDCG"], "t")  # the default: each zoomed to itself
    assert zoomed.layout.yaxis.range[1] - zoomed.layout.yaxis.range[0] > 2 * (
        zoomed.layout.yaxis2.range[1] - zoomed.layout.yaxis2.range[0])


def test_same_span_ranges_stay_inside_the_metric_bounds():
    ranges = comparisons.same_span_ranges([[0.95, 0.999], [0.40, 0.60], [0.0, 0.01]])
    assert all(hi - lo == pytest.approx(0.2) for lo, hi in ranges)
    assert ranges[0] == pytest.approx([0.8, 1.0]) and ranges[2] == pytest.approx([0.0, 0.2])


def test_script_grouping_sentence_follows_the_numbers():
    from lab.experiments.sentences import script_grouping_sentence

    near = {"same_coarse": 0.9, "chance": 0.1, "other_class_same_coarse": 0.3, "other_class_chance": 0.1}
    grouped = script_grouping_sentence(near, {"same_coarse": 0.32, "chance": 0.1})
    assert "3.0x and 3.2x chance, the first 9.0x" in grouped and "does not reproduce" in grouped
    apart = script_grouping_sentence({**near, "other_class_same_coarse": 0.12}, {"same_coarse": 0.11, "chance": 0.1})
    assert "1.2x and 1.1x" in apart and "lesson holds here" in apart
    mixed = script_grouping_sentence({**near, "other_class_same_coarse": 0.12}, {"same_coarse": 0.32, "chance": 0.1})
    assert "disagree" in mixed


def test_tab_ix_and_class_means_sentences_follow_the_numbers():
    from lab.experiments.hierarchical_runs import tab_ix_claims
    from lab.experiments.sentences import class_means_sentence, tab_ix_sentence

    metrics = ("R@1", "AP@glyph", "AP@script", "H-AP")
    smooth = dict(zip(metrics, (0.90, 0.78, 0.25, 0.59)))
    lost = tab_ix_sentence(tab_ix_claims(smooth, dict(zip(metrics, (0.87, 0.72, 0.30, 0.566)))))
    assert "gains 5.0 pt of AP at the coarse level (paper +45.0)" in lost and "loses 2.4 pt of H-AP" in lost
    assert "does not hold" in lost
    won = tab_ix_sentence(tab_ix_claims(smooth, dict(zip(metrics, (0.87, 0.72, 0.30, 0.61)))))
    assert "gains 2.0 pt of H-AP" in won and "claim holds in this run" in won

    def maps(a, b):
        return {"smooth_ap": {"embedding_agreement": a, "chance": 0.1},
                "happier": {"embedding_agreement": b, "chance": 0.1}}
    gathered = class_means_sentence(maps(0.29, 0.316))
    assert "already gather" in gathered and "adds 0.3x" in gathered
    assert "lesson holds here" in class_means_sentence(maps(0.12, 0.30))
    assert "neither" in class_means_sentence(maps(0.11, 0.12))


def test_tsne_progress_passes_on_iteration_lines_and_keeps_the_map(capsys):
    import io

    from lab.viz import retrieval_views as retrieval

    out = io.StringIO()
    lines = retrieval._IterationLines(out, 1000, every=0.0)
    lines.write("[t-SNE] Computing 91 nearest neighbors...\n[t-SNE] Iteration 50: error = 1.0, gradient")
    lines.write(" norm = 0.1 (50 iterations in 0.1s)\n[t-SNE] KL divergence after 50 iterations: 1.0\n")
    assert out.getvalue().startswith("t-SNE: iteration 50 of at most 1000, ") and out.getvalue().count("\n") == 1
    quiet = retrieval._IterationLines(out, 1000, every=3600.0)  # a map of seconds prints nothing
    quiet.write("[t-SNE] Iteration 100: error = 1.0\n")
    assert out.getvalue().count("\n") == 1
    x = torch.randn(60, 8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(retrieval.tsne_2d(x, progress=True), retrieval.tsne_2d(x, progress=False))
    assert "[t-SNE]" not in capsys.readouterr().out  # sklearn's own lines never reach the notebook


def test_the_two_gaps_of_one_model_report_each_batch_size(capsys):
    trainer = runs.trained_model("roadmap", fast=True, progress=True)
    rows = runs.gap_by_batch_size(trainer, (8, 16))
    printed = capsys.readouterr().out
    assert [r["batch_size"] for r in rows] == [8, 16]
    assert "batches of B = 8…" in printed and "batches of B = 16…" in printed


def test_the_loss_tolerance_is_rounding_on_the_first_step_and_a_flipped_rank_later(monkeypatch):
    """Another processor of one model name rounds the first loss within 1e-7 and the third within 1.2e-4 (the
    exact rank step amplifies a last-bit difference): that is the same recipe; a 1 % change is not."""
    stored = ck.read("roadmap")["fingerprint"]["losses"]

    def now(*moved):
        monkeypatch.setattr(ck, "first_steps", lambda config, steps: (None, {
            "losses": [x * (1 + m) for x, m in zip(stored, moved)], "torch": "other", "processor": "other",
            "digest": ""}))
        return ck.check("roadmap")["losses"]

    assert now(1e-7, 2e-4, 2e-4) and not now(1e-4, 0, 0) and not now(0, 0, 1e-2)
