"""Protocol v2's primary table (issue 33): the papers' claims as data, each tested by paired t and Holm within
its family (against a by-hand computation), the verdicts the dashboard reads, and the README's headline
(generated, word for word)."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from lab.studies.reporting import paper_claims as pc
from lab.studies.running import spec as study_spec
from lab.studies.reporting.sweeps import cpu_per_step

from .test_study import fake, fake_execute  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[1]
METHODS = ["FastAP", "SoftBinAP", "BlackBoxAP", "SmoothAP", "SupAP", "ROADMAP", "ROADMAP (L_DG*)", "Smooth-R@k",
           "Sup-R@k"]
# per method, per seed (5 seeds): mAP@R chosen so that every kind of verdict occurs
VALUES = {"FastAP": [0.70, 0.71, 0.69, 0.72, 0.70], "SoftBinAP": [0.64, 0.66, 0.63, 0.65, 0.64],
          "BlackBoxAP": [0.60, 0.60, 0.61, 0.59, 0.60], "SmoothAP": [0.61, 0.62, 0.61, 0.60, 0.62],
          "SupAP": [0.62, 0.61, 0.63, 0.61, 0.63], "ROADMAP": [0.65, 0.64, 0.66, 0.64, 0.65],
          "ROADMAP (L_DG*)": [0.66, 0.665, 0.67, 0.65, 0.66], "Smooth-R@k": [0.59, 0.60, 0.58, 0.59, 0.60],
          "Sup-R@k": [0.60, 0.60, 0.61, 0.60, 0.60]}


# R@1 per seed: mAP@R + 0.25, but SoftBinAP's above ROADMAP's in every seed (an R@1-only contradiction)
R1_SHIFT = {"SoftBinAP": 0.04, "FastAP": -0.06}
R1_WIGGLE = (0.001, -0.002, 0.0, 0.002, -0.001)


def synthetic() -> list[dict]:
    return [{"method": m, "seed": s, "mAP@R": v, "R@1": v + 0.25 + R1_SHIFT.get(m, 0.0) + R1_WIGGLE[s], "params": {}}
            for m in METHODS for s, v in enumerate(VALUES[m])]


def t_by_hand(diffs: list[float]) -> tuple[float, float]:
    """Paired t statistic and two-sided p, from the formula and the t distribution's survival function."""
    from scipy.stats import t

    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    stat = mean / (sd / math.sqrt(n))
    return stat, 2 * float(t.sf(abs(stat), n - 1))


def holm_by_hand(ps: list[float]) -> list[float]:
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out


def test_the_claims_are_the_papers_in_four_families_each_with_its_reason():
    assert len(pc.CLAIMS) == 13 and {c.family for c in pc.CLAIMS} == set(pc.FAMILIES)
    b4 = [c for c in pc.CLAIMS if c.family == "ROADMAP vs each baseline"]
    assert [(c.better, c.worse) for c in b4] == [
        ("ROADMAP", "FastAP"), ("ROADMAP", "SoftBinAP"), ("ROADMAP", "BlackBoxAP"), ("ROADMAP", "SmoothAP")]
    assert all(c.metrics == ("mAP@R", "R@1") for c in b4)  # B.4: "both the R@1 and mAP@R"
    assert [c.metrics for c in pc.CLAIMS if c not in b4] == [("mAP@R",)] * 9
    table_1 = [c for c in pc.CLAIMS if c.family == "SupRank Table I"]
    assert {c.better for c in table_1} == {"ROADMAP (L_DG*)"}  # Table I's ROADMAP row is Sup-AP + L_DG*
    assert [c.worse for c in table_1] == ["FastAP", "SoftBinAP", "BlackBoxAP", "SmoothAP"]
    known = {**study_spec.METHODS, **study_spec.PLANNED_METHODS}
    assert all(c.better in known and c.worse in known for c in pc.CLAIMS)
    # every claim's own numbers agree with it in the paper: the better loss is above in each setting cited
    assert all(b > w for c in pc.CLAIMS for m in c.metrics for _, b, w in c.numbers(m))
    # supp. Table 4's ResNet-50 rows are the numbers the ROADMAP-vs-baseline claims cite; SupRank Table I's too
    for c in b4:
        for dataset, better, worse in c.paper:
            row = pc.PAPER_TABLES[f"supp. T. 4 ResNet-50, {dataset}"]
            assert (better, worse) == (row[pc.TABLE_ROWS.index("ROADMAP")], row[pc.TABLE_ROWS.index(c.worse)])
    for c in table_1:
        for dataset, better, worse in c.paper:
            row = pc.PAPER_TABLES[f"SupRank T. I, {dataset}"]
            assert (better, worse) == (row[pc.TABLE_ROWS.index("ROADMAP")], row[pc.TABLE_ROWS.index(c.worse)])


