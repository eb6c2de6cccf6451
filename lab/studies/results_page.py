"""Render ``docs/results.md`` and ``docs/figures/study_*.png`` from the raw results, without training.

    python -m lab study --render            # results/*.json -> docs/results.md + figures

Each study's section: the paper's claim (numbers, table / figure), our measurement (mean ± std
over n seeds), the verdict and, when it is not "reproduces", the most likely reasons; the
command and the time it took; which runs are missing and how to complete them.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Optional

from . import spec
from .claims import Section, analyse_batch_size, analyse_gap, analyse_methods, table
from .code_versions import code_versions, pilot_replay
from .gpu_time import gpu_time
from .ordering import _seeds, analyse_methods_v2, pilot_section
from .power import MAX_SEEDS
from .runner import load_results, missing_runs
from .spec import (ALPHA, BATCH_SIZES, BINS, FULL_BASE, FULL_SEEDS, HPARAMS, METHODS, QUICK_BASE, QUICK_SEEDS,
                   V2_BASE, V2_SEEDS, V2_STUDIES, XBM_FRACTION, XBM_WARMUP, RunSpec, study_runs)
from .sweeps import analyse_bins, analyse_hparams, analyse_memory, hparam_baseline

PAGE = ("methods", "batch_size", "hparams", "bins", "gap", "memory")  # the paper order of docs/results.md
ANALYSE: dict[str, Callable[[list], Section]] = {
    "methods": analyse_methods, "batch_size": analyse_batch_size, "hparams": analyse_hparams, "bins": analyse_bins,
    "gap": analyse_gap, "memory": analyse_memory}
ANALYSE_V2: dict[str, Callable[[list], Section]] = {**ANALYSE, "methods": analyse_methods_v2}
TITLES = {"methods": "1. Rank losses compared", "batch_size": "2. Batch size", "hparams": "3. Hyper-parameters",
          "bins": "4. Number of bins", "gap": "5. Decomposability gap", "memory": "6. Memory bank"}


def analyse(name: str, records: list[dict[str, Any]], protocol: str = "v1",
            every_seed: Optional[list[dict[str, Any]]] = None) -> Section:
    """Study ``name``'s section from its records (seeds 0-4 in v2); ``every_seed``: study 1's runs of every seed
    found, whose claims the power plan's looks decide (v2 only)."""
    if protocol == "v2" and name == "methods":
        return analyse_methods_v2(records, every_seed)
    return (ANALYSE_V2 if protocol == "v2" else ANALYSE)[name](records)


def section_figures(name: str, records: list[dict[str, Any]], protocol: str) -> dict[str, Any]:
    """{file stem: figure} of a study's section."""
    from . import figures as plots  # matplotlib is imported only when a figure is drawn

    suffix = "" if protocol == "v1" else f"_{protocol}"
    if name == "hparams":
        return {f"study_{name}": plots.plot_hparams(records, baseline=hparam_baseline(records))}
    out = {f"study_{name}{suffix}": getattr(plots, f"plot_{name}")(records)}
    if name == "methods" and protocol == "v2":
        out[f"study_ranks{suffix}"] = plots.plot_ranks(records, spec.PAPER_ORDER)
    return out


def _seed_list(records: list[dict[str, Any]]) -> str:
    return _seeds(sorted({r["seed"] for r in records}))


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


def _timing(data: dict[str, Any], records: list[dict[str, Any]], complete: bool = False) -> str:
    records = list({r["key"]: r for r in records}.values())  # a run that is several sweep points counts once
    own = [r for r in records if "shared_from" not in r]
    shared = sorted({r["shared_from"] for r in records if "shared_from" in r})
    if own:
        text = f"{_minutes(sum(r['seconds'] for r in own))} of run time summed over the {len(own)} runs trained for it"
        text += f" (+ {len(records) - len(own)} runs shared with {', '.join(shared)}, not counted)" if shared else ""
    else:
        text = f"no run of its own: all {len(records)} runs were trained for {', '.join(shared)}"
    sessions = data.get("sessions", [])
    if sessions:
        last = sessions[-1]
        text += f"; trained by `{last['command']}` (jobs = {last['jobs']}, threads = {last['threads']}; "
        n = last.get("trained", 0)
        if last.get("stopped") and complete:  # the invocation recorded no end, but this study lacks no run
            text += (f"its last record: {n} run{'' if n == 1 else 's'} finished in {_minutes(last['elapsed_seconds'])} "
                     f"of wall time, the last at {last['finished']}; every run of this study is done)")
        elif last.get("stopped"):  # killed part-way (its runs in flight were lost), or rendered while it runs
            text += (f"that invocation has not recorded its end (stopped, or still running at this render): "
                     f"{n} run{'' if n == 1 else 's'} finished in "
                     f"{_minutes(last['elapsed_seconds'])} of wall time, the last at {last['finished']})")
        else:
            text += (f"that whole invocation took {_minutes(last['elapsed_seconds'])} of wall time, finished "
                     f"{last['finished']})")
    return text


