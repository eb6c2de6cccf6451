"""The tables of bench/gpu.py: every loss on three engines, peers at equal B, mixed precision,
evaluation against AccuracyCalculator and training throughput. Each prints its rows as it goes."""
from __future__ import annotations

import os
import time
from typing import Optional

import torch

from bench import metrics as bench_metrics
from bench import peers
from bench import train as bench_train
from bench.gpu_cases import CUBIC, FLAT, GRADED, Case, Deadline, engine, ms, predicted, timed
from bench.gpu_targets import TRAIN_CASES, target_verdict

SLOW = 6.0  # seconds: a case predicted to take longer per call is skipped (the whole run must stay < 10 min)


def loss_tables(sizes: list[int], device: torch.device, engines: tuple[str, ...],
                deadline: Optional[Deadline] = None) -> tuple[str, dict]:
    """Section 1, and {(name, B, composition, engine): seconds} for the targets."""
    deadline = deadline or Deadline(float("inf"))
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
                    if deadline.passed():
                        cells.append(f"{deadline.note()} | —")
                        continue
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
                slow = times.get((name, b, composition, "cpu-sized"))
                fast = times.get((name, b, composition, "default"))
                ratio = f"{slow / fast:.1f}x" if slow and fast else "—"
                diff = "—"
                if "default" in results and len(results) > 1:
                    worst = {e: max(float((a - r).abs().max()) for a, r in zip(results[e], results["default"]))
                             for e in results if e != "default"}
                    diff = ", ".join(f"{e}: {d:.1e}" for e, d in worst.items())
                lines.append(f"| {name} | {b} | " + " | ".join(cells) + f" | {ratio} | {diff} |")
                print(lines[-1], flush=True)
        parts.append(f"#### {composition}\n\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n", times


PEERS = [  # (label, how to get theirs, our loss, same objective, builds (B, B, B) float tensors)
    ("cubic SmoothAP (the papers' (B, B, B) tensors)", lambda: peers.cubic_smooth_ap, "smooth_ap", True, True),
    ("pytorch-metric-learning FastAPLoss", lambda: peers.pml_loss("FastAPLoss"), "fast_ap", True, False),
    ("pytorch-metric-learning SmoothAPLoss", lambda: peers.pml_loss("SmoothAPLoss"), "smooth_ap", False, True),
]


def cubic_fits(size: int, device: torch.device) -> bool:
    """Whether one (B, B, B) float32 tensor fits in the device's free memory and in the host's.
    pytorch-metric-learning's SmoothAPLoss builds its (B, B, B) mask on the host first: at B = 4096
    that is 275 GB, and the kernel kills the process instead of raising an out-of-memory error."""
    need = 4 * size ** 3
    host = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else need
    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else host
    return need < min(free, host)


def peer_table(sizes: list[int], device: torch.device) -> str:
    """Section 2: the papers' cubic SmoothAP and pytorch-metric-learning, 4 per class, against ours."""
    lines = ["| theirs | ours | B | theirs: ms | MB | ours: ms | MB | abs diff of the loss |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for label, get, ours, same, cubic in PEERS:
        theirs = get()
        if theirs is None:
            lines.append(f"| {label} | `{ours}` | — | not installed | — | — | — | — |")
            continue
        for b in sizes:
            mine = Case(ours, b, "4/class", device)
            if cubic and not cubic_fits(b, device):
                t_ours, p_ours, _ = timed(mine, device)
                lines.append(f"| {label} | `{ours}` | {b} | needs {4 * b ** 3 / 1e9:.0f} GB for one (B, B, B) tensor: "
                             f"not run | — | {ms(t_ours)} | {p_ours:.0f} | — |")
                print(lines[-1], flush=True)
                continue

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


def eval_table(sizes: list[int], device: torch.device, deadline: Optional[Deadline] = None) -> tuple[str, dict]:
    """Section 4: retrieval_metrics and AccuracyCalculator on the same embeddings (D = 128); above 20k one
    timed run, after a warm-up of ours only (AccuracyCalculator took ~22 s at 100k in the issue's
    measurement; its first-call costs were paid at the smaller size)."""
    deadline = deadline or Deadline(float("inf"))
    lines = ["| N x D | data | R@1 | ours, all metrics: ms | ours, its metrics: ms | AccuracyCalculator: ms "
             "| ratio (its metrics) | largest difference |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    times = {}
    for n in sizes:
        if deadline.passed():
            lines.append(f"| {n} x 128 | — | — | {deadline.note()} | — | — | — | — |")
            continue
        small = n <= 20_000
        rows = bench_metrics.versus_accuracy_calculator(n, 128, device, repeat=3 if small else 1, warm_theirs=small)
        for data, row in rows.items():
            theirs = row["accuracy_calculator_s"]
            ratio = "" if theirs is None else f"{theirs / row['ours_top_s']:.1f}x"
            diff = "not installed" if row["max_abs_diff"] is None else f"{row['max_abs_diff']:.1e}"
            lines.append(f"| {n} x 128 | {data} | {row['R@1']:.3f} | {ms(row['ours_s'])} | {ms(row['ours_top_s'])} | "
                         f"{'' if theirs is None else ms(theirs)} | {ratio} | {diff} |")
            times[(n, data)] = row["ours_s"]
            print(lines[-1], flush=True)
    return "\n".join(lines) + f"\n\nAccuracyCalculator's k-NN: {knn_backend()}.\n", times


def knn_backend() -> str:
    """Where AccuracyCalculator's k-NN ran: faiss on the GPU or on the CPU (its ratio means different things)."""
    try:
        import faiss
    except ImportError:
        return "faiss not installed"
    gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    where = f"on {gpus} GPU(s)" if gpus else f"on the CPU, {faiss.omp_get_max_threads()} threads (faiss-cpu)"
    return f"faiss {faiss.__version__} {where}"


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
        verdict = target_verdict(value, limit, kind)
        lines.append(f"| {label} | {r['data']} | {w['steps_per_s']:.1f} | {w['images_per_s']:.0f} | "
                     f"{m['steps_per_s']:.1f} | {m['images_per_s']:.0f} | {r['fraction']:.0%} | "
                     f">= {shown}: {verdict} |")
        print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"
