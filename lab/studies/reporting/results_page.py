"""A view: render ``docs/results.md`` and ``docs/figures/study_*.png`` from the raw results, without training.

    python -m lab study --render            # results/*.json -> docs/results.md + figures

Each study's section: the paper's claim (numbers, table / figure), our measurement (mean ± std
over n seeds), the verdict and, when it is not "reproduces", the most likely reasons; the
command and the time it took; which runs are missing and how to complete them. The page lays out the
sections (:mod:`.study_sections` and the section modules beside it); it computes no statistic itself.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

from ...viz.render import save_png
from ..running import spec
from ..running.results_file import load_results
from ..running.spec import missing_runs, FULL_SEEDS, QUICK_SEEDS, V2_SEEDS, V2_STUDIES, study_runs
from .budget_table import budget_table, train_images
from .code_versions import code_versions, pilot_replay
from .compute import GPU_RESULTS, compute_paragraph, gpu_runs
from .curves import curves_lines
from .deviations import deviations_section
from .figures import plot_pilot
from .ordering import pilot_section
from .paper_scale import paper_part
from .protocol_history import registered_text, registration
from .replication import replicate, status_line, unread_seeds
from .stats import fmt_seeds, table
from .study_sections import EVERY_SEED, PAGE, TITLES, analyse, section_figures, study_records, v2_complete
from .trend_claims import trend_section, trend_tests


def _seed_list(records: list[dict[str, Any]]) -> str:
    return fmt_seeds(sorted({r["seed"] for r in records}))


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 600 else f"{seconds / 60:.1f} min"


def _missing_settings(missing: list) -> str:
    """'ROADMAP, batch_size = 32: seeds 3, 4; SupAP, batch_size = 256: seed 4': the runs a study still needs."""
    seeds: dict[tuple, list[int]] = {}
    names: dict[tuple, str] = {}
    for m in missing:
        key = (m.method, tuple(sorted(m.params.items())))  # sorts B = 32 before B = 256
        names[key] = m.setting
        seeds.setdefault(key, []).append(m.seed)
    return "; ".join(f"{names[k]}: seed{'s' if len(seeds[k]) > 1 else ''} {', '.join(map(str, sorted(seeds[k])))}"
                     for k in sorted(seeds))


def _timing(data: dict[str, Any], records: list[dict[str, Any]], complete: bool = False,
            beyond: Optional[list[dict[str, Any]]] = None, beyond_status: str = "", beyond_done: bool = False) -> str:
    """The study's run time and the call that trained it. ``beyond``: its runs outside ``records`` (study 1's
    replication seeds), counted apart, with ``beyond_status`` (where the replication stands); ``beyond_done``:
    every look of the replication is read (its runs are all there is, not a count "so far")."""
    records = list({r["key"]: r for r in records}.values())  # a run that is several sweep points counts once
    own = [r for r in records if "shared_from" not in r]
    shared = sorted({r["shared_from"] for r in records if "shared_from" in r})
    seeds = _seed_list(records)
    if own:
        text = (f"{_minutes(sum(r['seconds'] for r in own))} of run time summed over the {len(own)} runs "
                + (f"of seeds {seeds} " if beyond is not None else "") + "trained for it")
        text += f" (+ {len(records) - len(own)} runs shared with {', '.join(shared)}, not counted)" if shared else ""
    else:
        text = f"no run of its own: all {len(records)} runs were trained for {', '.join(shared)}"
    if beyond:
        text += (f", + {_minutes(sum(r['seconds'] for r in beyond))} over the {len(beyond)} runs of the replication's "
                 f"seeds {_seed_list(beyond)}" + ("" if beyond_done else " so far"))
    sessions = data.get("sessions", [])
    if sessions:
        last = sessions[-1]
        text += f"; its last call: `{last['command']}` (jobs = {last['jobs']}, threads = {last['threads']}; "
        n = last.get("trained", 0)
        done = (f"every run of seeds {seeds} is done" + (f"; {beyond_status}" if beyond_status else "")
                if beyond is not None else "every run of this study is done")
        if last.get("stopped") and complete:  # the invocation recorded no end, but this study lacks no run
            text += (f"its last record: {n} run{'' if n == 1 else 's'} finished in {_minutes(last['elapsed_seconds'])} "
                     f"of wall time, the last at {last['finished']}; {done})")
        elif last.get("stopped"):  # killed part-way (its runs in flight were lost), or rendered while it runs
            text += (f"that invocation has not recorded its end (stopped, or still running at this render): "
                     f"{n} run{'' if n == 1 else 's'} finished in "
                     f"{_minutes(last['elapsed_seconds'])} of wall time, the last at {last['finished']})")
        else:
            text += (f"that whole invocation took {_minutes(last['elapsed_seconds'])} of wall time, finished "
                     f"{last['finished']}" + (f"; {done}" if complete else "") + ")")
    return text


def _section(name: str, data: dict[str, Any], quick: bool, seeds: Optional[int], figures: Path,
             docs: Path, protocol: str = "v1") -> tuple[str, list[str]]:
    level = "###" if protocol == "v2" else "##"
    flag = f" --protocol {protocol}" if protocol != "v1" else ""
    command = f"python -m lab study {name}{' --quick' if quick else ''}{flag} --jobs 2"
    if protocol == "v2" and spec.V2_STEPS is None:
        return (f"{level} {TITLES[name]}\n\n**Not run yet.** Protocol v2's budget comes from its pilot first "
                "(`python -m lab study pilot`).\n", [TITLES[name], "—", "not run", "not run"])
    records = study_records(name, data, quick, seeds, protocol)
    missing = missing_runs(name, data, quick, seeds, protocol)
    failed = data.get("failed", {})
    lines = [f"{level} {TITLES[name]}", ""]
    if not records:
        lines += [f"**Not run yet.** Complete with `{command}` ({len(missing)} runs).", ""]
        return "\n".join(lines), [TITLES[name], "—", "not run", "not run"]
    # Study 1's replication reads seeds 5-14; its claims, descriptive numbers and figures keep seeds 0-4.
    extended = study_records(name, data, quick, EVERY_SEED, protocol) if (protocol, name) == ("v2", "methods") else None
    s = analyse(name, records, protocol, extended)
    per_setting: dict[str, set] = {}  # a study cut short has more seeds of some settings than of others
    for r in records:
        per_setting.setdefault(repr((r["method"], sorted(r.get("params", {}).items()))), set()).add(r["seed"])
    counts = sorted({len(seeds) for seeds in per_setting.values()})
    n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    so_far = f" so far ({len(records)} of {len(records) + len(missing)} runs: provisional)" if missing else ""
    lines = [f"{level} {s.title}", "", f"**Paper.** {s.claim}", "",
             f"**Measured** (mean ± std over n = {n} seeds a setting, seeds {_seed_list(records)}; metrics in %). "
             f"{s.measured}.", "",
             f"**Verdict{so_far}: {s.verdict}.**"
             + ("" if s.verdict == "reproduces" or not s.if_not else f" Most likely reasons: {s.if_not}"),
             "", s.body, ""]
    if figures is not None:
        for stem, fig in section_figures(name, records, protocol).items():
            path = save_png(fig, figures / f"{stem}.png")
            lines += [f"![{s.title}]({path.relative_to(docs).as_posix()})", ""]
    beyond = [r for r in extended if r["seed"] not in {x["seed"] for x in records}] if extended else None
    rep = replicate(extended) if extended else None
    status, read = (status_line(rep), all(look.complete for look in rep.looks)) if rep else ("", False)
    lines.append(f"**Command and time.** `{command}`: {_timing(data, records, not missing, beyond, status, read)}.")
    if protocol == "v2":
        lines += ["", code_versions(extended or records)]
    if missing or failed:
        what = _missing_settings(missing)
        lines.append(f"\n**Incomplete: {len(missing)} of {len(missing) + len(records)} runs missing** ({what}"
                     + (f"; {len(failed)} failed: " + "; ".join(f"{f['method']} seed {f['seed']}: {f['error']}"
                                                             for f in failed.values()) if failed else "")
                     + f"). Complete with `{command}` (finished runs are skipped), "
                     "then `python -m lab study --render`.")
    lines.append("")
    verdict = f"provisional: {s.verdict}" if missing else s.verdict
    done = f"{len(records)} / {len(records) + len(missing)}"
    return "\n".join(lines), [s.title.split(" (")[0], s.measured, verdict, done]


def _v2_part(out: Path, docs: Path, seeds: Optional[int]) -> tuple[list[str], set[str]]:
    """Protocol v2's part of the page, and the studies whose v2 runs supersede v1's."""
    folder = out / "v2"
    datas = {n: load_results(folder / f"{n}.json") for n in V2_STUDIES}
    pilot = load_results(folder / "pilot.json")
    sections, summary = [], []
    for name in V2_STUDIES:
        text, row = _section(name, datas[name], False, seeds, docs / "figures", docs, "v2")
        sections.append(text)
        summary.append(row)
    if other := _other_claims(out, datas):  # right after study 1's section and its primary table
        sections.insert(1, other + "\n")
    complete = {n for n in V2_STUDIES if v2_complete(n, datas[n], seeds)}
    # distinct trainings: study 5 reads study 2's runs, and B = 128 of study 2 is study 1's
    distinct = {s.key: s for n in V2_STUDIES for s in study_runs(n, False, seeds, "v2")} if spec.V2_STEPS else {}
    wanted = set(distinct)
    done = len(wanted & {key for data in datas.values() for key in data.get("runs", {})})
    total = len(wanted) or "?"
    if complete == set(V2_STUDIES):
        trust = "**Trust these.** They supersede v1's studies 1, 2 and 5."
    else:
        trust = (f"**In progress: {done} of {total} runs done.** A study's v2 verdict is final once all its runs "
                 "are done; until then its numbers here are provisional, and its v1 section below stays the one to "
                 "read, with v1's caveats. A complete v2 study replaces its v1 section.")
    lines = ["## Protocol v2: which AP loss is better", "", trust + " Protocol v2 was registered in "
             f"{registered_text(registration('99d6fb1'))}; its analysis changed after some results had been seen, and "
             "every such change is listed, with its commit, in [Deviations from the protocol]"
             "(#deviations-from-the-protocol) at the end of this part ([what protocol v3 would fix]"
             "(plans/protocol-v3.md)). As registered:", "",
             "- every image of the whole test split queries all the others (14,672 images of 1,834 classes never "
             "trained on), not a 2,000-image subset;",
             "- mAP@R is the primary metric, R@1 secondary;",
             f"- {V2_SEEDS} seeds, as in the papers;",
             "- a budget where the learning curve of the papers' best loss has plateaued, picked by the pilot below;",
             "- the papers' batch composition (B = 128 = 32 × 4) and each loss's defaults.", "",
             budget_table(False, seeds or V2_SEEDS, train_images(False), "v2"), "", pilot_section(pilot), "",
             *([replay, ""] if (replay := pilot_replay(_json(folder / "pilot_replay.json"))) else [])]
    if pilot.get("curve"):
        path = save_png(plot_pilot(pilot["curve"], pilot.get("plateau_step")), docs / "figures" / "study_pilot_v2.png")
        lines += [f"![Pilot learning curve]({path.relative_to(docs).as_posix()})", ""]
    every = study_records("methods", datas["methods"], False, EVERY_SEED, "v2") if spec.V2_STEPS is not None else []
    rep = replicate(every)
    held = unread_seeds(rep)  # the seeds of a replication look not read yet: none of their numbers is shown
    if spec.V2_STEPS is not None:
        lines += curves_lines(every, pilot, docs, held, "; ".join(look.status for look in rep.looks))
    lines += ["### Summary (v2)", "", table(["study", "measured", "verdict", "runs done"], summary), "",
              compute_paragraph(datas, list(distinct.values()), gpu_runs(out / GPU_RESULTS / "v2"), held), "",
              *sections]
    if spec.V2_STEPS is not None:
        files = {f"v2/{n}.json": datas[n] for n in V2_STUDIES} | {"bins.json": load_results(out / "bins.json")}
        lines += [deviations_section(files, [r for r in every if r["seed"] not in held], pilot.get("curve", [])), ""]
    return lines, complete


def _other_claims(out: Path, datas: dict[str, dict[str, Any]]) -> str:
    """The primary table's families of studies 2, 4 and 5: v2's batch-size and gap runs, v1's bins runs."""
    bins = load_results(out / "bins.json")
    records = {name: study_records(name, datas[name], False, None, "v2") for name in ("batch_size", "gap")}
    records["bins"] = study_records("bins", bins, False, None) if bins.get("mode") == "full" else []
    return trend_section(trend_tests(records))


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def render(out: Path, docs: Path, seeds: Optional[int] = None) -> Path:
    """Write ``docs/results.md`` (and ``docs/figures/study_*.png``) from ``out/*.json`` (protocol v1) and
    ``out/v2/*.json`` (protocol v2); returns the page."""
    out, docs = Path(out), Path(docs)
    datas = {n: load_results(out / f"{n}.json") for n in PAGE}
    modes = {d["mode"] for d in datas.values() if d.get("runs")}
    quick = modes == {"quick"}
    if len(modes) > 1:
        raise ValueError(f"{out} mixes quick and full results; render them from separate folders")
    v2_lines, superseded = ([], set()) if quick else _v2_part(out, docs, None)
    sections, summary = [], []
    for name in PAGE:
        if name in superseded:  # its v1 figure too: the page links it no more
            (docs / "figures" / f"study_{name}.png").unlink(missing_ok=True)
            continue
        text, row = _section(name, datas[name], quick, seeds, docs / "figures", docs)
        sections.append(text)
        summary.append(row)
    banner = ("> **QUICK MODE (CI):** 24 classes, 3 steps per run, 2 methods per study. These numbers only show "
              "that the pipeline runs; they say nothing about the papers.\n\n" if quick else "")
    v1_intro = []
    if superseded:
        v1_intro = ["## Protocol v1: the earlier, easier evaluation", "",
                    f"Protocol v1 evaluated a ~2,000-image subset of the test classes after 300 steps, with 3 seeds. "
                    "There all nine losses reached R@1 90-93 % and their differences stayed within the seed spread. "
                    f"Its {', '.join(TITLES[n] for n in PAGE if n in superseded)} are superseded by protocol v2 above: "
                    "their "
                    "raw results stay in `results/*.json` for the record, and this page no longer shows them. The "
                    "studies below ask other questions (sensitivity to hyper-parameters, the number of bins, a memory "
                    "bank) at v1's fixed budget, and keep it.", ""]
    page = "\n".join([
        "# Results: the papers' claims at laptop scale", "",
        "<!-- Generated by `python -m lab study --render` from results/*.json: edit lab/studies, not this file. -->",
        "",
        banner + "Every claim below is re-measured on the glyphs benchmark (`lab.data`, classes of the test split "
        "never seen in training) with the small CNN on CPU, through `lab.train.Trainer`, with one budget for "
        "every method (protocol v2's chosen by a pilot run on the test split: see its deviations) and no per-method "
        "tuning. A verdict is computed by a "
        "rule written in `lab/studies` (paired t-test at p < 0.05 for an A-beats-B claim, Holm-corrected over "
        "a family of comparisons in protocol v2, the shape of the curve for a trend) and applies to this scale "
        "only: a small network trained from scratch, not a pretrained ResNet-50 trained for 100 epochs. "
        "`docs/reproduce-on-gpu.md` has the full-size recipes.", "",
        *v2_lines, *v1_intro,
        "## Budget" + (" (v1)" if superseded else ""), "",
        budget_table(quick, seeds or (QUICK_SEEDS if quick else FULL_SEEDS), train_images(quick)), "",
        "## Summary" + (" (v1)" if superseded else ""), "",
        table(["study", "measured", "verdict", "runs done"], summary),
        "", *sections, *paper_part(out),
        f"_Rendered {time.strftime('%Y-%m-%d %H:%M')} from `{out.name}/`._", ""])
    docs.mkdir(parents=True, exist_ok=True)
    path = docs / "results.md"
    path.write_text(page)
    return path


__all__ = ["render"]
