"""Training on the CPU defaults (glyphs, small CNN, ROADMAP): does it learn in 2 minutes, how fast,
and how much of a step is the loss.

    python bench/train.py                  # 2-minute run, 3,000 held-out images, B = 64, 256, 1024
    python bench/train.py --seconds 30 --no-write   # a quick look

1. Held-out R@1 / mAP@R (test classes never seen in training; a fixed subset of whole test
   classes, every image of it querying all the others) of the untrained model and after
   ``--seconds`` of training; steps per second. (The whole test split, 14.7k images, takes
   lab.metrics several minutes on 2 cores: ``--eval-items 0``.)
2. Share of a training step (forward, loss, backward, Adam; random 1 x 32 x 32 images, no data
   loading) spent in the loss's forward + backward, for batch sizes B.
Writes the "training" section of docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import machine, measure, write_section  # noqa: E402

from lab.losses import build_loss  # noqa: E402
from lab.models import build_model, num_parameters  # noqa: E402
from lab.train import Trainer, TrainConfig  # noqa: E402


def learning_run(seconds: float, eval_items: int | None) -> dict:
    cfg = TrainConfig(eval_every=0, eval_max_items=eval_items, progress=False)
    trainer = Trainer(cfg)
    before = trainer.evaluate(progress=True)
    trainer.step()  # warm-up (first batch renders its glyphs), not timed
    start, steps = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        trainer.step()
        steps += 1
    elapsed = time.perf_counter() - start
    after = trainer.evaluate(progress=True)
    return {"config": cfg, "before": before, "after": after, "steps": steps + 1, "seconds": elapsed,
            "steps_per_s": steps / elapsed, "train_images": len(trainer.train_set),
            "params": num_parameters(trainer.model)}


def loss_share(batch: int, device: torch.device) -> tuple[float, float, float]:
    """(step seconds, loss seconds, step peak MB) at batch size ``batch``, 4 images per class."""
    torch.manual_seed(0)
    cfg = TrainConfig()
    model = build_model(cfg.model, cfg.embed_dim, 1).to(device)
    loss_fn = build_loss(cfg.loss)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    images = torch.randn(batch, 1, 32, 32, device=device)
    labels = torch.arange(batch // cfg.m, device=device).repeat_interleave(cfg.m)
    emb = model(images).detach().requires_grad_()

    def step():
        opt.zero_grad()
        loss_fn(model(images), labels).backward()
        opt.step()

    def loss_only():
        emb.grad = None
        loss_fn(emb, labels).backward()

    step_s, step_mb = measure(step, device)
    loss_s, _ = measure(loss_only, device)
    return step_s, loss_s, step_mb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--eval-items", type=int, default=3000, help="held-out images (whole classes); 0: all")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    device = torch.device("cpu")

    shares = {}
    for batch in args.sizes:
        shares[batch] = loss_share(batch, device)
        step_s, loss_s, _ = shares[batch]
        print(f"B={batch}: step {step_s * 1e3:.0f} ms, loss {loss_s * 1e3:.1f} ms ({loss_s / step_s:.1%})", flush=True)
    load_before = os.getloadavg()[0]
    run = learning_run(args.seconds, args.eval_items or None)
    load_after = os.getloadavg()[0]
    b, a, cfg = run["before"], run["after"], run["config"]
    print(f"{run['steps']} steps in {run['seconds']:.0f} s ({run['steps_per_s']:.2f}/s); "
          f"R@1 {b['R@1']:.3f} -> {a['R@1']:.3f}, mAP@R {b['mAP@R']:.3f} -> {a['mAP@R']:.3f}")

    held_out = f"{a['num_queries']:,} held-out test images" + (" (all)" if not args.eval_items else
                                                                 " (a fixed subset of whole classes)")
    lines = [
        "## Training on the CPU defaults (`python bench/train.py`)",
        "",
        f"Machine: {machine()}. Defaults: glyphs ({run['train_images']:,} training images, 1 x 32 x 32), "
        f"{cfg.model} ({run['params']:,} parameters, {cfg.embed_dim}-d), {cfg.loss}, batch {cfg.batch_size} "
        f"= {cfg.batch_size // cfg.m} classes x {cfg.m}, Adam lr {cfg.lr:g}, 1 process, num_workers 0.",
        "",
        f"| {held_out}, classes never trained on | untrained | after {run['seconds']:.0f} s "
        f"({run['steps']} steps) |",
        "|---|---|---|",
        f"| R@1 | {b['R@1']:.3f} | {a['R@1']:.3f} |",
        f"| mAP@R | {b['mAP@R']:.3f} | {a['mAP@R']:.3f} |",
        f"| decomposability gap (ROADMAP Eq. 6, train probe of {cfg.probe_batches} batches) | "
        f"{b['decomposability_gap']:.3f} | {a['decomposability_gap']:.3f} |",
        "",
        f"Training speed: {run['steps_per_s']:.2f} steps/s ({run['steps_per_s'] * cfg.batch_size:,.0f} images/s), "
        "data loading (glyph rendering on first use, augmentation) included. Load average (1 min) before / after "
        f"the run: {load_before:.1f} / {load_after:.1f} on {os.cpu_count()} cores: other processes slow 2-thread "
        "torch down a lot (OpenMP threads wait on each other), so compare runs made at a load near 0.",
        "",
        "Share of a training step spent in the loss (forward + backward of ROADMAP on the embeddings; the step is "
        "forward + loss + backward + Adam on random images, no data loading):",
        "",
        "| B | step | loss | loss share | step peak memory |",
        "|---|---|---|---|---|",
    ]
    for batch, (step_s, loss_s, step_mb) in shares.items():
        lines.append(f"| {batch} | {step_s * 1e3:.0f} ms | {loss_s * 1e3:.1f} ms | {loss_s / step_s:.1%} | "
                     f"{step_mb:.0f} MB |")
    if not args.no_write:
        write_section("training", "\n".join(lines))
        print("wrote the training section of docs/benchmarks.md")
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
