"""Issue 14: each loss hyper-parameter declared once (lab.core.hparams) and read everywhere; no
accepted setting gives NaN or inf; the settings that used to (rho=1e39, tau=1e-300, ...) either
stay finite or are refused with their range."""
from __future__ import annotations

import inspect
import math
import warnings

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import lab.losses as L
import lab.losses.functional as LF
from lab.core.hparams import HParam
from lab.core.relevance import build_relevance
from lab.core.steps import default_delta, h_minus
from lab.dashboard.sliders import loss_sliders
from lab.metrics import average_precision
from lab.metrics.hierarchical import h_ap, ndcg

NUMERIC = (float, int)
NOT_HPARAMS = {"num_classes", "embed_dim", "chunk_size"}


def signature_defaults(fn) -> dict:
    return {n: p.default for n, p in inspect.signature(inspect.unwrap(fn)).parameters.items()
            if p.default is not inspect.Parameter.empty}


@pytest.mark.parametrize("name", sorted(L.LOSSES))
def test_class_and_function_defaults_are_the_declared_ones(name):
    cls = L.LOSSES[name]
    declared = cls.declared
    assert declared, f"{name} declares no hyper-parameter"
    ctor = {k: p.default for k, p in L.base.constructor_parameters(cls).items()}
    for key, hp in declared.items():
        assert ctor[key] == hp.default, f"{name}: constructor default of {key} is not the declared one"
    if cls.functional is not None:
        fn = signature_defaults(cls.functional)
        for key, hp in declared.items():
            if key in fn:
                assert fn[key] == hp.default, f"{name}: function default of {key} is not the declared one"


@pytest.mark.parametrize("name", sorted(L.LOSSES))
def test_every_numeric_constructor_argument_is_declared(name):
    cls = L.LOSSES[name]
    for key, p in L.base.constructor_parameters(cls).items():
        if p.annotation in NUMERIC and key not in NOT_HPARAMS:
            assert key in cls.declared, f"{name}.{key} is a number but has no declaration (range, meaning)"


@pytest.mark.parametrize("name", sorted(L.LOSSES))
def test_sliders_and_defaults_lie_inside_the_accepted_range(name):
    for hp in L.LOSSES[name].declared.values():
        assert hp.low <= hp.default <= hp.high
        assert hp.meaning and ("Eq." in hp.meaning or "et al." in hp.meaning or "AP" in hp.meaning)
        if hp.slider is not None:
            low, high = hp.slider
            assert hp.low <= low < high <= hp.high and low <= hp.default <= high
    # The dashboard reads the same declaration.
    sliders = loss_sliders(name)
    assert set(sliders) == set(L.LOSSES[name].declared.sliders)
    for key, spec in sliders.items():
        assert spec.value == L.LOSSES[name].declared[key].default


def test_a_value_outside_the_declared_range_names_range_and_meaning():
    with pytest.raises(ValueError,
                       match=r"rho must be a number in \[0, 1e\+06\] \(slope of H\^- .*Eq. 4\), got 1e\+39"):
        L.SupAP(rho=1e39)
    with pytest.raises(ValueError, match=r"rho must be a number in \[0, 1e\+06\]"):
        LF.sup_ap(torch.rand(3, 4), torch.rand(3, 4) > 0.5, rho=1e39)
    with pytest.raises(ValueError, match=r"tau must be a number in \[1e-06, 100\]"):
        L.SmoothAP(tau=1e-300)
    with pytest.raises(ValueError, match=r"tau must be a number in \[1e-06, 100\]"):
        default_delta(tau=1e308)
    with pytest.raises(ValueError, match=r"num_bins must be an integer in \[2, 10000\]"):
        L.FastAP(num_bins=2.5)
    with pytest.raises(ValueError, match=r"for loss 'roadmap', lam must be a number in \[0, 1\]"):
        L.check_loss_kwargs("roadmap", {"lam": "1.5"})
    assert L.check_loss_kwargs("roadmap", {"lam": "0.25", "tau": "1e-2"}) == {"lam": 0.25, "tau": 0.01}


def test_h_minus_refuses_what_would_overflow_and_stays_finite_at_the_edges():
    t = torch.linspace(-2, 2, 101, requires_grad=True)
    with pytest.raises(ValueError, match="rho must be"):
        h_minus(t, rho=1e39)
    out = h_minus(t, tau=1e-6, rho=1e6, delta=10.0) + h_minus(t, tau=100.0, rho=0.0, delta=0.0)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(t.grad).all()


