"""Command line: ``python -m lab demo``."""
from __future__ import annotations

import argparse
import sys
import time


def demo(args: argparse.Namespace) -> None:
    """Train a small MLP on half of scikit-learn's digits with a rank loss; evaluate on the other half."""
    import torch
    from sklearn.datasets import load_digits

    from .losses import build_loss
    from .metrics import retrieval_metrics

    torch.manual_seed(args.seed)
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x, dtype=torch.float32) / 16.0
    y = torch.tensor(y)
    train = torch.rand(len(y), generator=torch.Generator().manual_seed(0)) < 0.5
    test = ~train
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32))
    loss_fn = build_loss(args.loss)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xt, yt = x[train], y[train]

    def evaluate() -> dict:
        with torch.no_grad():
            return retrieval_metrics(model(x[test]), y[test], backend="torch")

    before = evaluate()
    start = time.time()
    for step in range(args.steps):
        # 10 classes x 16 images: every query has positives in its batch.
        idx = torch.cat([torch.nonzero(yt == c).squeeze(1)[torch.randperm(int((yt == c).sum()))[:16]] for c in range(10)])
        loss = loss_fn(model(xt[idx]), yt[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = evaluate()
    print(f"{args.loss} on digits, held-out half of the images, {args.steps} steps in {time.time() - start:.1f}s")
    for key in ("R@1", "mAP@R"):
        print(f"  {key}: {before[key]:.3f} -> {after[key]:.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="train a tiny model on digits and print retrieval metrics")
    p.add_argument("--loss", default="roadmap")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=demo)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main(sys.argv[1:])
