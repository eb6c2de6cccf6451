"""Step functions and their smooth surrogates (ROADMAP Eq. 3-4, SupRank Eq. 3-5).

Every rank loss in the lab counts, for a positive k of a query, how many items j score
above it: ``rank(k) = 1 + sum_j H(s_j - s_k)``. The functions below are the choices of H.
They take ``t = s_j - s_k`` (any shape) and return a tensor of the same shape.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from .hparams import DELTA, RHO, TAU


def check_h_minus(tau: float, rho: float, delta: float) -> None:
    """Validate the hyper-parameters of H^- against their declarations (lab.core.hparams)."""
    TAU.check(tau)
    RHO.check(rho)
    DELTA.check(delta)


def heaviside(t: Tensor) -> Tensor:
    """Exact step H(t) = 1 if t >= 0 else 0 (ROADMAP Eq. 3). No gradient.

    H(0) = 1: a tie counts as ranked above, so ranks are pessimistic and the resulting
    AP equals scikit-learn's ``average_precision_score`` even with tied scores.
    """
    return (t >= 0).to(t.dtype if t.is_floating_point() else torch.float32)


def sigmoid(t: Tensor, tau: float = TAU.default) -> Tensor:
    """Temperature sigmoid sigma(t / tau), SmoothAP's surrogate of H (Brown et al.)."""
    TAU.check(tau)
    return torch.sigmoid(t / tau)


def default_delta(tau: float = TAU.default, eps: float = 1e-2) -> float:
    """delta = tau * ln((1 - eps) / eps): where sigma(t/tau)'s slope falls below eps/tau.

    ROADMAP supp. A.3 (Fig. 11): tau = 0.01, eps = 0.01 gives delta ~= 0.046, rounded to 0.05.
    """
    TAU.check(tau)
    if not 0 < eps < 0.5:
        raise ValueError(f"eps must be in (0, 0.5), got {eps!r}")
    return tau * math.log((1 - eps) / eps)


def h_minus(t: Tensor, tau: float = TAU.default, rho: float = RHO.default, delta: float = DELTA.default) -> Tensor:
    """SupRank's H^- (ROADMAP Eq. 4, SupRank Eq. 4), the surrogate used for rank^-.

    sigma(t/tau) for t < 0; sigma(t/tau) + 0.5 on [0, delta]; rho * (t - delta) +
    sigma(delta/tau) + 0.5 beyond delta. It is >= heaviside(t) everywhere (so Sup-AP
    upper-bounds the AP loss) and keeps slope rho where the sigmoid saturates, so a
    negative ranked far above a positive still receives gradient.
    """
    check_h_minus(tau, rho, delta)
    sig = torch.sigmoid(t / tau)
    sig_delta = 1.0 / (1.0 + math.exp(-delta / tau))
    # relu keeps the unused linear branch from contributing gradient where t <= delta. (relu, not
    # clamp_min: clamp_min's slope at 0 was 1 in torch 2.11 and is 0 in 2.14, pytorch/pytorch#184572;
    # relu's is 0 on every version, as the engine's hand-written slopes and the fused kernels have it.)
    linear = rho * torch.relu(t - delta) + sig_delta + 0.5
    return torch.where(t < 0, sig, torch.where(t <= delta, sig + 0.5, linear))


def soft_histogram(values: Tensor, centres: Tensor, width: float, weights: Tensor) -> Tensor:
    """Weighted soft bin counts with the triangular kernel max(0, 1 - |v - c| / width).

    values, weights: (Q, N); centres: (L,). Returns (Q, L). With width = the spacing of the
    centres every value in range splits a total weight of 1 between its two nearest bins
    (FastAP supp. Eq. 22-23, Revaud et al. supp. Eq. 7).
    """
    kernel = torch.relu(1 - (values[..., None] - centres).abs() / width)  # (Q, N, L); slope 0 at the kinks
    return torch.einsum("qnl,qn->ql", kernel, weights.to(kernel.dtype))


