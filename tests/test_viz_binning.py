"""Histogram binning figures (FastAP supp. C.1 and Fig. 4c, Revaud et al. supp. Fig. 1)."""
import json

import pytest
import torch

from lab.losses.functional import fast_ap, soft_bin_ap
from lab.metrics import average_precision
from lab.viz.binning import (BINNING_SCORES, BINNING_TARGETS, apq_vs_ap, bin_tradeoff, bins, histogram_summary,
                             margin_list, plot_apq_scatter, plot_bin_tradeoff, plot_soft_binning, soft_assignment)


@pytest.mark.parametrize("space, num_bins", [("fast_ap", 10), ("fast_ap", 3), ("ap_q", 20), ("ap_q", 7)])
def test_soft_assignment_splits_each_item_between_two_neighbouring_bins(space, num_bins):
    centres, width = bins(num_bins, space)
    values = 2 - 2 * torch.tensor(BINNING_SCORES, dtype=torch.float64) if space == "fast_ap" else \
        torch.tensor(BINNING_SCORES, dtype=torch.float64)
    w = soft_assignment(values, centres, width)
    torch.testing.assert_close(w.sum(1), torch.ones(len(values), dtype=torch.float64))  # a weight of 1 each
    assert ((w > 0).sum(1) <= 2).all()
    for v, row in zip(values, w):
        touched = centres[row > 0]
        assert ((touched - v).abs() < width).all()  # only the nearest centres


@pytest.mark.parametrize("space", ["fast_ap", "ap_q"])
def test_drawn_histogram_is_the_losses_histogram(space):
    fig = plot_soft_binning(num_bins=12, item=4, space=space)
    spec = json.loads(fig.to_json())
    h_pos, h_neg = spec["data"][0], spec["data"][1]
    r = histogram_summary(num_bins=12, space=space)
    assert h_pos["y"] == pytest.approx(r["h_pos"]) and h_neg["y"] == pytest.approx(r["h_neg"])
    assert sum(h_pos["y"]) == pytest.approx(sum(BINNING_TARGETS))  # every positive counted once
    s, t = torch.tensor([BINNING_SCORES], dtype=torch.float64), torch.tensor([BINNING_TARGETS])
    loss = (fast_ap if space == "fast_ap" else soft_bin_ap)(s, t, num_bins=12)
    assert r["binned_ap"] == pytest.approx(1 - float(loss))
    # The AP recomputed from the drawn bars (Eq. 14 of FastAP; bins best first) is the loss's.
    hp, hn = torch.tensor(h_pos["y"]), torch.tensor(h_neg["y"])
    ap = (hp.cumsum(0) * hp / (hp + hn).cumsum(0).clamp_min(1e-12)).sum() / hp.sum()
    assert float(ap) == pytest.approx(r["binned_ap"], rel=1e-6)


def test_fastap_fig_4c_fine_bins_no_signal_coarse_bins_signal():
    r = bin_tradeoff(0.064, num_bins=(4, 400))
    assert r["fast_ap"][1] == pytest.approx(1.0, abs=1e-12) and r["grad_norm"][1] < 1e-12  # FastAP = 1, no gradient
    assert r["fast_ap"][0] < 0.99 and r["grad_norm"][0] > 0.1  # coarse bins mix + and -: a margin
    scores, targets = margin_list(0.064)
    assert float(average_precision(scores, targets)[0]) == 1.0  # the list is perfectly ranked


@pytest.mark.parametrize("margin", [0.02, 0.064, 0.15])
def test_no_gradient_once_the_kernel_fits_in_the_margin(margin):
    n = int(4 / margin) + 1  # num_bins >= 4 / margin: the dotted line of the figure
    r = bin_tradeoff(margin, num_bins=(n, 2 * n))
    assert max(r["grad_norm"]) < 1e-12
    fig = plot_bin_tradeoff(margin)
    assert fig.layout.shapes[0].x0 == pytest.approx(4 / margin)


def test_coarse_bins_push_positives_up_and_negatives_down():
    scores, targets = margin_list(0.064)
    scores.requires_grad_(True)
    (g,) = torch.autograd.grad(fast_ap(scores, targets, num_bins=4), scores)
    assert g[0, :3].max() < 0 < g[0, 3:].min()


def test_apq_tracks_ap_like_revaud_supp_fig_1():
    r20, r5, r100 = apq_vs_ap(20), apq_vs_ap(5), apq_vs_ap(100)
    assert r20["correlation"] > 0.98  # "a correlation of ~0.98" (RParis); synthetic lists here
    assert r5["mean_abs_error"] > r20["mean_abs_error"] > r100["mean_abs_error"]
    fig = plot_apq_scatter(20)
    assert list(fig.data[0].x) == pytest.approx(r20["ap"]) and list(fig.data[0].y) == pytest.approx(r20["apq"])
