"""Start a Python process of the grader that imports nothing from the folder it runs in.

``python -m MODULE`` puts the current folder first on ``sys.path``, and ``python`` reads ``PYTHONPATH``,
``PYTHONSTARTUP`` and the user's site folder: a student's ``json.py`` (or ``sitecustomize.py``, a ``.pth``
file, a ``torch/`` package) next to the process would run in it, outside the sandbox. So every process the
grader starts runs ``python -I`` (isolated mode: no current folder, no script folder, no ``PYTHON*``
variables, no user site) and is told where this very ``lab`` is by an argument, never by the environment
or the working folder.
"""
from __future__ import annotations

import sys
from pathlib import Path

# ``python -I -c BOOT LAB_ROOT MODULE ARGS...``: LAB_ROOT first on sys.path, then MODULE runs as ``python -m``.
BOOT = ("import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = sys.argv.pop(1); "
        "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)")


def lab_root() -> Path:
    """The folder that holds this ``lab`` package (a checkout, or site-packages)."""
    return Path(__file__).resolve().parents[2]


def python_module(module: str, *args: str, python: str = sys.executable) -> list[str]:
    """argv of ``python -I -B``, running ``module`` as ``python -m`` would, with this ``lab`` importable (``-B``: no
    ``__pycache__`` written beside a student's module: ``-I`` ignores PYTHONDONTWRITEBYTECODE)."""
    return [python, "-I", "-B", "-c", BOOT, str(lab_root()), module, *map(str, args)]