def test_hap_alpha_is_the_new_name_of_the_h_ap_exponent():
    with pytest.warns(DeprecationWarning, match="'alpha' is now called 'hap_alpha'"):
        old = L.SupHAP(alpha=2.0)
    assert old.hap_alpha == 2.0 == old.alpha
    with pytest.warns(DeprecationWarning):
        assert L.build_loss("happier", num_classes=3, embed_dim=4, alpha=3.0).rank_loss.hap_alpha == 3.0
    with pytest.warns(DeprecationWarning):
        assert L.check_loss_kwargs("happier", {"alpha": "2"}) == {"hap_alpha": 2.0}
    with pytest.raises(ValueError, match="give 'hap_alpha' only"):
        L.SupHAP(alpha=2.0, hap_alpha=2.0)
    # ROADMAP's alpha stays the calibration threshold; no loss has both meanings.
    assert "alpha" in L.ROADMAP.declared and "hap_alpha" not in L.ROADMAP.declared
    assert "alpha" not in L.HAPPIER.declared and "hap_alpha" in L.HAPPIER.declared


def test_scores_beyond_the_loss_limit_are_refused_but_metrics_take_any_finite_score():
    scores = torch.tensor([[3e38, -3e38, 1.0, 0.0]])
    targets = torch.tensor([[True, False, True, False]])
    for fn in (LF.sup_ap, LF.smooth_ap, LF.roadmap):
        with pytest.raises(ValueError, match=r"scores must lie in \[-1e\+06, 1e\+06\] for a rank loss"):
            fn(scores, targets)
    small = torch.tensor([[0.3, -0.3, 1e-8, 0.0]])
    # Metrics only compare scores: any finite scale gives the same AP.
    assert torch.equal(average_precision(scores, targets), average_precision(small, targets))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_relevance_near_the_float_maximum_gives_the_same_graded_values(dtype):
    g = torch.Generator().manual_seed(0)
    labels = torch.stack([torch.arange(12) % 4, torch.arange(12) % 2], 1)
    mask = ~torch.eye(12, dtype=torch.bool)
    rel = build_relevance(labels, labels, mask, "hap").to(dtype)
    scores = torch.randn(12, 12, generator=g, dtype=dtype).tanh()
    big = torch.finfo(dtype).max / 2
    huge = rel / rel.amax(1, keepdim=True) * big
    for fn in (h_ap, ndcg):
        torch.testing.assert_close(fn(scores, huge, mask), fn(scores, rel, mask))
    for fn in (LF.sup_hap, LF.sup_ndcg):
        s = scores.clone().requires_grad_()
        value = fn(s, huge, mask=mask)
        value.backward()
        assert torch.isfinite(value) and torch.isfinite(s.grad).all()
        torch.testing.assert_close(value, fn(scores, rel, mask=mask))


# ---------------------------------------------------------------- property test over the ranges
def values_of(hp: HParam):
    """Both ends of the accepted range, the default, and values in between (log-spaced for wide ranges)."""
    inner = (st.floats(math.log10(hp.low), math.log10(hp.high)).map(lambda e: 10 ** e) if hp.low > 0
             else st.floats(hp.low, hp.high))
    if hp.kind is int:
        return (st.sampled_from([int(hp.low), int(hp.high), hp.default])
                | st.integers(int(hp.low), min(int(hp.high), 200)))
    return st.sampled_from([hp.low, hp.high, hp.default]) | inner.map(lambda v: min(max(v, hp.low), hp.high))


@st.composite
def loss_settings(draw):
    name = draw(st.sampled_from(sorted(L.LOSSES)))
    hparams = {key: draw(values_of(hp)) for key, hp in L.LOSSES[name].declared.items()}
    if "alpha" in hparams and "beta" in hparams:
        assume(hparams["alpha"] > hparams["beta"])  # the calibration thresholds' own rule
    return name, hparams


@st.composite
def batches(draw):
    classes = draw(st.integers(1, 4))
    per_class = draw(st.integers(2, 4))
    labels = torch.arange(classes).repeat_interleave(per_class)
    kind = draw(st.sampled_from(["random", "tied", "duplicated", "one point"]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    emb = torch.randn(len(labels), 6, generator=g)
    if kind == "tied":  # scores tie exactly: coordinates on a coarse grid
        emb = emb.round()
        emb[emb.abs().sum(1) == 0] = 1.0
    elif kind == "duplicated":  # each class collapsed on one point
        emb = emb[labels * per_class]
    elif kind == "one point":
        emb = emb[:1].expand_as(emb).clone()
    return emb, labels, kind


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(loss_settings(), batches(), st.sampled_from([torch.float32, torch.float64]))
def test_every_accepted_setting_gives_finite_loss_and_gradients(setting, batch, dtype):
    name, hparams = setting
    emb, labels, kind = batch
    emb = emb.to(dtype).requires_grad_()
    loss_fn = L.build_loss(name, num_classes=int(labels.max()) + 1, embed_dim=emb.shape[1], **hparams).to(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # one class: "no query has a positive"
        value = loss_fn(emb, labels)
    value.backward()
    assert torch.isfinite(value), f"{name} {hparams} on {kind} {dtype}: loss {value}"
    assert torch.isfinite(emb.grad).all(), f"{name} {hparams} on {kind} {dtype}: non-finite gradient"
    for p in loss_fn.parameters():
        assert p.grad is None or torch.isfinite(p.grad).all()
