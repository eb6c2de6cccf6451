"""The figures of docs/figures.md drawn from trained models (the notebooks' runs, full size unless
``fast``) or read from the reproduction study's records -> (plotly figure, "measured" sentence)."""
from __future__ import annotations

import functools

from lab.experiments import hierarchical_runs
from lab.experiments import runs
from lab.studies.reporting.verdicts import reproduction_rows
from lab.viz import comparisons, retrieval_views


def _test_images(fast: bool):
    """The ROADMAP model of notebook 04 and the test images its metrics are computed on."""
    trainer = runs.trained_model("roadmap", fast=fast)
    return (trainer, *runs.evaluation_embeddings(trainer))


def draw_retrieval_grid(fast: bool):
    trainer, emb, labels, index = _test_images(fast)
    queries = [0, 8, 16, 24, 32, 40]
    found = retrieval_views.retrieve(emb, labels, queries, k=6)
    names = [trainer.test_set.class_names[int(y)] for y in labels[:, 0]]
    hits = sum(any(r) for r in found["relevant"])
    return (retrieval_views.plot_retrieval([trainer.test_set.image(i) for i in index], queries, found, names),
            f"ROADMAP, {trainer.config.steps} steps: {hits} of {len(queries)} queries have a relevant item "
            "in their top 6.")


def draw_embedding(fast: bool):
    trainer, emb, labels, _ = _test_images(fast)
    points = retrieval_views.project_2d(emb)
    return (retrieval_views.plot_embedding_2d(points, labels[:, 1], trainer.test_set.coarse_names),
            f"{len(emb)} test glyphs (the evaluation subset), first two principal components.")


def _mean_std(row, metric: str) -> str:
    """'92.9 ± 1.2' (%) for a study row, '92.9' for one run."""
    return f"{100 * row[metric]:.1f}" + (f" ± {100 * row['std'][metric]:.1f}" if "std" in row else "")


def _source(rows) -> str:
    if rows and "std" in rows[0]:
        split = "the whole test split" if rows[0]["eval_max_items"] is None else "a ~2,000-image test subset"
        return f"mean ± std over {len(rows[0]['seeds'])} seeds, {split}, from {rows[0]['source']}"
    return f"one run each, seed {rows[0]['seed']}, trained here" if rows else ""


def draw_loss_comparison():
    rows = reproduction_rows("methods", runs.ABLATION)  # the runs the page's verdicts read (v2 once complete)
    return comparisons.plot_loss_comparison(rows), "; ".join(
        f"{r['loss']}: R@1 {_mean_std(r, 'R@1')}, mAP@R {_mean_std(r, 'mAP@R')}" for r in rows) + (
        f" (%, {rows[0]['steps']} steps of {rows[0]['batch_size']}, {_source(rows)}; paired t-tests of each step of "
        "the ablation: [results.md, 1](results.md)).")


@functools.lru_cache(maxsize=2)
def _class_tsne(fast: bool):
    trainer, emb, labels, _ = _test_images(fast)
    max_items = retrieval_views.FAST_TSNE_ITEMS if fast else retrieval_views.FULL_TSNE_ITEMS
    return trainer, retrieval_views.class_tsne(emb, labels, trainer.test_set.class_names, max_items=max_items)


def draw_tsne_classes(fast: bool):
    _, m = _class_tsne(fast)
    n = len(m["index"])
    return (retrieval_views.plot_embedding_2d(m["points"], m["fine"], m["names"], highlight=m["coloured"],
                                              axis_title="t-SNE",
                                        title=f"t-SNE of {n} test embeddings (ROADMAP), the first 16 classes coloured"),
            f"{n} test images of {len(set(m['fine'].tolist()))} held-out classes: {m['map_agreement']:.2f} of "
            f"each point's 5 nearest neighbours on the map are the same glyph ({m['embedding_agreement']:.2f} in the "
            f"64-d space, chance {m['chance']:.3f}).")


