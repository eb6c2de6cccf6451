"""The ``study`` subcommand of ``python -m lab``: its flags and what it does."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .reporting.results_page import render
from .running.paths import DOCS, RESULTS
from .running.pilot import run_pilot
from .running.results_file import merge_files
from .running.cluster import FIELDS as CLUSTER_FIELDS
from .running.cluster import load_cluster
from .running.dry_run import dry_run
from .running.local_pool import check_device
from .running.paper_studies import PAPER_FOLDER, PAPER_STUDIES, is_paper
from .running.runner import EXECUTORS, parse_shard, run_studies
from .running.spec import ORDER, PROTOCOLS, V2_STUDIES, parse_seeds


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="*", metavar="NAME", help=f"{', '.join(ORDER)}, or all (default with --render: "
                   "render every study found in --out); pilot: protocol v2's learning curve, which fixes its steps; "
                   f"the papers' own tables on their recipes (a GPU each run): {', '.join(PAPER_STUDIES)}, into "
                   f"OUT/{PAPER_FOLDER}/; merge PARTS...: merge results files (each node's, say) by run into --out, "
                   "refusing two records of one run that differ")
    p.add_argument("--quick", action="store_true", help="CI size: tiny sets, 3 steps, 2 methods (seconds)")
    p.add_argument("--protocol", choices=PROTOCOLS, default="v1",
                   help=f"v2: the whole test split, 5 seeds, the pilot's steps; re-runs {', '.join(V2_STUDIES)} "
                        "(default v1)")
    p.add_argument("--seeds", default=None, metavar="N|A-B",
                   help="seeds per setting: N (seeds 0..N-1) or A-B (seeds A..B, e.g. more seeds on another node; "
                        "default 3, v2: 5; quick: 2)")
    p.add_argument("--out", type=Path, default=RESULTS,
                   help="raw results folder (default results/; protocol v2 and the pilot use its v2/ folder)")
    p.add_argument("--docs", type=Path, default=DOCS, help="where results.md and figures/ go (default docs/)")
    p.add_argument("--render", action="store_true", help="only regenerate the page from the raw results, no training")
    p.add_argument("--no-render", action="store_true", help="train only")
    p.add_argument("--jobs", type=int, default=1, help="runs trained in parallel processes (default 1)")
    p.add_argument("--device", default=None, help="where runs train: cpu, or cuda (cuda:N) where CUDA is available "
                   "(default: the study's, cpu); not part of a run's key: the same runs, elsewhere")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    p.add_argument("--methods", default=None, metavar="A,B",
                   help="train only these methods' runs, comma-separated as the page names them, e.g. "
                        "ROADMAP,SoftBinAP (a power plan's losses; default: every method)")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="train only part I (0 <= I < N) of the call's runs, split by key the same way by every part: "
                        "one task of your own sbatch array each (--shard $SLURM_ARRAY_TASK_ID/N), all writing --out "
                        "through its lock (or each its own folder, then python -m lab study merge)")
    cluster = p.add_argument_group("cluster (--executor submitit: one job per run; cluster.yaml or these flags)")
    cluster.add_argument("--executor", choices=EXECUTORS, default="local",
                         help="local: --jobs processes here (default); submitit: one job per run, a SLURM job array "
                              "where sbatch exists (else processes here), one driver writing the results as jobs end")
    cluster.add_argument("--cluster", type=Path, default=None, metavar="YAML",
                         help=f"the cluster's parameters ({', '.join(CLUSTER_FIELDS)}; "
                              "lab/studies/running/cluster.py shows a file); the flags below override it")
    cluster.add_argument("--partition", default=None, help="SLURM partition")
    cluster.add_argument("--gpus-per-task", type=int, default=None, help="GPUs per job (default: 1 with --device "
                         "cuda, else 0)")
    cluster.add_argument("--cpus-per-task", type=int, default=None, help="CPUs per job (default: --threads)")
    cluster.add_argument("--time", default=None, help="a job's time limit: minutes, H:MM:SS or D-HH:MM:SS "
                         "(default 24:00:00)")
    cluster.add_argument("--array-parallelism", type=int, default=None, help="jobs running at once (default 256)")
    cluster.add_argument("--mem", default=None, help="memory per job, e.g. 64G")
    p.add_argument("--base", type=Path, default=None, metavar="RECIPE",
                   help=f"a paper-scale study ({', '.join(PAPER_STUDIES)}) on this recipe only: one of its settings "
                        "(recipes/roadmap_cub_resnet50.yaml) or a recipe of your own")
    p.add_argument("--dry-run", action="store_true",
                   help="list the runs the call would train (key, setting, seed, steps) and their GPU hours estimated "
                        "from docs/benchmarks.md's measured step times; trains and writes nothing")
    p.add_argument("--curve-every", type=int, default=0, metavar="STEPS",
                   help="also evaluate each run every STEPS steps on the same split, into its record's learning "
                        "curve (does not change the run; default 0: only at its end)")


def main(args: argparse.Namespace) -> None:
    if args.names[:1] == ["merge"]:
        merge(args.names[1:], args.out)
        return
    if args.jobs < 1 or args.threads < 1:
        raise ValueError("--jobs and --threads must be >= 1")
    if args.curve_every < 0:
        raise ValueError(f"--curve-every must be >= 0 (0: no curve), got {args.curve_every}")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods is not None else None
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    shard = parse_shard(args.shard) if args.shard is not None else None
    cluster = cluster_of(args)
    log = lambda line: print(line, flush=True)  # noqa: E731
    pilot = "pilot" in args.names
    names = [n for n in args.names if n != "pilot"]
    study_names = V2_STUDIES if args.protocol == "v2" else ORDER
    if "all" in names or not (names or pilot):
        names = list(study_names)
    unknown = [n for n in names if n not in study_names and not is_paper(n)]
    if unknown:
        raise ValueError(f"unknown study {unknown[0]!r} for protocol {args.protocol}; choose from: "
                         f"{', '.join(study_names)}, all, pilot, {', '.join(PAPER_STUDIES)}")
    paper = [n for n in names if is_paper(n)]
    if paper and (len(paper) < len(names) or pilot):
        raise ValueError(f"the paper-scale studies ({', '.join(paper)}) train on their recipes into "
                         f"--out/{PAPER_FOLDER}/: name them in a call of their own")
    if args.base is not None and not paper:
        raise ValueError(f"--base takes a paper-scale study ({', '.join(PAPER_STUDIES)}): the glyph studies' "
                         "budget is fixed")
    out = args.out / PAPER_FOLDER if paper else args.out / "v2" if args.protocol == "v2" else args.out
    if args.dry_run:
        dry_run(names, out, args.quick, seeds, args.protocol, methods, shard, args.base, log=log)
        return
    if not args.render:  # before any file is written; jobs on SLURM train on its nodes, not here
        check_device(args.device, here=cluster is None or cluster.resolved_backend() == "local")
        start = time.time()
        if pilot:
            run_pilot(args.out / "v2", threads=args.threads, log=log, device=args.device)
        if names:
            run_studies(names, out, args.quick, seeds, args.jobs, args.threads, log=log, protocol=args.protocol,
                        device=args.device, methods=methods, curve_every=args.curve_every, shard=shard,
                        executor=args.executor, cluster=cluster, base=args.base)
        print(f"trained in {time.time() - start:.0f} s", file=sys.stderr)
    if not args.no_render:
        page = render(args.out, args.docs, seeds=seeds.stop if isinstance(seeds, range) else seeds)
        print(f"wrote {page}")


CLUSTER_FLAGS = ("partition", "gpus_per_task", "cpus_per_task", "time", "array_parallelism", "mem")


def cluster_of(args: argparse.Namespace):
    """The cluster of ``--cluster`` and the cluster flags (None for the local executor, which takes none)."""
    given = {k: getattr(args, k) for k in CLUSTER_FLAGS if getattr(args, k) is not None}
    if args.executor != "submitit":
        if given or args.cluster is not None:
            flag = "--cluster" if args.cluster is not None else f"--{next(iter(given)).replace('_', '-')}"
            raise ValueError(f"{flag} sets a cluster job's parameters: add --executor submitit (the local executor "
                             "takes --jobs and --device)")
        return None
    if args.time is not None and args.time.isdigit():
        given["time"] = int(args.time)
    return load_cluster(args.cluster, **given)


def merge(parts: list[str], out: Path) -> None:
    """``python -m lab study merge PARTS... --out DIR`` (results_file.merge_files), one line per file written."""
    if not parts:
        raise ValueError("merge: give the results files to merge, e.g. node1/methods.json node2/methods.json")
    for target, (before, after) in merge_files([Path(p) for p in parts], out).items():
        print(f"{target}: {after} runs ({after - before} added)")
