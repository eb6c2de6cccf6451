"""Triton, when it is installed (it ships with CUDA builds of torch; CPU-only installs have none).

One import for both kernel files and the plan. ``INTERPRETED`` is read once, at import, as Triton
itself reads ``TRITON_INTERPRET``: the kernels are then built for its CPU interpreter.
"""
from __future__ import annotations

from ...core.env import triton_interpret

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = tl = None

INTERPRETED = triton is not None and triton_interpret()

__all__ = ["triton", "tl", "INTERPRETED"]
