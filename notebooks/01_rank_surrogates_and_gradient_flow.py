# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 — Rank surrogates and gradient flow
#
# **What you will learn.** Average precision is computed from ranks, and a rank counts items
# with a step function whose derivative is zero almost everywhere. You will see the three
# choices for that step used in the lab — the exact Heaviside, SmoothAP's temperature sigmoid
# and SupAP's $H^-$ (ROADMAP Fig. 3, SupRank Fig. 2) — with their derivatives, how to pick
# $\tau$, $\rho$ and $\delta$, and, on the three-item toy of ROADMAP Fig. 1a and supplementary
# A.1 (Fig. 7-8), which gradient each loss sends to each score: SmoothAP pushes one positive
# *down* and leaves the negative alone, SupAP does what a ranking loss should.
#
# **Equations** (ROADMAP numbering; SupRank Eq. 3-5 are the same). For a query with positives
# $\mathcal{P}$ and negatives $\mathcal{N}$, scores $s_j$:
#
# $$\text{AP} = \frac{1}{|\mathcal{P}|}\sum_{k\in\mathcal{P}} \frac{\text{rank}^+(k)}{\text{rank}(k)},\qquad \mathcal{L}_\text{AP} = 1-\text{AP} \tag{1}$$
#
# $$\text{rank}^+(k) = 1 + \sum_{j\in\mathcal{P}\setminus\{k\}} H(s_j - s_k),\quad \text{rank}(k) = \text{rank}^+(k) + \underbrace{\sum_{j\in\mathcal{N}} H(s_j - s_k)}_{\text{rank}^-(k)},\quad H(t) = [t \ge 0] \tag{3}$$
#
# $$H^-(t) = \begin{cases}\sigma(t/\tau) & t \le 0\\ \sigma(t/\tau) + 0.5 & 0 \le t \le \delta\\ \rho\,(t-\delta) + \sigma(\delta/\tau) + 0.5 & t > \delta\end{cases} \tag{4}$$
#
# $$\mathcal{L}_\text{SupAP} = 1 - \frac{1}{|\mathcal{P}|}\sum_{k\in\mathcal{P}} \frac{\text{rank}^+(k)}{\text{rank}^+(k) + \sum_{j\in\mathcal{N}} H^-(s_j-s_k)} \tag{5}$$
#
# SmoothAP (Brown et al.) replaces every $H$ of Eq. 3 by $\sigma(t/\tau)$. Supplementary A.3:
# $\delta = \tau\ln\frac{1-\varepsilon}{\varepsilon}$.
#
# Everything below calls `lab`: the curves come from `lab.ranking`, the losses from
# `lab.losses.functional`, the figures from `lab.viz`.

# %%
import torch

from lab.losses.functional import smooth_ap, sup_ap
from lab.ranking import default_delta, h_minus, heaviside
from lab.viz.controls import explore
from lab.viz.gradient_flow import TOY_SCORES, TOY_TARGETS, ap_loss, plot_gradient_flow, toy_gradients
from lab.viz.registry import INTERACTIVE
from lab.viz.surrogates import delta_threshold, plot_delta_choice, plot_surrogates, saturation_ratio, surrogate_curves

# %% [markdown]
# ## 1. The step and its surrogates
#
# Left: the values; right: the derivatives SGD receives. The sigmoid's slope peaks at
# $1/(4\tau)$ and vanishes a few $\tau$ away from 0. $H^-$ follows the sigmoid below 0, jumps
# by 0.5 at 0 (so it stays above $H$), and beyond $\delta$ rises linearly with slope $\rho$:
# a negative ranked far above a positive keeps receiving gradient.

# %%
plot_surrogates(tau=0.01, rho=100.0, delta=0.05)

# %% [markdown]
# Two properties the text relies on, checked on the drawn grid: $H^- \ge H$ everywhere (so
# $\mathcal{L}_\text{SupAP} \ge \mathcal{L}_\text{AP}$), while the sigmoid is below $H$ for
# $t \ge 0$ (so SmoothAP is not an upper bound); and $H^-$'s slope is $\rho$ beyond $\delta$.

