"""The figures of docs/figures.md, each beside the paper's statement it reproduces and the notebook
that shows it interactively."""
from __future__ import annotations

from typing import Callable, NamedTuple

from lab.docs_figures import toy_figures, trained_figures


class Entry(NamedTuple):
    name: str
    title: str
    source: str  # paper, figure / equation
    statement: str  # what the paper says the figure shows
    draw: Callable[[], tuple] | None  # -> (plotly figure, "measured" sentence); None for a study's figure
    notebook: str
    trained: bool = False
    study: str = ""  # drawn by `python -m lab study` (3 seeds, docs/results.md), not here


ENTRIES = [
    Entry("surrogates", "Step surrogates", "ROADMAP Fig. 3, SupRank Fig. 2",
          "H⁻ upper-bounds the Heaviside, so L_SupAP ≥ L_AP, and back-propagates gradient (slope ρ beyond δ) until "
          "the ranking is correct, unlike the sigmoid of SmoothAP.", toy_figures.draw_surrogates, "01"),
    Entry("delta_choice", "Choice of δ", "ROADMAP supp. A.3, Fig. 11",
          "δ is where the sigmoid's gradient falls below ε: δ = τ·ln((1−ε)/ε); ε = 10⁻² gives δ ≃ 0.05.",
          toy_figures.draw_delta, "01"),
    Entry("gradient_flow", "Toy gradient flow", "ROADMAP Fig. 1a, supp. A.1 Fig. 7-8",
          "SmoothAP gives contradictory gradients to the two positives (∂L/∂s1 = −∂L/∂s2), a vanishing gradient to the "
          "negative (s3 − s2 = 0.13) and is below L_AP; the exact step on rank⁺ removes the contradiction but "
          "gradients still vanish (Fig. 8a); SupAP pushes both positives up and the negative down and "
          "L_SupAP ≥ L_AP (Fig. 8b).",
          toy_figures.draw_flow, "01"),
    Entry("decomposability_toy", "AP = 1 per batch, AP < 1 overall", "ROADMAP Fig. 1b, supp. Fig. 9",
          "L_AP = 0 in every batch despite L_AP ≠ 0 over the whole set; L_calibr. controls the absolute scores between "
          "batches.", toy_figures.draw_fig1b, "02"),
    Entry("juxtaposed", "Worst case and Eq. 8", "ROADMAP Eq. 8, supp. Fig. 10",
          "The upper bound of DG_AP is attained when the global ranking is the juxtaposition of the batches.",
          toy_figures.draw_juxtaposed, "02"),
    Entry("calibration_bounds", "Calibration tightens the bound", "ROADMAP Eq. 9",
          "Constraining positives above α and negatives below β refines the bound of Eq. 8; minimising L_calibr. makes "
          "it tighter.", toy_figures.draw_calibration, "02"),
    Entry("soft_binning", "Soft histogram binning", "FastAP supp. C.1, Revaud et al. supp. Eq. 7",
          "Each item contributes to two adjacent bins with weights summing to 1 (triangular kernel of width Δ).",
          toy_figures.draw_binning, "03"),
    Entry("bin_tradeoff", "Bin width vs margin", "FastAP Fig. 4c",
          "A fine quantization of a perfectly ranked list with a small margin gives FastAP = 1 and zero gradient; "
          "coarser bins mix positives and negatives and keep a learning signal.", toy_figures.draw_tradeoff, "03"),
    Entry("apq_vs_ap", "AP_Q vs AP", "Revaud et al. supp. Fig. 1",
          "AP_Q and the true AP correlate at ~0.98 over the queries of RParis (here: synthetic lists).",
          toy_figures.draw_apq, "03"),
    Entry("lada", "H-AP on the “Lada #2” example", "SupRank Fig. 4, 13-14",
          "Same AP (0.45) for both rankings, H-AP 0.78 vs 0.67 because the mistake at rank 1 is less severe; "
          "H-rank⁺(2) = 5/3 vs 4/3.", toy_figures.draw_lada, "05"),
    Entry("recall_at_k", "R@k and TR@k", "SupRank Eq. 13-15",
          "R@k is 1 if a positive is in the top k; TR@k is the number of positives in the top k over "
          "min(k, #positives).",
          toy_figures.draw_recall_curves, "06"),
    Entry("recall_surrogate", "Smoothing the count in the top k", "SupRank Eq. 16",
          "The Heaviside H(k − rank(p)) is approximated a second time, by a sigmoid of temperature τ*.",
          toy_figures.draw_recall_surrogate, "06"),
    Entry("recall_gradient_flow", "Gradient flow of the recall surrogates", "SupRank Sec. IV-B (toy of ROADMAP Fig. 7)",
          "Sup-R@k builds on SupRank's rank (exact rank⁺, H⁻ on negatives), so its gradients keep the directions of "
          "SupAP's; the all-sigmoid rank of Smooth-R@k inherits SmoothAP's contradictions.",
          toy_figures.draw_recall_flow, "06"),
    Entry("batch_size_study", "SupAP vs ROADMAP across batch sizes", "ROADMAP Fig. 5, supp. Table 6",
          "The mAP@R gain from adding L_calibr. grows as the batch size gets smaller.", None, "02",
          study="batch_size"),
    Entry("gap_study", "The decomposability gap with and without L_calibr.", "ROADMAP supp. Table 9",
          "L_calibr. decreases the decomposability gap (3.7 % on CUB, 5.4 % on SOP).", None, "02", study="gap"),
    Entry("bins_study", "R@1 vs number of bins", "FastAP Fig. 4b",
          "Retrieval performance does not improve with more bins; it peaks around 10.", None, "03", study="bins"),
    Entry("retrieval_grid", "What a trained model retrieves", "ROADMAP Fig. 6, supp. Fig. 13-15",
          "A query (purple) and its most similar instances, relevant ones in green.",
          trained_figures.draw_retrieval_grid, "04", trained=True),
    Entry("embedding_pca", "Test embeddings in 2-D", "SupRank Fig. 9 (there t-SNE)",
          "A projection of the embedding space shows how classes and coarse groups are organised.",
          trained_figures.draw_embedding, "04", trained=True),
    Entry("loss_comparison", "SmoothAP, SupAP, ROADMAP, seed for seed", "ROADMAP Table 2",
          "Replacing SmoothAP's sigmoid by H⁻ (SupAP) improves R@1 / mAP@R (+0.9 pt R@1 on CUB, +0.5 on SOP, +1.5 on "
          "iNaturalist), and adding L_calibr. (ROADMAP) improves again (CUB R@1 62.1 → 62.9 → 64.2, mAP@R 23.9 → "
          "24.6 → 25.3).", trained_figures.draw_loss_comparison, "04"),
    Entry("tsne_classes", "t-SNE of the test embeddings, by class", "SupRank Fig. 9 (t-SNE), ROADMAP Fig. 6",
          "A t-SNE keeps neighbourhoods: a trained model puts the images of one class together, even for classes "
          "never seen in training.", trained_figures.draw_tsne_classes, "04", trained=True),
    Entry("tsne_scripts", "The same t-SNE, by script", "SupRank Fig. 9a",
          "A model trained on fine labels only (there Smooth-AP) shows no clear clusters of the coarse labels.",
          trained_figures.draw_tsne_scripts, "04", trained=True),
    Entry("hierarchical_levels", "HAPPIER vs SmoothAP, level by level", "SupRank Tab. V, IX",
          "HAPPIER is slightly below fine-level methods at the fine level (SOP: R@1 81.0 vs 81.3, fine AP 60.4 vs "
          "61.7 for Smooth-AP) and far above at the coarse level (coarse AP 58.4 vs 13.4) and in H-AP "
          "(+16.4 pt over the best fine-level method on SOP).", trained_figures.draw_hierarchical_levels, "05",
          trained=True),
    Entry("class_means_tsne", "t-SNE of the class means, by script", "SupRank Fig. 9a-b",
          "With Smooth-AP no clear cluster of the coarse level is visible; with HAPPIER the class means of one "
          "coarse label gather.", trained_figures.draw_class_means_tsne, "05", trained=True),
    Entry("recall_study", "Training with recall losses", "SupRank Tab. II",
          "Sup-R@k trains better R@k than Smooth-R@k.", trained_figures.draw_recall_study, "06"),
]