def test_the_row_order_is_not_kept_by_the_papers_own_numbers():
    # by hand, mAP@R BlackBoxAP < SoftBinAP: T1 CUB 23.9<24.0, SOP 53.1<53.5, iNat 15.2<20.1; T4 ResNet-50 CUB
    # 23.83<24.29, iNat 19.62<23.22; DeiT SOP 60.20<60.53; SupRank T. I iNat 15.2<25.4. Not: T4 R50 SOP, DeiT CUB
    # and iNat, SupRank SOP.
    assert pc.below_in("BlackBoxAP", "SoftBinAP") == (7, 11)
    low, high = pc.adjacent_row_differences("supp. T. 4 ResNet-50")
    assert low == pytest.approx(19.62 - 23.22) and high == pytest.approx(24.33 - 19.62)  # -3.6, +4.71
    assert pc.adjacent_row_differences() == pytest.approx((15.2 - 25.4, 26.5 - 15.2))


def test_each_claim_is_a_paired_t_test_with_holm_over_its_familys_tests_by_hand():
    records = synthetic()
    value = {(r["method"], r["seed"], m): r[m] for r in records for m in ("mAP@R", "R@1")}
    tests = pc.claim_tests(records)
    wanted = [(c, m) for c in pc.CLAIMS if c.better in METHODS and c.worse in METHODS for m in c.metrics]
    assert [(t.claim, t.metric) for t in tests] == wanted and len(wanted) == 16  # ROD-R@k has no run
    raw = []
    for c, m in wanted:
        diffs = [value[(c.better, s, m)] - value[(c.worse, s, m)] for s in range(5)]
        raw.append((diffs, *t_by_hand(diffs)))
    expected_holm = {}
    for family in pc.FAMILIES:
        idx = [i for i, (c, _) in enumerate(wanted) if c.family == family]
        for i, p in zip(idx, holm_by_hand([raw[i][2] for i in idx])):
            expected_holm[i] = p
    assert len([i for i, (c, _) in enumerate(wanted) if c.family == "ROADMAP vs each baseline"]) == 8
    for i, t in enumerate(tests):
        diffs, stat, p = raw[i]
        assert t.diffs == pytest.approx(diffs) and t.test.t == pytest.approx(stat) and t.test.p == pytest.approx(p)
        assert t.p_holm == pytest.approx(expected_holm[i]) and t.test.n == 5
        mean = sum(diffs) / 5
        want = pc.UNRESOLVED if expected_holm[i] >= 0.05 else (pc.HOLDS if mean > 0 else pc.CONTRADICTED)
        assert t.verdict == want
    assert {pc.HOLDS, pc.CONTRADICTED, pc.UNRESOLVED} <= {t.verdict for t in tests}  # all three occur
    # a claim over two metrics: contradicted when either is, holds when both do
    by_claim: dict = {}
    for t in tests:
        by_claim.setdefault(t.claim, []).append(t.verdict)
    combined = {c: (pc.CONTRADICTED if pc.CONTRADICTED in v else pc.HOLDS if set(v) == {pc.HOLDS} else pc.UNRESOLVED)
                for c, v in by_claim.items()}
    soft = next(c for c in combined if c.worse == "SoftBinAP" and c.family == "ROADMAP vs each baseline")
    assert [t.verdict for t in tests if t.claim == soft] == [pc.UNRESOLVED, pc.CONTRADICTED]  # R@1 alone decides
    assert combined[soft] == pc.CONTRADICTED and pc.claim_verdicts(tests) == list(combined.items())
    held = sum(v == pc.HOLDS for v in combined.values())
    against = [c for c, v in combined.items() if v == pc.CONTRADICTED]
    assert pc.claims_headline(tests) == (
        f"of the papers' 12 claims, {held} {'holds' if held == 1 else 'hold'}, {len(against)} contradicted ("
        + ", ".join(f"{c.worse} > {c.better}" for c in against)
        + f"), {sum(v == pc.UNRESOLVED for v in combined.values())} not resolved")
    assert "SoftBinAP > ROADMAP" in pc.claims_headline(tests)


def test_one_claim_holds_in_the_singular():
    one = [t._replace(verdict=v) for t, v in zip(pc.claim_tests(synthetic())[:3],
                                                 (pc.HOLDS, pc.HOLDS, pc.UNRESOLVED))]
    assert pc.claims_headline(one).startswith("of the papers' 2 claims, 1 holds, 0 contradicted")