def _budget(quick: bool, seeds: int, train_images: Optional[int], protocol: str = "v1") -> str:
    base = QUICK_BASE if quick else FULL_BASE if protocol == "v1" else dict(V2_BASE, steps=spec.V2_STEPS or 0)
    images = f"{train_images:,} training images" if train_images else "the training split"
    data = (f"glyphs ({images}; test classes held out)"
            + (f", {base['dataset_kwargs']}" if base["dataset_kwargs"] else ""))
    rows = [
        ["data", data],
        ["model", f"{base['model']}, {base['embed_dim']}-d embeddings, trained from scratch"],
        ["optimisation", f"{base['optimizer']}, lr {base['lr']:g} (backbone and head), no schedule, no weight decay"],
        ["batches", f"{base['batch_size']} = {base['batch_size'] // base['m']} classes x m = {base['m']} images"],
        ["steps", (f"{base['steps']} per run (study 2: the same {base['steps'] * base['batch_size']:,} images at every "
                   "batch size, so steps = that / B)" + (" — where the pilot's learning curve plateaus" if
                                                         protocol == "v2" else ""))
         if base["steps"] else "not fixed yet: the pilot fixes them (`python -m lab study pilot`)"],
        ["losses", "each loss's defaults in `lab.losses` (the papers' values: τ = 0.01, ρ = 100, λ = 0.5, α = 0.9, "
                   "β = 0.6; L_DG* with λ = 0.1; FastAP 10 bins, SoftBinAP 20)"],
        ["evaluation", "held-out test classes, every image querying all others (full gallery): " +
         ("the whole test split" if base["eval_max_items"] is None else
          f"a fixed random subset of ~{base['eval_max_items']:,} images of whole test classes, drawn from the run's "
          "seed (so paired runs share it)")],
        ["seeds", f"{', '.join(map(str, range(seeds)))} (the seed fixes initial weights, batches, augmentations"
                  + (" and evaluation classes)" if base["eval_max_items"] is not None else ")")],
        ["grids", f"study 1: {len(METHODS)} losses; study 2: B ∈ {BATCH_SIZES}" + ("; study 5: the runs of study 2"
         if protocol == "v2" else "; study 3: " + "; ".join(f"{p} ∈ {v}" for p, _, v in HPARAMS) +
         f" (margin via β, α = {ALPHA}); study 4: bins ∈ {BINS}; study 6: memory of "
         f"{round(XBM_FRACTION * 14752):,} embeddings, loss on it from {XBM_WARMUP:.0%} of the steps")],
        ["compute", "1 torch thread per run, 2 runs in parallel (`--jobs 2`) on the 2 shared cores"],
    ]
    return table(["setting", "value"], rows)


def _train_images(quick: bool) -> Optional[int]:
    try:
        from ..data import build_dataset

        return len(build_dataset("glyphs", "train", **(QUICK_BASE if quick else FULL_BASE)["dataset_kwargs"]))
    except Exception:  # noqa: BLE001 - the page is still worth writing without the count
        return None


def study_records(name: str, data: dict[str, Any], quick: bool, seeds: Optional[int],
                  protocol: str = "v1") -> list[dict[str, Any]]:
    """One record per run of the study, in the order it lists them (methods as in the paper's tables).
    A finished run stands for every spec of the study with its config: e.g. the default SupAP run is
    the λ = 0, ρ = 100 and τ = 0.01 points of study 3 at once, so it is listed once per point."""
    runs = data.get("runs", {})
    return [{**runs[spec.key], "method": spec.method, "seed": spec.seed, "params": spec.params}
            for spec in study_runs(name, quick, seeds, protocol) if spec.key in runs]


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
    # Study 1's claims read every seed the power plan added; its descriptive numbers and figures keep seeds 0-4.
    extended = study_records(name, data, quick, MAX_SEEDS, protocol) if (protocol, name) == ("v2", "methods") else None
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
        from ..viz.render import save_png

        for stem, fig in section_figures(name, records, protocol).items():
            path = save_png(fig, figures / f"{stem}.png")
            lines += [f"![{s.title}]({path.relative_to(docs).as_posix()})", ""]
    lines.append(f"**Command and time.** `{command}`: {_timing(data, records, complete=not missing)}.")
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


