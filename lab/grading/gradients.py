"""Gradient checks, run once the values are right: the gradient exists, is finite, points the right
way (negatives pushed down, and for Sup-AP and calibration positives pulled up), and equals the
reference's on the float64 cases without ties or kinks.

``GradientChecks`` is a mixin of :class:`lab.grading.engine.Runner`, which provides ``cases``,
``topic``, ``student``, ``call`` and ``fail``.
"""
from __future__ import annotations

import torch
from torch import Tensor

from .cases import Case
from .report import GRAD_TOL, close, crash_hint, fmt


class GradientChecks:
    """The gradient half of a check (mixed into the Runner)."""

    def check_gradients(self) -> None:
        __tracebackhide__ = True
        for case in self.cases:
            out, args = self.student(case, grad=True)
            x = args[case.diff_arg]
            if not out.requires_grad:
                self.fail(case, "your output has no gradient with respect to "
                                f"`{case.arg_names[case.diff_arg]}` (no autograd graph). Something cuts it: .item(), "
                                "float(), numpy, .detach(), torch.no_grad(), or a hard comparison where a smooth "
                                "surrogate belongs.")
            try:
                (grad,) = torch.autograd.grad(out.sum(), x, allow_unused=True)
            except Exception as exc:
                self.fail(case, f"backward() through your output raised {type(exc).__name__}: {exc}",
                          crash_hint(exc, self.topic).lstrip("\n"))
            ref_out, ref_args = self.call(case, self.topic.reference, grad=True)
            (ref_grad,) = torch.autograd.grad(ref_out.sum(), ref_args[case.diff_arg])
            if grad is None:
                grad = torch.zeros_like(x)
            if not torch.isfinite(grad).all() and torch.isfinite(ref_grad).all():
                self.fail(case, "your output is finite but its gradient contains NaN/inf. Typical causes: "
                                "torch.where(cond, a / b, 0) still back-propagates through a / b where b = 0 — "
                                "clamp the denominator instead (b.clamp_min(1)); or a hand-written sigmoid "
                                "1 / (1 + exp(-x / tau)) whose exp overflows in float32 — use torch.sigmoid.")
            self.check_signs(case, grad)
            if case.grad and not close(grad, ref_grad, grad.dtype, GRAD_TOL).all():
                self.explain_gradient(case, grad, ref_grad)

    def check_signs(self, case: Case, grad: Tensor) -> None:
        """Gradient descent must push negatives down (and, for Sup-AP/calibration, positives up)."""
        __tracebackhide__ = True
        if self.topic.signs is None or not case.grad:
            return
        if self.topic.signs == "increasing":  # a step surrogate: a larger t = s_j - s_k never lowers a rank
            if (grad < -1e-9).any():
                i = tuple((grad < -1e-9).nonzero()[0].tolist())
                self.fail(case, f"your H⁻ decreases at t = {fmt(case.values[0][i])} (derivative {fmt(grad[i])}): "
                                "an item further above k must never count less in k's rank.")
            return
        targets, mask = case.get("targets"), case.get("mask")
        has_pos = (targets & mask).any(1, keepdim=True)
        neg, pos = ~targets & mask & has_pos, targets & mask
        tol = 1e-9
        if (grad[~mask].abs() > tol).any():
            self.fail(case, "your loss changes when the score of a masked item changes: masked items must not "
                            "enter the loss at all (you forgot the mask somewhere).")
        if (grad[neg] < -tol).any():
            q, j = (neg & (grad < -tol)).nonzero()[0].tolist()
            self.fail(case, f"gradient descent on your loss would push a negative UP (query {q}, item {j}, "
                            f"d loss/d s = {fmt(grad[q, j])} < 0): raising a negative's score must never lower the loss.")
        if self.topic.signs == "both" and (grad[pos] > tol).any():
            q, j = (pos & (grad > tol)).nonzero()[0].tolist()
            self.fail(case, f"gradient descent on your loss would push a positive DOWN (query {q}, item {j}, "
                            f"d loss/d s = {fmt(grad[q, j])} > 0). For this loss every positive must be pulled up.")

    def explain_gradient(self, case: Case, grad: Tensor, ref_grad: Tensor) -> None:
        __tracebackhide__ = True
        ok = close(grad, ref_grad, grad.dtype, GRAD_TOL)
        index = tuple(int(i) for i in (~ok).nonzero()[0])
        numbers = (f"  d(sum of outputs)/d {case.arg_names[case.diff_arg]}{list(index)}: expected "
                   f"{fmt(ref_grad[index])}, got {fmt(grad[index])} ({int((~ok).sum())} of {ok.numel()} entries differ)")
        if grad.abs().max() == 0:
            what = "your gradient is zero everywhere although the values are right: a hard step or a detach cuts it."
        else:
            what = "your values are right but the gradient differs from the reference's (the values are probably " \
                   "computed with a different, non-differentiable path: straight-through tricks, detach, clamp)."
        self.fail(case, what, numbers)


