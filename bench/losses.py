"""Forward + backward time and peak memory of every loss in lab.losses.LOSSES.

    python bench/losses.py                 # B = 64 ... 4096 on CPU (and CUDA when present)
    python bench/losses.py --sizes 64 256  # a quick look

Batches of B L2-normalised D=512 embeddings, 4 samples per class, two label levels (for the
hierarchical losses). Also times a deliberately cubic SmoothAP (the B x B x B formulation of
the reference implementations) to show what the O(Q * P * N) engine saves. Writes the
"losses" section of docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import machine, measure, write_section  # noqa: E402

import lab.losses as L  # noqa: E402

PER_CLASS, DIM = 4, 512


def cubic_smooth_ap(embeddings: torch.Tensor, labels: torch.Tensor, tau: float = 0.01) -> torch.Tensor:
    """SmoothAP as the reference code computes it: a (B, B, B) tensor of sigmoids (for comparison only)."""
    e = torch.nn.functional.normalize(embeddings, dim=1)
    scores = e @ e.T
    fine = labels[:, 0] if labels.dim() == 2 else labels
    pos = (fine[:, None] == fine[None, :]).float()
    diff = scores[:, None, :] - scores[:, :, None]  # (B, B, B)
    step = torch.sigmoid(diff / tau) * (1 - torch.eye(len(e)))[None]
    rank_all = 1 + step.sum(-1)
    rank_pos = 1 + (step * pos[:, None, :]).sum(-1)
    return 1 - ((rank_pos / rank_all) * pos).sum(1).div(pos.sum(1)).mean()


def build(name: str, num_classes: int) -> torch.nn.Module:
    cls = L.LOSSES[name]
    params = inspect.signature(cls).parameters
    extra = {k: v for k, v in (("num_classes", num_classes), ("embed_dim", DIM)) if k in params}
    return cls(**extra)


def run(sizes: list[int], device: torch.device, names: list[str], cubic_max: int) -> dict:
    results: dict[str, dict[int, tuple[float, float]]] = {}
    for name in names + ["smooth_ap (cubic reference)"]:
        results[name] = {}
        for batch in sizes:
            if name.endswith("(cubic reference)") and batch > cubic_max:
                continue
            g = torch.Generator().manual_seed(0)
            fine = torch.arange(batch // PER_CLASS).repeat_interleave(PER_CLASS)
            labels = torch.stack([fine, fine // 8], dim=1).to(device)
            emb = torch.randn(batch, DIM, generator=g).to(device).requires_grad_()
            loss_fn = (cubic_smooth_ap if "cubic" in name else build(name, batch // PER_CLASS).to(device))

            def step() -> None:
                emb.grad = None
                loss_fn(emb, labels).backward()

            results[name][batch] = measure(step, device, repeat=3 if batch <= 1024 else 1)
            t, m = results[name][batch]
            print(f"{device.type:4s} {name:28s} B={batch:5d}  {t * 1e3:9.1f} ms  {m:8.1f} MB", flush=True)
    return results


def cpu_memory(args: argparse.Namespace) -> dict:
    """Peak memory on CPU, measured in a child process where glibc returns every allocation of 64 KB or
    more to the system when it is freed (``MALLOC_MMAP_THRESHOLD_``): otherwise a step reuses the heap
    left by earlier, larger batches and its resident-set peak does not move. Timings are taken in this
    process, with the normal allocator (mmap for every tensor would slow small batches down)."""
    cmd = [sys.executable, __file__, "--memory-json", "--sizes", *map(str, args.sizes), "--losses", *args.losses,
           "--cubic-max", str(args.cubic_max)]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return {name: {int(b): v for b, v in per.items()} for name, per in json.loads(out.splitlines()[-1]).items()}


def table(results: dict, sizes: list[int], index: int, fmt: str) -> str:
    head = "| loss | " + " | ".join(f"B={b}" for b in sizes) + " |\n|---|" + "---:|" * len(sizes) + "\n"
    rows = []
    for name, per_size in results.items():
        cells = [fmt.format(per_size[b][index] * (1e3 if index == 0 else 1)) if b in per_size else "—" for b in sizes]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return head + "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256, 384, 512, 1024, 2048, 4096])
    parser.add_argument("--losses", nargs="+", default=list(L.LOSSES), choices=list(L.LOSSES))
    parser.add_argument("--cubic-max", type=int, default=512, help="largest B for the cubic reference")
    parser.add_argument("--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone")
    parser.add_argument("--memory-json", action="store_true", help=argparse.SUPPRESS)  # the child of cpu_memory
    args = parser.parse_args()
    if args.memory_json:
        with contextlib.redirect_stdout(sys.stderr):
            results = run(args.sizes, torch.device("cpu"), args.losses, args.cubic_max)
        print(json.dumps({n: {b: v for b, v in per.items()} for n, per in results.items()}))
        return
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    sections = []
    load = os.getloadavg()[0]
    for device in devices:
        results = run(args.sizes, device, args.losses, args.cubic_max)
        if device.type == "cpu":
            memory = cpu_memory(args)
            results = {n: {b: (t, memory[n][b][1]) for b, (t, _) in per.items()} for n, per in results.items()}
        sections.append(
            f"### {device.type.upper()}: {machine() if device.type == 'cpu' else torch.cuda.get_device_name()}\n\n"
            f"Forward + backward, median milliseconds:\n\n{table(results, args.sizes, 0, '{:.1f}')}\n\n"
            f"Peak memory above the inputs, MB:\n\n{table(results, args.sizes, 1, '{:.0f}')}\n"
        )
    text = (
        "## Losses: time and memory (`python bench/losses.py`)\n\n"
        f"B L2-normalised {DIM}-d embeddings, {PER_CLASS} samples per class, the batch retrieving from itself. "
        "Memory is the rise of the process's peak resident set on CPU (measured in a separate process whose "
        "allocator returns freed tensors to the system, see `cpu_memory`; noise of a few MB), "
        "`torch.cuda.max_memory_allocated` on CUDA. The cubic reference builds the B x B x B tensor of the "
        "public SmoothAP / SupAP code; it is run only up to the size that fits. Load average (1 min) at the "
        f"start: {load:.1f} on {os.cpu_count()} cores (times are comparable between rows, less between "
        "machines).\n\n" + "\n".join(sections)
    )
    if args.no_write:
        print(text)
    else:
        write_section("losses", text)
        print("wrote docs/benchmarks.md")


if __name__ == "__main__":
    main()
