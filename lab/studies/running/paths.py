"""Where the studies read and write: the checkout, its raw results and its docs.

The one place these paths are defined: the command line's defaults, the replays' git checkout and the
reporting side's default results folder all read them here.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the checkout: lab/studies/running/paths.py -> ../../..
RESULTS = ROOT / "results"  # raw results: NAME.json (protocol v1), v2/NAME.json, gpu/v2/*.json
DOCS = ROOT / "docs"  # results.md and figures/
