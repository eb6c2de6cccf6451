"""Run a student function on every case, compare with the reference, explain the first failure.

Order of the checks: it runs and returns a tensor of the right shape and dtype (every case)
-> values match the reference (every case) -> gradients exist and are finite -> gradients
point the right way -> gradients match the reference (float64 cases without ties or kinks).
A value mismatch is explained by the catalogue of known mistakes when one of them
reproduces the student's output, else by structural hints, else by expected vs got.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Optional

import torch
from torch import Tensor

from .cases import Case
from .feedback import (CheckFailure, CheckResult, NotImplementedYet, close, crash_hint, fmt, fn_name,
                       student_frame)
from .gradient_checks import GradientChecks
from .topic import Mistake, Topic


class CheckRunner(GradientChecks):
    """Calls the student's function on cases and turns every problem into a CheckFailure."""

    def __init__(self, topic: Topic, fn: Callable, seed: int) -> None:
        self.topic, self.fn, self.seed = topic, fn, seed
        self.name = fn_name(fn)
        self.cases = topic.cases(seed)

    def fail(self, case: Optional[Case], what: str, detail: str = "", error: type = CheckFailure) -> None:
        __tracebackhide__ = True  # pytest and IPython then show the message, not our frames
        text = f"{self.name} is wrong on case {case.name!r}: {what}" if case else f"{self.name}: {what}"
        if case is not None:
            text += f"\n\nCase {case.name!r}: {case.summary()}."
        if detail:
            text += f"\n{detail}"
        if case is not None:
            text += f"\n\nReproduce it:\n{case.reproduce(self.name)}"
        error = error(text)
        error.__suppress_context__ = True  # the student's own traceback is summarised in the message
        raise error

    # ---------------------------------------------------------------- one call, validated
    def call(self, case: Case, fn: Optional[Callable] = None, grad: bool = False) -> tuple[Any, tuple]:
        """Run ``fn`` (default: the student's) on fresh copies of the case's arguments."""
        args = list(case.args)
        if grad:
            args[case.diff_arg] = args[case.diff_arg].requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return (fn or self.fn)(*args), tuple(args)

    def student(self, case: Case, grad: bool = False) -> tuple[Tensor, tuple]:
        __tracebackhide__ = True
        try:
            out, args = self.call(case, grad=grad)
        except NotImplementedError as exc:  # a TODO left: no case details, just what to do
            where = student_frame(exc)[0]
            self.fail(None, f"it is not implemented yet (it raises NotImplementedError: {exc}).",
                      f"Write it{' (' + where + ')' if where else ''}, then run this check again.", NotImplementedYet)
        except Exception as exc:  # the student's code crashed: say where, in their file
            where, code = student_frame(exc)
            self.fail(case, f"it raised {type(exc).__name__}: {exc}",
                      (f"  at {where}: {code}" if where else "") + crash_hint(exc, self.topic.signature))
        for name, before, after in zip(case.arg_names, case.values, args):
            if isinstance(before, Tensor) and not torch.equal(before, after.detach()):
                self.fail(case, f"it modified its input `{name}` in place. Work on new tensors "
                                f"(e.g. {name}.clone(), torch.where, masked_fill) — the caller's tensors must not "
                                "change.")
        self.validate(case, out)
        return out, args

    def expected_shape(self, case: Case) -> tuple[int, ...]:
        first = case.values[0]
        if self.topic.output == "elementwise":
            return tuple(first.shape)
        if self.topic.output == "histogram":
            return (first.shape[0], case.get("centres").shape[0])
        return (first.shape[0],)

    def validate(self, case: Case, out: Any) -> None:
        __tracebackhide__ = True
        shape = self.expected_shape(case)
        want = f"a torch.Tensor of shape {shape} ({self.topic.returns})"
        if isinstance(out, (float, int, bool)):
            self.fail(case, f"it returned a Python {type(out).__name__} ({out!r}); it must return {want}. "
                            "Keep the result as a tensor (no .item() / float()) so gradients can flow.")
        if not isinstance(out, Tensor):
            kind = "a numpy array" if type(out).__module__.startswith("numpy") else f"a {type(out).__name__}"
            self.fail(case, f"it returned {kind}; it must return {want}. Compute in torch from start to end "
                            "(numpy cuts the autograd graph).")
        if tuple(out.shape) != shape:
            hint = ""
            if out.dim() == 0 and self.topic.output == "per_query":
                hint = " You returned a single number (a mean over queries?): return one value per query."
            elif self.topic.output == "histogram" and tuple(out.shape) == shape[::-1]:
                hint = " Your histogram is transposed: one row per query, one column per bin."
            elif out.numel() == int(torch.tensor(shape).prod()):
                hint = " The number of entries is right: squeeze/reshape your result."
            elif self.topic.output == "per_query" and tuple(out.shape) == tuple(case.values[0].shape):
                hint = " You returned one value per item: reduce over the items of each query."
            self.fail(case, f"it returned shape {tuple(out.shape)}, expected {shape}.{hint}")
        if not out.is_floating_point():
            why = "NaN marks a query without positive" if self.topic.metric else "losses are real numbers"
            self.fail(case, f"it returned dtype {out.dtype}; return floating-point values ({why}).")

    # -------------------------------------------------------------------------- values
    def check_values(self) -> None:
        __tracebackhide__ = True
        outputs = {c.name: self.student(c)[0].detach() for c in self.cases}
        self.expected = {c.name: self.call(c, self.topic.reference)[0].detach() for c in self.cases}
        for case in self.cases:
            expected = self.expected[case.name]
            ok = close(outputs[case.name], expected, expected.dtype)
            if not ok.all():
                self.explain(case, outputs, expected, ok)
        for case in self.cases:  # after the values: a conceptual mistake matters more than a dtype
            dtype, got = case.values[0].dtype, outputs[case.name].dtype
            if got != dtype:
                self.fail(case, f"it returned dtype {got} for {dtype} inputs: keep the input dtype (create "
                                "constants with dtype=scores.dtype; integer counts divided by integers give "
                                "float32; avoid numpy and torch.tensor(..., dtype=torch.float64)).")

    def explain(self, case: Case, outputs: dict[str, Tensor], expected: Tensor, ok: Tensor) -> None:
        __tracebackhide__ = True
        got = outputs[case.name]
        index = tuple(int(i) for i in (~ok).nonzero()[0])
        if self.topic.output == "per_query":
            at = f"query {index[0]}"
        elif self.topic.output == "histogram":
            at = f"query {index[0]}, bin {index[1]}"
        else:
            at = f"index {list(index)} (t = {fmt(case.values[0][index])})"
        numbers = f"  {at}: expected {fmt(expected[index])}, got {fmt(got[index])}"
        bad = int((~ok).sum())
        numbers += f" ({bad} of {ok.numel()} entries differ)"
        mistake, matched = self.diagnose(case, outputs, expected)
        if mistake is not None:
            tail = f"Your output reproduces this mistake on {matched} of {len(self.cases)} cases."
            self.fail(case, mistake.message, f"{numbers}\n{tail}")
        self.fail(case, self.hint(case, outputs, got, expected, index), numbers)

    def diagnose(self, case: Case, outputs: dict[str, Tensor], expected: Tensor) -> tuple[Optional[Mistake], int]:
        """The known mistake that reproduces the student's output on this case (and on most others)."""
        best, best_count = None, 0
        for mistake in self.topic.mistakes:
            try:
                out = self.call(case, mistake.fn)[0].detach()
                if not (close(out, outputs[case.name], out.dtype).all() and not close(out, expected, out.dtype).all()):
                    continue
                count = sum(bool(close(self.call(c, mistake.fn)[0].detach(), outputs[c.name], c.values[0].dtype).all())
                            for c in self.cases)
            except Exception:  # a variant that cannot run on this case explains nothing
                continue
            if count > best_count:
                best, best_count = mistake, count
        return best, best_count

    def hint(self, case: Case, outputs: dict[str, Tensor], got: Tensor, expected: Tensor, index: tuple) -> str:
        """A precise message when no known mistake matches."""
        q = index[0]
        if self.topic.output in ("per_query", "histogram") and "targets" in case.arg_names:
            pos = (case.get("targets") & case.get("mask"))[q]
            neg = (~case.get("targets") & case.get("mask"))[q]
            g, e = got[index], expected[index]
            if not torch.isfinite(g) and torch.isfinite(e):
                if not pos.any():
                    return f"the loss is NaN/inf when a query has no positive (query {q}): return 0 for it."
                if not neg.any():
                    return f"the output is NaN/inf when a query has no negative (query {q}): guard that division."
                return f"your output is {fmt(g)} at query {q}: a division by zero or a log/exp overflow?"
            if self.topic.metric and torch.isnan(e) and not torch.isnan(g):
                return f"query {q} has no positive: its value is undefined — return NaN (you returned {fmt(g)})."
            if not self.topic.metric and close(1 - got, expected, expected.dtype).all():
                return "you return 1 − (the expected value): the AP instead of the loss 1 − AP (or the reverse)?"
        if torch.isnan(got).any() and not torch.isnan(expected).any():
            return "your output contains NaN where the reference is finite."
        passes = {c.name: bool(close(outputs[c.name], self.expected[c.name], c.values[0].dtype).all())
                  for c in self.cases}
        failing = [c for c in self.cases if not passes[c.name]]
        if all(c.values[0].dtype == torch.float64 for c in failing) and \
                all(close(outputs[c.name], self.expected[c.name], torch.float32).all() for c in failing):
            how = (f"you return {got.dtype} for float64 inputs" if got.dtype != torch.float64
                   else "you compute in float32 somewhere and cast back")
            return (f"your values match the reference only to float32 precision on the float64 cases: {how}. Keep the "
                    "input dtype from start to end: no .float(); create tensors with dtype=scores.dtype "
                    "(torch.tensor, torch.linspace, torch.ones and torch.arange(...) / n default to float32).")
        if "mask" in case.arg_names:
            if all(c.name.startswith("ties-") for c in failing):
                return ("your values differ only on the cases with tied scores: the lab ranks ties pessimistically "
                        "(an item ties below every equal score: rank(k) counts every j with s_j ≥ s_k, H(0) = 1).")
            if all(not bool(c.get("mask").all()) for c in failing):
                return ("your values differ only on cases where some items are masked out: check how you apply the "
                        "mask (masked items are in no count: not positives, not negatives, not ranked).")
        return f"your output differs from the reference {self.topic.signature}."


def run_check(topic: Topic, fn: Callable, seed: int = 0, verbose: bool = True) -> CheckResult:
    """Check ``fn`` against ``topic``'s reference; raise an AssertionError that explains the first failure."""
    __tracebackhide__ = True
    if not callable(fn):
        raise CheckFailure(f"check_{topic.name} expects your function {topic.signature}, "
                           f"got {type(fn).__name__} {fn!r}.")
    runner = CheckRunner(topic, fn, seed)
    runner.check_values()
    if topic.differentiable:
        runner.check_gradients()
    result = CheckResult(topic.name, runner.name, len(runner.cases), seed, topic.differentiable, verbose)
    if verbose:
        print(f"✓ {result}")
    return result
