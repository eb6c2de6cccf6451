"""The Reproduction view's data, computed once per state of ``results/`` before a server opens it.
(Here, beside the page, not in lab.dashboard: it reads the studies, a package of the dashboard's layer.)

Deriving every study's verdict, tables and figures takes 7-70 s on 2 cores (issue 46: a fresh
checkout's first open of the view took 7.85 s). ``make app`` runs

    python -m app_pages.studies_page          # stores them under .cache/reproduction/

before it starts the server, which then reads them in milliseconds
(:class:`lab.dashboard.reproduction.StudyCache`: keyed on the contents of ``results/`` and of the code
that reads them, so a new result or a new rule is computed again, never shown stale). The server's
warm-up thread (``app_pages/results.py``) remains for a server started otherwise.
"""
from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path
from typing import Optional

from lab import studies
from lab.core import env
from lab.dashboard.reproduction import StudyCache, StudyView, png_bytes, verdict_parts
from lab.studies.reporting.study_sections import PAGE, TITLES
from lab.studies.reporting.verdicts import claims_rows, study_details, study_verdict
from lab.studies.running.paths import RESULTS

# git ignores .cache/: one folder per state of results/ (bench/dashboard.py points it elsewhere to time a cold start)
STORE = env.reproduction_cache(RESULTS.parent / ".cache" / "reproduction")


def compute(name: str) -> StudyView:
    """What the view shows of study ``name``, from ``results/`` (seconds: figures are drawn)."""
    verdict = study_verdict(name)
    body, figures = study_details(name)
    return StudyView(name, TITLES[name], verdict, verdict_parts(verdict), body, tuple(png_bytes(f) for f in figures),
                     tuple(claims_rows(name)))


def study_cache(store: Optional[Path] = None) -> StudyCache:
    """A cache of the studies over ``store`` (default :data:`STORE`)."""
    return StudyCache(compute, RESULTS, store=STORE if store is None else store, code=[Path(studies.__file__).parent])


@functools.lru_cache(maxsize=1)
def server_cache() -> StudyCache:
    """The server's one cache of the studies (shared by every browser session)."""
    return study_cache()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app_pages.studies_page", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=None, help=f"default {STORE}")
    args = parser.parse_args(argv)
    cache = study_cache(args.store)
    start = time.perf_counter()
    cache.all(PAGE)
    print(f"Reproduction view: {len(PAGE)} studies ready in {cache.store} ({time.perf_counter() - start:.1f} s)",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
