"""The ``study`` subcommand of ``python -m lab``: its flags and what it does."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .spec import ORDER

ROOT = Path(__file__).resolve().parents[2]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="*", metavar="NAME", help=f"{', '.join(ORDER)}, or all (default with --render: "
                   "render every study found in --out)")
    p.add_argument("--quick", action="store_true", help="CI size: tiny sets, 3 steps, 2 methods (seconds)")
    p.add_argument("--seeds", type=int, default=None, help="seeds per setting (default 3; quick: 2)")
    p.add_argument("--out", type=Path, default=ROOT / "results", help="raw results folder (default results/)")
    p.add_argument("--docs", type=Path, default=ROOT / "docs", help="where results.md and figures/ go (default docs/)")
    p.add_argument("--render", action="store_true", help="only regenerate the page from the raw results, no training")
    p.add_argument("--no-render", action="store_true", help="train only")
    p.add_argument("--jobs", type=int, default=1, help="runs trained in parallel processes (default 1)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")


def main(args: argparse.Namespace) -> None:
    from .results_page import render
    from .runner import run_studies

    names = list(ORDER) if not args.names or "all" in args.names else list(args.names)
    unknown = [n for n in names if n not in ORDER]
    if unknown:
        raise ValueError(f"unknown study {unknown[0]!r}; choose from: {', '.join(ORDER)}, all")
    if not args.render:
        if args.jobs < 1 or args.threads < 1:
            raise ValueError("--jobs and --threads must be >= 1")
        start = time.time()
        run_studies(names, args.out, args.quick, args.seeds, args.jobs, args.threads,
                    log=lambda line: print(line, flush=True))
        print(f"trained in {time.time() - start:.0f} s", file=sys.stderr)
    if not args.no_render:
        page = render(args.out, args.docs, seeds=args.seeds)
        print(f"wrote {page}")
