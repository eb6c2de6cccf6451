"""Embedding a dataset, full-gallery retrieval metrics, the decomposability probe, export.

:func:`evaluate_split` is the one evaluation path: the trainer's ``evaluate`` and
``python -m lab eval`` both go through it."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Optional, Sequence, Union

import numpy as np
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset, Subset
from tqdm.auto import tqdm

from ..data.labeled_images import batchable, resized_pixels
from ..metrics import EVAL_KS, average_precision, decomposability_gap, retrieval_metrics
from .loading import transform_of
from .optim import amp_dtype


@torch.no_grad()
def embed_dataset(
    model: nn.Module,
    dataset: Dataset,
    device: torch.device,
    batch_size: int = 256,
    amp_dtype: Optional[torch.dtype] = None,
    indices: Optional[Sequence[int]] = None,
    progress: bool = False,
) -> tuple[Tensor, Tensor]:
    """(embeddings (N, D) float32, labels (N, L)) on the CPU, model in eval mode, in dataset order.

    ``indices`` embeds a subset. A dataset held in memory with the "small" evaluation transform
    (glyphs, digits) is embedded from its pixels, normalised by the batch on ``device`` (the
    same input tensors as the per-image path); others go through a DataLoader with a generator of
    its own. Nothing is drawn from a run's generators or the process-wide ones, so evaluating in
    the middle of a run does not change the run.
    """
    if batchable(dataset) and not dataset.transform.train:
        batches = _pixel_batches(dataset, indices, batch_size, device, progress)
    else:
        data = Subset(dataset, list(indices)) if indices is not None else dataset
        loader = DataLoader(data, batch_size=batch_size, shuffle=False, num_workers=0, generator=torch.Generator())
        batches = ((images, y) for images, y, _ in loader)
    was_training = model.training
    model.eval()
    embeddings, labels = [], []
    total = -(-len(dataset if indices is None else indices) // batch_size)
    try:
        for images, y in tqdm(batches, desc="embed", total=total, disable=not progress, leave=False):
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                e = model(images.to(device, non_blocking=True))
            embeddings.append(e.float().cpu())
            labels.append(y.view(len(y), -1))
    finally:
        model.train(was_training)
    return torch.cat(embeddings), torch.cat(labels)


def _pixel_batches(dataset, indices: Optional[Sequence[int]], batch_size: int, device: torch.device,
                   progress: bool) -> Iterator[tuple[Tensor, Tensor]]:
    """(images (b, C, S, S) on ``device``, labels (b, L)) of a batchable dataset, in order: its
    uint8 pixels (drawn or read once) go over a batch at a time and are normalised there."""
    pixels = resized_pixels(dataset, indices, progress)
    labels = dataset.labels if indices is None else dataset.labels[torch.as_tensor(list(indices), dtype=torch.long)]
    for start in range(0, len(pixels), batch_size):
        chunk = pixels[start : start + batch_size].to(device, non_blocking=True)
        yield dataset.transform.batch(chunk), labels[start : start + batch_size]


MIN_EVAL_CLASSES = 2  # with one class every item is a positive: R@1 = mAP = 1 whatever the model


def class_subset(labels: Tensor, max_items: Optional[int], seed: int = 0) -> Optional[list[int]]:
    """Indices of a fixed random subset of classes (finest level) holding about ``max_items``
    images, every image of a chosen class kept, so each query keeps all its positives; at least
    ``MIN_EVAL_CLASSES`` classes, even when that means more images. None: all."""
    if max_items is None or max_items >= len(labels):
        return None
    fine = labels.view(len(labels), -1)[:, 0]
    classes, counts = torch.unique(fine, return_counts=True)
    order = torch.randperm(len(classes), generator=torch.Generator().manual_seed(seed))
    take = int(torch.searchsorted(counts[order].cumsum(0), torch.tensor(max_items))) + 1
    chosen = classes[order[:max(take, MIN_EVAL_CLASSES)]]
    return torch.nonzero(torch.isin(fine, chosen)).squeeze(1).tolist()


def subset_size(labels: Tensor, max_items: Optional[int], seed: int = 0) -> dict[str, int]:
    """What :func:`class_subset` evaluates, recorded with every result: num_images and num_classes
    (finest level) of the subset, split_images and split_classes of the whole split. Fewer than
    ``MIN_EVAL_CLASSES`` classes is a ValueError: such a result would be perfect by construction."""
    fine = labels.view(len(labels), -1)[:, 0]
    indices = class_subset(labels, max_items, seed)
    kept = fine if indices is None else fine[indices]
    size = {"num_images": len(kept), "num_classes": len(torch.unique(kept)), "split_images": len(fine),
            "split_classes": len(torch.unique(fine))}
    if size["num_classes"] < MIN_EVAL_CLASSES:
        raise ValueError(f"evaluation needs at least {MIN_EVAL_CLASSES} classes, and the evaluated split holds "
                         f"{size['num_classes']} ({size['num_images']} images): every query would retrieve only "
                         "its own class (R@1 = mAP = 1 for any model)")
    return size


def describe_subset(labels: Tensor, max_items: Optional[int], seed: int = 0, split: str = "test") -> str:
    """One line saying what :func:`class_subset` evaluates: images and classes (finest level), of how many."""
    size = subset_size(labels, max_items, seed)
    if size["num_images"] == size["split_images"]:
        return f"evaluated on the whole {split} split: {size['num_images']:,} images, {size['num_classes']:,} classes"
    return (f"evaluated on {size['num_images']:,} of {size['split_images']:,} {split} images, "
            f"{size['num_classes']:,} of {size['split_classes']:,} classes (a fixed random subset of whole classes)")


def evaluate_embeddings(embeddings: Tensor, labels: Tensor, backend: str = "faiss",
                        level_names: Optional[Sequence[str]] = None, device: Optional[torch.device] = None,
                        ks: Sequence[int] = EVAL_KS) -> dict[str, float]:
    """Full-gallery R@k, mAP@R and mAP (and, with several label levels, H-AP, NDCG, ASI):
    every image queries all the others (lab.metrics.retrieval_metrics). The ranking runs on
    ``device`` (a GPU sorts a large gallery much faster than the CPU). "faiss" is faiss's CPU
    kernel: on a CUDA device the similarities are computed there by "torch" instead (the same
    numbers, see lab.metrics.retrieval_metrics), not copied to the CPU chunk by chunk."""
    if device is not None:
        embeddings, labels = embeddings.to(device), labels.to(device)
    names = list(level_names) if level_names is not None and len(level_names) == labels.shape[1] else None
    return retrieval_metrics(embeddings, labels, ks=ks, backend=metrics_backend(backend, device), level_names=names)


def metrics_backend(backend: str, device: Optional[torch.device] = None) -> str:
    """The backend retrieval_metrics gets for ``backend`` on ``device``: "torch" on a CUDA device
    (our "faiss" is faiss's CPU kernel: every block would go to the CPU and back) and where faiss
    is not installed (the same numbers either way), else ``backend``."""
    if device is not None and torch.device(device).type == "cuda":
        return "torch"
    if backend == "faiss":
        try:
            import faiss  # noqa: F401
        except ImportError:
            return "torch"
    return backend


def embed_split(model: nn.Module, dataset: Dataset, device: torch.device, cfg, max_items: Optional[int] = None,
                progress: bool = False, transform=None) -> tuple[Tensor, Tensor]:
    """(embeddings (N, D), labels (N, L)) of ``dataset`` (a fixed subset of whole classes with about
    ``max_items`` images, or all), with ``transform`` in place of its own when given."""
    indices = class_subset(dataset.labels, max_items, cfg.seed)
    with transform_of(dataset, transform):
        return embed_dataset(model, dataset, device, cfg.eval_batch_size, amp_dtype(cfg.amp), indices, progress)


def evaluate_split(model: nn.Module, dataset: Dataset, device: torch.device, cfg, *, max_items: Optional[int] = None,
                   ks: Sequence[int] = EVAL_KS, backend: Optional[str] = None, progress: bool = False,
                   transform=None) -> tuple[dict[str, float], Tensor, Tensor]:
    """(metrics, embeddings, labels): :func:`embed_split` then :func:`evaluate_embeddings` with the
    config's backend (unless ``backend``); the metrics also say what was evaluated (:func:`subset_size`).
    ``cfg`` is the run's :class:`lab.train.TrainConfig`."""
    size = subset_size(dataset.labels, max_items, cfg.seed)  # first: a refusal costs no embedding
    emb, labels = embed_split(model, dataset, device, cfg, max_items, progress, transform)
    metrics = evaluate_embeddings(emb, labels, backend or cfg.eval_backend, getattr(dataset, "level_names", None),
                                  device, ks=ks)
    return {**metrics, **size}, emb, labels


def batch_ap(embeddings: Tensor, labels: Tensor) -> float:
    """Mean exact AP of each item retrieving the rest of its batch (finest labels)."""
    e = embeddings.detach().float()
    fine = labels[:, 0]
    mask = ~torch.eye(len(e), dtype=torch.bool, device=e.device)
    ap = average_precision(e @ e.T, fine[:, None] == fine[None, :], mask)
    return float(torch.nanmean(ap))


def probe_gap(embeddings: Tensor, labels: Tensor, batch_ids: Tensor) -> float:
    """ROADMAP Eq. 6 estimated on the probe: mean in-batch AP minus AP against the whole probe."""
    return decomposability_gap(embeddings, labels, batch_ids)


def export_embeddings(path: Union[str, Path], embeddings: Tensor, labels: Tensor,
                      level_names: Optional[Sequence[str]] = None) -> Path:
    """Save for t-SNE / notebooks: ``.npz`` (numpy arrays) or ``.pt`` (torch tensors)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(level_names or [f"level{i}" for i in range(labels.shape[1])])
    if path.suffix == ".npz":
        np.savez(path, embeddings=embeddings.numpy(), labels=labels.numpy(), level_names=np.array(names))
    elif path.suffix == ".pt":
        torch.save({"embeddings": embeddings, "labels": labels, "level_names": names}, path)
    else:
        raise ValueError(f"export path must end in .npz or .pt, got {path.name!r}")
    return path