# %%
curves = surrogate_curves(tau=0.01, rho=100.0, delta=0.05)
assert all(hm >= h for hm, h in zip(curves["h_minus"], curves["heaviside"]))
assert any(s < h for s, h in zip(curves["sigmoid"], curves["heaviside"]))
assert all(d == 100.0 for t, d in zip(curves["t"], curves["d_h_minus"]) if t > 0.05 + 1e-9)
t = torch.tensor(curves["t"], dtype=torch.float64)
assert torch.equal(torch.tensor(curves["h_minus"], dtype=torch.float64), h_minus(t, 0.01, 100.0, 0.05))
print("H^- >= H on", len(t), "points; the sigmoid is below H somewhere; slope beyond delta = rho")

# %% [markdown]
# **Try it.** $\tau$ sets the width of the sigmoid (the margin SupAP keeps once the ranking is
# right), $\rho$ the slope of the linear part, $\delta$ where it starts. The $\rho$ slider is
# on a log scale from 1 to 10,000, the paper's 100 in the middle: the smaller $\rho$, the
# flatter $H^-$ beyond $\delta$.

# %%
explore(*INTERACTIVE["surrogates"])

# %% [markdown]
# A log scale never reaches $\rho = 0$, so here it is: beyond $\delta$, $H^-$ is flat, like the
# saturated sigmoid, and the vanishing gradient comes back (exercise 2 measures it on the toy).

# %%
flat = surrogate_curves(tau=0.01, rho=0.0, delta=0.05)
assert all(d == 0.0 for t, d in zip(flat["t"], flat["d_h_minus"]) if t > 0.05 + 1e-9)
plot_surrogates(tau=0.01, rho=0.0, delta=0.05)

# %% [markdown]
# ## 2. Choosing $\delta$ (supplementary A.3, Fig. 11)
#
# $\delta$ is where the sigmoid is saturated: $\sigma(\delta/\tau) = 1-\varepsilon$, i.e.
# $\delta = \tau\ln\frac{1-\varepsilon}{\varepsilon}$. There the slope of $\sigma$ in its own
# variable is $\varepsilon(1-\varepsilon) \approx \varepsilon$; with respect to $t$ it is
# $\varepsilon(1-\varepsilon)/\tau$. The paper's $\tau = \varepsilon = 0.01$ gives
# $\delta \approx 0.046$, rounded to 0.05.

# %%
delta, slope = delta_threshold(tau=0.01, eps=0.01)
assert abs(delta - 0.046) < 5e-4 and delta == default_delta(0.01, 0.01)
print(f"delta = {delta:.4f}; slope of sigma(t/tau) there = {slope:.3f} (peak {1 / (4 * 0.01):.0f})")
plot_delta_choice(tau=0.01, eps=0.01)

# %%
explore(*INTERACTIVE["delta_choice"])

# %% [markdown]
# ## 3. The toy gradient flow (ROADMAP Fig. 1a, supplementary Fig. 7-8)
#
# One query, three items: positives $x_1, x_2$ with $s_1 = 0.50$, $s_2 = 0.51$ ranked below a
# negative $x_3$ with $s_3 = 0.64$ ($s_3 - s_2 = 0.13$, $s_3 - s_1 = 0.14$), $\tau = 0.01$.
# Autograd gives $\partial\mathcal{L}/\partial s_i$ for three losses:
#
# * SmoothAP (Fig. 7);
# * SmoothAP with the exact step on $\text{rank}^+$ (Fig. 8a, `smooth_ap(..., exact_rank_pos=True)`);
# * SupAP (Fig. 8b).

# %%
flows = toy_gradients(TOY_SCORES, TOY_TARGETS, tau=0.01, rho=100.0, delta=0.05)
l_ap = ap_loss(TOY_SCORES, TOY_TARGETS)
print(f"L_AP = {l_ap:.4f}")
for name, f in flows.items():
    print(f"{name:24s} L = {f.loss:.4f}   dL/ds = " + ", ".join(f"{g:+.2e}" for g in f.grads))

# %% [markdown]
# Arrows show the gradient-descent step $-\partial\mathcal{L}/\partial s_i$ on a common scale;
# a gradient below $10^{-3}$ of the largest one is labelled "≈ 0" instead.

# %%
plot_gradient_flow(*TOY_SCORES, tau=0.01)

