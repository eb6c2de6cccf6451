"""``python -m lab.dashboard``: what a dashboard server will offer, checked before ``make app`` starts it."""
from __future__ import annotations

import sys

from ..core.env import app_max_params, worker_nice
from .served import millions, offered, pool_memory, session_memory


def main() -> int:
    """``python -m lab.dashboard``, which ``make app`` runs before the server: the data the server will
    offer, the largest model it builds and a session's memory, or the malformed entry of ``RANKLAB_APP_DATA``
    (or a malformed ``RANKLAB_WORKER_NICE``, ``RANKLAB_APP_MAX_PARAMS`` or ``RANKLAB_APP_SESSION_MEMORY``) in
    one line (exit 2), before anything starts.
    Without it, a typo was reported only when a page drew its sidebar."""
    try:
        worker_nice()
        limit = app_max_params()
        data = offered()
        _, share, why = session_memory()  # this process's view of the memory: the server's, a moment later
        together = pool_memory()
    except ValueError as e:
        print(f"make app: {e}", file=sys.stderr)
        return 2
    print("the dashboard offers: " + "; ".join(
        f"{name} ({', '.join(folders)})" if any(folders) else name for name, folders in data.items())
        + f"; models of at most {millions(limit)} parameters; the open pages' runs at most {together / 1e9:.2f} GB "
        f"of memory together, each page's at most {share} ({why})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
