"""Render the notebooks' figures to docs/figures/*.png and write docs/figures.md.

    python bench/figures.py              # the toy figures (seconds)
    python bench/figures.py --training   # also the trained-model figures (full runs: tens of minutes on CPU)

Each figure sits next to the paper statement it reproduces and the numbers measured while
drawing it. PNGs are drawn with matplotlib from the plotly figures (lab.viz.render), at
100 dpi. The trained-model figures use full-size runs whatever LAB_FAST says; a figure
that was not rendered keeps its entry, marked as such.
"""
from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.experiments import hierarchical as hierarchical_runs  # noqa: E402
from lab.experiments import runs
from lab.studies.results_page import TITLES as STUDY_TITLES  # noqa: E402
from lab.studies.verdicts import reproduction_rows  # noqa: E402
from lab.viz import binning, comparisons, decomposability_toys, gradient_flow, hierarchical, recall, retrieval, surrogates  # noqa: E402
from lab.viz.render import save_png  # noqa: E402

OUT = ROOT / "docs" / "figures"
DOC = ROOT / "docs" / "figures.md"


class Entry(NamedTuple):
    name: str
    title: str
    source: str  # paper, figure / equation
    statement: str  # what the paper says the figure shows
    draw: Callable[[], tuple] | None  # -> (plotly figure, "measured" sentence); None for a study's figure
    notebook: str
    trained: bool = False
    study: str = ""  # drawn by `python -m lab study` (3 seeds, docs/results.md), not here


def _surrogates():
    c = surrogates.surrogate_curves()
    ok = all(hm >= h for hm, h in zip(c["h_minus"], c["heaviside"]))
    return surrogates.plot_surrogates(), f"H⁻ ≥ H on all {len(c['t'])} grid points: {ok}; slope of H⁻ beyond δ: {c['d_h_minus'][-1]:g} (= ρ)."


def _delta():
    delta, level = surrogates.delta_threshold(0.01, 0.01)
    return surrogates.plot_delta_choice(), f"δ = {delta:.4f} for τ = ε = 0.01; slope there {level:.3f} (peak 25)."


def _flow():
    f = gradient_flow.toy_gradients()
    g = f["SmoothAP"].grads
    text = (f"SmoothAP ∂L/∂s = ({g[0]:+.3f}, {g[1]:+.3f}, {g[2]:+.1e}); SupAP ∂L/∂s = "
            f"({', '.join(f'{v:+.3f}' for v in f['SupAP'].grads)}); L_SupAP = {f['SupAP'].loss:.3f} ≥ "
            f"L_AP = {gradient_flow.ap_loss():.3f} > L_SmoothAP = {f['SmoothAP'].loss:.3f}.")
    return gradient_flow.plot_gradient_flow(), text


def _fig1b():
    a, b = (decomposability_toys.gap_summary(*decomposability_toys.fig1b_toy(c)) for c in (False, True))
    return decomposability_toys.plot_fig1b(), (f"AP_b = 1 in both batches; global AP {a['global_ap']:.4f} (DG = {a['gap']:.4f}) "
                                          f"before calibration, {b['global_ap']:.1f} (DG = {b['gap']:.1f}) after.")


def _juxtaposed():
    from lab.metrics import dg_upper_bound, juxtaposed_batches, query_gap

    gap = query_gap(*juxtaposed_batches([2] * 3, [4] * 3))
    return decomposability_toys.plot_juxtaposed(3, 2, 4), f"3 batches of 2+/4−: ranked gap {gap:.4f} = Eq. 8 {dg_upper_bound([2] * 3, [4] * 3):.4f}."


def _calibration():
    r = decomposability_toys.gap_summary(*decomposability_toys.toy_batches(shift=0.4), 0.6, 0.5)
    r0 = decomposability_toys.gap_summary(*decomposability_toys.toy_batches(shift=0.0), 0.8, 0.6)
    return decomposability_toys.plot_calibration_bounds(), (
        f"shift 0.4: DG {r['gap']:.3f} ≤ Eq. 9 {r['eq9']:.3f} ≤ Eq. 8 {r['eq8']:.3f}; unshifted and calibrated: "
        f"DG {r0['gap']:.1f}, Eq. 9 {r0['eq9']:.1f}. Eq. 9 as printed exceeds Eq. 8 when most negatives violate β "
        f"and few positives pass α (see the notebook).")


