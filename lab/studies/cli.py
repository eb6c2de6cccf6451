"""The ``study`` subcommand of ``python -m lab``: its flags and what it does."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..core.env import project_root
from .spec import ORDER, PROTOCOLS, V2_STUDIES

ROOT = project_root()  # the checkout; installed from a wheel, the current folder (not site-packages)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="*", metavar="NAME", help=f"{', '.join(ORDER)}, or all (default with --render: "
                   "render every study found in --out); pilot: protocol v2's learning curve, which fixes its steps")
    p.add_argument("--quick", action="store_true", help="CI size: tiny sets, 3 steps, 2 methods (seconds)")
    p.add_argument("--protocol", choices=PROTOCOLS, default="v1",
                   help=f"v2: the whole test split, 5 seeds, the pilot's steps; re-runs {', '.join(V2_STUDIES)} "
                        "(default v1)")
    p.add_argument("--seeds", type=int, default=None, help="seeds per setting (default 3, v2: 5; quick: 2)")
    p.add_argument("--out", type=Path, default=ROOT / "results",
                   help="raw results folder (default results/; protocol v2 and the pilot use its v2/ folder)")
    p.add_argument("--docs", type=Path, default=ROOT / "docs", help="where results.md and figures/ go (default docs/)")
    p.add_argument("--render", action="store_true", help="only regenerate the page from the raw results, no training")
    p.add_argument("--no-render", action="store_true", help="train only")
    p.add_argument("--jobs", type=int, default=1, help="runs trained in parallel processes (default 1)")
    p.add_argument("--device", default=None, help="where runs train, e.g. cuda (default: the study's, cpu); not "
                   "part of a run's key: the same runs, elsewhere")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    p.add_argument("--methods", default=None, metavar="A,B",
                   help="train only these methods' runs, comma-separated as the page names them, e.g. "
                        "ROADMAP,SoftBinAP (a power plan's losses; default: every method)")
    p.add_argument("--curve-every", type=int, default=0, metavar="STEPS",
                   help="also evaluate each run every STEPS steps on the same split, into its record's learning "
                        "curve (does not change the run; default 0: only at its end)")


def main(args: argparse.Namespace) -> None:
    from .results_page import render
    from .runner import run_pilot, run_studies

    if args.jobs < 1 or args.threads < 1:
        raise ValueError("--jobs and --threads must be >= 1")
    if args.curve_every < 0:
        raise ValueError(f"--curve-every must be >= 0 (0: no curve), got {args.curve_every}")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods is not None else None
    log = lambda line: print(line, flush=True)  # noqa: E731
    pilot = "pilot" in args.names
    names = [n for n in args.names if n != "pilot"]
    study_names = V2_STUDIES if args.protocol == "v2" else ORDER
    if "all" in names or not (names or pilot):
        names = list(study_names)
    unknown = [n for n in names if n not in study_names]
    if unknown:
        raise ValueError(f"unknown study {unknown[0]!r} for protocol {args.protocol}; choose from: "
                         f"{', '.join(study_names)}, all, pilot")
    if not args.render:
        start = time.time()
        if pilot:
            run_pilot(args.out / "v2", threads=args.threads, log=log, device=args.device)
        if names:
            out = args.out / "v2" if args.protocol == "v2" else args.out
            run_studies(names, out, args.quick, args.seeds, args.jobs, args.threads, log=log, protocol=args.protocol,
                        device=args.device, methods=methods, curve_every=args.curve_every)
        print(f"trained in {time.time() - start:.0f} s", file=sys.stderr)
    if not args.no_render:
        page = render(args.out, args.docs, seeds=args.seeds)
        print(f"wrote {page}")
