"""The GPU way of counting (lab.metrics.counting._on_device), run on CPU tensors in place of numpy's,
so that tests without a GPU go through every line the device runs."""
import numpy as np
import torch

import lab.metrics.chunking as chunking
import lab.metrics.counting as counting
import lab.metrics.retrieval as retrieval


def _device_counts(s: np.ndarray, t: np.ndarray, cap=None) -> tuple[np.ndarray, np.ndarray]:
    # no cap here: count_at_least applies a cap to any way's counts, the device's included
    at_least, among = counting._on_device(torch.from_numpy(s), torch.from_numpy(t))
    return at_least.numpy(), among.numpy()


def count_as_on_a_device(monkeypatch, max_passes: int) -> None:
    """From now on (this test) the CPU counts in torch, sizes its chunks and runs them one after the
    other as a device does (so a dispatch probe, which sees its own thread's ops only, sees them all);
    ``max_passes``: DEVICE_MAX_PASSES (0: buckets only, large: broadcast comparisons only)."""
    monkeypatch.setattr(counting, "DEVICE_MAX_PASSES", max_passes)
    monkeypatch.setattr(counting, "_count_numpy", _device_counts)
    monkeypatch.setitem(chunking.SCORE_BYTES, "cpu", chunking.SCORE_BYTES["device"])
    monkeypatch.setattr(retrieval, "chunk_workers", lambda *args: 1)
