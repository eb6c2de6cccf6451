"""How a run uses its device, beyond what the config says: the data path, the loader settings,
the memory layout, mixed precision for ``amp="auto"``, and what an interactive run evaluates.
Pure functions of the device and the config, so the CUDA choices are tested on any machine.

- Embedded datasets with the "small" transform (glyphs, digits): the images are one uint8
  tensor on the device and a batch is an index gather plus the random shift done by the batch
  (:class:`lab.train.loading.DeviceBatchStream`); no DataLoader, no worker. On every device: it
  is also faster on the CPU, and it draws the same augmentation on all of them.
- Disk datasets (a DataLoader): on the CPU as the config says (default: no worker, torch's
  threads use the cores); on CUDA, unless ``num_workers`` is set, one worker per usable core of
  this process (its share under torchrun, one core left to the training loop, at most
  ``MAX_WORKERS``), pinned memory, persistent workers, ``PREFETCH`` batches ahead.
- CUDA: non-blocking host-to-device copies; timm backbones in channels_last (what tensor cores
  want for convolutions) and, for ``amp="auto"`` (the default), bf16 autocast (:func:`auto_amp`;
  ``amp="none"`` keeps float32). The Trainer resolves "auto" as it is built (:func:`resolve_amp`)
  and records the resolved value (config.yaml, checkpoints), whoever built the config: the CLI,
  a notebook, the dashboard. The studies state ``amp="none"``: their keys hash the amp.
- Evaluation size: ``python -m lab train`` from flags alone evaluates ``INTERACTIVE_EVAL_IMAGES``
  images (:func:`interactive_eval_items`), a few seconds on 2 cores. A policy of interactive
  commands, not a config default: ``Trainer(cfg)`` evaluates what ``cfg.eval_max_items`` says
  (None: the whole split), as the notebooks and the studies rely on.
- Accelerators: a step reads nothing from the device; its numbers are read at the steps that log
  (``deferred_reads``, lab.train.host_reads). Not with fp16, whose scaler reads its own state, nor
  on the CPU, where a read waits for nothing and the simple path is the reference trajectory.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Union

import torch

from .config import TrainConfig

MAX_WORKERS = 16  # decoding JPEGs for one GPU rarely needs more; more only costs memory and start-up
PREFETCH = 4  # batches each worker prepares ahead (DataLoader's default is 2)
# What `python -m lab train` without a recipe, checkpoint or --eval-images, and `python -m lab eval`,
# evaluate: a fixed subset of whole classes, a few seconds on 2 cores (`--eval-images all`: the split).
INTERACTIVE_EVAL_IMAGES = 3000


@dataclass(frozen=True)
class RuntimePlan:
    """What :func:`runtime_plan` chose; ``describe()`` says it in one line (printed by the CLI)."""

    device: str
    device_batches: bool  # the images on the device, batches gathered there (no DataLoader)
    num_workers: int  # DataLoader workers (0: in the training process)
    pin_memory: bool
    persistent_workers: bool
    prefetch_factor: Optional[int]  # None: DataLoader's default
    non_blocking: bool  # host-to-device copies overlap with compute
    channels_last: bool  # model and images in NHWC
    workers_auto: bool = False  # num_workers was derived (the config left it None)
    workers_unused: bool = False  # the config asked for workers, but there is no DataLoader
    deferred_reads: bool = False  # a step's numbers read at the steps that log, not by every step

    def describe(self) -> str:
        if self.device_batches:
            data = (f"data: the images as one uint8 tensor on {self.device}, each batch gathered and shifted "
                    f"there (no DataLoader{', num_workers unused' if self.workers_unused else ''})")
        elif self.num_workers:
            derived = " (from the usable cores)" if self.workers_auto else ""
            data = (f"data: DataLoader with {self.num_workers} workers{derived}"
                    f"{', pinned memory' if self.pin_memory else ''}, persistent workers"
                    f"{f', prefetch {self.prefetch_factor}' if self.prefetch_factor else ''}")
        else:
            data = f"data: DataLoader in the training process{', pinned memory' if self.pin_memory else ''}"
        extras = [name for name, on in (("non-blocking copies", self.non_blocking and not self.device_batches),
                                        ("channels_last", self.channels_last),
                                        ("host reads at the logging steps only", self.deferred_reads)) if on]
        return "; ".join([data, *extras])


def usable_cpus() -> int:
    """Cores this process may run on (its CPU affinity, e.g. a container's or a job's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def runtime_plan(device: Union[str, torch.device], cfg: TrainConfig, *, batchable: bool, timm_backbone: bool,
                 cpus: Optional[int] = None, local_world_size: int = 1) -> RuntimePlan:
    """The data path and device settings of a run of ``cfg`` on ``device``.

    ``batchable``: the training set can be gathered on the device (:func:`lab.data.labeled_images.batchable`);
    ``timm_backbone``: the model is a timm backbone; ``cpus``: usable cores (default
    :func:`usable_cpus`), shared by ``local_world_size`` processes on this machine.
    """
    device = torch.device(device)
    cuda = device.type == "cuda"
    if local_world_size < 1:
        raise ValueError(f"local_world_size must be >= 1, got {local_world_size}")
    workers_auto = cfg.num_workers is None and not batchable
    if batchable:
        workers = 0
    elif cfg.num_workers is not None:
        workers = cfg.num_workers
    elif cuda:
        share = (cpus if cpus is not None else usable_cpus()) // local_world_size
        workers = max(1, min(MAX_WORKERS, share - 1))  # one core stays with the training loop
    else:
        workers = 0  # CPU training: the cores belong to torch's threads
    loader = not batchable
    return RuntimePlan(
        device=str(device), device_batches=batchable, num_workers=workers, pin_memory=cuda and loader,
        persistent_workers=workers > 0, prefetch_factor=PREFETCH if cuda and workers > 0 else None,
        non_blocking=cuda, channels_last=cuda and timm_backbone, workers_auto=workers_auto,
        workers_unused=batchable and bool(cfg.num_workers),
        deferred_reads=device.type != "cpu" and cfg.amp != "fp16")


def auto_amp(device: Union[str, torch.device], amp: str, *, timm_backbone: bool,
             bf16_supported: bool = True) -> tuple[str, str]:
    """(amp, why): for ``amp="auto"``, bf16 autocast for a timm backbone on a CUDA device that has bf16
    (the loss stays float32), else float32 ("none"); any other ``amp`` is an explicit choice, kept."""
    if amp != "auto":
        return amp, f"amp {amp} (the config's)"
    if torch.device(device).type == "cuda" and timm_backbone:
        if bf16_supported:
            return "bf16", "bf16 autocast for a timm backbone on CUDA (amp auto; --amp none keeps float32)"
        return "none", "float32: this GPU has no bf16 (amp auto; --amp fp16 for mixed precision)"
    return "none", "float32 (amp auto: bf16 autocast only for a timm backbone on CUDA)"


def resolve_amp(cfg: TrainConfig, device: Union[str, torch.device, None] = None,
                timm_backbone: Optional[bool] = None) -> tuple[TrainConfig, str]:
    """(``cfg`` with ``amp="auto"`` replaced by :func:`auto_amp`'s choice, why). The Trainer passes its
    device and model; without them, the device ``cfg.device`` selects here and whether ``cfg.model`` is a
    timm name (for comparing a wanted config with a stored, resolved one). Other amps are returned as they are."""
    if cfg.amp != "auto":
        return cfg, f"amp {cfg.amp} (the config's)"
    from ..models import MODELS
    from .optim import select_device

    device = torch.device(device) if device is not None else select_device(cfg.device)
    timm = timm_backbone if timm_backbone is not None else cfg.model not in MODELS
    bf16 = timm and bf16_supported(device)  # the GPU is asked only where its answer decides
    amp, why = auto_amp(device, cfg.amp, timm_backbone=timm, bf16_supported=bf16)
    return cfg.with_amp(amp), why


def interactive_eval_items(eval_max_items: Optional[int], *, chosen: bool) -> Optional[int]:
    """What an interactive command evaluates: ``eval_max_items`` when it was ``chosen`` (a flag, a recipe,
    the run being resumed) or is set, else ``INTERACTIVE_EVAL_IMAGES`` images rather than the whole split."""
    return eval_max_items if chosen or eval_max_items is not None else INTERACTIVE_EVAL_IMAGES


def bf16_supported(device: torch.device) -> bool:
    """Whether ``device`` runs bf16 autocast natively (CUDA only asks the device)."""
    return device.type != "cuda" or torch.cuda.is_bf16_supported()


def apply_determinism(enabled: bool) -> None:
    """``deterministic=True`` (``--deterministic``): torch's deterministic algorithms for the rest of the process.

    On CUDA a float ``index_add`` / ``scatter_add`` and cuDNN's convolution backward sum in an order that
    varies from run to run, so two runs of one seed drift apart; cuBLAS needs a fixed workspace for
    reproducible products. An op without a deterministic implementation warns (torch names it) rather
    than stopping the run. On the CPU this changes nothing: every run is deterministic already."""
    if not enabled:
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
