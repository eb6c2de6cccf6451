"""TF32 matrix products (``--matmul-precision high``), emulated on the CPU: how much they move each
loss, its gradient and a short training run.

    python -m bench.tf32                          # B = 2048, 200 steps; writes the "tf32" section (~25 min, 2 cores)
    python -m bench.tf32 --batch 512 --steps 20 --no-write   # a quick look

No GPU here: :func:`lab.core.precision.emulated_tf32` rounds the two float32 matrices of every matrix
product (forward and backward) to TF32's 10-bit mantissa, round to nearest even, and multiplies in
float32, as the tensor cores do (their accumulation order differs). Convolutions are left in float32
in both runs: on the GPU cuDNN runs them in TF32 by default already, whatever the switch says.
1. Each loss (lab.losses.LOSSES) on B L2-normalised 64-d embeddings, 4 per class (bench/loss_cases.py):
   the loss value and the gradient with respect to the embeddings, float32 vs TF32.
2. The CPU defaults (glyphs, small_cnn, roadmap, batch 128) trained ``--steps`` steps from one seed,
   float32 vs TF32: held-out R@1 / mAP@R and how far the weights moved apart.
The speed of TF32 is not measured here; the section quotes the one GPU measurement there is.
"""
from __future__ import annotations

import argparse
import contextlib
import time

import torch

from bench.loss_cases import PER_CLASS, batch, build
from bench.measure import machine, publish
from lab.core.precision import emulated_tf32
from lab.losses import LOSSES

GPU_NOTE = ("GPU speed: ../shared/gpu/README.md's H100 measurement (smooth_ap B=16384: 58 ms, 32 ms with TF32), "
            "taken once on main, 2026-11-26; not measured again here")


def _precision(emulate: bool):
    return emulated_tf32() if emulate else contextlib.nullcontext()


def loss_effect(name: str, size: int, per_class: int = PER_CLASS) -> dict:
    """Loss value and embedding gradient of ``name`` in float32 and in emulated TF32."""
    emb, labels = batch(size, per_class)
    module = build(name, size // per_class)
    runs = []
    for emulate in (False, True):
        e = emb.detach().clone().requires_grad_()
        with _precision(emulate):
            value = module(e, labels)
            value.backward()
        runs.append((float(value.detach()), e.grad))
    (v32, g32), (vtf, gtf) = runs
    grad_norm = float(torch.linalg.vector_norm(g32))
    return {"loss": name, "B": size, "value": v32, "value_tf32": vtf,
            "value_rel": abs(vtf - v32) / abs(v32) if v32 else abs(vtf - v32),
            "grad_rel": float(torch.linalg.vector_norm(gtf - g32)) / grad_norm if grad_norm else 0.0}


def training_effect(steps: int, eval_items: int) -> dict:
    """The CPU defaults trained ``steps`` steps in float32 and in emulated TF32 (evaluation in float32)."""
    from lab.train import TrainConfig, Trainer

    runs = {}
    for emulate in (False, True):
        cfg = TrainConfig(steps=steps, eval_every=0, eval_max_items=eval_items, progress=False, device="cpu")
        trainer = Trainer(cfg)
        with _precision(emulate):
            last = trainer.step(steps)
        result = trainer.evaluate()
        runs[emulate] = {"R@1": result["R@1"], "mAP@R": result["mAP@R"], "loss": last["loss"],
                         "weights": torch.cat([p.detach().flatten() for p in trainer.model.parameters()])}
    apart = torch.linalg.vector_norm(runs[True]["weights"] - runs[False]["weights"])
    moved = torch.linalg.vector_norm(runs[False]["weights"])
    return {"steps": steps, "eval_items": eval_items, "float32": runs[False], "tf32": runs[True],
            "weights_apart": float(apart / moved)}


def markdown(losses: list[dict], training: dict, seconds: float) -> str:
    lines = ["## TF32 matrix products, emulated on CPU (`python -m bench.tf32`)", "",
             ("`--matmul-precision high` (TrainConfig.matmul_precision) lets CUDA multiply float32 matrices in TF32 "
              "(inputs rounded to a 10-bit mantissa, float32 accumulation) during training steps; the default "
              "`highest` keeps IEEE float32, and evaluation is always float32. Emulated on CPU "
              "(lab.core.precision.emulated_tf32: both matrices of every product, forward and backward, rounded to "
              "nearest even; convolutions untouched, as cuDNN runs them in TF32 by default on the GPU anyway). "
              f"{GPU_NOTE}."), "",
             f"Each loss on B = {losses[0]['B']} unit 64-d embeddings, {PER_CLASS} per class, float32 vs TF32:", "",
             "| loss | value (float32) | relative change of the value | relative change of the gradient (L2) |",
             "|---|---:|---:|---:|"]
    for r in losses:
        lines.append(f"| {r['loss']} | {r['value']:.6f} | {r['value_rel']:.1e} | {r['grad_rel']:.1e} |")
    lines += ["", ("blackbox_ap's gradient is a difference of two rankings (Vlastelica et al.'s perturbed ranking): a "
                   "change of the scores that swaps two items changes it by a whole step, hence its large change.")]
    f32, tf32 = training["float32"], training["tf32"]
    lines += ["", (f"Training the CPU defaults (glyphs, small_cnn, roadmap, batch 128, seed 0) for {training['steps']} "
                   f"steps, then held-out R@1 / mAP@R on a fixed subset of {training['eval_items']:,} "
                   "test images:"), "",
              "| matmuls | R@1 | mAP@R | last batch loss |", "|---|---:|---:|---:|",
              f"| float32 | {f32['R@1']:.3f} | {f32['mAP@R']:.3f} | {f32['loss']:.4f} |",
              f"| TF32 (emulated) | {tf32['R@1']:.3f} | {tf32['mAP@R']:.3f} | {tf32['loss']:.4f} |", "",
              ("(No times: the emulation measures the rounding, and this shared CPU's load moves a run's time more "
               "than anything measured here.)"), "",
              (f"The two runs' weights end {training['weights_apart']:.1e} apart (relative L2). One seed each: the "
               "rows say how far TF32 moves one run, not whether it changes the accuracy on average."),
              "", f"Measured {time.strftime('%Y-%m-%d')} on {machine()}, in {seconds:.0f} s (niced, a shared machine)."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # 2048 / 200: ~25 minutes on 2 shared cores (B = 4096 is 4x the loss time, sup_hap alone minutes)
    parser.add_argument("--batch", type=int, default=2048, help="embeddings per loss call")
    parser.add_argument("--steps", type=int, default=200, help="training steps of each run")
    parser.add_argument("--eval-items", type=int, default=3000, help="held-out images evaluated")
    parser.add_argument("--losses", nargs="*", default=sorted(LOSSES), help="losses to measure (default: all)")
    parser.add_argument("--no-write", action="store_true", help="print the section instead of writing it")
    args = parser.parse_args()
    start = time.perf_counter()
    losses = []
    for name in args.losses:
        losses.append(loss_effect(name, args.batch))
        print(f"{name}: value {losses[-1]['value_rel']:.1e}, gradient {losses[-1]['grad_rel']:.1e}", flush=True)
    training = training_effect(args.steps, args.eval_items)
    publish("tf32", markdown(losses, training, time.perf_counter() - start), args.no_write)


if __name__ == "__main__":
    main()
