"""The results page's GPU runs (results/gpu/v2/) beside the same runs on the CPU (results/v2/): every number
of the rendered paragraph and table recomputed from the raw JSON, matched by method and seed (not by the
page's keys), and the committed page carries it."""
from __future__ import annotations

import functools
import json
import statistics
from pathlib import Path

from lab.studies.reporting.gpu_time import gpu_rows, gpu_time
from lab.studies.reporting.compute import gpu_runs
from lab.studies.running.results_file import load_results

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "results" / "gpu" / "v2"


@functools.lru_cache(maxsize=1)  # once per run of the file (it was once per record: 65 replications a call)
def _held() -> tuple[int, ...]:
    """The seeds of a replication look not read yet: their runs give the GPU comparison no number (issue 43)."""
    from lab.studies.reporting.replication import replicate, unread_seeds
    from lab.studies.reporting.study_sections import EVERY_SEED, study_records

    data = load_results(ROOT / "results" / "v2" / "methods.json")
    return unread_seeds(replicate(study_records("methods", data, False, EVERY_SEED, "v2")))


def _raw() -> tuple[list[dict], list[dict]]:
    gpu = [r for p in sorted(GPU.glob("*.json")) for r in json.loads(p.read_text())["runs"].values()]
    held = _held()
    cpu = [r for r in json.loads((ROOT / "results" / "v2" / "methods.json").read_text())["runs"].values()
           if r["seed"] not in held]
    return gpu, cpu


def _rendered() -> str:
    runs = load_results(ROOT / "results" / "v2" / "methods.json")["runs"]
    held = _held()
    return gpu_time(gpu_runs(GPU), {k: r for k, r in runs.items() if r["seed"] not in held})


def test_the_committed_gpu_runs_are_cuda_runs_of_protocol_v2_with_a_cpu_twin_each():
    gpu, cpu = _raw()
    assert gpu and all(r["device"] == "cuda" and r["steps"] == 5500 for r in gpu)
    for r in gpu:
        twins = [c for c in cpu if (c["method"], c["seed"]) == (r["method"], r["seed"])]
        assert len(twins) == 1 and twins[0]["device"] == "cpu"
        assert {k: v for k, v in twins[0]["config"].items() if k != "device"} == \
               {k: v for k, v in r["config"].items() if k != "device"}  # the same run, another device


def test_every_number_of_the_table_is_recomputed_from_the_raw_files():
    gpu, cpu = _raw()
    page = _rendered()
    assert len([line for line in page.splitlines() if line.startswith("| ") and "seed" in line]) == len(gpu)
    for r in gpu:
        c = next(c for c in cpu if (c["method"], c["seed"]) == (r["method"], r["seed"]))
        cells = [f"{r['method']}, seed {r['seed']}", f"{c['seconds']:,.0f}", f"{r['seconds']:,.0f}",
                 f"{c['seconds'] / r['seconds']:.1f}x"]
        for m in ("mAP@R", "R@1"):
            cells += [f"{100 * c[m]:.2f}", f"{100 * r[m]:.2f}", f"{100 * r[m] - 100 * c[m]:+.2f}"]
        assert "| " + " | ".join(cells) + " |" in page


