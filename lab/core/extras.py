"""The optional extras of ``ranklab-retrieval``, and the one-line error a part gives when its extra is missing.

``pip install ranklab-retrieval`` is the lean core: ``lab.core``, ``lab.losses`` and ``lab.metrics`` need
only torch, numpy and tqdm (faiss is an optional backend of the metrics). Each other part names the extra
that brings what it imports (pyproject.toml's ``[project.optional-dependencies]``); its ``__init__`` calls
:func:`require` first, so a missing extra is one line naming it, not a traceback from deep inside.
"""
from __future__ import annotations

import importlib.util
from typing import Sequence

DIST = "ranklab-retrieval"

# part -> (extra, the top-level modules it imports that the core does not bring). Module names, not
# distribution names: PIL is pillow, yaml is pyyaml, fontTools is fonttools.
NEEDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "lab.data": ("train", ("PIL", "torchvision", "matplotlib", "fontTools")),
    "lab.models (timm backbones)": ("train", ("timm",)),
    "lab.train": ("train", ("yaml", "PIL", "torchvision", "timm", "matplotlib", "fontTools")),
    "lab.experiments": ("train", ("yaml", "PIL", "torchvision", "timm", "matplotlib", "fontTools")),
    "lab.viz": ("notebooks", ("plotly", "matplotlib")),
    "lab.metrics (backend='faiss')": ("train", ("faiss",)),
    "lab.losses.pml": ("pml", ("pytorch_metric_learning",)),
    "python -m lab study --executor submitit": ("cluster", ("submitit",)),
}


class MissingExtraError(ModuleNotFoundError):
    """A part of the package was imported without the extra that installs its dependencies."""


def missing_modules(modules: Sequence[str]) -> list[str]:
    """The modules of ``modules`` that cannot be imported here (found without importing them: cheap)."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def install_hint(extra: str) -> str:
    return f"pip install '{DIST}[{extra}]'"


def require(part: str) -> None:
    """Raise :class:`MissingExtraError` (one line: the part, what is missing, the pip command) unless every
    module ``part`` needs is installed."""
    extra, modules = NEEDS[part]
    missing = missing_modules(modules)
    if missing:
        error = MissingExtraError(f"{part} needs {', '.join(missing)}, not installed here: {install_hint(extra)}")
        error.name = missing[0]
        raise error
