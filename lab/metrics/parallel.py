"""Who runs the chunks of :func:`lab.metrics.retrieval_metrics` on the CPU, on how many torch threads.

With one worker (a GPU, the faiss backend, or one thread), the chunks run in order: the product on the
caller's threads, the chunk's bookkeeping on one (:func:`one_thread`). On a CPU with T > 1 threads,
T Python workers each take whole chunks, every torch op on one thread: the product of a few hundred
rows costs no more CPU time per score on one thread than on two (measured: 0.48-0.51 s for 15k x 15k
x 64 in chunks of 68 to 1,024 rows), and between two products the serial bookkeeping of a chunk no
longer leaves the other core idle or spinning (15k random data on 2 busy cores: 1.66 s of CPU time
with 2 threads a product against 0.90 s with 2 workers). torch releases the GIL inside its ops, and
numpy inside its loops, so the workers run at once.
"""
from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, Optional, Sequence

import torch
from tqdm.auto import tqdm

from ..core.env import torch_threads
from .chunking import SCORE_BYTES

# The fewest queries a worker's chunk may hold: below this, a chunk's fixed costs (a dozen small torch
# ops, a thread hand-over: a few ms) weigh on its product (32 x 30k scores: ~60 ms on one thread). With 2
# threads and the CPU's 32 MB budget: 2 workers up to N = 65k, 1 beyond (the product then on the caller's
# threads, as before the workers).
MIN_WORKER_ROWS = 32


@contextlib.contextmanager
def one_thread(device: torch.device) -> Iterator[None]:
    """On the CPU, a chunk's bookkeeping (tensors of a few thousand entries; the big counting is
    numpy's, in as many Python threads as the caller had torch threads) runs on one torch thread:
    starting threads for it costs more than it saves, and on a busy machine far more, as a parallel op
    waits for a free core (15k easy data on 2 loaded cores: 2.3 s with 2 threads, against 1.7 s before
    issue 20). torch's thread count
    is process-wide: meanwhile other Python threads' ops run on one thread too."""
    with torch_threads(1 if device.type == "cpu" else None):
        yield


def chunk_workers(device: torch.device, backend: str, n: int, budget: int, chunk_size: Optional[int] = None) -> int:
    """Workers for the chunks: on the CPU with the torch backend, the caller's torch threads, as long as
    each worker's share of ``budget`` still holds MIN_WORKER_ROWS queries against a gallery of ``n``
    (many threads and a large gallery: fewer workers, not chunks of a few rows, each paying a chunk's
    fixed costs); with ``chunk_size`` given, the threads. Else 1 (faiss spreads its own product over
    OpenMP threads; a GPU's chunks queue on one stream)."""
    if device.type != "cpu" or backend != "torch":
        return 1
    threads = torch.get_num_threads()
    if chunk_size is not None:
        return threads
    return max(1, min(threads, budget // (n * SCORE_BYTES["cpu"] * MIN_WORKER_ROWS)))


def run_chunks(fn: Callable[[tuple[int, int]], None], bounds: Sequence[tuple[int, int]], workers: int,
               device: torch.device, progress: bool = False) -> None:
    """``fn(bound)`` for every chunk: in order with one worker, else on ``workers`` Python threads with
    torch on one thread meanwhile (restored after, also on an error)."""
    bar = tqdm(total=len(bounds), desc="retrieval metrics", disable=not progress, leave=False)
    if workers == 1:
        for bound in bounds:
            fn(bound)
            bar.update()
    else:
        # The pool is made after torch's count is set to 1, in this thread: its threads start on one torch
        # thread (a new thread's first op reads the process's count), and a forked child re-creates torch's
        # pool here, once, not in two workers at once (lab.metrics.counting._executor).
        with one_thread(device):
            pool = ThreadPoolExecutor(workers, thread_name_prefix="ranklab-chunks")
            try:
                for _ in pool.map(fn, bounds):  # in order; the first error (or Ctrl-C) is raised here
                    bar.update()
            finally:  # after an error the chunks not yet started are dropped, not computed
                pool.shutdown(wait=True, cancel_futures=True)
    bar.close()
