"""The CUDA section of docs/benchmarks.md, in one command on one GPU, in under 10 minutes.

    python bench/gpu.py              # needs a CUDA device; without one it says so and exits 0
    python bench/gpu.py --no-write   # print the section instead of writing it
    python bench/gpu.py --smoke      # tiny sizes on whatever device there is (CPU too): checks the script

1. Every loss at B = 1024, 4096, 16384 with 4 per class, 2 classes, and 2 levels for the
   hierarchical losses, fwd + bwd from the embeddings, on three engines:
   - the default on CUDA (fused Triton kernels, device budget);
   - the PyTorch path with the device budget;
   - "CPU-sized": the engine as it ran on every device before, cache-sized blocks and tiles.
   Columns: time, peak memory, largest differences.
2. Peers at equal B: the papers' cubic SmoothAP, and pytorch-metric-learning's FastAPLoss and
   SmoothAPLoss (`pip install pytorch-metric-learning` to include them).
3. AMP: embeddings in bf16 / fp16 (the loss stays float32): time and the difference from float32.
4. Evaluation: retrieval_metrics against pytorch-metric-learning's AccuracyCalculator at 15k and
   100k x 128 (easy and hard data, bench/metrics.py), and `lab eval --eval-images all` on glyphs.
5. Training throughput with the data path against the model alone (bench/train.py): small_cnn at
   B = 256 and resnet50 @224 bf16 at B = 128.
The load, the GPU, torch and Triton versions head the section; each target of issue 20 is stated
as met or missed.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]
import metrics as bench_metrics  # noqa: E402
import peers  # noqa: E402
import train as bench_train  # noqa: E402
from measure import load_average, measure, publish  # noqa: E402

import lab.core.budget as budget  # noqa: E402
import lab.losses as L  # noqa: E402
from lab.losses import fused_sums  # noqa: E402

DIM = 512  # the measurements: D = 512
FLAT = ["smooth_ap", "sup_ap", "roadmap", "calibration", "fast_ap", "soft_bin_ap", "blackbox_ap", "smooth_recall",
        "sup_recall", "rod_recall", "roadmap_proxy", "proxy_dg"]
GRADED = ["sup_hap", "happier", "sup_ndcg", "rod_ndcg"]
CUBIC = {"smooth_ap", "sup_ap", "roadmap", "smooth_recall", "sup_recall", "rod_recall", "roadmap_proxy"}  # O(B P N)
ENGINES = ("default", "pytorch", "cpu-sized")
SLOW = 6.0  # seconds: a case predicted to take longer per call is skipped (the whole run must stay < 10 min)


@contextlib.contextmanager
def engine(name: str) -> Iterator[None]:
    """``default``: as shipped; ``pytorch``: fused kernels off; ``cpu-sized``: kernels off and the CPU's
    block, tile and chunk sizes on any device (what the engine did everywhere before)."""
    saved_env = os.environ.get(fused_sums.FUSED_ENV)
    saved_cache = budget.uses_cache_blocks
    try:
        if name != "default":
            os.environ[fused_sums.FUSED_ENV] = "0"
        if name == "cpu-sized":
            budget.uses_cache_blocks = lambda device: True
            with budget.memory_budget(budget.CPU_BUDGET):
                yield
        else:
            yield
    finally:
        budget.uses_cache_blocks = saved_cache
        if saved_env is None:
            os.environ.pop(fused_sums.FUSED_ENV, None)
        else:
            os.environ[fused_sums.FUSED_ENV] = saved_env


def batch(size: int, composition: str, device: torch.device, dtype=torch.float32):
    """(embeddings (B, DIM) leaf, labels): "4/class" and "2 classes" give (B,) fine labels; "2 levels"
    gives (B, 2), 4 per fine class and 8 fine classes per coarse class."""
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(size, DIM, generator=g).to(device=device, dtype=dtype).requires_grad_()
    per_class = size // 2 if composition == "2 classes" else 4
    fine = torch.arange(size, device=device) // per_class
    labels = torch.stack([fine, fine // 8], 1) if composition == "2 levels" else fine
    return emb, labels


def build(name: str, labels: torch.Tensor, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(0)
    fine = labels if labels.dim() == 1 else labels[:, 0]
    return L.build_loss(name, num_classes=int(fine.max()) + 1, embed_dim=DIM).to(device)


class Case:
    """One loss on one batch: forward + backward from the embeddings; the last value and gradient kept."""

    def __init__(self, name: str, size: int, composition: str, device: torch.device) -> None:
        self.emb, self.labels = batch(size, composition, device)
        self.loss = build(name, self.labels, device)
        self.value: Optional[torch.Tensor] = None

    def __call__(self) -> None:
        self.emb.grad = None
        value = self.loss(self.emb, self.labels)
        value.backward()
        self.value = value.detach()

    def result(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.value.float().cpu(), self.emb.grad.float().cpu()


def timed(fn: Callable[[], None], device: torch.device) -> tuple[Optional[float], Optional[float], str]:
    """(seconds, peak MB, note): the median of 3 after a warm-up, or one run when one takes over a second."""
    try:
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        first = time.perf_counter() - start
        seconds, peak = measure(fn, device, repeat=1 if first > 1.0 else 3)
        return seconds, peak, ""
    except torch.OutOfMemoryError:
        return None, None, "out of memory"
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()


def ms(seconds: Optional[float]) -> str:
    if seconds is None:
        return "—"
    return f"{seconds * 1e3:.0f}" if seconds >= 0.1 else f"{seconds * 1e3:.2g}" if seconds < 1e-3 else \
        f"{seconds * 1e3:.1f}"


def predicted(last: dict, key: tuple, size: int, grow: int) -> Optional[float]:
    """Seconds one call at ``size`` should take, from the last size measured for ``key`` (B^grow)."""
    if key not in last:
        return None
    b, seconds = last[key]
    return seconds * (size / b) ** grow


def loss_tables(sizes: list[int], device: torch.device, engines: tuple[str, ...]) -> tuple[str, dict]:
    """Section 1, and {(name, B, composition, engine): seconds} for the targets."""
    times, last, parts = {}, {}, []
    for composition, names in (("4/class", FLAT + GRADED), ("2 classes", FLAT), ("2 levels", GRADED)):
        lines = ["| loss | B | " + " | ".join(f"{e}: ms | MB" for e in engines) + " | CPU-sized / default | "
                 "max abs diff to default (value or gradient) |",
                 "|---|---:|" + "---:|---:|" * len(engines) + "---:|---|"]
        for name in names:
            grow = 3 if composition == "2 classes" and name in CUBIC else 2
            for b in sizes:
                cells, results = [], {}
                for eng in engines:
                    guess = predicted(last, (name, composition, eng), b, grow)
                    if guess is not None and guess > SLOW:
                        cells.append(f"~{guess:.0f} s predicted: not run | —")
                        continue
                    case = Case(name, b, composition, device)
                    with engine(eng):
                        seconds, peak, note = timed(case, device)
                    times[name, b, composition, eng] = seconds
                    if seconds is None:
                        cells.append(f"{note} | —")
                        continue
                    last[name, composition, eng] = (b, seconds)
                    results[eng] = case.result()
                    cells.append(f"{ms(seconds)} | {peak:.0f}")
                    del case
                slow, fast = times.get((name, b, composition, "cpu-sized")), times.get((name, b, composition, "default"))
                ratio = f"{slow / fast:.1f}x" if slow and fast else "—"
                diff = "—"
                if "default" in results and len(results) > 1:
                    diff = ", ".join(f"{e}: {max(float((a - r).abs().max()) for a, r in zip(results[e], results['default'])):.1e}"
                                     for e in results if e != "default")
                lines.append(f"| {name} | {b} | " + " | ".join(cells) + f" | {ratio} | {diff} |")
                print(lines[-1], flush=True)
        parts.append(f"#### {composition}\n\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n", times


PEERS = [  # (label, how to get theirs, our loss, same objective)
    ("cubic SmoothAP (the papers' (B, B, B) tensors)", lambda: peers.cubic_smooth_ap, "smooth_ap", True),
    ("pytorch-metric-learning FastAPLoss", lambda: peers.pml_loss("FastAPLoss"), "fast_ap", True),
    ("pytorch-metric-learning SmoothAPLoss", lambda: peers.pml_loss("SmoothAPLoss"), "smooth_ap", False),
]


def peer_table(sizes: list[int], device: torch.device) -> str:
    """Section 2: the papers' cubic SmoothAP and pytorch-metric-learning, 4 per class, against ours."""
    lines = ["| theirs | ours | B | theirs: ms | MB | ours: ms | MB | abs diff of the loss |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for label, get, ours, same in PEERS:
        theirs = get()
        if theirs is None:
            lines.append(f"| {label} | `{ours}` | — | not installed | — | — | — | — |")
            continue
        for b in sizes:
            mine = Case(ours, b, "4/class", device)

            def run_theirs(emb=mine.emb, labels=mine.labels, fn=theirs):
                emb.grad = None
                fn(emb, labels).backward()
            t_theirs, p_theirs, note = timed(run_theirs, device)
            t_ours, p_ours, _ = timed(mine, device)
            diff = "different objective"
            if same and t_theirs is not None:
                with torch.no_grad():
                    diff = f"{float((theirs(mine.emb, mine.labels) - mine.loss(mine.emb, mine.labels)).abs()):.1e}"
            cell = f"{ms(t_theirs)} | {p_theirs:.0f}" if t_theirs is not None else f"{note} | —"
            lines.append(f"| {label} | `{ours}` | {b} | {cell} | {ms(t_ours)} | {p_ours:.0f} | {diff} |")
            print(lines[-1], flush=True)
            del mine
    return "\n".join(lines) + "\n"


def amp_table(size: int, device: torch.device) -> str:
    """Section 3: embeddings produced under autocast (bf16, fp16); the losses run in float32 inside."""
    lines = ["| loss | B | float32: ms | bf16: ms | fp16: ms | max abs diff of the loss vs float32 (bf16, fp16) |",
             "|---|---:|---:|---:|---:|---|"]
    for name in ["smooth_ap", "roadmap", "fast_ap", "sup_hap"]:
        composition = "2 levels" if name in GRADED else "4/class"
        cells, values = [], {}
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            case = Case(name, size, composition, device)
            case.emb = case.emb.detach().to(dtype).requires_grad_()
            seconds, _, note = timed(case, device)
            cells.append(ms(seconds) if seconds is not None else note)
            values[dtype] = case.value
        diffs = ", ".join(f"{float((values[d].float() - values[torch.float32]).abs()):.1e}"
                          for d in (torch.bfloat16, torch.float16))
        lines.append(f"| {name} | {size} | " + " | ".join(cells) + f" | {diffs} |")
        print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


TARGETS = [  # (what, loss, B, composition, seconds): issue 20's targets on an H100
    ("4 per class, B = 16384, <= 20 ms", "smooth_ap", 16384, "4/class", 0.020),
    ("4 per class, B = 16384, <= 20 ms", "sup_ap", 16384, "4/class", 0.020),
    ("2 classes, B = 4096, <= 0.3 s", "smooth_ap", 4096, "2 classes", 0.3),
    ("2 classes, B = 4096, <= 0.3 s", "sup_ap", 4096, "2 classes", 0.3),
    ("2 levels, B = 4096, <= 50 ms", "sup_hap", 4096, "2 levels", 0.050),
    ("2 levels, B = 4096, <= 50 ms", "sup_ndcg", 4096, "2 levels", 0.050),
    ("2 levels, B = 4096, <= 50 ms", "happier", 4096, "2 levels", 0.050),
    ("FastAP, B = 16384, < 100 ms", "fast_ap", 16384, "4/class", 0.100),
]


def target_lines(times: dict) -> str:
    lines = []
    for what, name, b, composition, limit in TARGETS:
        t = times.get((name, b, composition, "default"))
        verdict = "not measured" if t is None else ("met" if t <= limit else f"**missed** ({t / limit:.1f}x the limit)")
        lines.append(f"- `{name}`, {what}: {ms(t)} ms, {verdict}.")
    return "\n".join(lines) + "\n"


def eval_table(sizes: list[int], device: torch.device) -> tuple[str, dict]:
    """Section 4: retrieval_metrics and AccuracyCalculator on the same embeddings (D = 128); at 100k one
    timed run after the warm-up (AccuracyCalculator took ~22 s there in the issue's measurement)."""
    lines = ["| N x D | data | R@1 | ours, all metrics: ms | ours, its metrics: ms | AccuracyCalculator: ms "
             "| ratio (its metrics) | largest difference |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    times = {}
    for n in sizes:
        for data, row in bench_metrics.versus_accuracy_calculator(n, 128, device, repeat=3 if n <= 20_000 else 1).items():
            theirs = row["accuracy_calculator_s"]
            ratio = "" if theirs is None else f"{theirs / row['ours_top_s']:.1f}x"
            diff = "not installed" if row["max_abs_diff"] is None else f"{row['max_abs_diff']:.1e}"
            lines.append(f"| {n} x 128 | {data} | {row['R@1']:.3f} | {ms(row['ours_s'])} | {ms(row['ours_top_s'])} | "
                         f"{'' if theirs is None else ms(theirs)} | {ratio} | {diff} |")
            times[(n, data)] = row["ours_s"]
            print(lines[-1], flush=True)
    return "\n".join(lines) + "\n", times


def eval_whole_split(device: torch.device, max_items: Optional[int]) -> tuple[float, int]:
    """`lab eval --eval-images all` without the checkpoint load: a small_cnn embeds the glyphs' whole
    test split and scores it. -> (seconds, images); the split is drawn (or read back) before the clock."""
    from lab.train import TrainConfig, Trainer

    trainer = Trainer(TrainConfig(device=str(device), eval_every=0, eval_max_items=max_items, progress=False))
    trainer.embed("test", 256)  # warm-up: kernels and the test split's pixels
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    result = trainer.evaluate()
    sync()
    return time.perf_counter() - start, int(result["num_queries"]) + int(result.get("excluded_queries", 0))


TRAIN_CASES = [  # (label, training_throughput's arguments, target fraction or steps/s)
    ("small_cnn, B = 256, 32 px", dict(model="small_cnn", batch_size=256, image_size=32, amp="none"), ("steps/s", 60)),
    ("resnet50 @224 bf16, B = 128", dict(model="resnet50", batch_size=128, image_size=224, amp="bf16"),
     ("fraction", 0.8)),
]


def train_table(device: torch.device, smoke: bool) -> str:
    """Section 5: the trainer's steps with its data path against forward + loss + backward + Adam alone."""
    lines = ["| run | data path | with data: steps/s | images/s | model only: steps/s | images/s | with data / "
             "model only | target |", "|---|---|---:|---:|---:|---:|---:|---|"]
    for label, kwargs, (kind, limit) in TRAIN_CASES:
        if smoke:  # the script's path only: no verdict means anything here
            kwargs = {**kwargs, "model": "small_cnn", "batch_size": 16, "image_size": 32}
            label = f"smoke: small_cnn, B = 16, in place of {label}"
        r = bench_train.training_throughput(device, steps=3 if smoke else 30, warmup=1 if smoke else 5, **kwargs)
        w, m = r["with_data"], r["model_only"]
        value = w["steps_per_s"] if kind == "steps/s" else r["fraction"]
        shown = f"{limit:.0f} steps/s" if kind == "steps/s" else f"{limit:.0%} of model only"
        verdict = "met" if value >= limit else f"**missed** ({value / limit:.0%} of it)"
        lines.append(f"| {label} | {r['data']} | {w['steps_per_s']:.1f} | {w['images_per_s']:.0f} | "
                     f"{m['steps_per_s']:.1f} | {m['images_per_s']:.0f} | {r['fraction']:.0%} | >= {shown}: {verdict} |")
        print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


def describe(device: torch.device) -> str:
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "no GPU (smoke run on the CPU)"
    triton = getattr(fused_sums.triton, "__version__", "not installed")
    free = f", {torch.cuda.mem_get_info(device)[0] / 2**30:.0f} GiB free at the start" if device.type == "cuda" else ""
    return (f"{gpu}{free}; torch {torch.__version__}, Triton {triton}; load average (1 min) {load_average():.1f} "
            f"on {os.cpu_count()} CPUs; default memory budget per loss call {budget.budget_bytes(device) / 2**20:.0f} MB")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-write", action="store_true", help="print the section, do not write docs/benchmarks.md")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on any device: check the script only")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() and not args.smoke:
        print("bench/gpu.py measures the CUDA path and this machine has no CUDA device: nothing measured, nothing "
              "written. (--smoke runs it at tiny sizes on the CPU, to check the script.)")
        return 0
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sizes = [16, 32] if args.smoke else [1024, 4096, 16384]
    engines = ENGINES if device.type == "cuda" else ("pytorch", "cpu-sized")
    start = time.perf_counter()
    section = [f"## GPU (`python bench/gpu.py`)\n\n{describe(device)}. Times: wall clock with "
               "`torch.cuda.synchronize`, median of 3 after a warm-up (one run when a call takes over a second); MB: "
               "peak of `torch.cuda.max_memory_allocated` above the inputs. Embeddings: B x 512, L2-normalised inside "
               "the loss, fwd + bwd."]
    tables, times = loss_tables(sizes, device, engines)
    section += ["### Every loss, three engines\n\n" + tables, "### Targets\n\n" + target_lines(times)]
    section.append("### Peers, 4 per class\n\n" + peer_table(sizes[:2], device))
    section.append("### Mixed precision\n\n" + amp_table(sizes[1], device))
    table, eval_times = eval_table([500, 1000] if args.smoke else [15_000, 100_000], device)
    hundred_k = eval_times.get((100_000, "easy"))
    section.append("### Evaluation\n\n" + table + f"\n- `retrieval_metrics`, 100k x 128, <= 1 s: {ms(hundred_k)} ms, "
                   + ("not measured" if hundred_k is None else "met" if hundred_k <= 1.0 else "**missed**") + ".")
    seconds, images = eval_whole_split(device, 500 if args.smoke else None)
    section[-1] += (f"\n- `lab eval --eval-images all` on glyphs (small_cnn, {images} images), <= 5 s: {seconds:.1f} s, "
                    + ("met" if seconds <= 5.0 else "**missed**") + ".\n")
    section.append("### Training throughput\n\n" + train_table(device, args.smoke))
    section.append(f"Whole run: {time.perf_counter() - start:.0f} s.")
    publish("gpu", "\n\n".join(section), dry_run=args.no_write or args.smoke)
    return 0


if __name__ == "__main__":
    sys.exit(main())