def nearest_bins(values: Tensor, centres: Tensor) -> Tensor:
    """Index of the evenly spaced centre nearest to each value, clamped to the range -> (Q, N) int64.

    A value beyond the range has weight in the end bin at most, so clamping its nearest centre loses
    nothing. No gradient: the index only says where the kernel weights go."""
    step = centres[1] - centres[0]
    return torch.round((values.detach() - centres[0]) / step).clamp_(0, len(centres) - 1).long()


def neighbour_bin(values: Tensor, nearest: Tensor, offset: int, centres: Tensor,
                  width: float) -> tuple[Tensor, Tensor, Tensor]:
    """(index, weight, centre), all (Q, N): the bin ``offset`` (-1, 0 or 1) away from each value's
    nearest centre, its triangular-kernel weight max(0, 1 - |v - c| / width) and its centre.

    A bin outside the range gets the centre -inf / +inf (ordered as the centres): weight 1 - inf,
    clamped to 0, with no gradient. Its index is clamped into the range, where it adds 0.
    """
    # Centres padded at both ends, so that nearest + offset + 1 always indexes into them.
    far = torch.tensor([float("inf")], dtype=centres.dtype, device=centres.device) * (centres[1] - centres[0]).sign()
    padded = torch.cat([-far, centres, far])
    shifted = nearest + (offset + 1)  # in ``padded``
    centre = padded.index_select(0, shifted.flatten()).view(shifted.shape)
    weight = torch.relu(1 - (values - centre).abs() / width)
    return (shifted - 1).clamp_(0, len(centres) - 1), weight, centre


NEIGHBOURS = (-1, 0, 1)


def kernel_bins(values: Tensor, centres: Tensor, width: float) -> tuple[Tensor, Tensor]:
    """The bins around each value and its triangular-kernel weight there. values (Q, N) ->
    (index, weight), both (Q, 3, N): for each value its nearest centre and both neighbours.

    ``soft_histogram``'s kernel without its zeros. With width = the spacing of the (evenly spaced)
    centres, a value has weight in its two nearest bins only, so a histogram is a scatter of a few
    weights per value, O(N) instead of O(N * L). The third bin keeps it exact: for a value on a
    centre, a neighbour's weight 1 - |v - c| / width may round to a tiny positive number, with a
    gradient, as in ``soft_histogram``. The losses take the three bins one at a time
    (``neighbour_bin``), which keeps their temporaries at (Q, N).
    """
    nearest = nearest_bins(values, centres)
    parts = [neighbour_bin(values, nearest, offset, centres, width)[:2] for offset in NEIGHBOURS]
    return torch.stack([index for index, _ in parts], 1), torch.stack([weight for _, weight in parts], 1)


def histogram_ap_from_counts(h_pos: Tensor, h_all: Tensor, num_pos: Tensor) -> Tensor:
    """(1/N+) sum_l H+_l h+_l / H_l -> (Q,) from soft counts h+, h (Q, L), bins ordered best-first."""
    # An empty prefix has H = H+ = h+ = 0: the term is 0, and clamp keeps its gradient finite.
    terms = h_pos.cumsum(-1) * h_pos / h_all.cumsum(-1).clamp_min(1e-12)
    return terms.sum(-1) / num_pos.clamp_min(1).to(terms.dtype)


def histogram_ap(values: Tensor, centres: Tensor, width: float, pos: Tensor, valid: Tensor) -> Tensor:
    """AP from soft histograms, bins ordered best-first: (1/N+) sum_l H+_l h+_l / H_l -> (Q,).

    h+/h: soft counts of positives / of all valid items per bin; H+/H their cumulative sums
    (FastAP Eq. 14; Revaud's AP_Q, Eq. 1-3 of the supplementary, is the same expression).
    """
    h_pos = soft_histogram(values, centres, width, pos)
    h_all = soft_histogram(values, centres, width, valid)
    return histogram_ap_from_counts(h_pos, h_all, pos.sum(-1))


STEPS = {"heaviside": heaviside, "sigmoid": sigmoid, "h_minus": h_minus}
