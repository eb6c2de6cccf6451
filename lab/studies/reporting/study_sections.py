"""Each study's section as every view reads it: which records (protocol v2's once the study is complete under
v2, else v1's, as on the page), its analysis (a :class:`.section.Section`) and its figures.

The three views (``results_page``, ``verdicts``, ``headline``) read the studies through here, so that the page,
the notebooks, the dashboard and the README cannot read different records or apply different rules.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

from ..running import spec
from ..running.paths import RESULTS
from ..running.results_file import load_results
from ..running.spec import missing_runs, study_runs
from . import figures as plots
from .claims import analyse_batch_size, analyse_gap, analyse_methods
from .ordering import analyse_methods_v2
from .replication_plan import SEEDS as REPLICATION_SEEDS

EVERY_SEED = REPLICATION_SEEDS[-1] + 1  # study 1's seeds 0-14: the primary five and the replication's ten
from .section import Section
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
    found, whose seeds 5-14 the replication reads (v2 only)."""
    if protocol == "v2" and name == "methods":
        return analyse_methods_v2(records, every_seed)
    return (ANALYSE_V2 if protocol == "v2" else ANALYSE)[name](records)


def section_figures(name: str, records: list[dict[str, Any]], protocol: str) -> dict[str, Any]:
    """{file stem: figure} of a study's section."""
    suffix = "" if protocol == "v1" else f"_{protocol}"
    if name == "hparams":
        return {f"study_{name}": plots.plot_hparams(records, baseline=hparam_baseline(records))}
    out = {f"study_{name}{suffix}": getattr(plots, f"plot_{name}")(records)}
    if name == "methods" and protocol == "v2":
        out[f"study_ranks{suffix}"] = plots.plot_ranks(records, spec.PAPER_ORDER)
    return out



def study_records(name: str, data: dict[str, Any], quick: bool, seeds: Optional[int],
                  protocol: str = "v1") -> list[dict[str, Any]]:
    """One record per run of the study, in the order it lists them (methods as in the paper's tables).
    A finished run stands for every spec of the study with its config: e.g. the default SupAP run is
    the λ = 0, ρ = 100 and τ = 0.01 points of study 3 at once, so it is listed once per point."""
    runs = data.get("runs", {})
    return [{**runs[run.key], "method": run.method, "seed": run.seed, "params": run.params}
            for run in study_runs(name, quick, seeds, protocol) if run.key in runs]



def v2_complete(name: str, data: dict[str, Any], seeds: Optional[int] = None) -> bool:
    """True once every protocol v2 run of study ``name`` is in ``data`` (its v2 results file)."""
    return spec.V2_STEPS is not None and not missing_runs(name, data, False, seeds, "v2")


def read_study(name: str, results: Optional[Path] = None) -> tuple[list[dict], str, str]:
    """(records, protocol, note): v2's records of a complete v2 study, else v1's (the page's own
    reading: same records, same order); the note says where v2 stands when v1 is read instead. ``results``:
    the raw results folder (default results/)."""
    root, note = Path(results or RESULTS), ""
    if name in spec.V2_STUDIES and spec.V2_STEPS is not None:
        data = load_results(root / "v2" / f"{name}.json")
        if data.get("mode") == "full" and v2_complete(name, data):
            return study_records(name, data, False, None, "v2"), "v2", ""
        missing = missing_runs(name, data, False, None, "v2")
        done = len(data.get("runs", {})) if data.get("mode") == "full" else 0
        note = (f" Protocol v2 (whole test split, {spec.V2_SEEDS} seeds) has {done} of {done + len(missing)} runs of "
                "this study: until it is complete, protocol v1's results are the ones shown.")
    data = load_results(root / f"{name}.json")
    return (study_records(name, data, quick=False, seeds=None) if data.get("mode") == "full" else []), "v1", note


def every_seed(name: str, records: list[dict], protocol: str, results: Optional[Path]) -> list[dict]:
    """Study 1's runs of every seed the replication added (v2), else ``records``: what the replication reads."""
    if (name, protocol) != ("methods", "v2"):
        return records
    data = load_results(Path(results or RESULTS) / "v2" / f"{name}.json")
    return study_records(name, data, False, EVERY_SEED, "v2")