def _compute(datas: dict[str, dict[str, Any]], wanted: Optional[list[RunSpec]] = None,
             gpu: Optional[list[dict[str, Any]]] = None) -> str:
    """What a protocol's finished runs cost (wall time with 1 torch thread per run, and CPU time, summed)
    and, with ``wanted`` (its distinct runs), what the runs left should cost at the same pace; ``gpu``:
    runs of the protocol trained with ``--device cuda`` (:func:`gpu_runs`), for its time on a GPU."""
    runs = {key: rec for data in datas.values() for key, rec in data.get("runs", {}).items()}
    if not runs:
        return ""
    wall = sum(r["seconds"] for r in runs.values()) / 3600
    cpu = sum(r.get("train_cpu_seconds", 0.0) for r in runs.values()) / 3600
    text = (f"**Compute.** {len(runs)} distinct runs: {wall:.1f} h of run time summed (1 torch thread each, 2 in "
            f"parallel on 2 cores: about {wall / 2:.1f} h of wall time), of which {cpu:.1f} h of CPU time in training.")
    left = [s for s in wanted or [] if s.key not in runs]
    if left:
        more = [expected_cost(s, list(runs.values())) for s in left]
        more_wall, more_cpu = (sum(m[i] for m in more) / 3600 for i in (0, 1))
        text += (f" The {len(left)} run{'' if len(left) == 1 else 's'} left should take about {more_wall:.1f} h more "
                 f"({more_wall / 2:.1f} h of wall "
                 f"time with 2 jobs; {more_cpu:.1f} h of training CPU), each estimated from the finished runs of its "
                 f"loss and batch size: the whole protocol about {wall + more_wall:.0f} h of run time, "
                 f"{cpu + more_cpu:.0f} h of training CPU.")
    if gpu:
        return text + " " + _gpu_compute(gpu, runs, wanted or []) + "\n\n" + gpu_time(gpu, runs)
    return text + (" On a GPU the same protocol runs unchanged with `--device cuda` (the device is not part of a run's "
                   "key); its time there is not measured: no study run has been made on a GPU yet "
                   "(one seed of study 1, "
                   "`python -m lab study methods --protocol v2 --seeds 1 --device cuda --out "
                   f"results/{GPU_RESULTS} --no-render`, puts it here).")


GPU_RESULTS = "gpu"  # results/gpu/v2/*.json: runs of protocol v2 trained with --device cuda, for their time only


def gpu_runs(folder: Path) -> list[dict[str, Any]]:
    """The runs of every results file in ``folder`` (e.g. results/gpu/v2) that were trained on a CUDA device."""
    records = [r for path in sorted(folder.glob("*.json")) for r in load_results(path).get("runs", {}).values()]
    return list({r["key"]: r for r in records if str(r.get("device", "")).startswith("cuda")}.values())


def _gpu_compute(gpu: list[dict[str, Any]], cpu_runs: dict[str, dict[str, Any]], wanted: list[RunSpec]) -> str:
    """The GPU sentence: the runs measured there against the same runs on the CPU, and the protocol's
    distinct runs at the GPU's pace (a run not measured there: its loss's GPU seconds per step times its
    steps, plus the mean evaluation time)."""
    names = sorted({r.get("accelerator") or r["device"] for r in gpu})
    mean = sum(r["seconds"] for r in gpu) / len(gpu)
    same = [(r["seconds"], cpu_runs[r["key"]]["seconds"]) for r in gpu if r["key"] in cpu_runs]
    text = (f"On a GPU ({', '.join(names)}; `--device cuda`, the same runs, results/{GPU_RESULTS}/v2/) {len(gpu)} "
            f"run{'' if len(gpu) == 1 else 's'} took {mean:.0f} s each on average")
    if same:
        ratio = sum(c for _, c in same) / sum(g for g, _ in same)
        text += (f", {ratio:.1f}x faster" if ratio >= 1 else f", {1 / ratio:.1f}x slower") + (
            f" than the same {len(same)} on one CPU core")
    if not wanted:
        return text + "."
    evaluation = sum(r["seconds"] - r["train_seconds"] for r in gpu) / len(gpu)
    by_key = {r["key"]: r for r in gpu}
    total, scaled = 0.0, 0
    for run in wanted:
        if run.key in by_key:
            total += by_key[run.key]["seconds"]
            continue
        alike = [r for r in gpu if r["loss"] == run.config["loss"]] or gpu
        total += sum(r["seconds_per_step"] for r in alike) / len(alike) * run.config["steps"] + evaluation
        scaled += 1
    return text + (f". The protocol's {len(wanted)} distinct runs would take about {total / 3600:.1f} h there, "
                   "one at a time"
                   + (f" ({scaled} of them estimated from their loss's measured seconds per step times their "
                              "steps, assuming a step costs the same at every batch size)." if scaled else "."))


