"""Two checkouts of the lab side by side on the CPU: did a change make the losses (or a training step) slower?

    git worktree add /tmp/before <commit>
    python -m bench.checkouts /tmp/before .          # ~5 minutes; writes the "checkouts" section
    python -m bench.checkouts /tmp/before . --no-write

Each checkout's `lab.losses` runs in its own child process (two packages named `lab` cannot share
one interpreter); the children alternate, ``--rounds`` times each, so both see the same load. A
child times forward + backward from the embeddings of each loss at each B (4 per class, 64-d), in
CPU seconds of one thread (and, with ``--trainer-batches``, one ``Trainer.step`` of the defaults
at each batch size): the fastest of ``--repeat`` calls after two warm-ups (on shared cores
other processes only ever add time, through the caches they share). The table gives, per case,
the median over rounds of each checkout and their ratio, and the spread of the rounds (a ratio
inside it is noise).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from bench.measure import load_average, machine, publish

LOSSES = ["smooth_ap", "sup_ap", "roadmap", "fast_ap", "soft_bin_ap"]
TRAINER = "trainer.step"  # the case name of a whole training step (--trainer-batches)

# Run with the checkout as its working directory: `python -c` puts that first on the module path, so
# `lab` is the checkout's, not the installed one.
CHILD = r"""
import json, sys, time
import torch
import lab.losses as L
torch.set_num_threads(1)
losses, sizes, repeat = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
batches, TRAINER = json.loads(sys.argv[4]), sys.argv[5]
out = {}
for b in batches:  # one Trainer.step of the defaults (data, forward, loss, backward, Adam) at batch b
    from lab.train import Trainer, TrainConfig
    trainer = Trainer(TrainConfig(batch_size=b, eval_every=0, progress=False))
    times = []
    for _ in range(repeat + 2):
        start = time.process_time()
        trainer.step()
        times.append(time.process_time() - start)
    out[f"{TRAINER} {b}"] = min(times[2:])
for name in losses:
    fn = L.build_loss(name)
    for b in sizes:
        g = torch.Generator().manual_seed(b)
        emb = torch.nn.functional.normalize(torch.randn(b, 64, generator=g), dim=1)
        labels = torch.arange(b) // 4
        times = []
        for _ in range(repeat + 2):
            e = emb.clone().requires_grad_()
            start = time.process_time()
            fn(e, labels).backward()
            times.append(time.process_time() - start)
        out[f"{name} {b}"] = min(times[2:])
print(json.dumps(out))
"""


def child(checkout: Path, losses: list[str], sizes: list[int], repeat: int,
          trainer_batches: list[int] = ()) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(losses), json.dumps(sizes), str(repeat),
                           json.dumps(list(trainer_batches)), TRAINER],
                          cwd=checkout, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def describe(checkout: Path) -> str:
    rev = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no", "--", "lab"],
                           capture_output=True, text=True).stdout.strip()
    return (rev.stdout.strip() or str(checkout)) + (" + uncommitted changes to lab/" if dirty else "")


TRAINED = (f" ({TRAINER}: one `Trainer.step` of the CLI's defaults at batch B, its data, forward, loss, backward "
           "and Adam; the trainer built before the clock)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--losses", nargs="*", default=LOSSES, help="none: only the trainer steps")
    parser.add_argument("--trainer-batches", type=int, nargs="*", default=[],
                        help="also time one Trainer.step of the defaults at each of these batch sizes")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    for path in (args.before, args.after):
        if not (path / "lab" / "losses").is_dir():
            raise SystemExit(f"{path} is not a checkout of the lab (no lab/losses in it)")
    load = load_average()
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for r in range(args.rounds):
        for side in ("before", "after"):
            runs[side].append(child(getattr(args, side), args.losses, args.sizes, args.repeat, args.trainer_batches))
            print(f"round {r + 1} {side}: " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in runs[side][-1].items()),
                  flush=True)
    lines = ["| case | B | before, ms | after, ms | after / before | rounds' spread (min-max ms, before; after) |",
             "|---|---:|---:|---:|---:|---|"]
    slower = []
    for key in runs["before"][0]:
        before, after = ([run[key] * 1e3 for run in runs[side]] for side in ("before", "after"))
        b, a = statistics.median(before), statistics.median(after)
        if min(after) > max(before):
            slower.append(f"{key.replace(' ', ' at B = ')} ({a / b:.2f}x)")
        name, size = key.split()
        lines.append(f"| {name} | {size} | {b:.1f} | {a:.1f} | {a / b:.2f} | {min(before):.1f}-{max(before):.1f}; "
                     f"{min(after):.1f}-{max(after):.1f} |")
    text = (f"## Two checkouts side by side (`python -m bench.checkouts BEFORE AFTER`)\n\n"
            f"Before: {describe(args.before)}; after: {describe(args.after)}. {machine()}; load average (1 min) "
            f"{load:.1f} at the start, {load_average():.1f} at the end. Forward + backward from B x 64 embeddings, "
            f"4 per class{TRAINED if args.trainer_batches else ''}, CPU time of one thread, the fastest of "
            f"{args.repeat} calls in each of {args.rounds} alternating rounds per checkout, the median over rounds."
            "\n\n" + "\n".join(lines) + "\n\n"
            "Slower beyond the noise (the after checkout's fastest round slower than the before checkout's slowest): "
            + (", ".join(slower) if slower else "none") + ".\n")
    publish("checkouts", text, dry_run=args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