def _binning():
    r = binning.histogram_summary(num_bins=10)
    return binning.plot_soft_binning(10, 3), f"10 bins: FastAP {r['binned_ap']:.3f} vs exact AP {r['ap']:.3f}; every item's weights sum to 1."


def _tradeoff():
    r = binning.bin_tradeoff(0.064, (4, 400))
    return binning.plot_bin_tradeoff(0.064), (f"margin 0.064: 4 bins → FastAP {r['fast_ap'][0]:.3f}, ‖∇‖ {r['grad_norm'][0]:.3f}; "
                                              f"400 bins → FastAP {r['fast_ap'][1]:.3f}, ‖∇‖ {r['grad_norm'][1]:.0e}.")


def _apq():
    r = binning.apq_vs_ap(20)
    return binning.plot_apq_scatter(20), f"300 synthetic queries, 20 bins: correlation {r['correlation']:.3f}, mean |AP_Q − AP| {r['mean_abs_error']:.3f}."


def _lada():
    ex = hierarchical.lada_example()
    t, b = ex["top row"], ex["bottom row"]
    return hierarchical.plot_lada(), (f"top: H-AP {t['h_ap']:.4f}, AP {t['ap']:.2f}; bottom: H-AP {b['h_ap']:.4f}, AP {b['ap']:.2f}; "
                                      f"H-rank⁺(2) = {t['h_rank_plus'][1]:.4f} vs {b['h_rank_plus'][1]:.4f}.")


def _recall_curves():
    c = recall.recall_curves()
    return recall.plot_recall_at_k(), f"positives at ranks 3, 5, 9: R@k = {c['R@k'][:5]}…, TR@k = {[round(v, 3) for v in c['TR@k'][:9]]}…"


def _recall_surrogate():
    s = recall.surrogate_step(4, 1.0)
    far = max(g for r, g in zip(s["rank"], s["slope"]) if r >= 12)
    return recall.plot_recall_surrogate(4, 1.0), f"k = 4, τ* = 1: slope {max(s['slope']):.3f} at rank k, ≤ {far:.1e} from rank 12 on."


def _recall_flow():
    f = gradient_flow.toy_gradients(family="recall")
    return gradient_flow.plot_recall_gradient_flow(), "; ".join(
        f"{name} ∂L/∂s = ({', '.join(f'{g:+.2e}' for g in v.grads)})" for name, v in f.items()) + (
        " — each panel has its own arrow scale (Sup-R@k's arrows magnified, as its title says): the directions "
        "are the lesson, the printed values the magnitudes.")


def _test_images(fast: bool):
    """The ROADMAP model of notebook 04 and the test images its metrics are computed on."""
    trainer = runs.trained_model("roadmap", fast=fast)
    return (trainer, *runs.evaluation_embeddings(trainer))


def _retrieval_grid(fast: bool):
    trainer, emb, labels, index = _test_images(fast)
    queries = [0, 8, 16, 24, 32, 40]
    found = retrieval.retrieve(emb, labels, queries, k=6)
    names = [trainer.test_set.class_names[int(y)] for y in labels[:, 0]]
    hits = sum(any(r) for r in found["relevant"])
    return (retrieval.plot_retrieval([trainer.test_set.image(i) for i in index], queries, found, names),
            f"ROADMAP, {trainer.config.steps} steps: {hits} of {len(queries)} queries have a relevant item in their top 6.")


def _embedding(fast: bool):
    trainer, emb, labels, _ = _test_images(fast)
    points = retrieval.project_2d(emb)
    return (retrieval.plot_embedding_2d(points, labels[:, 1], trainer.test_set.coarse_names),
            f"{len(emb)} test glyphs (the evaluation subset), first two principal components.")