def test_the_sentence_gives_the_measured_ranges_and_the_spread_over_seeds():
    gpu, cpu = _raw()
    text = _rendered().split("\n")[0]
    pairs = [(r, next(c for c in cpu if (c["method"], c["seed"]) == (r["method"], r["seed"]))) for r in gpu]
    ratios = [c["seconds"] / r["seconds"] for r, c in pairs]
    assert f"{min(r['seconds'] for r in gpu):,.0f}-{max(r['seconds'] for r in gpu):,.0f} s a run against " \
           f"{min(c['seconds'] for _, c in pairs):,.0f}-{max(c['seconds'] for _, c in pairs):,.0f} s " \
           "on one CPU core, " \
           f"{min(ratios):.0f}-{max(ratios):.0f}x faster" in text
    assert "NVIDIA H100 80GB HBM3" in text and "not the same run bit for bit" in text
    for m in ("mAP@R", "R@1"):
        diffs = [100 * r[m] - 100 * c[m] for r, c in pairs]
        assert f"{min(diffs):+.2f} to {max(diffs):+.2f} pt of {m}" in text
    stds, within = [], 0
    for r, c in pairs:  # the loss's CPU runs at every seed, its config otherwise the same
        seeds = [x["mAP@R"] for x in cpu if x["method"] == c["method"] and x["config"]["batch_size"] ==
                 c["config"]["batch_size"]]
        stds.append(100 * statistics.stdev(seeds))
        within += abs(100 * (r["mAP@R"] - c["mAP@R"])) <= stds[-1]
    assert f"{within} of {len(pairs)} mAP@R differences are within one std" in text
    assert f"({min(stds):.2f}-{max(stds):.2f} pt)" in text


def test_the_committed_page_carries_the_gpu_paragraph():
    page = (ROOT / "docs" / "results.md").read_text()
    assert _rendered() in page
    assert "no study run has been made on a GPU yet" not in page


def test_a_gpu_run_without_a_cpu_twin_has_no_row_and_none_gives_nothing():
    run = {"key": "a", "method": "FastAP", "seed": 0, "device": "cuda", "seconds": 10.0, "mAP@R": 0.5, "R@1": 0.8,
           "config": {"loss": "fast_ap", "seed": 0}}
    twin = {**run, "device": "cpu", "seconds": 300.0, "mAP@R": 0.49, "R@1": 0.81}
    assert gpu_rows([run], {"b": twin}) == [] and gpu_time([run], {"b": twin}) == ""
    (row,) = gpu_rows([run], {"a": twin})
    assert row["ratio"] == 30.0 and row["seeds"] == 1 and row["mAP@R"][3] is None  # one seed: no spread
    assert abs(row["mAP@R"][2] - 1.0) < 1e-9 and abs(row["R@1"][2] + 1.0) < 1e-9
    assert "within one std" not in gpu_time([run], {"a": twin})


def test_the_code_version_comes_from_the_records_provenance_when_they_carry_it():
    run = {"key": "a", "method": "FastAP", "seed": 0, "device": "cuda", "accelerator": "X", "seconds": 10.0,
           "mAP@R": 0.5, "R@1": 0.8, "config": {"seed": 0}}
    twin = {**run, "device": "cpu", "seconds": 300.0}
    assert "results/gpu/README.md" in gpu_time([run], {"a": twin})
    with_code = {**run, "provenance": {"commit": "0123456789abcdef", "torch": "2.11.0+cu130"}}
    assert "(code 0123456, torch 2.11.0+cu130)" in gpu_time([with_code], {"a": twin})


def test_a_seed_whose_record_states_a_default_counts_in_the_spread():
    # SoftBinAP seeds 8-9 came from a commit whose records state amp="none", left out by seeds 0-7: the same run,
    # but comparing config dicts counted 8 seeds where there are 10 (the page said "5-8 seeds").
    run = {"key": "a", "method": "FastAP", "seed": 0, "device": "cuda", "seconds": 10.0, "mAP@R": 0.5, "R@1": 0.8,
           "config": {"loss": "fast_ap", "seed": 0}}
    cpu = {"a": {**run, "device": "cpu", "seconds": 300.0},
           "b": {**run, "key": "b", "seed": 1, "mAP@R": 0.6, "config": {"loss": "fast_ap", "seed": 1, "amp": "none"}},
           "c": {**run, "key": "c", "seed": 2, "mAP@R": 0.7, "config": {"loss": "fast_ap", "seed": 2, "lr": 0.01}}}
    (row,) = gpu_rows([run], cpu)
    assert row["seeds"] == 2 and abs(row["mAP@R"][3] - 100 * statistics.stdev([0.5, 0.6])) < 1e-9