# %% [markdown]
# The claims of supplementary A.1, checked:
#
# 1. **Contradictory gradients.** SmoothAP pushes $x_1$ up and $x_2$ *down*, with
#    $\partial\mathcal{L}/\partial s_1 = -\partial\mathcal{L}/\partial s_2$: the sigmoid in
#    $\text{rank}^+$ compares the two positives with each other.
# 2. **Vanishing gradient.** $s_3 - s_2 = 13\tau$ is deep in the sigmoid's saturation (its slope
#    there is $\sim 10^{-5}$ of its peak), so the negative barely moves.
# 3. **Not an upper bound.** $\mathcal{L}_\text{SmoothAP} < \mathcal{L}_\text{AP}$ on this list,
#    whereas $\mathcal{L}_\text{SupAP} \ge \mathcal{L}_\text{AP}$ always (because $H^- \ge H$).
# 4. The exact step on $\text{rank}^+$ removes the contradiction but every gradient still vanishes
#    (Fig. 8a); $H^-$'s linear part brings the gradient back on all three items (Fig. 8b).

# %%
g = flows["SmoothAP"].grads
assert g[0] < 0 < g[1] and abs(g[0] + g[1]) < 1e-3 * abs(g[0])  # opposite, equal gradients on the positives
assert abs(g[2]) < 1e-3 * abs(g[0])  # vanishing gradient on the negative
assert saturation_ratio(tau=0.01, t=0.13) < 1e-4
g = flows["SmoothAP, exact rank⁺"].grads
assert g[0] <= 0 and g[1] <= 0 and max(abs(v) for v in g) < 1e-4
g = flows["SupAP"].grads
assert g[0] < 0 and g[1] < 0 and g[2] > 0  # positives up, negative down
assert flows["SupAP"].loss >= l_ap > flows["SmoothAP"].loss  # L_SupAP >= L_AP > L_SmoothAP
print("all claims of supplementary A.1 hold on the toy")

# %% [markdown]
# The same numbers straight from the loss functions, without `lab.viz`:

# %%
scores = torch.tensor([TOY_SCORES], dtype=torch.float64, requires_grad=True)
targets = torch.tensor([TOY_TARGETS])
loss = sup_ap(scores, targets, tau=0.01, rho=100.0, delta=0.05)
loss.backward()
print("SupAP", loss.item(), scores.grad.tolist())  # .item(): float() of a tensor that requires grad warns
assert torch.allclose(scores.grad[0], torch.tensor(flows["SupAP"].grads, dtype=torch.float64))
assert float(heaviside(torch.tensor(0.0))) == 1.0  # a tie counts as ranked above (pessimistic ranks)
assert float(smooth_ap(scores.detach(), targets, tau=0.01)) == flows["SmoothAP"].loss

# %% [markdown]
# **Drag the scores.** Move $s_3$ below $s_1$ (the ranking becomes correct): SupAP keeps a
# small gradient while the negative is within a few $\tau$ of the positives — the margin — and
# SmoothAP's contradiction disappears only when the positives are far apart. Raise $\tau$ to 0.1:
# the sigmoid is no longer saturated at 0.13.

# %%
explore(*INTERACTIVE["gradient_flow"])

# %% [markdown]
# ## Summary
#
# * The rank (Eq. 3) counts with a step $H$ whose derivative is 0 or undefined: AP needs a
#   surrogate to be trained.
# * A sigmoid everywhere (SmoothAP) gives contradictory gradients on positives, vanishing
#   gradients once a score difference exceeds a few $\tau$, and no bound on $\mathcal{L}_\text{AP}$.
# * SupAP keeps the exact step for $\text{rank}^+$ and uses $H^- \ge H$ (Eq. 4) for
#   $\text{rank}^-$: an upper bound of $\mathcal{L}_\text{AP}$ with gradient until the ranking
#   is correct (plus a margin set by $\tau$). $\delta = \tau\ln\frac{1-\varepsilon}{\varepsilon}$
#   starts the linear part where the sigmoid saturates.
#
# ## Exercises
#
# 1. With the gradient-flow sliders, find scores where $\mathcal{L}_\text{SmoothAP} > \mathcal{L}_\text{AP}$
#    (hint: rank⁺ can be under-estimated too). Which term of Eq. 3 does the sigmoid over- or
#    under-estimate in your example?
# 2. Show numerically (call `toy_gradients(..., rho=0.0)`) that SupAP with $\rho = 0$ loses its
#    gradient on the negative. What is the smallest $\rho$ for which the negative's gradient is
#    larger than SmoothAP's largest positive gradient?
# 3. Derive $\partial\mathcal{L}_\text{SmoothAP}/\partial s_1 = -\partial\mathcal{L}_\text{SmoothAP}/\partial s_2$
#    on the toy (supplementary A.1 i) and check your formula against `toy_gradients()`.