def expected_cost(run: RunSpec, finished: list[dict[str, Any]]) -> tuple[float, float]:
    """(run seconds, training CPU seconds) to expect of a run not trained yet: the mean over the
    finished runs of the same config but the seed, else of the same batch size, else of all."""
    def config(rec_or_spec: dict) -> dict:
        return {k: v for k, v in rec_or_spec.items() if k != "seed"}

    for alike in (lambda r: config(r["config"]) == config(run.config),
                  lambda r: r["config"].get("batch_size") == run.config.get("batch_size"),
                  lambda r: True):
        chosen = [r for r in finished if alike(r)]
        if chosen:
            return (sum(r["seconds"] for r in chosen) / len(chosen),
                    sum(r.get("train_cpu_seconds", 0.0) for r in chosen) / len(chosen))
    raise ValueError("finished must hold at least one run")


def v2_complete(name: str, data: dict[str, Any], seeds: Optional[int] = None) -> bool:
    """True once every protocol v2 run of study ``name`` is in ``data`` (its v2 results file)."""
    return spec.V2_STEPS is not None and not missing_runs(name, data, False, seeds, "v2")


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
    lines = ["## Protocol v2: which AP loss is better", "", trust + " Protocol v2 was fixed before any of its results "
             "were seen:", "",
             "- every image of the whole test split queries all the others (14,672 images of 1,834 classes never "
             "trained on), not a 2,000-image subset;",
             "- mAP@R is the primary metric, R@1 secondary;",
             f"- {V2_SEEDS} seeds, as in the papers;",
             "- a budget where the learning curve of the papers' best loss has plateaued, picked by the pilot below;",
             "- the papers' batch composition (B = 128 = 32 × 4) and each loss's defaults.", "",
             _budget(False, seeds or V2_SEEDS, _train_images(False), "v2"), "", pilot_section(pilot), "",
             *([replay, ""] if (replay := pilot_replay(_json(folder / "pilot_replay.json"))) else [])]
    if pilot.get("curve"):
        from ..viz.render import save_png
        from .figures import plot_pilot

        path = save_png(plot_pilot(pilot["curve"], pilot.get("plateau_step")), docs / "figures" / "study_pilot_v2.png")
        lines += [f"![Pilot learning curve]({path.relative_to(docs).as_posix()})", ""]
    if spec.V2_STEPS is not None:
        from .curves import curves_lines

        lines += curves_lines(study_records("methods", datas["methods"], False, MAX_SEEDS, "v2"), pilot, docs)
    lines += ["### Summary (v2)", "", table(["study", "measured", "verdict", "runs done"], summary), "",
              _compute(datas, list(distinct.values()), gpu_runs(out / GPU_RESULTS / "v2")), "", *sections]
    return lines, complete


def _other_claims(out: Path, datas: dict[str, dict[str, Any]]) -> str:
    """The primary table's families of studies 2, 4 and 5: v2's batch-size and gap runs, v1's bins runs."""
    from .trend_claims import trend_section, trend_tests

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
        "every method, fixed before any result was seen, and no per-method tuning. A verdict is computed by a "
        "rule written in `lab/studies` (paired t-test at p < 0.05 for an A-beats-B claim, Holm-corrected over "
        "a family of comparisons in protocol v2, the shape of the curve for a trend) and applies to this scale "
        "only: a small network trained from scratch, not a pretrained ResNet-50 trained for 100 epochs. "
        "`docs/reproduce-on-gpu.md` has the full-size recipes.", "",
        *v2_lines, *v1_intro,
        "## Budget" + (" (v1)" if superseded else ""), "",
        _budget(quick, seeds or (QUICK_SEEDS if quick else FULL_SEEDS), _train_images(quick)), "",
        "## Summary" + (" (v1)" if superseded else ""), "",
        table(["study", "measured", "verdict", "runs done"], summary),
        "", *sections,
        f"_Rendered {time.strftime('%Y-%m-%d %H:%M')} from `{out.name}/`._", ""])
    docs.mkdir(parents=True, exist_ok=True)
    path = docs / "results.md"
    path.write_text(page)
    return path


__all__ = ["render", "PAGE"]
