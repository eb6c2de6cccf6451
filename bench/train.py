"""Training on the CPU defaults (glyphs, small CNN, ROADMAP): does it learn in 2 minutes, how fast,
how much of a step the data and the loss take.

    python -m bench.train                  # 2-minute run, 3,000 held-out images, B = 64, 256, 1024
    python -m bench.train --seconds 30 --no-write   # a quick look

1. Held-out R@1 / mAP@R (test classes never seen in training; a fixed subset of whole test
   classes, every image of it querying all the others) of the untrained model and after
   ``--seconds`` of training; steps per second. (The whole test split, 14.7k images, takes
   lab.metrics several minutes on 2 cores: ``--eval-items 0``.)
2. Share of a training step (forward, loss, backward, Adam; random 1 x 32 x 32 images, no data
   loading) spent in the loss's forward + backward, for batch sizes B.
3. Steps per second of the training loop with its data (the glyphs gathered and shifted by the
   batch on the device) against the per-image path it replaced (a DataLoader applying
   torchvision's transform to one PIL image at a time) and against model + loss alone on a
   batch already on the device: :func:`training_throughput`, which bench/gpu.py also calls.
Writes the "training" section of docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import os
import time

import torch

from bench.measure import _median, machine, measure, threads, write_section
from lab.losses import build_loss
from lab.models import build_model, num_parameters
from lab.train import Trainer, TrainConfig
from lab.train.loading import BatchStream
from lab.train.optim import amp_dtype

DATA_PATHS = ("device", "loader")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _rate(run, steps: int, batch_size: int, device: torch.device, clock=time.perf_counter) -> dict:
    """{"steps_per_s", "images_per_s", "seconds"} of ``run()`` (which does ``steps`` steps)."""
    _sync(device)
    start = clock()
    run()
    _sync(device)
    seconds = clock() - start
    return {"steps_per_s": steps / seconds, "images_per_s": steps * batch_size / seconds, "seconds": seconds}


def training_throughput(device="cpu", model: str = "small_cnn", batch_size: int = 256, image_size: int = 32,
                        amp: str = "none", steps: int = 20, warmup: int = 3, dataset: str = "glyphs",
                        dataset_kwargs: dict | None = None, data_path: str = "device",
                        num_workers: int | None = None, loss: str = "roadmap", cpu_time: bool = False) -> dict:
    """Training speed of ``lab.train.Trainer`` on ``device``, ``steps`` steps after ``warmup``:

    - ``"with_data"``: the real loop, ``Trainer.step`` (fetch a batch, forward, loss, backward,
      Adam, bookkeeping) with its data path: ``data_path="device"`` is what the trainer does
      (embedded images gathered on the device; a DataLoader for disk datasets), ``"loader"``
      forces a DataLoader applying the dataset's per-image transform (the path before issue 20);
    - ``"model_only"``: forward (autocast ``amp``) + loss + backward + Adam on one batch already
      on the device, in the trainer's memory layout, nothing else.

    Each is {"steps_per_s", "images_per_s", "seconds"}; plus "fraction" (with_data / model_only),
    the run's settings and "data" (the trainer's data path in words). CUDA work is synchronised
    before each clock reading. The first call for a dataset draws its images (not timed).
    ``cpu_time``: seconds of CPU time of this process instead of wall-clock time (CPU runs on a
    shared machine: see bench/measure.py's cpu_times; with workers it would miss theirs).
    """
    if data_path not in DATA_PATHS:
        raise ValueError(f"data_path must be one of {DATA_PATHS}, got {data_path!r}")
    if cpu_time and (torch.device(device).type != "cpu" or num_workers):
        raise ValueError("cpu_time measures this process on the CPU: device 'cpu' and no loader workers only")
    if steps < 1 or warmup < 0:
        raise ValueError(f"steps must be >= 1 and warmup >= 0, got steps={steps}, warmup={warmup}")
    cfg = TrainConfig(dataset=dataset, dataset_kwargs=dict(dataset_kwargs or {}), model=model, batch_size=batch_size,
                      image_size=image_size, amp=amp, device=str(device), eval_every=0, progress=False,
                      num_workers=num_workers, loss=loss, steps=warmup + steps)
    trainer = Trainer(cfg)
    device = trainer.device
    data = trainer.plan.describe()
    if data_path == "loader":
        plan = trainer.plan
        trainer.stream = BatchStream(trainer.train_set, trainer.stream.batch_sampler, cfg.num_workers or 0,
                                     device.type == "cuda", cfg.seed, plan.prefetch_factor if cfg.num_workers else None)
        data = f"DataLoader, {cfg.num_workers or 0} workers, the per-image transform (forced)"
    if warmup:
        trainer.step(warmup)
    clock = time.process_time if cpu_time else time.perf_counter
    with_data = _rate(lambda: trainer.step(steps), steps, batch_size, device, clock)

    images, labels, _ = trainer.stream.next()
    images = images.to(device)
    if trainer.plan.channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    labels = labels.view(len(labels), -1).to(device)
    net, loss_fn, optimizer, scaler = trainer.net, trainer.loss_fn, trainer.optimizer, trainer.scaler
    dtype = amp_dtype(cfg.amp)

    def model_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            emb = net(images)
        with torch.autocast(device.type, enabled=False):
            total = loss_fn(emb.float(), labels)
        scaler.scale(total).backward()
        scaler.step(optimizer)
        scaler.update()

    for _ in range(warmup):
        model_step()
    model_only = _rate(lambda: [model_step() for _ in range(steps)], steps, batch_size, device, clock)
    return {"device": str(device), "model": model, "batch_size": batch_size, "image_size": image_size, "amp": amp,
            "dataset": dataset, "steps": steps, "data": data, "with_data": with_data, "model_only": model_only,
            "fraction": with_data["steps_per_s"] / model_only["steps_per_s"]}


def learning_run(seconds: float, eval_items: int | None) -> dict:
    cfg = TrainConfig(eval_every=0, eval_max_items=eval_items, progress=False)
    trainer = Trainer(cfg)
    before = trainer.evaluate(progress=True)
    trainer.step()  # warm-up, not timed (the glyphs were drawn, or read from the disk cache, by Trainer())
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


def data_paths(repeats: int, steps: int, batch_size: int) -> dict[str, list[dict]]:
    """{data path: [training_throughput on the CPU defaults, one per repeat]}, the paths' runs interleaved,
    in CPU time of one thread (wall-clock times of 2 threads move several-fold with other processes' load)."""
    runs: dict[str, list[dict]] = {path: [] for path in DATA_PATHS}
    with threads(1):
        for _ in range(repeats):
            for path in DATA_PATHS:
                runs[path].append(training_throughput("cpu", batch_size=batch_size, steps=steps, data_path=path,
                                                      cpu_time=True))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--eval-items", type=int, default=3000, help="held-out images (whole classes); 0: all")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs of each data path")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per data-path run")
    args = parser.parse_args()
    device = torch.device("cpu")

    load_paths = os.getloadavg()[0]
    paths = data_paths(args.repeats, args.steps, TrainConfig().batch_size)
    load_paths = (load_paths, os.getloadavg()[0])
    for path, runs in paths.items():
        print(f"{path}: with data {[round(r['with_data']['steps_per_s'], 2) for r in runs]} steps/s, model + loss "
              f"alone {[round(r['model_only']['steps_per_s'], 2) for r in runs]}", flush=True)

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
        "## Training on the CPU defaults (`python -m bench.train`)",
        "",
        f"Machine: {machine()}. Defaults: glyphs ({run['train_images']:,} training images, 1 x 32 x 32), "
        f"{cfg.model} ({run['params']:,} parameters, {cfg.embed_dim}-d), {cfg.loss}, batch {cfg.batch_size} "
        f"= {cfg.batch_size // cfg.m} classes x {cfg.m}, Adam lr {cfg.lr:g}, 1 process; the glyphs as one uint8 "
        "tensor, each batch gathered and shifted there (no DataLoader).",
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
        "data (gather and random shift of each batch) included. Load average (1 min) before / after "
        f"the run: {load_before:.1f} / {load_after:.1f} on {os.cpu_count()} cores: other processes slow 2-thread "
        "torch down a lot (OpenMP threads wait on each other), so compare runs made at a load near 0.",
        "",
        f"The data path (`training_throughput`, {args.steps} steps after 3 of warm-up, CPU time of one thread, "
        f"median of {args.repeats} runs interleaved; load {load_paths[0]:.1f} before, {load_paths[1]:.1f} after): "
        "the trainer's step with its data against forward + loss + backward + Adam on one batch already in "
        "memory. \"per image\" is the path before issue 20, forced: a DataLoader (no worker) applying "
        "torchvision's transform to one PIL image at a time.",
        "",
        "| data path | steps per CPU-second with data | model + loss alone | with data / alone |",
        "|---|---|---|---|",
        *[f"| {'by the batch (the trainer)' if path == 'device' else 'per image (DataLoader, before)'} | "
          f"{_median([r['with_data']['steps_per_s'] for r in runs]):.2f} | "
          f"{_median([r['model_only']['steps_per_s'] for r in runs]):.2f} | "
          f"{_median([r['fraction'] for r in runs]):.0%} |" for path, runs in paths.items()],
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
