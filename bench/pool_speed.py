"""The small CNN's 2x2 max pooling on the CPU: ``nn.MaxPool2d(2)`` against ``lab.models.max_pool`` (the same bits).

    .venv/bin/python -m bench.pool_speed             # ~1 minute; writes the "pool_speed" section of docs/benchmarks.md
    .venv/bin/python -m bench.pool_speed --no-write

CPU seconds of one thread (``bench.measure.cpu_times``: the two variants' calls interleaved, the median of
``--repeat``) for the pooling alone at the small CNN's three shapes (forward; forward + backward), and for the
whole model: an evaluation forward of a batch of 256 (no gradient) and a training step at batch 64 (forward,
backward, Adam; random 1 x 32 x 32 images with a flat band, as glyphs have a flat background).
"""
from __future__ import annotations

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

from bench.measure import cpu_model, cpu_times, load_average, publish
from lab.models import build_model
from lab.models.max_pool import MaxPool2x2, max_pool_2x2

SHAPES = [(64, 32, 32, 32), (64, 64, 16, 16), (64, 128, 8, 8)]  # the pooled maps of a batch of 64 at 32 x 32


def with_nn_pool(model: nn.Module) -> nn.Module:
    """A copy of ``model`` with every MaxPool2x2 replaced by nn.MaxPool2d(2)."""
    model = copy.deepcopy(model)
    for name, module in list(model.named_modules()):
        for child, layer in list(module.named_children()):
            if isinstance(layer, MaxPool2x2):
                setattr(module, child, nn.MaxPool2d(2))
    return model


def _pool_cases(shape: tuple) -> dict:
    x = torch.randn(shape).relu_()
    xg = x.clone().requires_grad_()
    grad = torch.randn(shape[0], shape[1], shape[2] // 2, shape[3] // 2)

    def backward(pool):
        xg.grad = None
        pool(xg).backward(grad)

    return {("forward", "nn"): lambda: F.max_pool2d(x, 2), ("forward", "lab"): lambda: max_pool_2x2(x),
            ("forward + backward", "nn"): lambda: backward(lambda t: F.max_pool2d(t, 2)),
            ("forward + backward", "lab"): lambda: backward(max_pool_2x2)}


def _model_cases() -> dict:
    torch.manual_seed(0)
    ours = build_model(embed_dim=64, in_chans=1)
    models = {"nn": with_nn_pool(ours), "lab": ours}
    images = torch.rand(256, 1, 32, 32)
    images[:, :, :10] = 0.0
    cases = {}
    for key, model in models.items():
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def evaluate(model=model):
            model.eval()
            with torch.no_grad():
                model(images)

        def step(model=model, opt=opt):
            model.train()
            opt.zero_grad()
            model(images[:64]).pow(2).mean().backward()
            opt.step()

        cases[("evaluation forward, B = 256", key)] = evaluate
        cases[("training step, B = 64", key)] = step
    return cases


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pool_speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="interleaved calls per variant (default 7)")
    parser.add_argument("--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    load = load_average()
    rows = []
    for shape in SHAPES:
        t = cpu_times(_pool_cases(shape), repeat=args.repeat)
        rows += [(f"pooling {tuple(shape)}, {what}", t[(what, "nn")], t[(what, "lab")])
                 for what in ("forward", "forward + backward")]
    t = cpu_times(_model_cases(), repeat=args.repeat)
    rows += [(f"small CNN, {what}", t[(what, "nn")], t[(what, "lab")])
             for what in ("evaluation forward, B = 256", "training step, B = 64")]
    lines = ["## The small CNN's max pooling on the CPU (`python -m bench.pool_speed`)", "",
             f"{cpu_model()}, torch {torch.__version__}, one thread; load average (1 min) {load:.1f} at the start, "
             f"{load_average():.1f} at the end. CPU milliseconds, the median of {args.repeat} interleaved calls; "
             "`nn.MaxPool2d(2)` against `lab.models.max_pool` (channels-last on a CPU, the same bits: "
             "tests/test_max_pool.py).", "",
             "| case | nn.MaxPool2d, ms | lab, ms | lab / nn |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {a * 1e3:.1f} | {b * 1e3:.1f} | {b / a:.2f} |" for name, a, b in rows]
    publish("pool_speed", "\n".join(lines), args.no_write)


if __name__ == "__main__":
    main()