def _mean_std(row, metric: str) -> str:
    """'92.9 ± 1.2' (%) for a study row, '92.9' for one run."""
    return f"{100 * row[metric]:.1f}" + (f" ± {100 * row['std'][metric]:.1f}" if "std" in row else "")


def _source(rows) -> str:
    if rows and "std" in rows[0]:
        split = "the whole test split" if rows[0]["eval_max_items"] is None else "a ~2,000-image test subset"
        return f"mean ± std over {len(rows[0]['seeds'])} seeds, {split}, from {rows[0]['source']}"
    return f"one run each, seed {rows[0]['seed']}, trained here" if rows else ""


def _loss_comparison():
    rows = reproduction_rows("methods", runs.ABLATION)  # the runs the page's verdicts read (v2 once complete)
    return comparisons.plot_loss_comparison(rows), "; ".join(
        f"{r['loss']}: R@1 {_mean_std(r, 'R@1')}, mAP@R {_mean_std(r, 'mAP@R')}" for r in rows) + (
        f" (%, {rows[0]['steps']} steps of {rows[0]['batch_size']}, {_source(rows)}; paired t-tests of each step of "
        "the ablation: [results.md, 1](results.md)).")


@functools.lru_cache(maxsize=2)
def _class_tsne(fast: bool):
    trainer, emb, labels, _ = _test_images(fast)
    max_items = retrieval.FAST_TSNE_ITEMS if fast else retrieval.FULL_TSNE_ITEMS
    return trainer, retrieval.class_tsne(emb, labels, trainer.test_set.class_names, max_items=max_items)


def _tsne_classes(fast: bool):
    _, m = _class_tsne(fast)
    n = len(m["index"])
    return (retrieval.plot_embedding_2d(m["points"], m["fine"], m["names"], highlight=m["coloured"], axis_title="t-SNE",
                                        title=f"t-SNE of {n} test embeddings (ROADMAP), the first 16 classes coloured"),
            f"{n} test images of {len(set(m['fine'].tolist()))} held-out classes: {m['map_agreement']:.2f} of "
            f"each point's 5 nearest neighbours on the map are the same glyph ({m['embedding_agreement']:.2f} in the "
            f"64-d space, chance {m['chance']:.3f}).")


def _tsne_scripts(fast: bool):
    trainer, m = _class_tsne(fast)
    n = len(m["index"])
    emb, labels = _test_images(fast)[1:3]
    near, means = retrieval.coarse_neighbours(emb, labels), retrieval.class_mean_neighbours(emb, labels)
    ratio = means["same_coarse"] / means["chance"]
    lesson = (f" **Does not reproduce the paper's lesson here:** different glyphs of one script sit together "
              f"({ratio:.0f}x chance for the class means) although the loss never saw the scripts, unlike Smooth-AP's "
              "map on SOP. Likely reason: the glyphs of a script share their strokes (Braille dots, box-drawing "
              "lines, arrowheads), so the features that tell glyphs apart also tell scripts apart."
              if ratio > 2 else "")
    return (retrieval.plot_embedding_2d(m["points"], m["coarse"], trainer.test_set.coarse_names, axis_title="t-SNE",
                                        title=f"t-SNE of {n} test embeddings (ROADMAP), coloured by script"),
            f"in the 64-d space, {near['same_coarse']:.2f} of each image's 5 nearest neighbours share its script "
            f"(chance {near['chance']:.2f}), but {near['same_class']:.2f} are the same glyph, which shares it by "
            f"definition: of the neighbours that are other glyphs, {near['other_class_same_coarse']:.2f} share the "
            f"script (chance {near['other_class_chance']:.2f}), and {means['same_coarse']:.2f} of each class mean's 5 "
            f"nearest class means (chance {means['chance']:.2f}, {means['num_classes']} glyphs; notebook 05's measure). "
            f"The last two answer whether scripts cluster; the loss never saw scripts.{lesson}")


