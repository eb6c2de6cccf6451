"""Triton, when it is installed (it ships with CUDA builds of torch; CPU-only installs have none).

One import for both kernel files and the plan. ``INTERPRETED`` is read once, at import, as Triton
itself reads ``TRITON_INTERPRET``: the kernels are then built for its CPU interpreter.
"""
from __future__ import annotations

import os

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = tl = None

# Triton's own switch ("1", "true", "on" ...), as its ``knobs`` read it when it has them.
_SWITCH = os.environ.get("TRITON_INTERPRET", "0").strip().lower()
INTERPRETED = triton is not None and _SWITCH in ("1", "true", "on", "yes")

__all__ = ["triton", "tl", "INTERPRETED"]
