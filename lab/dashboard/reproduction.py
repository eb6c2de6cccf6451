"""The Reproduction view's data, without Streamlit: each study's verdict as a table row with a badge,
its figures as PNG bytes, computed once per state of ``results/`` and kept (issue 36, D-11).

Deriving a study's verdict and drawing its figures from ``results/*.json`` takes 0.4-6 s a study on
2 cores; the view must open and switch in under a second. :class:`StudyCache` keeps what a
``compute(name)`` function returned (the app passes one built on :mod:`lab.studies.reporting.verdicts`, a
package beside this one), keyed on :func:`results_fingerprint`, a hash of the results files'
contents and of the code that reads them: a new result, whatever its mtime, or a new rule in
lab/studies is computed again. :meth:`StudyCache.warm` fills it in a
background thread when the server starts, so that the first open finds it ready, and stores it on
disk (``.cache/reproduction/``): a server started again on the same results reads it in milliseconds.

:func:`verdict_parts` splits :func:`lab.studies.reporting.verdicts.study_verdict`'s paragraph into its fields
(protocol, source, claim, measured, verdict, reasons); :func:`verdict_table` lays the studies out as
one Markdown table with a coloured verdict badge per row (:func:`verdict_tone`).

A study that tests the papers' claims (study 1) is shown by its claims instead: :func:`claims_table`
lays out :func:`lab.studies.reporting.verdicts.claims_rows`'s dicts, kept in :attr:`StudyView.claims`, one row per
claim with its verdict's badge (:func:`claim_badge`), under :func:`study_heading`'s line.
"""
from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import io
import json
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from ..experiments.plain_verdicts import plain_verdict
from .settings import escape_markdown

VERDICT = re.compile(
    r"\*\*Reproduction study, protocol (?P<protocol>\w+)\*\* \((?P<source>.*?)\)\.(?P<note>.*?) "
    r"\*Paper:\* (?P<claim>.*?)\n\n\*Measured:\* (?P<measured>.*?)\. \*\*Verdict: (?P<verdict>.*?)\.\*\*"
    r"(?: Most likely reasons: (?P<reasons>.*))?$", re.S)
SEEDS = re.compile(r"(\d+) seeds")
FINGERPRINT = re.compile(r"[0-9a-f]{40}")  # a store's folder names: nothing else there is ever removed
NOT_RUN = "has no full-mode results"  # study_verdict's sentence for a study not run
FORMAT = "2"  # the stored StudyView's form (2: with its claims); a new one is never read from an old folder
SHOWN = 160  # characters of a paragraph verdict_parts cannot split
TONES = {"good": "green", "mixed": "orange", "bad": "red", "none": "gray"}
BADGES = {"good": "reproduces", "mixed": "partly", "bad": "not reproduced", "none": "not run"}
# study 1's headline (lab.studies.reporting.paper_claims.claims_headline): "of the papers' 8 claims, 4 hold, ..."
CLAIMS_HEADLINE = re.compile(r"of the papers' (\d+) claims, (\d+) hold")
# A claim's verdict (lab.studies.reporting.stats: HOLDS, CONTRADICTED, UNRESOLVED) and its badge's colour.
CLAIM_TONES = {"resolved as in the paper": "green", "contradicted": "red", "not resolved": "gray"}


def verdict_parts(markdown: str) -> Optional[dict[str, str]]:
    """{protocol, source, seeds, note, claim, measured, verdict, reasons} of a study's verdict
    paragraph; None when it is not one (e.g. "no full-mode results")."""
    match = VERDICT.match(markdown.strip())
    if match is None:
        return None
    parts = {k: (v or "").strip() for k, v in match.groupdict().items()}
    seeds = SEEDS.search(parts["source"])
    parts["seeds"] = seeds.group(1) if seeds else "?"
    return parts


def verdict_tone(verdict: Optional[str]) -> str:
    """'good' (reproduces), 'bad' (does not, reversed), 'mixed' (partly, not significant) or 'none'."""
    if not verdict:
        return "none"
    text = verdict.lower()
    if text == "reproduces":
        return "good"
    claims = CLAIMS_HEADLINE.match(text)
    if claims:  # the papers' claims tested one by one: all hold, none holds, or some of them
        tested, held = int(claims.group(1)), int(claims.group(2))
        return "good" if held == tested else "bad" if held == 0 else "mixed"
    if text.startswith("partly"):  # "partly (R@1 does not improve past 5 bins, ...)": partly, whatever follows
        return "mixed"
    if any(word in text for word in ("does not", "reversed", "opposite", "contradict")):
        return "bad"
    return "mixed"


