"""The Reproduction view's data (lab.dashboard.reproduction): today's verdict paragraphs split into
table rows with a badge each, and the cache that keeps what they cost to derive (issue 36, D-11)."""
from __future__ import annotations

import shutil
import threading

import pytest

from lab.dashboard.reproduction import (StudyCache, StudyView, badge, claim_badge, claim_cells, claims_table,
                                        results_fingerprint, study_heading, verdict_parts, verdict_table, verdict_tone)
from lab.studies.reporting.study_sections import PAGE, TITLES
from lab.studies.reporting.verdicts import claims_markdown, claims_rows, study_verdict
from lab.studies.running.paths import RESULTS

PARAGRAPH = ("**Reproduction study, protocol v1** (`results/bins.json`, 3 seeds, `python -m lab study bins`). "
             "*Paper:* R@1 peaks around 10 bins.\n\n*Measured:* FastAP: best mean R@1 at 20 bins. "
             "**Verdict: partly (1 of 2).** Most likely reasons: few seeds.")


def test_a_verdict_paragraph_splits_into_its_fields():
    p = verdict_parts(PARAGRAPH)
    assert p["protocol"] == "v1" and p["seeds"] == "3" and p["claim"] == "R@1 peaks around 10 bins."
    assert p["measured"] == "FastAP: best mean R@1 at 20 bins" and p["verdict"] == "partly (1 of 2)"
    assert p["reasons"] == "few seeds."
    assert verdict_parts("The reproduction study has no full-mode results for `bins`.") is None


def test_every_study_of_the_committed_results_gives_a_row():
    # The parser follows lab.studies.reporting.verdicts' paragraph: a change of its form fails here, not silently.
    for name in PAGE:
        p = verdict_parts(study_verdict(name))
        assert p is not None and p["verdict"] and p["measured"] and p["protocol"] in ("v1", "v2"), name
        # no Markdown emphasis; the one asterisk allowed is a loss's name, ROADMAP (L_DG*)
        assert "*" not in p["verdict"].replace("L_DG*", "") and not p["verdict"].endswith("."), (name, p["verdict"])
    # Study 1's verdict is now its claims' headline, whole (its parentheses included), and so is its badge.
    p = verdict_parts(study_verdict("methods"))
    assert p["verdict"].startswith("of the papers' 12 claims, ") and p["verdict"].endswith(")"), p["verdict"]
    claims: dict[tuple[str, str], list[str]] = {}  # a claim holds when each of its metrics' tests does
    for r in claims_rows("methods"):
        claims.setdefault((r["family"], r["claim"].removesuffix(f" ({r['metric']})")), []).append(r["verdict"])
    held = sum(all(v == "resolved as in the paper" for v in vs) for vs in claims.values())
    assert len(claims) == 12 and f"12 claims, {held} hold, " in p["verdict"]
    assert p["reasons"].startswith("Not resolved ("), p["reasons"]
    assert verdict_tone(p["verdict"]) == ("good" if held == 12 else "bad" if held == 0 else "mixed")


@pytest.mark.parametrize("verdict, tone", [("reproduces", "good"), ("partly (2 of 4)", "mixed"),
                                           ("same direction, not significant", "mixed"),
                                           ("0 of 5 adjacent pairs resolved as in the paper, 2 reversed", "bad"),
                                           ("does not reproduce", "bad"), (None, "none"),
                                           ("partly (R@1 does not improve past 5 bins, but no resolved peak: flat)",
                                            "mixed"),
                                           ("of the papers' 8 claims, 4 hold, 1 contradicted (FastAP > ROADMAP), "
                                            "3 not resolved (mAP@R, paired t, Holm within each family, n = 5)",
                                            "mixed"),
                                           ("of the papers' 8 claims, 8 hold, 0 contradicted, 0 not resolved", "good"),
                                           ("of the papers' 8 claims, 0 hold, 2 contradicted (A > B, C > D), "
                                            "6 not resolved", "bad")])
