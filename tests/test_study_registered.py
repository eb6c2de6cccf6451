"""Study 1's analysis as registered in 99d6fb1 (adjacent pairs of the papers' row order, Holm over 5, and SupRank's
family of 2), recomputed by hand on the stored runs and read from that commit's own code for what it tests."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from lab.studies.reporting import registered as rg
from lab.studies.reporting.ordering import analyse_methods_v2
from lab.studies.reporting.study_sections import read_study
from lab.studies.running.spec import PAPER_ORDER

from ._history import require_history
from .test_study_claims import holm_by_hand, t_by_hand

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not (ROOT / "results" / "v2" / "methods.json").exists(), reason="no raw results")


def at_commit(path: str) -> str:
    require_history(rg.COMMIT)
    return subprocess.run(["git", "-C", str(ROOT), "show", f"{rg.COMMIT}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def test_the_order_and_the_suprank_family_are_99d6fb1s():
    spec = at_commit("lab/studies/spec.py")
    order = ast.literal_eval(re.search(r"^PAPER_ORDER = (\(.*?\))", spec, re.M | re.S).group(1))
    assert tuple(order) == PAPER_ORDER
    ordering = at_commit("lab/studies/ordering.py")
    claims = ast.literal_eval(re.search(r"^SUPRANK_CLAIMS = (\[.*?\])", ordering, re.M | re.S).group(1))
    assert tuple((better, worse) for _, better, worse in claims) == rg.SUPRANK
    assert "Holm's" in ordering and "adjacent_verdict" in ordering  # the rule the module applies


def by_hand(records, pairs):
    value = {(r["method"], r["seed"]): r["mAP@R"] for r in records}
    seeds = sorted({r["seed"] for r in records})
    raw = [[value[(b, s)] - value[(w, s)] for s in seeds] for b, w in pairs]
    ps = [t_by_hand(d)[1] for d in raw]
    out = []
    for d, p in zip(raw, holm_by_hand(ps)):
        mean = sum(d) / len(d)
        out.append("not resolved" if p >= 0.05 else ("resolved, as in the paper" if mean > 0 else "resolved, reversed"))
    return out, holm_by_hand(ps)


def test_the_registered_analysis_by_hand_on_the_stored_runs():
    records, protocol, _ = read_study("methods")
    assert protocol == "v2" and {r["seed"] for r in records} == set(range(5))
    pairs = [(b, w) for w, b in zip(PAPER_ORDER, PAPER_ORDER[1:])]
    verdicts, holms = by_hand(records, pairs)
    rows = rg.adjacent_pairs(records, PAPER_ORDER, "mAP@R")
    assert [r["verdict"] for r in rows] == verdicts and [r["p_holm"] for r in rows] == pytest.approx(holms)
    s_verdicts, _ = by_hand(records, rg.SUPRANK)
    assert [r["verdict"] for r in rg.suprank_pairs(records)] == s_verdicts
    count = lambda vs: (f"{vs.count('resolved, as in the paper')} of {len(vs)} resolved as in the papers, "  # noqa: E731
                        f"{vs.count('resolved, reversed')} reversed, {vs.count('not resolved')} not resolved")
    line = rg.registered_outcome(records)
    assert line == f"adjacent pairs of the papers' row order: {count(verdicts)}; SupRank's family: {count(s_verdicts)}"
    section = analyse_methods_v2(records)
    assert rg.registered_section(records) in section.body
    assert "| SoftBinAP > FastAP |" in section.body  # the registered pairs are on the page, as registered
