"""Gradient checks, run once the values are right: the gradient exists, is finite, points the right
way (negatives pushed down, and for Sup-AP and calibration positives pulled up), and equals the
reference's on the float64 cases without ties or kinks.

``GradientChecks`` is a mixin of :class:`lab.grading.check_runner.CheckRunner`, which provides ``cases``,
``topic``, ``student``, ``call`` and ``fail``.
"""
from __future__ import annotations

import os
import re
import warnings

import torch
from torch import Tensor

from .cases import Case
from .feedback import GRAD_TOL, close, crash_hint, fmt

_HERE = os.path.dirname(os.path.abspath(__file__))
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n?( {4}.*)?')  # a frame of a forward traceback
_EXP_LIMIT = {torch.float32: 88.7, torch.float64: 709.8}  # exp(y) overflows beyond y


class GradientChecks:
    """The gradient half of a check (mixed into the CheckRunner)."""

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
                          crash_hint(exc, self.topic.signature).lstrip("\n"))
            ref_out, ref_args = self.call(case, self.topic.reference, grad=True)
            (ref_grad,) = torch.autograd.grad(ref_out.sum(), ref_args[case.diff_arg])
            if grad is None:
                grad = torch.zeros_like(x)
            if not torch.isfinite(grad).all() and torch.isfinite(ref_grad).all():
                self.explain_nan_gradient(case, grad)
            self.check_signs(case, grad)
            if case.grad and not close(grad, ref_grad, grad.dtype, GRAD_TOL).all():
                self.explain_gradient(case, grad, ref_grad)

    def explain_nan_gradient(self, case: Case, grad: Tensor) -> None:
        """Name the operation whose backward made the NaN, and the student's line that called it."""
        __tracebackhide__ = True
        index = tuple((~torch.isfinite(grad)).nonzero()[0].tolist())
        at = f"{case.arg_names[case.diff_arg]}{list(index)}"
        if self.topic.output == "elementwise" and "tau" in case.params:
            t = case.values[0][index]
            at = f"t = {fmt(t)}, where t/τ = {fmt(t / case.get('tau'))}"
        op, where = self.nan_source(case)
        line = f" ({where})" if where else ""
        if op.startswith("Exp"):
            dtype = case.values[0].dtype
            limit, tau = _EXP_LIMIT.get(dtype, 88.7), case.params.get("tau", 0.01)
            self.fail(case, f"your output is finite but its gradient is NaN at {at}: an exp overflows to inf"
                            f"{line}. Typically a hand-written sigmoid 1 / (1 + exp(−x/τ)): {str(dtype)[6:]} holds "
                            f"exp(y) only up to y ≈ {limit}, so at τ = {tau:g} exp(−x/τ) is inf for x < "
                            f"{-limit * tau:.3g}, and the sigmoid's gradient becomes inf/inf = NaN. Use "
                            "torch.sigmoid(x / tau), which is stable for every x.")
        if op.startswith(("Div", "Pow", "Log", "Sqrt", "Reciprocal")):
            self.fail(case, f"your output is finite but its gradient contains NaN (at {at}), made by a division (or "
                            f"log/sqrt) at 0{line}. torch.where(cond, a / b, 0) still back-propagates through a / b "
                            "where b = 0, although it drops that value: clamp the denominator instead "
                            "(b.clamp_min(1)), or divide only where b > 0.")
        self.fail(case, f"your output is finite but its gradient contains NaN/inf (at {at})"
                        + (f", first made by the backward of {op}{line}" if op else "") + ".")

    def nan_source(self, case: Case) -> tuple[str, str]:
        """(operation, 'file, line N: code') where autograd's anomaly mode sees the first NaN, or ('', '')."""
        args = list(case.args)
        x = args[case.diff_arg].requires_grad_()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with torch.autograd.detect_anomaly(check_nan=True):
                    torch.autograd.grad(self.fn(*args).sum(), x, allow_unused=True)
                return "", ""
            except Exception as exc:
                op = re.search(r"Function '(\w+)'", str(exc))
        frames = [f for w in caught for f in _FRAME.findall(str(w.message))
                  if not f[0].startswith(_HERE) and f"{os.sep}torch{os.sep}" not in f[0]]
        where = f"{os.path.basename(frames[-1][0])}, line {frames[-1][1]}: {frames[-1][3].strip()}" if frames else ""
        return (op.group(1) if op else ""), where.rstrip(": ")

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
                            f"d loss/d s = {fmt(grad[q, j])} < 0): raising a negative's score must never lower the "
                            "loss.")
        if self.topic.signs == "both" and (grad[pos] > tol).any():
            q, j = (pos & (grad > tol)).nonzero()[0].tolist()
            self.fail(case, f"gradient descent on your loss would push a positive DOWN (query {q}, item {j}, "
                            f"d loss/d s = {fmt(grad[q, j])} > 0). For this loss every positive must be pulled up.")

    def explain_gradient(self, case: Case, grad: Tensor, ref_grad: Tensor) -> None:
        __tracebackhide__ = True
        ok = close(grad, ref_grad, grad.dtype, GRAD_TOL)
        index = tuple(int(i) for i in (~ok).nonzero()[0])
        numbers = (f"  d(sum of outputs)/d {case.arg_names[case.diff_arg]}{list(index)}: expected "
                   f"{fmt(ref_grad[index])}, got {fmt(grad[index])} "
                   f"({int((~ok).sum())} of {ok.numel()} entries differ)")
        if grad.abs().max() == 0:
            what = "your gradient is zero everywhere although the values are right: a hard step or a detach cuts it."
        else:
            what = "your values are right but the gradient differs from the reference's (the values are probably " \
                   "computed with a different, non-differentiable path: straight-through tricks, detach, clamp)."
        self.fail(case, what, numbers)


