"""What a run will need of the machine's memory, estimated before anything of that size is allocated.

``--image-size 100000`` on digits allocated 20 GB for 212 s before it was stopped, and ``--embed-dim
1000000000`` died in the allocator with a traceback. :func:`check_fits` (the Trainer and ``python -m lab
eval`` call it before they build the model or hold a batch) adds up, from the config and one image of
the dataset:

- the model's parameters (with their gradients and Adam's two moments when training), counted on a copy
  built on PyTorch's meta device, which holds shapes and no memory;
- a training batch: its images and the backbone's activations for each image (the outputs of its layers,
  which backward needs; measured by running the meta copy on one image), and an evaluation batch;
- the images a dataset held in memory keeps at the training size (glyphs, digits), and the cross-batch memory.

It is a floor, not a forecast (the backward pass and the allocator need more), so a refusal is certain to
be right. A run whose floor exceeds the memory available is refused in one line naming the flags, the
estimate and the memory available. The check needs no memory itself: tests set a small available memory.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
from torch import nn
from torch.func import functional_call

from .checkpoint import preserved_rng
from .config import TrainConfig

ADAM_COPIES = 4  # weights, gradients and Adam's two moments, each as large as the parameters
MAX_CHANNELS = 3  # the most channels any transform here produces (RGB)


@dataclass(frozen=True)
class Need:
    flags: str  # the flags that set its size: "--image-size 100000, --batch-size 128"
    what: str
    nbytes: int
    on_device: bool = True  # False: host memory even when training on an accelerator


def available_bytes(device: torch.device) -> int:
    """Memory this run can still have: the accelerator's free memory, or the host's available memory
    (psutil's estimate when installed, else /proc/meminfo's MemAvailable, else the free pages)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        import psutil
        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import os
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def human(nbytes: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if nbytes < 1000 or unit == "PB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1000
    raise AssertionError("unreachable")


def _leaf_outputs(module: nn.Module, image: torch.Tensor, run: Optional[Callable] = None) -> tuple[int, int]:
    """(sum, largest) of the element counts of ``module``'s leaf outputs for one meta image (``run``: how to
    call it, default ``module(image)``)."""
    counts: list[int] = []
    hooks = [m.register_forward_hook(lambda m, i, o: counts.append(o.numel() if isinstance(o, torch.Tensor) else 0))
             for m in module.modules() if not list(m.children())]
    try:
        (run or module)(image)
    finally:
        for hook in hooks:
            hook.remove()
    return sum(counts), max(counts, default=0)


@functools.lru_cache(maxsize=32)
def _backbone(name: str, pooling: str, in_chans: int, height: int, width: int) -> tuple[int, int, int, int]:
    """(features, parameters, summed and largest activation elements per image) of a config's backbone,
    built on the meta device (embed_dim does not change the backbone)."""
    from ..models import build_model

    with torch.device("meta"):
        model = build_model(name, 1, in_chans, False, pooling, image_size=height if height == width else None)
    params = sum(p.numel() for p in model.backbone.parameters())
    total, largest = _leaf_outputs(model.backbone.eval(), torch.empty(1, in_chans, height, width, device="meta"))
    return model.head.proj.in_features, params, total, largest


def _given_model(model: nn.Module, image: torch.Tensor) -> tuple[int, int, int]:
    """(parameters, summed and largest activation elements per image) of a model passed in. Its backbone
    runs on meta copies of its tensors (its own are not touched); 0 activations when that cannot run."""
    params = sum(p.numel() for p in model.parameters())
    backbone = getattr(model, "backbone", model)
    meta = {name: torch.empty_like(t, device="meta") for name, t in [*backbone.named_parameters(),
                                                                      *backbone.named_buffers()]}
    try:
        total, largest = _leaf_outputs(backbone, image[None].to("meta"),
                                       lambda x: functional_call(backbone, meta, (x,)))
    except Exception:  # an operation without a meta kernel: the parameters still count
        total = largest = 0
    return params, total, largest


def needs(cfg: TrainConfig, image: torch.Tensor, *, model: Optional[nn.Module] = None, training: bool = True,
          held_images: int = 0, world_size: int = 1, half_activations: bool = False) -> list[Need]:
    """What a run of ``cfg`` holds at once, item by item (bytes); ``image`` is one transformed image."""
    channels, height, width = image.shape[-3:] if image.dim() >= 3 else (1, 1, image.numel())
    pixels = channels * height * width
    if model is None:
        features, params, total, largest = _backbone(cfg.model, cfg.pooling, channels, height, width)
        head = (features + 1) * cfg.embed_dim
        params += head
        param_flags = f"--embed-dim {cfg.embed_dim}" if head >= params - head else f"--model {cfg.model}"
    else:
        params, total, largest = _given_model(model, image)
        param_flags = "the model passed in"
    act = 2 if half_activations else 4  # bytes per activation element: float32, or bf16/fp16 under amp
    size = f"--image-size {cfg.image_size}"
    copies = ADAM_COPIES if training else 1
    out = [Need(param_flags, f"the model's {params:,} parameters" + (" with their gradients and Adam's moments"
                                                                         if training else ""), 4 * params * copies)]
    batch = max(1, cfg.batch_size // world_size)
    staged = min(batch, cfg.stage_size or batch)
    shape = f"{channels}x{height}x{width}"
    if training:
        out.append(Need(f"{size}, --batch-size {cfg.batch_size}", f"a training batch ({batch} images of {shape} and "
                        f"the activations of {staged})", 4 * batch * pixels + act * staged * total))
    out.append(Need(f"{size}, --eval-batch-size {cfg.eval_batch_size}",
                    f"an evaluation batch ({cfg.eval_batch_size} images of {shape})",
                    cfg.eval_batch_size * (4 * pixels + 2 * act * largest)))
    if held_images:
        out.append(Need(size, f"the dataset's {held_images:,} images held at {shape}", held_images * pixels, False))
    if cfg.xbm_size and training:
        out.append(Need(f"--xbm-size {cfg.xbm_size}", f"the cross-batch memory of {cfg.xbm_size:,} embeddings",
                        cfg.xbm_size * (4 * cfg.embed_dim + 16)))
    return out


def refuse_unless_fits(items: list[Need], device: torch.device) -> None:
    """ValueError (one line: the largest item's flags, its size, the total, the memory available) when the
    items of one memory (the device's; the host's for ``on_device=False`` items) exceed what it has free."""
    host = torch.device("cpu")
    pools = {device: [n for n in items if n.on_device or device.type == "cpu"]}
    if device.type != "cpu":
        pools[host] = [n for n in items if not n.on_device]
    for where, mine in pools.items():
        total = sum(n.nbytes for n in mine)
        if not mine or total <= (free := available_bytes(where)):
            continue
        big = max(mine, key=lambda n: n.nbytes)
        place = "this machine" if where.type == "cpu" else str(where)
        raise ValueError(f"{big.flags}: {big.what}: at least {human(big.nbytes)} of memory (the whole run: at "
                         f"least {human(total)}), but {place} has {human(free)} available")


def check_fits(cfg: TrainConfig, device: torch.device, dataset: Any, *, model: Optional[nn.Module] = None,
               training: bool = True, world_size: int = 1) -> int:
    """Refuse ``cfg`` in one line when it cannot fit (:func:`needs`); else the channels of its images.

    First one image at ``cfg.image_size`` (reading the dataset's first image builds one), then the whole run."""
    one = MAX_CHANNELS * cfg.image_size ** 2 * 5  # float32 and the uint8 image it came from
    refuse_unless_fits([Need(f"--image-size {cfg.image_size}", f"one image of {cfg.image_size}x{cfg.image_size} "
                                                                "pixels", one, False)], torch.device("cpu"))
    with preserved_rng():
        image = dataset[0][0]
    from ..data.labeled_images import batchable

    held = len(dataset) if training and batchable(dataset) else 0
    half = device.type == "cuda" and cfg.amp in ("bf16", "fp16", "auto")
    refuse_unless_fits(needs(cfg, image, model=model, training=training, held_images=held, world_size=world_size,
                             half_activations=half), device)
    return int(image.shape[0])
