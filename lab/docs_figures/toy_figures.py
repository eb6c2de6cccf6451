"""The toy figures of docs/figures.md: each draws a figure of the notebooks from a few numbers, in
seconds, and says what it measured -> (plotly figure, "measured" sentence)."""
from __future__ import annotations

from lab.viz import binning, decomposability_toys, gradient_flow, hierarchical_ap, recall_at_k, surrogates


def draw_surrogates():
    c = surrogates.surrogate_curves()
    ok = all(hm >= h for hm, h in zip(c["h_minus"], c["heaviside"]))
    return surrogates.plot_surrogates(), (f"H⁻ ≥ H on all {len(c['t'])} grid points: {ok}; "
                                          f"slope of H⁻ beyond δ: {c['d_h_minus'][-1]:g} (= ρ).")


def draw_delta():
    delta, level = surrogates.delta_threshold(0.01, 0.01)
    return surrogates.plot_delta_choice(), f"δ = {delta:.4f} for τ = ε = 0.01; slope there {level:.3f} (peak 25)."


def draw_flow():
    f = gradient_flow.toy_gradients()
    g = f["SmoothAP"].grads
    text = (f"SmoothAP ∂L/∂s = ({g[0]:+.3f}, {g[1]:+.3f}, {g[2]:+.1e}); SupAP ∂L/∂s = "
            f"({', '.join(f'{v:+.3f}' for v in f['SupAP'].grads)}); L_SupAP = {f['SupAP'].loss:.3f} ≥ "
            f"L_AP = {gradient_flow.ap_loss():.3f} > L_SmoothAP = {f['SmoothAP'].loss:.3f}.")
    return gradient_flow.plot_gradient_flow(), text


def draw_fig1b():
    a, b = (decomposability_toys.gap_summary(*decomposability_toys.fig1b_toy(c)) for c in (False, True))
    return decomposability_toys.plot_fig1b(), (f"AP_b = 1 in both batches; global AP {a['global_ap']:.4f} "
                                               f"(DG = {a['gap']:.4f}) before calibration, {b['global_ap']:.1f} "
                                               f"(DG = {b['gap']:.1f}) after.")


def draw_juxtaposed():
    from lab.metrics import dg_upper_bound, juxtaposed_batches, query_gap

    gap = query_gap(*juxtaposed_batches([2] * 3, [4] * 3))
    bound = dg_upper_bound([2] * 3, [4] * 3)
    text = f"3 batches of 2+/4−: ranked gap {gap:.4f} = Eq. 8 {bound:.4f}."
    return decomposability_toys.plot_juxtaposed(3, 2, 4), text


def draw_calibration():
    r = decomposability_toys.gap_summary(*decomposability_toys.toy_batches(shift=0.4), 0.6, 0.5)
    r0 = decomposability_toys.gap_summary(*decomposability_toys.toy_batches(shift=0.0), 0.8, 0.6)
    return decomposability_toys.plot_calibration_bounds(), (
        f"shift 0.4: DG {r['gap']:.3f} ≤ Eq. 9 {r['eq9']:.3f} ≤ Eq. 8 {r['eq8']:.3f}; unshifted and calibrated: "
        f"DG {r0['gap']:.1f}, Eq. 9 {r0['eq9']:.1f}. Eq. 9 as printed exceeds Eq. 8 when most negatives violate β "
        f"and few positives pass α (see the notebook).")


def draw_binning():
    r = binning.histogram_summary(num_bins=10)
    return binning.plot_soft_binning(10, 3), (f"10 bins: FastAP {r['binned_ap']:.3f} vs exact AP {r['ap']:.3f}; "
                                              "every item's weights sum to 1.")


def draw_tradeoff():
    r = binning.bin_tradeoff(0.064, (4, 400))
    return binning.plot_bin_tradeoff(0.064), (f"margin 0.064: 4 bins → FastAP {r['fast_ap'][0]:.3f}, "
                                              f"‖∇‖ {r['grad_norm'][0]:.3f}; "
                                              f"400 bins → FastAP {r['fast_ap'][1]:.3f}, ‖∇‖ {r['grad_norm'][1]:.0e}.")


def draw_apq():
    r = binning.apq_vs_ap(20)
    return binning.plot_apq_scatter(20), (f"300 synthetic queries, 20 bins: correlation {r['correlation']:.3f}, "
                                          f"mean |AP_Q − AP| {r['mean_abs_error']:.3f}.")


def draw_lada():
    ex = hierarchical_ap.lada_example()
    t, b = ex["top row"], ex["bottom row"]
    return hierarchical_ap.plot_lada(), (f"top: H-AP {t['h_ap']:.4f}, AP {t['ap']:.2f}; "
                                         f"bottom: H-AP {b['h_ap']:.4f}, AP {b['ap']:.2f}; "
                                         f"H-rank⁺(2) = {t['h_rank_plus'][1]:.4f} vs {b['h_rank_plus'][1]:.4f}.")


def draw_recall_curves():
    c = recall_at_k.recall_curves()
    tr = [round(v, 3) for v in c["TR@k"][:9]]
    return recall_at_k.plot_recall_at_k(), f"positives at ranks 3, 5, 9: R@k = {c['R@k'][:5]}…, TR@k = {tr}…"


def draw_recall_surrogate():
    s = recall_at_k.surrogate_step(4, 1.0)
    far = max(g for r, g in zip(s["rank"], s["slope"]) if r >= 12)
    return recall_at_k.plot_recall_surrogate(4, 1.0), (f"k = 4, τ* = 1: slope {max(s['slope']):.3f} at rank k, "
                                                       f"≤ {far:.1e} from rank 12 on.")


def draw_recall_flow():
    f = gradient_flow.toy_gradients(family="recall")
    return gradient_flow.plot_recall_gradient_flow(), "; ".join(
        f"{name} ∂L/∂s = ({', '.join(f'{g:+.2e}' for g in v.grads)})" for name, v in f.items()) + (
        " — each panel has its own arrow scale (Sup-R@k's arrows magnified, as its title says): the directions "
        "are the lesson, the printed values the magnitudes.")
