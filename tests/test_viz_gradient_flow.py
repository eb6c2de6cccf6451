"""The toy gradient-flow figure (ROADMAP Fig. 1a, supp. A.1 Fig. 7-8) draws autograd's gradients."""
import pytest
import torch

from lab.losses.functional import smooth_ap, sup_ap
from lab.viz.gradient_flow import (ARROW_LENGTH, FLOW_LOSSES, TOY_SCORES, TOY_TARGETS, VANISHING, ap_loss,
                                   plot_gradient_flow, plot_recall_gradient_flow, toy_gradients)


def autograd(fn, scores, **kw):
    s = torch.tensor([list(scores)], dtype=torch.float64, requires_grad=True)
    loss = fn(s, torch.tensor([list(TOY_TARGETS)]), **kw)
    return torch.autograd.grad(loss, s)[0][0].tolist()


def test_toy_is_the_papers():
    s1, s2, s3 = TOY_SCORES
    assert s3 - s2 == pytest.approx(0.13) and s3 - s1 == pytest.approx(0.14)
    assert TOY_TARGETS == (True, True, False)


@pytest.mark.parametrize("scores, tau", [(TOY_SCORES, 0.01), ((0.62, 0.41, 0.55), 0.05), ((0.3, 0.9, 0.6), 0.002)])
def test_arrows_are_the_autograd_gradients(scores, tau):
    fig = plot_gradient_flow(*scores, tau=tau)
    scales = fig.layout.meta["arrow_scales"]
    assert len(set(scales)) == 1  # AP panels share one scale: the vanishing gradients are the lesson
    scale = scales[0]
    want = {"SmoothAP": autograd(smooth_ap, scores, tau=tau),
            "SmoothAP, exact rank⁺": autograd(smooth_ap, scores, tau=tau, exact_rank_pos=True),
            "SupAP": autograd(sup_ap, scores, tau=tau, rho=100.0, delta=0.05)}
    largest = max(abs(g) for gs in want.values() for g in gs)
    arrows = [a for a in fig.layout.annotations if a.showarrow]
    for row, (name, grads) in enumerate(want.items(), start=1):
        marker = fig.data[row - 1]
        assert marker.name == name
        torch.testing.assert_close(torch.tensor(marker.customdata), torch.tensor(grads))
        xref = "x" if row == 1 else f"x{row}"
        drawn = {round(a.ax, 9): a.x - a.ax for a in arrows if a.xref == xref}
        for s, g in zip(scores, grads):
            if abs(g) >= VANISHING * largest:
                assert drawn[round(s, 9)] == pytest.approx(-scale * g, rel=1e-9, abs=1e-12)  # descent step
            else:
                assert round(s, 9) not in drawn  # a vanishing gradient gets a label, not an arrow


def test_claims_of_supplementary_a1():
    flows = toy_gradients()
    g = flows["SmoothAP"].grads
    assert g[0] < 0 < g[1] and g[0] == pytest.approx(-g[1], rel=1e-3)  # opposite gradients on the positives
    assert abs(g[2]) < 1e-3 * abs(g[0])  # vanishing gradient on the negative
    g = flows["SmoothAP, exact rank⁺"].grads
    assert g[0] <= 0 and g[1] <= 0 and max(map(abs, g)) < 1e-4  # Fig. 8a: no contradiction, no gradient
    g = flows["SupAP"].grads
    assert g[0] < 0 and g[1] < 0 and g[2] > 0  # Fig. 8b: positives up, negative down
    assert flows["SupAP"].loss >= ap_loss() > flows["SmoothAP"].loss  # L_SupAP >= L_AP > L_SmoothAP


def test_exact_ap_loss_of_the_toy():
    assert ap_loss() == pytest.approx(1 - (1 / 2 + 2 / 3) / 2)  # positives at ranks 2 and 3


def test_panels_follow_the_losses_registry():
    fig = plot_gradient_flow()
    assert [t.name for t in fig.data] == list(FLOW_LOSSES)


def test_recall_arrows_are_visible_and_say_their_scale():
    """Sup-R@k's gradients on the toy are ~50x smaller than Smooth-R@k's: with one shared scale its
    arrows were ~0.001 score units long. Each panel now has its own scale, named in its title."""
    flows = toy_gradients(family="recall")
    fig = plot_recall_gradient_flow()
    scales = fig.layout.meta["arrow_scales"]
    arrows = [a for a in fig.layout.annotations if a.showarrow]
    for row, ((name, flow), scale) in enumerate(zip(flows.items(), scales), start=1):
        largest = max(abs(g) for g in flow.grads)
        assert scale == pytest.approx(ARROW_LENGTH / largest)  # the panel's largest gradient: a full arrow
        xref = "x" if row == 1 else f"x{row}"
        lengths = {round(a.ax, 9): a.x - a.ax for a in arrows if a.xref == xref}
        for s, g in zip(TOY_SCORES, flow.grads):
            if abs(g) >= VANISHING * largest:
                assert lengths[round(s, 9)] == pytest.approx(-scale * g)  # still the descent step, scaled
                assert abs(lengths[round(s, 9)]) >= 0.1 * ARROW_LENGTH  # visible: >= 6 thousandths of a score
    sup = [a.text for a in fig.layout.annotations if not a.showarrow and a.text.startswith("Sup-R@k")][0]
    ratio = scales[1] / scales[0]
    assert ratio > 20 and f"arrows ×{ratio:.0f}" in sup  # the magnification is written on the panel
    with pytest.raises(ValueError, match="arrows"):
        plot_gradient_flow(arrows="log")