def test_a_claim_whose_loss_was_not_run_is_left_out_and_holm_counts_only_the_tested():
    records = [r for r in synthetic() if r["method"] != "FastAP"]
    tests = pc.claim_tests(records)
    assert len(tests) == 13 and all("FastAP" not in (t.claim.better, t.claim.worse) for t in tests)
    family = [t for t in tests if t.claim.family == "ROADMAP vs each baseline"]
    assert [t.p_holm for t in family] == pytest.approx(holm_by_hand([t.test.p for t in family]))
    assert "Holm over 6" in pc.families_text(tests)
    assert [c.worse for c in pc.planned_claims(records)] == ["FastAP", "Sup-R@k", "FastAP"]


def test_a_loss_with_runs_on_only_some_seeds_is_not_tested_yet():
    """ROD-R@k's runs admitted part-way (2 seeds of 5) must not make a 2-seed test of its claim."""
    records = synthetic() + [{"method": "ROD-R@k", "seed": s, "mAP@R": 0.7, "R@1": 0.95, "params": {}} for s in (0, 1)]
    assert all("ROD-R@k" not in (t.claim.better, t.claim.worse) for t in pc.claim_tests(records))
    assert [c.better for c in pc.planned_claims(records) if c.worse == "Sup-R@k"] == ["ROD-R@k"]
    assert pc.claim_tests(records) == pc.claim_tests(synthetic())


def test_claims_rows_for_the_dashboard_are_the_pages_table(tmp_path, fake, monkeypatch):  # noqa: F811
    from lab.studies.running import runner
    from lab.studies.reporting.verdicts import claims_markdown, claims_rows

    monkeypatch.setattr(study_spec, "V2_STEPS", 1000)
    runner.run_studies(["methods"], tmp_path / "v2", quick=False, log=lambda _: None, protocol="v2")
    records = [fake_execute(s) for s in study_spec.study_runs("methods", protocol="v2")]
    tests = pc.claim_tests(records)
    rows = claims_rows("methods", tmp_path)
    assert len(rows) == 16 and rows == pc.claim_records(tests)
    assert [r["claim"] for r in rows[:2]] == ["ROADMAP > FastAP", "ROADMAP > FastAP (R@1)"]
    assert rows[0]["delta"] == pytest.approx(100 * tests[0].interval.mean) and rows[0]["n"] == 5
    assert claims_rows("gap", tmp_path) == []
    ablation = claims_markdown("methods", ("ablation",), tmp_path)
    assert ablation.startswith("Protocol v2 (`results/v2/methods.json`, 5 seeds)")
    assert ablation.count("| ablation |") == 2 and "| SupRank Table II |" not in ablation
    assert len({line.count("|") for line in ablation.splitlines() if line.startswith("|")}) == 1  # header = rows


def test_the_memory_claim_compares_cpu_time():
    records = [{"method": m, "seed": s, "train_cpu_seconds": cpu * 100, "steps": 100}
               for m, cpu in (("ROADMAP", 0.38), ("SupAP + XBM", 0.54)) for s in range(3)]
    assert cpu_per_step(records, "SupAP + XBM") / cpu_per_step(records, "ROADMAP") == pytest.approx(0.54 / 0.38)


def test_the_readme_headline_is_generated_from_the_results():
    """README.md carries lab.studies.reporting.headline.readme_headline() word for word (line breaks aside), so its
    numbers are the page's; and the study's verdict line on the page is the same claims sentence."""
    if not (ROOT / "results" / "v2" / "methods.json").exists():
        pytest.skip("no raw results")
    from lab.studies.reporting.headline import readme_headline

    words = lambda text: " ".join(text.split())  # noqa: E731
    headline = readme_headline()
    assert words(headline) in words((ROOT / "README.md").read_text())
    claims = re.search(r"of the papers' \d+ claims, [^(]*\([^)]*\)[^(]*not resolved", headline).group(0)
    assert f"**Verdict: {claims}" in (ROOT / "docs" / "results.md").read_text()


