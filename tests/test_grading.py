"""lab.grading: the checks accept right implementations and explain wrong ones in the student's terms."""
from __future__ import annotations

import importlib.util
import re
from functools import partial
from pathlib import Path

import pytest
import torch

from lab import grading
from lab.grading import CHECKS, TOPICS, get_case

from . import grading_students as st
from . import reference as ref

ROOT = Path(__file__).resolve().parents[1]


def load(path: str):
    spec = importlib.util.spec_from_file_location(Path(path).stem + "_solution", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


A1 = load("assignments/01_rank_surrogates_and_sup_ap/surrogates.py")
A2 = load("assignments/02_decomposability_and_calibration/decomposability.py")
A3 = load("assignments/03_histogram_losses_and_bin_width/histograms.py")


def fail_message(check: str, fn) -> str:
    with pytest.raises(AssertionError) as info:
        CHECKS[check](fn, verbose=False)
    return str(info.value)


# ----------------------------------------------------------------- right implementations pass
def _per_query(loop):
    """tests/reference.py's one-query loops as a (Q,) student function. They run in float64: their
    hand-written sigmoid 1 / (1 + exp(-x / tau)) overflows in float32 and its gradient is NaN."""
    def fn(scores, targets, mask, *params):
        s = scores.double()
        rows = [loop(s[q], targets[q].tolist(), mask[q].tolist(), *params) for q in range(len(s))]
        out = torch.stack([torch.as_tensor(float("nan") if r is None else r, dtype=s.dtype) for r in rows])
        return out.to(scores.dtype)
    return fn


def h_minus_by_parts(t, tau, rho, delta):
    """H⁻ as a sum of pieces instead of nested torch.where: sigmoid + jump + hinge, the sigmoid swapped
    for its value at delta beyond delta."""
    sig = torch.special.expit(t / tau)
    beyond = (t > delta).to(t.dtype)
    sig_delta = torch.special.expit(torch.tensor(delta / tau, dtype=t.dtype))
    return sig + 0.5 * (t >= 0).to(t.dtype) + rho * torch.relu(t - delta) + beyond * (sig_delta - sig)


RIGHT = [(f"check_{name}", topic.reference, f"lab-{name}") for name, topic in TOPICS.items()] + [
    ("check_h_minus", h_minus_by_parts, "by-parts-h_minus"),
    ("check_average_precision", A1.average_precision, "solution-ap"),
    ("check_h_minus", A1.h_minus, "solution-h_minus"),
    ("check_smooth_ap", A1.smooth_ap, "solution-smooth_ap"),
    ("check_sup_ap", A1.sup_ap, "solution-sup_ap"),
    ("check_map_at_r", A2.map_at_r, "solution-map_at_r"),
    ("check_recall_at_k", A2.recall_at_k, "solution-recall_at_k"),
    ("check_calibration", A2.calibration, "solution-calibration"),
    ("check_soft_histogram", A3.soft_histogram, "solution-soft_histogram"),
    ("check_fast_ap", A3.fast_ap, "solution-fast_ap"),
    ("check_average_precision", _per_query(ref.ap_loop), "loops-ap"),
    ("check_sup_ap", _per_query(ref.sup_ap_loop), "loops-sup_ap"),
    ("check_calibration", _per_query(ref.calibration_loop), "loops-calibration"),
] + [(f"check_{name}", getattr(st, name), f"student-{name}") for name in TOPICS]


@pytest.mark.parametrize("check, fn", [r[:2] for r in RIGHT], ids=[r[2] for r in RIGHT])
def test_right_implementations_pass(check, fn):
    result = CHECKS[check](fn, verbose=False)
    assert result.cases >= 6 and result.topic == check.removeprefix("check_")


@pytest.mark.parametrize("seed", [1, 2])
def test_right_implementations_pass_other_seeds(seed):
    for check, fn in [("check_sup_ap", A1.sup_ap), ("check_fast_ap", A3.fast_ap), ("check_map_at_r", A2.map_at_r)]:
        CHECKS[check](fn, seed=seed, verbose=False)


def test_success_is_reported(capsys):
    result = grading.check_h_minus(A1.h_minus)
    assert "check_h_minus passed" in capsys.readouterr().out
    assert result.gradients and "gradients included" in str(result)


# ---------------------------------------------------------- wrong implementations, right messages
W = partial
WRONG = [
    # (check, student function, phrase the message must contain)
    ("h_minus", W(st.h_minus, bug="no_jump"), "must jump by +0.5"),
    ("h_minus", W(st.h_minus, bug="sigmoid"), "plain sigmoid"),
    ("h_minus", W(st.h_minus, bug="no_temperature"), "forgot the temperature"),
    ("h_minus", W(st.h_minus, bug="tie_left"), "t = 0 exactly"),
    ("h_minus", W(st.h_minus, bug="linear_one"), "linear branch must start"),
    ("h_minus", W(st.h_minus, bug="linear_from_zero"), "you used ρ·t"),
    ("h_minus", W(st.h_minus, bug="step"), "exact step H(t): it has no gradient"),
    ("h_minus", W(st.h_minus, bug="detached"), "has no gradient"),
    ("h_minus", W(st.h_minus, bug="numpy"), "returned a numpy array"),
    ("h_minus", W(st.h_minus, bug="float64"), "keep the input dtype"),
    ("smooth_ap", W(st.smooth_ap, bug="query_as_positive"), "counts the query as its own positive"),
    ("smooth_ap", W(st.smooth_ap, bug="forgot_mask"), "you forgot the mask"),
    ("smooth_ap", W(st.smooth_ap, bug="no_temperature"), "forgot the temperature"),
    ("smooth_ap", W(st.smooth_ap, bug="off_by_one"), "ranks are off by one"),
    ("smooth_ap", W(st.smooth_ap, bug="nan_no_positive"), "NaN when a query has no positive"),
    ("smooth_ap", W(st.smooth_ap, bug="returns_ap"), "you return the AP, not the loss"),
    ("smooth_ap", W(st.smooth_ap, bug="mean"), "a mean over queries?"),
    ("smooth_ap", W(st.smooth_ap, bug="exact_rank_pos"), "exact step for rank⁺"),
    ("sup_ap", W(st.sup_ap, bug="sigmoid_rank_pos"), "rank⁺ should use the exact step"),
    ("sup_ap", W(st.sup_ap, bug="strict"), "use s_j ≥ s_k in rank⁺"),
    ("sup_ap", W(st.sup_ap, bug="sigmoid_rank_neg"), "rank⁻ must use H⁻"),
    ("sup_ap", W(st.sup_ap, bug="query_as_positive"), "counts the query as its own positive"),
    ("sup_ap", W(st.sup_ap, bug="forgot_mask"), "you forgot the mask"),
    ("sup_ap", W(st.sup_ap, bug="neg_all"), "negatives only"),
    ("sup_ap", W(st.sup_ap, bug="divide_by_n"), "wrong normalisation"),
    ("sup_ap", W(st.sup_ap, bug="off_by_one"), "ranks are off by one"),
    ("sup_ap", W(st.sup_ap, bug="nan_no_positive"), "NaN when a query has no positive"),
    ("sup_ap", W(st.sup_ap, h_bug="no_jump"), "Fix h_minus first"),
    ("sup_ap", W(st.sup_ap, bug="detached"), "has no gradient"),
    ("sup_ap", W(st.sup_ap, bug="float"), "returned a Python float"),
    ("sup_ap", W(st.sup_ap, bug="crash"), "raised ValueError: shapes do not match"),
    ("sup_ap", W(st.sup_ap, bug="where_nan_grad"), "gradient contains NaN"),
    ("calibration", W(st.calibration, bug="swapped"), "alpha and beta are swapped"),
    ("calibration", W(st.calibration, bug="sum"), "averages"),
    ("calibration", W(st.calibration, bug="no_hinge"), "is a hinge"),
    ("calibration", W(st.calibration, bug="forgot_mask"), "you forgot the mask"),
    ("calibration", W(st.calibration, bug="query_as_positive"), "counts the query as its own positive"),
    ("calibration", W(st.calibration, bug="nan_no_negative"), "NaN when a query has no negative"),
    ("calibration", W(st.calibration, bug="nonzero_no_positive"), "a query without positive must get loss 0"),
    ("soft_histogram", W(st.soft_histogram, bug="no_clamp"), "clamp it at 0"),
    ("soft_histogram", W(st.soft_histogram, bug="width_double"), "you divided by 2Δ"),
    ("soft_histogram", W(st.soft_histogram, bug="ignores_weights"), "forgot the weights"),
    ("soft_histogram", W(st.soft_histogram, bug="hard"), "hard binning"),
    ("soft_histogram", W(st.soft_histogram, bug="transposed"), "histogram is transposed"),
    ("fast_ap", W(st.fast_ap, bug="nan_empty_prefix"), "NaN when the first bins are empty"),
    ("fast_ap", W(st.fast_ap, bug="raw_scores"), "squared distance d = 2 − 2s"),
    ("fast_ap", W(st.fast_ap, bug="num_bins_centres"), "num_bins + 1 centres"),
    ("fast_ap", W(st.fast_ap, bug="far_first"), "from the closest bin"),
    ("fast_ap", W(st.fast_ap, bug="divide_by_n"), "wrong normalisation"),
    ("fast_ap", W(st.fast_ap, bug="query_as_positive"), "counts the query as its own positive"),
    ("fast_ap", W(st.fast_ap, hist_bug="no_clamp"), "Fix soft_histogram first"),
    ("average_precision", W(st.average_precision, bug="query_as_positive"), "counts the query as its own positive"),
    ("average_precision", W(st.average_precision, bug="forgot_mask"), "you forgot the mask"),
    ("average_precision", W(st.average_precision, bug="argsort"), "tied scores"),
    ("average_precision", W(st.average_precision, bug="zero_based"), "ranks are off by one"),
    ("average_precision", W(st.average_precision, bug="zero_no_positive"), "return NaN"),
    ("average_precision", W(st.average_precision, bug="divide_by_n"), "wrong normalisation"),
    ("average_precision", W(st.average_precision, bug="returns_loss"), "you return 1 − AP"),
    ("average_precision", W(st.average_precision, bug="inplace"), "modified its input `scores` in place"),
    ("map_at_r", W(st.map_at_r, bug="divide_by_hits"), "mAP@R divides by R"),
    ("map_at_r", W(st.map_at_r, bug="full_ap"), "that is the full AP"),
    ("map_at_r", W(st.map_at_r, bug="cutoff_plus_one"), "off by one"),
    ("map_at_r", W(st.map_at_r, bug="forgot_mask"), "you forgot the mask"),
    ("recall_at_k", W(st.recall_at_k, bug="fraction"), "is a hit rate"),
    ("recall_at_k", W(st.recall_at_k, bug="query_as_positive"), "counts the query as its own positive"),
    ("recall_at_k", W(st.recall_at_k, bug="top_k_plus_one"), "off by one"),
    ("recall_at_k", W(st.recall_at_k, bug="topk"), "tied scores"),
    # The diagnoses of issue 15: each message is triggered by a student-style implementation.
    ("h_minus", W(st.h_minus, bug="manual_sigmoid"), "an exp overflows to inf"),
    ("h_minus", W(st.h_minus, bug="slope_one"), "Yours has slope 1 (ρ is missing)"),
    ("h_minus", W(st.h_minus, bug="tau_multiplied"), "you multiplied by the temperature"),
    ("h_minus", W(st.h_minus, bug="delta_ignored"), "you ignored δ"),
    ("h_minus", W(st.h_minus, bug="no_linear"), "beyond δ it continues linearly"),
    ("smooth_ap", W(st.smooth_ap, bug="tau_multiplied"), "you multiplied by the temperature"),
    ("smooth_ap", W(st.smooth_ap, bug="rank_without_one"), "your rank(k) lacks its 1"),
    ("smooth_ap", W(st.smooth_ap, bug="float32"), "only to float32 precision on the float64 cases"),
    ("sup_ap", W(st.sup_ap, bug="step_rank_neg"), "not the exact step H"),
    ("sup_ap", W(st.sup_ap, bug="rank_without_one"), "your rank(k) lacks its 1"),
    ("sup_ap", W(st.sup_ap, bug="float32"), "only to float32 precision on the float64 cases"),
    ("sup_ap", W(st.sup_ap, h_bug="slope_one"), "Yours has slope 1 (ρ is missing)"),
    ("sup_ap", W(st.sup_ap, h_bug="tau_multiplied"), "you multiplied by the temperature"),
    ("sup_ap", W(st.sup_ap, h_bug="delta_ignored"), "you ignored δ"),
    ("calibration", W(st.calibration, bug="hinge_sign_pos"), "the positives' hinge points the wrong way"),
    ("calibration", W(st.calibration, bug="hinge_sign_neg"), "the negatives' hinge points the wrong way"),
    ("fast_ap", W(st.fast_ap, bug="no_norm"), "you forgot the 1/N⁺"),
    ("fast_ap", W(st.fast_ap, bug="num_bins_step"), "num_bins + 1 centres"),
    ("fast_ap", W(st.fast_ap, bug="float32"), "only to float32 precision on the float64 cases"),
    ("average_precision", W(st.average_precision, bug="no_one"), "your ranks lack their 1"),
    ("average_precision", W(st.average_precision, bug="first_positive"), "you only count the first positive"),
]


def _id(item) -> str:
    kw = item[1].keywords
    return f"{item[0]}-{kw.get('bug') or kw.get('h_bug') or kw.get('hist_bug')}"


@pytest.mark.parametrize("topic, fn, phrase", WRONG, ids=[_id(w) for w in WRONG])
def test_wrong_implementation_fails_with_the_intended_message(topic, fn, phrase):
    message = fail_message(f"check_{topic}", fn)
    assert phrase in message, message
    # Every message names a case the student can rebuild.
    name = re.search(r"case '([\w.-]+)'", message).group(1)
    assert get_case(topic, name).name == name and "get_case(" in message


def test_message_numbers_reproduce_with_get_case():
    fn = W(st.map_at_r, bug="divide_by_hits")
    message = fail_message("check_map_at_r", fn)
    name = re.search(r"case '([\w.-]+)'", message).group(1)
    query, expected, got = re.search(r"query (\d+): expected ([\d.e-]+), got ([\d.e-]+)", message).groups()
    case = get_case("map_at_r", name)
    assert float(fn(*case.args)[int(query)]) == pytest.approx(float(got), rel=1e-5)
    assert float(case.expected()[int(query)]) == pytest.approx(float(expected), rel=1e-5)


def test_crash_message_points_at_the_students_line():
    message = fail_message("check_sup_ap", W(st.sup_ap, bug="crash"))
    assert "grading_students.py, line" in message and 'raise ValueError("shapes do not match")' in message


def test_not_implemented_yet_is_said_plainly():
    def sup_ap(scores, targets, mask, tau, rho, delta):
        raise NotImplementedError("TODO: sup_ap")

    with pytest.raises(NotImplementedError, match="sup_ap: it is not implemented yet"):
        grading.check_sup_ap(sup_ap)
    assert "not implemented yet" in fail_message("check_sup_ap", sup_ap)  # also an AssertionError


@pytest.mark.parametrize("returned, phrase", [
    (None, "returned a NoneType"), ([0.1, 0.2], "returned a list"), ("0.5", "returned a str"),
    (torch.tensor([1.0, 0.0, 0.5]), "returned shape (3,)"), (torch.zeros(2, 6), "one value per item"),
])
def test_odd_return_values_get_clear_messages(returned, phrase):
    def fn(scores, targets, mask):
        return returned

    assert phrase in fail_message("check_average_precision", fn)


def test_integer_output_is_rejected_with_the_dtype_named():
    def fn(scores, targets, mask, k):
        return (targets & mask).any(1).long()

    assert "dtype torch.int64" in fail_message("check_recall_at_k", fn)


def test_wrong_signature_is_explained():
    assert "calls your function positionally as sup_ap(scores, targets, mask, tau, rho, delta)" in \
        fail_message("check_sup_ap", lambda scores, targets, mask: scores.sum(1))


def test_not_a_function():
    with pytest.raises(AssertionError, match="expects your function"):
        grading.check_fast_ap(None)


def test_unknown_mistake_falls_back_to_expected_vs_got():
    def fn(scores, targets, mask, tau):  # an arbitrary wrong formula, in no catalogue
        return torch.sigmoid(scores).mean(1) * 0.37

    message = fail_message("check_smooth_ap", fn)
    assert "differs from the reference smooth_ap(scores, targets, mask, tau)" in message
    assert re.search(r"query \d+: expected [\d.]+, got [\d.]+", message)


# ------------------------------------------------------------------------------------ cases
def test_cases_cover_the_announced_situations():
    cs = grading.cases("sup_ap")
    assert {c.get("scores").dtype for c in cs} == {torch.float32, torch.float64}
    assert {c.get("scores").shape[0] for c in cs} >= {1, 2, 5, 12, 28}
    pos = [c.get("targets") & c.get("mask") for c in cs]
    assert any((~p.any(1)).any() for p in pos)  # queries without positive (single-sample class)
    assert any((p.sum(1) == 1).any() for p in pos)  # a single positive
    assert any(len(c.get("scores").unique()) < c.get("scores").numel() / 2 for c in cs)  # ties
    assert any(not c.get("mask").all() for c in cs) and any(c.get("mask").all() for c in cs)


def test_cases_are_reproducible_and_depend_on_the_seed():
    a, b, c = grading.cases("fast_ap", 0), grading.cases("fast_ap", 0), grading.cases("fast_ap", 1)
    assert all(torch.equal(x.get("scores"), y.get("scores")) for x, y in zip(a, b))
    assert not torch.equal(a[2].get("scores"), c[2].get("scores"))
    with pytest.raises(ValueError, match="case names look like"):
        get_case("fast_ap", "nonsense")
    with pytest.raises(ValueError, match="unknown topic"):
        grading.cases("nonsense")


def test_case_args_are_fresh_copies():
    case = get_case("sup_ap", "self-f32-s0")
    case.args[0].zero_()
    assert case.get("scores").abs().sum() > 0


# ------------------------------------------------------------- right values, wrong gradients
def _with_gradient_of(surrogate):
    """Right values (the solution's), gradient of ``surrogate`` (a straight-through construction)."""
    def sup_ap(scores, targets, mask, tau, rho, delta):
        right = A1.sup_ap(scores.detach(), targets, mask, tau, rho, delta)
        g = surrogate(scores, targets, mask, tau, rho, delta)
        return right + (g - g.detach())
    return sup_ap


@pytest.mark.parametrize("surrogate, phrase", [
    (lambda *a: -A1.sup_ap(*a), "would push a negative UP"),
    (lambda *a: 2 * A1.sup_ap(*a), "the gradient differs from the reference's"),
    (lambda s, *a: 0 * s.sum(1), "gradient is zero everywhere"),
], ids=["reversed", "doubled", "zero"])
def test_gradients_are_checked_beyond_the_values(surrogate, phrase):
    message = fail_message("check_sup_ap", _with_gradient_of(surrogate))
    assert phrase in message, message


def test_a_decreasing_step_surrogate_is_caught():
    def h_minus(t, tau, rho, delta):  # right values, but a gradient of the wrong sign on the linear branch
        right = A1.h_minus(t.detach(), tau, rho, delta)
        return right - (t - t.detach()) * (t.detach() > delta)

    assert "your H⁻ decreases at t =" in fail_message("check_h_minus", h_minus)