def test_a_verdict_has_a_tone_and_a_badge(verdict, tone):
    assert verdict_tone(verdict) == tone
    assert badge(verdict).startswith({"good": ":green-badge[", "mixed": ":orange-badge[", "bad": ":red-badge[",
                                      "none": ":gray-badge["}[tone])


def test_the_table_has_one_row_per_study_a_badge_each_and_marks_the_chosen_one():
    studies = [StudyView("bins", "4. Number of bins", PARAGRAPH, verdict_parts(PARAGRAPH)),
               StudyView("gap", "5. Gap", "The reproduction study has no full-mode results for `gap`.", None),
               StudyView("odd", "6. Odd", "A paragraph of another form " + "x" * 300, None)]
    table = verdict_table(studies, selected="bins").splitlines()
    assert len(table) == 2 + 3
    assert table[2].startswith("| ▶ **4\\. Number of bins** | :orange-badge[partly] partly \\(1 of 2\\) |")
    assert "v1 · n = 3" in table[2]
    assert ":gray-badge[not run] | no full-mode results" in table[3] and "▶" not in table[3]
    assert table[4].count("x") < 200 and table[4].endswith("… | – |")  # its first words; the rest in the expander
    assert verdict_table(studies[:1]).count("| reproduces") == 0  # a badge's word is not repeated


ROW = {"family": "ablation", "claim": "SupAP > SmoothAP", "source": "ROADMAP Table 2, H⁻ (ResNet-50, B = 64)",
       "paper": [{"dataset": "CUB", "better": 24.6, "worse": 23.9}, {"dataset": "SOP", "better": 55.3, "worse": 54.6}],
       "delta": 1.1300301745562003, "low": -0.37756584871006355, "high": 2.637626197822464, "p": 0.1058903803233661,
       "p_holm": 0.1403143695266645, "n": 5, "verdict": "not resolved"}


def test_a_claim_is_a_row_with_its_verdicts_badge_and_its_numbers():
    assert claim_cells(ROW) == ["not resolved", "ablation", "SupAP > SmoothAP", "mAP@R", "+1.13 [-0.38, +2.64]",
                                "0.140", "5", "CUB +0.70 · SOP +0.70"]
    assert claim_cells({**ROW, "metric": "R@1"})[3] == "R@1"  # supp. B.4's claims are tested on both metrics
    assert claim_badge("resolved as in the paper") == ":green-badge[resolved as in the paper]"
    assert claim_badge("contradicted") == ":red-badge[contradicted]"
    assert claim_badge("not resolved") == ":gray-badge[not resolved]"
    assert claim_badge("something else").startswith(":orange-badge[")
    contradicted = {**ROW, "claim": "ROADMAP > FastAP", "delta": -3.14, "low": -4.43, "high": -1.86, "p_holm": 0.0006,
                    "verdict": "contradicted"}
    table = claims_table([ROW, contradicted]).splitlines()
    assert table[0] == "| verdict | family | claim | metric | Δ (pt) [95 % CI] | p (Holm) | n | paper: Δ (pt) |"
    assert len(table) == 2 + 2 and table[2].startswith("| :gray-badge[not resolved] | ablation | SupAP \\> SmoothAP |")
    assert table[3].startswith("| :red-badge[contradicted] |") and "| \\< 0\\.001 |" in table[3]
    view = StudyView("methods", "1. Rank losses compared", PARAGRAPH, verdict_parts(PARAGRAPH))
    assert study_heading(view).startswith("▶ **1\\. Rank losses compared** · :orange-badge[partly] partly")


def test_the_claims_of_the_committed_results_read_as_on_the_page():
    # The dashboard formats claims_rows' numbers itself: the same text as the page's primary table.
    rows = claims_rows("methods")
    # [1:]: after the header
    page = [line.split(" | ") for line in claims_markdown("methods").splitlines() if line.startswith("| ")][1:]
    # supp. B.4's 4 claims on R@1 and mAP@R, then the ablation's 2, SupRank Table II's 2 and Table I's 4
    assert len(rows) == len(page) == 16 and len(claims_table(rows).splitlines()) == 2 + 16
    assert {row["metric"] for row in rows} == {"mAP@R", "R@1"}
    for row, cells in zip(rows, page):
        family, claim, metric, _, _, delta, _, holm, n, verdict = [c.strip("| ") for c in cells]
        named = claim if metric == "mAP@R" else f"{claim} ({metric})"
        assert claim_cells(row)[:7] == [verdict, family, named, metric, delta, holm, n]