def draw_tsne_scripts(fast: bool):
    trainer, m = _class_tsne(fast)
    n = len(m["index"])
    emb, labels = _test_images(fast)[1:3]
    near, means = retrieval_views.coarse_neighbours(emb, labels), retrieval_views.class_mean_neighbours(emb, labels)
    ratio = means["same_coarse"] / means["chance"]
    lesson = (f" **Does not reproduce the paper's lesson here:** different glyphs of one script sit together "
              f"({ratio:.0f}x chance for the class means) although the loss never saw the scripts, unlike Smooth-AP's "
              "map on SOP. Likely reason: the glyphs of a script share their strokes (Braille dots, box-drawing "
              "lines, arrowheads), so the features that tell glyphs apart also tell scripts apart."
              if ratio > 2 else "")
    return (retrieval_views.plot_embedding_2d(m["points"], m["coarse"], trainer.test_set.coarse_names,
                                              axis_title="t-SNE",
                                        title=f"t-SNE of {n} test embeddings (ROADMAP), coloured by script"),
            f"in the 64-d space, {near['same_coarse']:.2f} of each image's 5 nearest neighbours share its script "
            f"(chance {near['chance']:.2f}), but {near['same_class']:.2f} are the same glyph, which shares it by "
            f"definition: of the neighbours that are other glyphs, {near['other_class_same_coarse']:.2f} share the "
            f"script (chance {near['other_class_chance']:.2f}), and {means['same_coarse']:.2f} of each class mean's 5 "
            f"nearest class means (chance {means['chance']:.2f}, {means['num_classes']} glyphs; "
            "notebook 05's measure). "
            f"The last two answer whether scripts cluster; the loss never saw scripts.{lesson}")


def draw_hierarchical_levels(fast: bool):
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
        f"a proxy of L_DG* is pulled ~{_proxy_pulls(fast):.0f} times in such a run, ~130 times on SOP)."
        if failed else ""))


def _proxy_pulls(fast: bool) -> float:
    """How often a class (so its L_DG* proxy) is in a batch during HAPPIER's run:
    steps x classes per batch / classes."""
    trainer = hierarchical_runs.hierarchical_model("happier", fast=fast)
    cfg = trainer.config
    return cfg.steps * (cfg.batch_size / cfg.m) / len(trainer.loss_fn.decomposability_loss.proxies)


def draw_class_means_tsne(fast: bool):
    maps, names = {}, {}
    for loss in hierarchical_runs.HIERARCHICAL_LOSSES:
        trainer = hierarchical_runs.hierarchical_model(loss, fast=fast)
        emb, labels, _ = runs.evaluation_embeddings(trainer)
        maps[loss] = retrieval_views.class_mean_map(emb, labels)
        names = trainer.test_set.coarse_names
    first = next(iter(maps.values()))
    gain = maps["happier"]["embedding_agreement"] - maps["smooth_ap"]["embedding_agreement"]
    lesson = (" **Does not reproduce Fig. 9's lesson here:** SmoothAP's class means already gather by script "
              f"({maps['smooth_ap']['embedding_agreement'] / first['chance']:.0f}x chance) and HAPPIER adds "
              f"{gain:+.3f}; glyphs of one script look alike, and HAPPIER's proxies have barely moved after "
              f"{trainer.config.steps} steps." if gain < 0.1 else "")
    return retrieval_views.plot_class_mean_maps(maps, names), "; ".join(
        f"{loss}: {m['embedding_agreement']:.3f} of each class mean's 5 nearest class means share its script "
        f"({m['map_agreement']:.3f} on the map)" for loss, m in maps.items()) + (
        f"; chance {first['chance']:.3f}, {first['num_classes']} test classes "
        f"(those of the evaluation subset).{lesson}")


def draw_recall_study():
    rows = reproduction_rows("methods", runs.RECALL_LOSSES)
    return comparisons.plot_recall_study(rows), "; ".join(
        f"{r['loss']}: R@1 {_mean_std(r, 'R@1')}, R@8 {_mean_std(r, 'R@8')}" for r in rows) + (
        f" (%, {_source(rows)}; Sup-R@k − Smooth-R@k, paired t-tests: [results.md, 1](results.md)).")