def _hierarchical_levels(fast: bool):
    rows = hierarchical_runs.hierarchical_study(fast=fast)
    keys = hierarchical_runs.LEVEL_METRICS
    claims = hierarchical_runs.tab_ix_claims(*rows)
    failed = [c["paper_name"] for c in claims if not c["holds"]]
    return comparisons.plot_level_metrics(rows), "; ".join(
        f"{r['loss']}: " + ", ".join(f"{k} {100 * r[k]:.1f}" for k in keys) for r in rows) + (
        f" (%, {rows[0]['steps']} steps of {rows[0]['batch_size']}, hierarchical sampler, seed {rows[0]['seed']}, "
        "one run each). HAPPIER − Smooth-AP: " + ", ".join(f"{c['paper_name']} {c['measured']:+.1f} pt (paper "
                                                           f"{c['paper']:+.1f})" for c in claims) + "." + (
        f" **Not reproduced at this scale:** {', '.join(failed)} (one seed; likely reasons in notebook 05, section 5: "
        f"a proxy of L_DG* is pulled ~{_proxy_pulls(fast):.0f} times in such a run, ~130 times on SOP)." if failed else ""))


def _proxy_pulls(fast: bool) -> float:
    """How often a class (so its L_DG* proxy) is in a batch during HAPPIER's run: steps x classes per batch / classes."""
    trainer = hierarchical_runs.hierarchical_model("happier", fast=fast)
    cfg = trainer.config
    return cfg.steps * (cfg.batch_size / cfg.m) / len(trainer.loss_fn.decomposability_loss.proxies)


def _class_means_tsne(fast: bool):
    maps, names = {}, {}
    for loss in hierarchical_runs.HIERARCHICAL_LOSSES:
        trainer = hierarchical_runs.hierarchical_model(loss, fast=fast)
        emb, labels, _ = runs.evaluation_embeddings(trainer)
        maps[loss] = retrieval.class_mean_map(emb, labels)
        names = trainer.test_set.coarse_names
    first = next(iter(maps.values()))
    gain = maps["happier"]["embedding_agreement"] - maps["smooth_ap"]["embedding_agreement"]
    lesson = (" **Does not reproduce Fig. 9's lesson here:** SmoothAP's class means already gather by script "
              f"({maps['smooth_ap']['embedding_agreement'] / first['chance']:.0f}x chance) and HAPPIER adds "
              f"{gain:+.3f}; glyphs of one script look alike, and HAPPIER's proxies have barely moved after "
              f"{trainer.config.steps} steps." if gain < 0.1 else "")
    return retrieval.plot_class_mean_maps(maps, names), "; ".join(
        f"{loss}: {m['embedding_agreement']:.3f} of each class mean's 5 nearest class means share its script "
        f"({m['map_agreement']:.3f} on the map)" for loss, m in maps.items()) + (
        f"; chance {first['chance']:.3f}, {first['num_classes']} test classes (those of the evaluation subset).{lesson}")


def _recall_study():
    rows = reproduction_rows("methods", runs.RECALL_LOSSES)
    return comparisons.plot_recall_study(rows), "; ".join(
        f"{r['loss']}: R@1 {_mean_std(r, 'R@1')}, R@8 {_mean_std(r, 'R@8')}" for r in rows) + (
        f" (%, {_source(rows)}; Sup-R@k − Smooth-R@k, paired t-tests: [results.md, 1](results.md)).")