def test_the_cache_computes_each_study_once_per_state_of_the_results(tmp_path):
    root = tmp_path / "results"
    shutil.copytree(RESULTS, root)
    calls = []

    def compute(name):
        calls.append(name)
        return StudyView(name, TITLES[name], f"verdict of {name} #{len(calls)}", None, "", (b"png",))

    cache = StudyCache(compute, root, store=tmp_path / "store")
    first = cache.all(["bins", "gap"])
    assert cache.all(["bins", "gap"]) == first and calls == ["bins", "gap"] and cache.ready(["bins", "gap"])
    (root / "bins.json").write_text((root / "bins.json").read_text() + " ")  # a new result
    assert not cache.ready(["bins"]) and cache.get("bins").verdict == "verdict of bins #3"
    # A new server on the same results reads the stored views: nothing computed again.
    again = StudyCache(lambda name: pytest.fail(f"computed {name} again"), root, store=tmp_path / "store")
    assert again.get("bins") == cache.get("bins") and again.get("bins").figures == (b"png",)
    assert len(list((tmp_path / "store").iterdir())) == 1  # the older results' folder is gone
    # A store written before StudyView had its claims: computed again, not a KeyError.
    (stored,) = (tmp_path / "store").iterdir()
    old = (stored / "bins.json").read_text().replace(', "claims": []', "")
    assert '"claims"' not in old
    (stored / "bins.json").write_text(old)
    fresh = StudyCache(compute, root, store=tmp_path / "store")
    assert fresh.get("bins").verdict == f"verdict of bins #{len(calls)}" and calls[-1] == "bins"


def test_the_warm_up_thread_fills_the_cache_and_a_reader_waits_for_it_instead_of_recomputing(tmp_path):
    started, release, calls = threading.Event(), threading.Event(), []

    def slow(name):
        calls.append(name)
        started.set()
        release.wait(10)
        return StudyView(name, name, "v", None)

    cache = StudyCache(slow, RESULTS)
    thread = cache.warm(["bins"])
    assert cache.warm(["bins"]) is thread  # one warm-up at a time
    started.wait(10)
    reader = threading.Thread(target=cache.get, args=("bins",))
    reader.start()
    release.set()
    reader.join(10)
    thread.join(10)
    assert calls == ["bins"] and cache.ready(["bins"])


def test_the_fingerprint_follows_the_contents(tmp_path):
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "a.json").write_text("{}")
    before = results_fingerprint(tmp_path)
    assert results_fingerprint(tmp_path) == before
    (tmp_path / "v2" / "a.json").write_text("{ }")
    assert results_fingerprint(tmp_path) != before
    code = tmp_path / "code"
    code.mkdir()
    (code / "rule.py").write_text("VERDICT = 1")
    with_code = results_fingerprint(tmp_path, [code])
    (code / "rule.py").write_text("VERDICT = 2")  # a new rule: the stored verdicts are not the page's any more
    assert results_fingerprint(tmp_path, [code]) != with_code


@pytest.mark.slow
def test_make_app_stores_every_study_so_that_the_first_open_computes_nothing(tmp_path, capsys):
    # Issue 46: a fresh checkout's first open of the view took 7.85 s, computing the studies.
    from pathlib import Path

    from lab import studies
    from app_pages import studies_page

    assert studies_page.main(["--store", str(tmp_path)]) == 0  # what `make app` runs before the server
    assert f"{len(PAGE)} studies ready" in capsys.readouterr().out

    def never(name):
        raise AssertionError(f"{name} was computed when the view opened")

    server = StudyCache(never, studies_page.RESULTS, store=tmp_path, code=[Path(studies.__file__).parent])
    assert [v.name for v in server.all(PAGE)] == list(PAGE) and server.ready(PAGE)
