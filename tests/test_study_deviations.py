"""The protocol's history against git's (issue 43): every deviation the page lists is a commit of this history, at
its stated date, made after the last run of the data it concerns; every registration came before the runs it
names; and no sentence of the page says that something was fixed, written or registered before, unless it names
a registration that git shows came first."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from lab.studies.reporting import deviations as dv
from lab.studies.reporting import protocol_history as ph

from ._history import require_history

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
pytestmark = pytest.mark.skipif(not (RESULTS / "v2" / "methods.json").exists(), reason="no raw results")


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def commit_date(commit: str) -> str:
    require_history(commit)
    out = git("show", "-s", "--format=%cI", commit).stdout.strip()
    assert out.endswith("+00:00"), out
    return out[:19].replace("T", " ")


def runs(concern: ph.Concern) -> list[dict]:
    data = json.loads((RESULTS / concern.file).read_text())
    return [r for r in data["runs"].values() if concern.select(r)]


@pytest.mark.parametrize("d", ph.DEVIATIONS, ids=lambda d: d.commit)
def test_each_deviation_is_a_commit_of_this_history_at_its_date_after_the_runs_it_concerns(d):
    assert commit_date(d.commit) == d.date
    assert git("merge-base", "--is-ancestor", d.commit, "HEAD").returncode == 0
    for concern in d.concerns:
        found = runs(concern)
        assert found, concern.what
        assert max(r["finished"] for r in found) < d.date, (d.commit, concern.what)


def test_the_deviations_are_in_the_order_of_their_commits_and_cover_the_post_result_changes():
    dates = [d.date for d in ph.DEVIATIONS]
    assert dates == sorted(dates)
    listed = {d.commit for d in ph.DEVIATIONS}
    # the changes the review named: the claims for the registered pairs, the re-analyses of studies 2, 4 and 5, the
    # looks and their replacement, the bins' margin, the budget chosen on the test split
    assert {"dcab6d1", "0c33270", "191b9b7", "842f726", "b0a4995", "8db5758", "19daea8"} <= listed
    # the margin was committed alone, before the code that tests it
    assert git("merge-base", "--is-ancestor", "8db5758", "912ee46").returncode == 0
    changed = git("show", "--name-only", "--format=", "8db5758").stdout.split()
    assert changed == ["lab/studies/reporting/trend_claims.py"]
    assert "BINS_MARGIN = 1.0" in git("show", "8db5758").stdout
    assert "tost(" not in git("show", "8db5758:lab/studies/reporting/trend_claims.py").stdout
    assert "tost(" in git("show", "912ee46:lab/studies/reporting/trend_claims.py").stdout


@pytest.mark.parametrize("r", ph.REGISTERED, ids=lambda r: r.commit)
def test_each_registration_came_before_the_runs_and_the_code_it_names(r):
    assert commit_date(r.commit) == r.date
    for concern in r.concerns:
        assert all(run["finished"] > r.date for run in runs(concern)), concern.what
    if r.introduces:
        assert git("grep", "-q", r.introduces, f"{r.commit}^", "--", "lab").returncode == 1  # not there before
        assert git("grep", "-q", r.introduces, r.commit, "--", "lab").returncode == 0


def test_the_plan_was_written_with_the_page_as_rendered_then():
    require_history("b0a4995")
    assert f"_Rendered {dv.PAGE_AT_PLAN} from" in git("show", "b0a4995:docs/results.md").stdout


BEFORE = re.compile(r"\b(fixed|written|registered|committed|chosen|decided|planned)\b[^.;]*\bbefore\b|before any",
                    re.IGNORECASE)
HASH = re.compile(r"\b[0-9a-f]{7}\b")


def sentences(text: str) -> list[str]:
    return [s for block in text.split("\n") for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*(])", block)]


def test_no_sentence_of_the_page_says_before_of_what_git_does_not_show_was_before():
    page = (ROOT / "docs" / "results.md").read_text()
    known = {r.commit for r in ph.REGISTERED} | {"8db5758"}  # and the margin, before 912ee46 (tested above)
    found = [s for s in sentences(page) if BEFORE.search(s)]
    assert found  # the page does say when its registrations came
    unbacked = [s for s in found if not set(HASH.findall(s)) & known]
    assert not unbacked, unbacked[0]
    for old in ("Protocol v2 was fixed before any of its results were seen",
                "The families were fixed from the papers' text before these tests were read", "fixed before any"):
        assert old not in page


def test_the_page_lists_every_deviation_with_its_commit_and_date():
    page = (ROOT / "docs" / "results.md").read_text()
    section = page.split("### Deviations from the protocol", 1)[1].split("\n## ", 1)[0]
    for d in ph.DEVIATIONS:
        assert f"**{d.date[:16]} UTC, {d.commit}**" in section
    assert "[Deviations from the protocol](#deviations-from-the-protocol)" in page
    assert "(plans/protocol-v3.md)" in page and (ROOT / "docs" / "plans" / "protocol-v3.md").exists()


def test_the_section_says_after_which_runs_each_deviation_came(tmp_path):
    """From synthetic results: the count and the last finishing time of each concern's runs, and the runs of the
    look that finished before the plan, with the page's render time."""
    first = {f"k{i}": {"method": "ROADMAP", "seed": i, "finished": f"2026-11-26 0{i}:00:00"} for i in range(5)}
    look = {"l1": {"method": "SupAP", "seed": 5, "finished": "2026-11-27 01:00:00",
                   "provenance": {"commit": "00e5c4c1"}},
            "l2": {"method": "ROADMAP", "seed": 8, "finished": "2026-11-28 18:35:53",
                   "provenance": {"commit": "afb24c8"}}}
    datas = {"v2/methods.json": {"runs": {**first, **look}}}
    text = dv.deviations_section(datas)
    assert "It came after study 1's runs of seeds 0-4: 5 runs, the last finished 2026-11-26 04:00." in text
    assert ("the power plan's look runs on the page (seeds 5-7, trained at 00e5c4c): 1 run, the last finished "
            "2026-11-27 01:00") in text
    assert ("When it was written, 1 run of the look (seed 5) was on the page as provisional differences with "
            "95 % intervals (its last render, 2026-11-27 05:27 UTC), and 1 more had finished (ROADMAP seed 8 at "
            "18:35 UTC on the 28th)") in text


def test_the_page_gives_protocol_v3s_plan_section_by_section(tmp_path):
    """Issue 43, build 8: the plan is on the page, its numbered sections by title, and the page's paragraph
    follows the plan file (a section added there is on the page at the next render)."""
    plan = ROOT / "docs" / "plans" / "protocol-v3.md"
    titles = re.findall(r"^## (\d+\. .+)$", plan.read_text(), re.MULTILINE)
    assert len(titles) >= 3 and titles[0].startswith("1. A validation split")
    page = (ROOT / "docs" / "results.md").read_text()
    section = page.split("### Deviations from the protocol", 1)[1].split("\n## ", 1)[0]
    assert dv.protocol_v3_text() in section and all(t in section for t in titles)
    other = tmp_path / "plan.md"
    other.write_text(plan.read_text() + "\n## 5. Another point\n\nText.\n")
    assert dv.protocol_v3_text(other).endswith("; 5. Another point.")
    assert dv.protocol_v3_text(tmp_path / "absent.md") == ""