ENTRIES = [
    Entry("surrogates", "Step surrogates", "ROADMAP Fig. 3, SupRank Fig. 2",
          "H⁻ upper-bounds the Heaviside, so L_SupAP ≥ L_AP, and back-propagates gradient (slope ρ beyond δ) until "
          "the ranking is correct, unlike the sigmoid of SmoothAP.", _surrogates, "01"),
    Entry("delta_choice", "Choice of δ", "ROADMAP supp. A.3, Fig. 11",
          "δ is where the sigmoid's gradient falls below ε: δ = τ·ln((1−ε)/ε); ε = 10⁻² gives δ ≃ 0.05.", _delta, "01"),
    Entry("gradient_flow", "Toy gradient flow", "ROADMAP Fig. 1a, supp. A.1 Fig. 7-8",
          "SmoothAP gives contradictory gradients to the two positives (∂L/∂s1 = −∂L/∂s2), a vanishing gradient to the "
          "negative (s3 − s2 = 0.13) and is below L_AP; the exact step on rank⁺ removes the contradiction but gradients "
          "still vanish (Fig. 8a); SupAP pushes both positives up and the negative down and L_SupAP ≥ L_AP (Fig. 8b).",
          _flow, "01"),
    Entry("decomposability_toy", "AP = 1 per batch, AP < 1 overall", "ROADMAP Fig. 1b, supp. Fig. 9",
          "L_AP = 0 in every batch despite L_AP ≠ 0 over the whole set; L_calibr. controls the absolute scores between "
          "batches.", _fig1b, "02"),
    Entry("juxtaposed", "Worst case and Eq. 8", "ROADMAP Eq. 8, supp. Fig. 10",
          "The upper bound of DG_AP is attained when the global ranking is the juxtaposition of the batches.",
          _juxtaposed, "02"),
    Entry("calibration_bounds", "Calibration tightens the bound", "ROADMAP Eq. 9",
          "Constraining positives above α and negatives below β refines the bound of Eq. 8; minimising L_calibr. makes "
          "it tighter.", _calibration, "02"),
    Entry("soft_binning", "Soft histogram binning", "FastAP supp. C.1, Revaud et al. supp. Eq. 7",
          "Each item contributes to two adjacent bins with weights summing to 1 (triangular kernel of width Δ).",
          _binning, "03"),
    Entry("bin_tradeoff", "Bin width vs margin", "FastAP Fig. 4c",
          "A fine quantization of a perfectly ranked list with a small margin gives FastAP = 1 and zero gradient; "
          "coarser bins mix positives and negatives and keep a learning signal.", _tradeoff, "03"),
    Entry("apq_vs_ap", "AP_Q vs AP", "Revaud et al. supp. Fig. 1",
          "AP_Q and the true AP correlate at ~0.98 over the queries of RParis (here: synthetic lists).", _apq, "03"),
    Entry("lada", "H-AP on the “Lada #2” example", "SupRank Fig. 4, 13-14",
          "Same AP (0.45) for both rankings, H-AP 0.78 vs 0.67 because the mistake at rank 1 is less severe; "
          "H-rank⁺(2) = 5/3 vs 4/3.", _lada, "05"),
    Entry("recall_at_k", "R@k and TR@k", "SupRank Eq. 13-15",
          "R@k is 1 if a positive is in the top k; TR@k is the number of positives in the top k over min(k, #positives).",
          _recall_curves, "06"),
    Entry("recall_surrogate", "Smoothing the count in the top k", "SupRank Eq. 16",
          "The Heaviside H(k − rank(p)) is approximated a second time, by a sigmoid of temperature τ*.",
          _recall_surrogate, "06"),
    Entry("recall_gradient_flow", "Gradient flow of the recall surrogates", "SupRank Sec. IV-B (toy of ROADMAP Fig. 7)",
          "Sup-R@k builds on SupRank's rank (exact rank⁺, H⁻ on negatives), so its gradients keep the directions of "
          "SupAP's; the all-sigmoid rank of Smooth-R@k inherits SmoothAP's contradictions.", _recall_flow, "06"),
    Entry("batch_size_study", "SupAP vs ROADMAP across batch sizes", "ROADMAP Fig. 5, supp. Table 6",
          "The mAP@R gain from adding L_calibr. grows as the batch size gets smaller.", None, "02",
          study="batch_size"),
    Entry("gap_study", "The decomposability gap with and without L_calibr.", "ROADMAP supp. Table 9",
          "L_calibr. decreases the decomposability gap (3.7 % on CUB, 5.4 % on SOP).", None, "02", study="gap"),
    Entry("bins_study", "R@1 vs number of bins", "FastAP Fig. 4b",
          "Retrieval performance does not improve with more bins; it peaks around 10.", None, "03", study="bins"),
    Entry("retrieval_grid", "What a trained model retrieves", "ROADMAP Fig. 6, supp. Fig. 13-15",
          "A query (purple) and its most similar instances, relevant ones in green.", _retrieval_grid, "04",
          trained=True),
    Entry("embedding_pca", "Test embeddings in 2-D", "SupRank Fig. 9 (there t-SNE)",
          "A projection of the embedding space shows how classes and coarse groups are organised.", _embedding, "04",
          trained=True),
    Entry("loss_comparison", "SmoothAP, SupAP, ROADMAP, seed for seed", "ROADMAP Table 2",
          "Replacing SmoothAP's sigmoid by H⁻ (SupAP) improves R@1 / mAP@R (+0.9 pt R@1 on CUB, +0.5 on SOP, +1.5 on "
          "iNaturalist), and adding L_calibr. (ROADMAP) improves again (CUB R@1 62.1 → 62.9 → 64.2, mAP@R 23.9 → "
          "24.6 → 25.3).", _loss_comparison, "04"),
    Entry("tsne_classes", "t-SNE of the test embeddings, by class", "SupRank Fig. 9 (t-SNE), ROADMAP Fig. 6",
          "A t-SNE keeps neighbourhoods: a trained model puts the images of one class together, even for classes "
          "never seen in training.", _tsne_classes, "04", trained=True),
    Entry("tsne_scripts", "The same t-SNE, by script", "SupRank Fig. 9a",
          "A model trained on fine labels only (there Smooth-AP) shows no clear clusters of the coarse labels.",
          _tsne_scripts, "04", trained=True),
    Entry("hierarchical_levels", "HAPPIER vs SmoothAP, level by level", "SupRank Tab. V, IX",
          "HAPPIER is slightly below fine-level methods at the fine level (SOP: R@1 81.0 vs 81.3, fine AP 60.4 vs "
          "61.7 for Smooth-AP) and far above at the coarse level (coarse AP 58.4 vs 13.4) and in H-AP "
          "(+16.4 pt over the best fine-level method on SOP).", _hierarchical_levels, "05", trained=True),
    Entry("class_means_tsne", "t-SNE of the class means, by script", "SupRank Fig. 9a-b",
          "With Smooth-AP no clear cluster of the coarse level is visible; with HAPPIER the class means of one "
          "coarse label gather.", _class_means_tsne, "05", trained=True),
    Entry("recall_study", "Training with recall losses", "SupRank Tab. II",
          "Sup-R@k trains better R@k than Smooth-R@k.", _recall_study, "06"),
]


