"""``python -m lab.dashboard``: what a dashboard server will offer, checked before ``make app`` starts it."""
from __future__ import annotations

import sys

from ..core.env import app_max_params, worker_nice
from .served import millions, offered


def main() -> int:
    """``python -m lab.dashboard``, which ``make app`` runs before the server: the data the server will
    offer and the largest model it builds, or the malformed entry of ``RANKLAB_APP_DATA`` (or a malformed
    ``RANKLAB_WORKER_NICE`` or ``RANKLAB_APP_MAX_PARAMS``) in one line (exit 2), before anything starts.
    Without it, a typo was reported only when a page drew its sidebar."""
    try:
        worker_nice()
        limit = app_max_params()
        data = offered()
    except ValueError as e:
        print(f"make app: {e}", file=sys.stderr)
        return 2
    print("the dashboard offers: " + "; ".join(
        f"{name} ({', '.join(folders)})" if any(folders) else name for name, folders in data.items())
        + f"; models of at most {millions(limit)} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