def test_notebook_05_says_what_the_claims_table_says_of_l_dg_star():
    """Notebook 05's prose on ROADMAP with L_DG* against SupAP states a direction; the committed results'
    claims row must have it (v1's "about 6 points below" outlived the runs it described)."""
    if not (ROOT / "results" / "v2" / "methods.json").exists():
        pytest.skip("no raw results")
    from lab.studies.reporting.verdicts import claims_rows

    text = " ".join((ROOT / "notebooks" / "05_hierarchical_ranking.py").read_text().replace("#", " ").split())
    row = next(r for r in claims_rows("methods") if r["claim"] == "ROADMAP (L_DG*) > SupAP")
    assert "ROADMAP with this proxy loss ends above SupAP on mAP@R" in text
    assert row["delta"] > 0 and row["verdict"] == pc.HOLDS
    assert "6 points of mAP@R below SupAP" not in text


def test_docs_figures_says_the_seeds_its_comparisons_are_read_from():
    """docs/figures.md's intro gives the seeds of the loss and recall comparisons: those of the study's records
    the figures read (5 once protocol v2's study 1 is complete), as its sections say."""
    if not (ROOT / "results" / "methods.json").exists():
        pytest.skip("no raw results")
    from lab.studies.reporting.verdicts import reproduction_rows

    seeds = "/".join(str(n) for n in sorted({len(r["seeds"]) for r in reproduction_rows("methods")}))
    intro = (ROOT / "docs" / "figures.md").read_text().split("<!-- figure: ", 1)[0]
    assert f"The loss comparison and the recall losses (mean ± std over {seeds} seeds)" in intro


def test_the_committed_page_reads_as_one_page():
    """Issue 33's readability list, on the committed page and README: one rank convention (1 = best), a summary's
    measured and verdict cells that say different things, no complete study that 'has not recorded its end', and
    the README giving protocol v2's command before v1's."""
    page_path = ROOT / "docs" / "results.md"
    if not (ROOT / "results" / "v2" / "methods.json").exists() or not page_path.exists():
        pytest.skip("no raw results")
    page = page_path.read_text()
    assert re.findall(r"\(1 = (\w+)", page) and set(re.findall(r"\(1 = (\w+)", page)) == {"best"}
    for header in ("| study | measured | verdict | runs done |",):
        for block in page.split(header)[1:]:
            for line in block.strip().splitlines()[1:]:
                if not line.startswith("|"):
                    break
                study, measured, verdict = (c.strip() for c in line.strip("|").split("|")[:3])
                assert measured not in verdict and verdict not in measured, study
    for section in re.split(r"\n#{2,3} ", page):
        if "has not recorded its end" in section:
            assert "**Incomplete:" in section, section.splitlines()[0]
    readme = (ROOT / "README.md").read_text()
    results = readme[readme.index("## Do the papers' claims hold?"):]
    assert results.index("--protocol v2") < results.index("python -m lab study all")


def test_rod_recall_s_declared_runs_train_only_when_named_and_then_join_their_family(tmp_path, fake,  # noqa: F811
                                                                                      monkeypatch):
    """SupRank Table II's ROD-R@k > Sup-R@k is declared with its 5 runs (spec.PLANNED_METHODS): a study call trains
    them only when ``--methods`` names ROD-R@k, with the keys the page declares, and a results file that holds them
    tests the claim in its family (Holm over 3) instead of listing it as not yet run."""
    from lab.studies.running import runner
    from lab.studies.running.results_file import load_results

    monkeypatch.setattr(study_spec, "V2_STEPS", 1000)
    out = tmp_path / "v2"
    runner.run_studies(["methods"], out, quick=False, log=lambda _: None, protocol="v2")
    records = list(load_results(out / "methods.json")["runs"].values())
    assert "ROD-R@k" not in {r["method"] for r in records}
    assert [c.better for c in pc.planned_claims(records)] == ["ROD-R@k"]
    fake.clear()
    runner.run_studies(["methods"], out, quick=False, log=lambda _: None, protocol="v2", methods=["ROD-R@k"])
    declared = {s.key for s in study_spec.planned_runs()}
    assert set(fake) == declared and len(declared) == 5
    records = list(load_results(out / "methods.json")["runs"].values())
    assert pc.planned_claims(records) == []
    for r in records:  # fake_execute gives ROD-R@k and Sup-R@k equal values: paired differences that vary by seed
        r["mAP@R"] += 0.001 * (r["seed"] + 1) * (sum(map(ord, r["method"])) % 11)
    family = [t for t in pc.claim_tests(records) if t.claim.family == "SupRank Table II"]
    assert [(t.claim.better, t.claim.worse) for t in family][-1] == ("ROD-R@k", "Sup-R@k")
    assert [t.p_holm for t in family] == pytest.approx(holm_by_hand([t.test.p for t in family]))
    assert study_spec.planned_runs(seeds=15) == study_spec.planned_runs()  # the declared seeds 0-4, no more