def render(entries: list[Entry], with_training: bool, fast: bool, out: Path = OUT) -> dict[str, str]:
    """Draw each entry's PNG; {name: measured sentence} for those drawn."""
    measured = {}
    for e in entries:
        if e.study or (e.trained and not with_training):
            continue
        start = time.perf_counter()
        fig, text = e.draw(fast) if e.trained else e.draw()
        path = save_png(fig, out / f"{e.name}.png")
        seconds = time.perf_counter() - start
        # Trained figures: how long this one took (its runs, unless an earlier figure trained them).
        measured[e.name] = text + (f" [{seconds:.0f} s to draw]" if e.trained else "")
        print(f"{path}: {path.stat().st_size / 1024:.0f} KB, {seconds:.1f} s", flush=True)
    return measured


def previous_measurements(doc: Path = DOC) -> dict[str, str]:
    """Measured sentences of docs/figures.md, to keep those of figures not redrawn this time."""
    if not doc.exists():
        return {}
    out, name = {}, None
    for line in doc.read_text().splitlines():
        if line.startswith("<!-- figure: "):
            name = line.split()[2]
        elif name and line.startswith("*Measured:* "):
            out[name] = line[len("*Measured:* "):]
            name = None
    return out


def write_doc(entries: list[Entry], measured: dict[str, str], out: Path = OUT, doc: Path = DOC) -> None:
    full = runs.run_settings(fast=False)
    # the comparisons are read where the notebooks read them: v2's 5 seeds once its study 1 is complete, v1's 3 before
    seeds = "/".join(str(n) for n in sorted({len(r["seeds"]) for r in reproduction_rows("methods")})) or "the study's"
    lines = ["# Figures", "",
             "Each figure of the notebooks, rendered by `python bench/figures.py` (trained-model figures: "
             "`--training`), next to the statement of the paper it reproduces and the numbers measured when it was "
             "drawn. Interactive versions (sliders) are in the notebooks.", "",
             f"Trained-model figures: `python bench/figures.py --training` (full mode whatever `LAB_FAST` says). Each "
             f"run trains a {full['model']} (64-d embedding) on all glyph training classes for {full['steps']} steps of "
             f"{full['batch_size']} images (m = {full['m']} per class, Adam, lr 1e-3, seed {full['seed']}) and is "
             f"evaluated on a fixed subset of ~{full['eval_max_items']} test images (whole classes, every image a "
             f"query); HAPPIER vs SmoothAP with the hierarchical sampler for "
             f"{hierarchical_runs.hierarchical_overrides(fast=False).get('steps', full['steps'])} steps; the maps, the "
             "retrieved images and the class means are those of the evaluation subset (t-SNE on at most "
             f"~{retrieval.FULL_TSNE_ITEMS} points). These are the notebooks' full-mode models, loaded from the "
             "checkpoints they ship (`lab/data/checkpoints/`, made by `python -m lab.experiments.checkpoints make`), "
             "one run per setting: differences of a point or two are within seed-to-seed noise. The times in brackets were "
             "measured on 2 CPU cores shared with other jobs. The loss comparison and the recall losses (mean ± std "
             f"over {seeds} seeds) and the batch-size, gap and bin-count figures come from the reproduction study "
             "([results.md](results.md), `results/*.json`): no training.", ""]
    for e in entries:
        lines += [f"<!-- figure: {e.name} -->", f"## {e.title} — {e.source}", "",
                  f"*Paper:* {e.statement}", ""]
        if e.study:
            # A study that protocol v2 completed has only its v2 figure (the page's render deletes v1's).
            v2 = not (out / f"study_{e.study}.png").exists() and (out / f"study_{e.study}_v2.png").exists()
            png = out / f"study_{e.study}{'_v2' if v2 else ''}.png"
            lines += ([f"![{e.title}]({out.name}/{png.name})", ""] if png.exists() else []) + [
                f"*Measured* over {5 if v2 else 3} seeds in the reproduction study{' (protocol v2)' if v2 else ''}, "
                f"with the paper's numbers, the verdict and the command: [results.md, {STUDY_TITLES[e.study]}]"
                f"(results.md) (`python -m lab study {e.study}{' --protocol v2' if v2 else ''}`).", ""]
        elif (out / f"{e.name}.png").exists() and e.name in measured:
            lines += [f"![{e.title}]({out.name}/{e.name}.png)", "", f"*Measured:* {measured[e.name]}", ""]
        else:
            lines += ["*Not rendered yet:* run `python bench/figures.py --training` (full-size training runs).", ""]
        notebook = next(iter(sorted((ROOT / "notebooks").glob(f"{e.notebook}_*.ipynb"))), None)
        if notebook is not None:
            lines += [f"Notebook: [{notebook.name}](../notebooks/{notebook.name}).", ""]
    doc.write_text("\n".join(lines))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--training", action="store_true", help="also train the models of the trained-model figures")
    parser.add_argument("--fast", action="store_true", help="trained-model figures from fast-mode runs (smoke test only)")
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=[e.name for e in ENTRIES],
                        help="draw only these figures (the others keep their files and measured sentences)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write figures/ and figures.md under this folder instead of docs/ (e.g. for --fast)")
    args = parser.parse_args(argv)
    out, doc = (args.out / "figures", args.out / "figures.md") if args.out else (OUT, DOC)
    drawn = [e for e in ENTRIES if not args.only or e.name in args.only]
    measured = {**previous_measurements(doc), **render(drawn, args.training, args.fast, out)}
    write_doc(ENTRIES, measured, out, doc)
    print(f"wrote {doc}")


if __name__ == "__main__":
    main()
