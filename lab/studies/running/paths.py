"""Where the studies read and write: the checkout, its raw results and its docs.

The one place these paths are defined: the command line's defaults, the replays' git checkout and the
reporting side's default results folder all read them here.
"""
from __future__ import annotations

from ...core.env import project_root

# The checkout this package runs from (a clone, or an editable install of one); installed from a wheel, the
# current folder: site-packages is nobody's project folder.
ROOT = project_root()
RESULTS = ROOT / "results"  # raw results: NAME.json (protocol v1), v2/NAME.json, gpu/v2/*.json
DOCS = ROOT / "docs"  # results.md and figures/