def badge(verdict: Optional[str]) -> str:
    """A Streamlit Markdown badge for a verdict: its tone's colour and word."""
    tone = verdict_tone(verdict)
    return f":{TONES[tone]}-badge[{BADGES[tone]}]"


@dataclass(frozen=True)
class StudyView:
    """What the view shows of one study: ``verdict`` (the whole paragraph), its ``parts``
    (None when the study has no results), the tables' Markdown and the figures as PNG bytes."""

    name: str
    title: str
    verdict: str
    parts: Optional[dict[str, str]]
    body: str = ""
    figures: tuple[bytes, ...] = field(default_factory=tuple)
    claims: tuple[dict[str, Any], ...] = field(default_factory=tuple)  # claims_rows(name): () for most studies


def verdict_table(studies: Sequence[StudyView], selected: Optional[str] = None) -> str:
    """One row per study: its title (the ``selected`` one marked ▶ and bold), a badge (and the
    verdict's words where they say more than the badge), what was measured, the protocol and its
    number of seeds. Every cell but the badge is escaped Markdown."""
    rows = ["| study | verdict | measured | protocol |", "|---|---|---|---|"]
    for s in studies:
        title = escape_markdown(s.title)
        title = f"▶ **{title}**" if s.name == selected else title
        p = s.parts
        if p is None:  # not run, or a paragraph of another form: its first words, the whole in the expander
            text = "no full-mode results" if NOT_RUN in s.verdict else escape_markdown(s.verdict[:SHOWN]) + "…"
            rows.append(f"| {title} | {badge(None)} | {text} | – |")
            continue
        verdict = plain_verdict(p["verdict"])  # the extra seeds in progress are the details' (expander)
        words = "" if verdict == BADGES[verdict_tone(verdict)] else " " + escape_markdown(verdict)
        cells = [title, badge(p["verdict"]) + words, escape_markdown(p["measured"]),
                 f"{p['protocol']} · n = {p['seeds']}"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def study_heading(view: StudyView) -> str:
    """One line above a study's claims table: ▶ its title in bold, its verdict's badge and words."""
    title = f"▶ **{escape_markdown(view.title)}**"
    if view.parts is None:
        return f"{title} · {badge(None)}"
    p = view.parts
    verdict = plain_verdict(p["verdict"])  # the extra seeds in progress are the details' (expander)
    return (f"{title} · {badge(verdict)} {escape_markdown(verdict)} · "
            f"protocol {escape_markdown(p['protocol'])}")


def claim_badge(verdict: str) -> str:
    """A claim's verdict as a badge in its own words: green resolved as in the paper, red
    contradicted, gray not resolved (orange for a verdict of another form)."""
    return f":{CLAIM_TONES.get(verdict, 'orange')}-badge[{escape_markdown(verdict)}]"


def _pt(x: float) -> str:
    return f"{x:+.2f}"


def _p(p: float) -> str:  # as on the page (lab.studies.reporting.stats.fmt_p)
    return "—" if p != p else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def claim_cells(row: dict[str, Any]) -> list[str]:
    """One claim (a dict of :func:`lab.studies.reporting.verdicts.claims_rows`) as the table's cells, unescaped:
    verdict, family, claim, its metric (mAP@R or R@1, supp. B.4's claims being tested on both), Δ [95 % CI] on
    that metric, Holm p, n, the paper's gap per dataset on that metric (better − worse)."""
    delta = _pt(row["delta"]) if row["n"] < 2 else f"{_pt(row['delta'])} [{_pt(row['low'])}, {_pt(row['high'])}]"
    paper = " · ".join(f"{d['dataset']} {_pt(d['better'] - d['worse'])}" for d in row["paper"])
    return [row["verdict"], row["family"], row["claim"], row.get("metric", "mAP@R"), delta, _p(row["p_holm"]),
            str(row["n"]), paper]


def claims_table(claims: Sequence[dict[str, Any]]) -> str:
    """One row per test of a claim, in the order given: its verdict's badge, family, claim, metric, Δ (points) on
    that metric with its 95 % interval, the Holm-adjusted p, n seeds, and the paper's own gap per dataset on that
    metric (its source and numbers are in the study's tables). Every cell but the badge is escaped Markdown."""
    rows = ["| verdict | family | claim | metric | Δ (pt) [95 % CI] | p (Holm) | n | paper: Δ (pt) |",
            "|---|---|---|---|---|---|---|---|"]
    for row in claims:
        verdict, *cells = claim_cells(row)
        rows.append("| " + " | ".join([claim_badge(verdict)] + [escape_markdown(c) for c in cells]) + " |")
    return "\n".join(rows)


def png_bytes(fig: Any, dpi: int = 100) -> bytes:
    """A matplotlib figure as PNG bytes, the figure closed (a kept figure would hold its memory)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def results_fingerprint(root: Path, code: Sequence[Path] = (), salt: str = "") -> str:
    """A hash of every ``*.json`` under ``root`` (paths and contents) and of every ``*.py`` under the
    folders ``code``: the results the verdicts are read from, and the code that derives them (a new
    rule in lab/studies must not be answered with a verdict stored under the old one); ``salt``: the
    stored form's version (:data:`FORMAT`)."""
    digest = hashlib.sha1(salt.encode())
    files = [(Path(root), p) for p in sorted(Path(root).rglob("*.json"))]
    files += [(Path(folder), p) for folder in code for p in sorted(Path(folder).rglob("*.py"))]
    for base, path in files:
        digest.update(str(path.relative_to(base)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


class StudyCache:
    """``compute(name) -> StudyView``, computed once per (name, fingerprint of ``root`` and of the
    source folders ``code``) and kept in memory and, with ``store`` (a folder), on disk as JSON: a
    server started again on the same results and code opens the view at once
    (``store/<fingerprint>/<name>.json``; other fingerprints' folders are removed when one is written).

    One computation at a time (matplotlib's pyplot is not thread-safe); a caller that asks for a
    study the warm-up thread is computing waits for it instead of computing it again."""

    def __init__(self, compute: Callable[[str], StudyView], root: Path, store: Optional[Path] = None,
                 code: Sequence[Path] = ()):
        self.compute, self.root, self.store = compute, Path(root), None if store is None else Path(store)
        self.code = [Path(c) for c in code]
        self._kept: dict[tuple[str, str], StudyView] = {}
        self._lock = threading.Lock()
        self._warming: Optional[threading.Thread] = None

    def fingerprint(self) -> str:
        return results_fingerprint(self.root, self.code, salt=FORMAT)

    def get(self, name: str, fingerprint: Optional[str] = None) -> StudyView:
        key = (name, fingerprint or self.fingerprint())
        found = self._kept.get(key)
        if found is not None:
            return found
        with self._lock:
            if key not in self._kept:
                kept = {k: v for k, v in self._kept.items() if k[1] == key[1]}  # drop an older results/'s
                kept[key] = self._load(*key) or self._save(key[1], self.compute(name))
                self._kept = kept
            return self._kept[key]

    def _file(self, name: str, fingerprint: str) -> Optional[Path]:
        return None if self.store is None else self.store / fingerprint / f"{name}.json"

    def _load(self, name: str, fingerprint: str) -> Optional[StudyView]:
        path = self._file(name, fingerprint)
        try:
            data = json.loads(path.read_text()) if path is not None else None
        except (OSError, ValueError):
            return None  # not stored yet, or a torn write: compute it
        if data is None:
            return None
        try:
            return StudyView(data["name"], data["title"], data["verdict"], data["parts"], data["body"],
                             tuple(base64.b64decode(f) for f in data["figures"]), tuple(data["claims"]))
        except (KeyError, TypeError, ValueError):
            return None  # written by an older form of StudyView: compute it again

    def _save(self, fingerprint: str, view: StudyView) -> StudyView:
        path = self._file(view.name, fingerprint)
        if path is not None:
            for old in path.parent.parent.glob("*"):  # an older state of results/ or of the code: never read again
                if old.is_dir() and old.name != fingerprint and FINGERPRINT.fullmatch(old.name):
                    shutil.rmtree(old, ignore_errors=True)
            data = {**dataclasses.asdict(view), "figures": [base64.b64encode(f).decode("ascii") for f in view.figures]}
            with contextlib.suppress(OSError):  # a read-only checkout still shows the view
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(data))
                tmp.replace(path)
        return view

    def all(self, names: Iterable[str]) -> list[StudyView]:
        fingerprint = self.fingerprint()
        return [self.get(name, fingerprint) for name in names]

    def ready(self, names: Iterable[str]) -> bool:
        """Every study of ``names`` kept in memory for today's results (reading them costs no computation)."""
        fingerprint = self.fingerprint()
        return all((name, fingerprint) in self._kept for name in names)

    def warm(self, names: Sequence[str]) -> threading.Thread:
        """Compute ``names`` in a daemon thread (once: a call while it runs returns the same thread)."""
        if self._warming is None or not self._warming.is_alive():
            self._warming = threading.Thread(target=self.all, args=(list(names),), name="ranklab-reproduction",
                                             daemon=True)
            self._warming.start()
        return self._warming


__all__ = ["StudyView", "StudyCache", "verdict_parts", "verdict_tone", "verdict_table", "badge", "png_bytes",
           "results_fingerprint", "study_heading", "claim_badge", "claim_cells", "claims_table"]
