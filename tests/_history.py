"""Tests that export an older commit's ``lab`` need git's history (.ci/run fetches it in a shallow clone)."""
from __future__ import annotations

import pytest

from lab.studies.running import replay


def require_history(commit: str) -> None:
    """Fail with one line (never skip) when ``commit`` is not in this clone's history."""
    try:
        replay.resolve(commit)
    except replay.MissingHistory as missing:
        reason = str(missing)
    else:
        return
    pytest.fail(reason, pytrace=False)  # outside the except: one line, no chained traceback
