"""The page's section of a paper-scale study (``results/paper/NAME.json``): the papers' tables re-run on their own
recipes, read with the glyph studies' rules.

Per setting (dataset x backbone): each loss's R@1 and mAP@R as mean ± std over its seeds beside the paper's, and
the paper's claims for that setting (:mod:`.paper_tables`), each a two-sided paired t-test on mAP@R over the seeds
both losses have, Holm within the setting's family, with the three verdicts of :func:`.stats.claim_verdict`. Then
which runs are missing and the command that completes them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..running.paper_studies import PAPER_FOLDER, PAPER_STUDIES, paper_runs
from ..running.results_file import load_results
from .paper_claims import claim_tests, claims_headline, delta_cell, paper_cell
from .paper_tables import PAPER, SOURCES, setting_claims
from .stats import SIGNIFICANCE, fmt, fmt_p, summarise, table


def paper_records(name: str, data: dict[str, Any], quick: bool) -> list[dict[str, Any]]:
    """The study's records, one per run it lists (in its order), labelled as it names them."""
    runs = data.get("runs", {})
    return [{**runs[s.key], "method": s.method, "seed": s.seed, "params": s.params}
            for s in paper_runs(name, quick) if s.key in runs]


def _setting_lines(name: str, setting: str, records: Sequence[dict[str, Any]], methods: Sequence[str]) -> list[str]:
    paper = PAPER.get(name, {}).get(setting, {})
    rows = []
    for m in methods:
        mine = [r for r in records if r["method"] == m]
        if not mine and m not in paper:
            continue
        ref = paper.get(m)
        rows.append([m, fmt(summarise(mine, "R@1")), fmt(summarise(mine, "mAP@R"), digits=2), str(len(mine)),
                     f"{ref[0]:.2f} / {ref[1]:.2f}" if ref else "—"])
    lines = [f"#### {setting}", "", table(["loss", "R@1", "mAP@R", "runs", f"paper R@1 / mAP@R ({SOURCES[name]})"],
                                          rows), ""]
    tests = claim_tests(list(records), setting_claims(name, setting))
    if tests:
        lines += [f"**Verdict: {claims_headline(tests)}** (mAP@R, paired t, Holm over the {len(tests)} claims of "
                  f"*{tests[0].claim.family}* in this setting).", "",
                  table(["claim", "paper mAP@R", "Δ mAP@R (pt) [95 % CI]", "p", "p (Holm)", "n", "verdict"],
                        [[f"{t.claim.better} > {t.claim.worse}", paper_cell(t.claim) or "—", delta_cell(t.interval),
                          fmt_p(t.test.p), fmt_p(t.p_holm), str(t.test.n), t.verdict] for t in tests]), ""]
    return lines


def paper_section(name: str, data: dict[str, Any], level: str = "###") -> str:
    """Markdown: study ``name``'s section (see the module), from its results file's ``data``."""
    study, quick = PAPER_STUDIES[name], data.get("mode") == "quick"
    specs = paper_runs(name, quick)
    records = paper_records(name, data, quick)
    flag = " --quick" if quick else ""
    command = f"python -m lab study {name}{flag}"
    lines = [f"{level} {study.title}", ""]
    if quick:
        lines += ["> **QUICK MODE (CI):** the recipes shrunk to the small CNN on a few images of each dataset for 3 "
                  "steps; these numbers only show that the pipeline runs.", ""]
    settings = list(dict.fromkeys(s.params["setting"] for s in specs))
    seeds = sorted({s.seed for s in specs})
    lines += [f"The papers' own settings, one recipe each (`recipes/`: backbone, data, batch, schedule): "
              f"{'; '.join(settings)}; {len(study.methods if not quick else {s.method for s in specs})} losses x "
              f"{len(seeds)} seeds (paired: a seed fixes the initial head, batches and augmentations). Every image "
              "of the test split queries all the others. Rule, fixed before any run: a claim is resolved when its "
              f"Holm-adjusted paired p is below {SIGNIFICANCE} (mAP@R); `{command}` trains it, one GPU per run "
              f"(`--executor submitit` on a cluster; `--dry-run` lists the runs and their GPU hours). Raw results: "
              f"`results/{PAPER_FOLDER}/{name}.json`.", ""]
    methods = list(dict.fromkeys(s.method for s in specs))
    for setting in settings:
        lines += _setting_lines(name, setting, [r for r in records if r["params"].get("setting") == setting],
                                methods)
    done = {r["key"] for r in records}
    missing = [s for s in specs if s.key not in done]
    failed = data.get("failed", {})
    if missing or failed:
        lines += [f"**Incomplete: {len(missing)} of {len(specs)} runs missing**"
                  + (f" ({len(failed)} failed: " + "; ".join(f"{f['method']} seed {f['seed']}: {f['error']}"
                                                          for f in failed.values()) + ")" if failed else "")
                  + f". Complete with `{command}` (finished runs are skipped), then `python -m lab study --render`.",
                  ""]
    else:
        lines += [f"All {len(specs)} runs done.", ""]
    return "\n".join(lines)


def paper_part(out: Path) -> list[str]:
    """The page's lines of the paper-scale studies that have runs in ``out/paper/`` (none: no lines)."""
    datas = {n: load_results(Path(out) / PAPER_FOLDER / f"{n}.json") for n in PAPER_STUDIES}
    sections = [paper_section(n, d) for n, d in datas.items() if d.get("runs")]
    if not sections:
        return []
    return ["## Paper scale: the papers' own tables", "",
            "The same runner, keys, paired seeds, Holm families and verdicts as above, on the papers' recipes "
            "(pretrained backbones, the real datasets, a GPU per run). `docs/reproduce-on-gpu.md` says how to run "
            "them, on one GPU or a cluster.", "", *sections]
