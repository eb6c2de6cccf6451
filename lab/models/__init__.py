"""Embedding models: backbone -> pooling -> [LayerNorm] -> Linear -> L2 normalisation.

``build_model("small_cnn")`` is the CPU default; any timm model name gives a timm backbone
(``resnet50``, ``deit_small_patch16_224``, ...). Models expose ``backbone`` and ``head`` so the
trainer can give them different learning rates.
"""
from __future__ import annotations

import functools
from typing import Optional

import torch
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from ..core.normalize import unit_rows
from .small_cnn import SmallCNN
from .timm_backbone import EXAMPLES, TimmBackbone, is_timm_model

MODELS = ("small_cnn",)  # plus any timm model name
POOLINGS = ("avg", "max", "gem")


class GeM(nn.Module):
    """Generalised mean pooling (Radenovic et al.): (mean x^p)^(1/p), learnable p. (B, C, H, W) -> (B, C)."""

    def __init__(self, p: float = 3.0, eps: float = 1e-6) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.tensor(float(p)))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return x.clamp(min=self.eps).pow(self.p).mean(dim=(2, 3)).pow(1.0 / self.p)


class EmbeddingHead(nn.Module):
    """features (B, F, h, w) or (B, F) -> unit-norm float32 embeddings (B, embed_dim)."""

    def __init__(self, num_features: int, embed_dim: int, pooling: str = "avg", layer_norm: bool = False) -> None:
        super().__init__()
        self.pooling = pooling
        self.gem = GeM() if pooling == "gem" else None
        # No affine parameters: the projection right after can absorb them (SupRank Sec. VII-A).
        self.norm = nn.LayerNorm(num_features, elementwise_affine=False) if layer_norm else nn.Identity()
        self.proj = nn.Linear(num_features, embed_dim)

    def pool(self, x: Tensor) -> Tensor:
        if x.dim() == 2:  # a transformer already pooled its tokens
            if self.pooling != "avg":
                raise ValueError(f"pooling={self.pooling!r} needs a CNN feature map; this backbone outputs "
                                 "pooled tokens (use pooling='avg', i.e. the model's own token pooling)")
            return x
        if self.pooling == "avg":
            return x.mean(dim=(2, 3))
        if self.pooling == "max":
            return x.amax(dim=(2, 3))
        return self.gem(x)

    def forward(self, x: Tensor) -> Tensor:
        z = self.proj(self.norm(self.pool(x)))
        # Normalised into float32 (any finite row, lab.core.normalize): under autocast z is half
        # precision, and the loss wants float32.
        return unit_rows(z, torch.float32)


class EmbeddingModel(nn.Module):
    """images (B, C, H, W) -> L2-normalised embeddings (B, embed_dim), float32."""

    def __init__(self, backbone: nn.Module, head: EmbeddingHead, name: str, freeze_bn: bool = False) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head
        self.name = name
        self.embed_dim = head.proj.out_features
        self.freeze_bn = freeze_bn
        if freeze_bn:
            for m in self.batch_norms():
                m.requires_grad_(False)
            self.train(self.training)

    def batch_norms(self) -> list[_BatchNorm]:
        return [m for m in self.modules() if isinstance(m, _BatchNorm)]

    def train(self, mode: bool = True) -> "EmbeddingModel":
        super().train(mode)
        if self.freeze_bn:  # frozen BN: running statistics, never batch statistics
            for m in self.batch_norms():
                m.eval()
        return self

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.backbone(x))


def check_model_name(name: str) -> None:
    """ValueError naming the valid choices unless ``name`` is small_cnn or a timm model."""
    if name in MODELS or (isinstance(name, str) and is_timm_model(name)):
        return
    raise ValueError(f"unknown model {name!r}; choose 'small_cnn' or any timm model name, e.g. "
                     f"{', '.join(EXAMPLES)} (timm.list_models() lists them all)")


def build_model(
    name: str = "small_cnn",
    embed_dim: int = 64,
    in_chans: int = 1,
    pretrained: bool = False,
    pooling: str = "avg",
    layer_norm: bool = False,
    freeze_bn: bool = False,
    image_size: Optional[int] = None,
) -> EmbeddingModel:
    """``small_cnn`` or any timm model name, with the embedding head described in the module doc.

    ``pretrained=True`` loads timm weights when they can be had and otherwise warns and uses
    random initialisation (never waits on an unreachable hub). ``freeze_bn`` keeps every
    BatchNorm in eval mode with frozen affine parameters. ``image_size``: the side of the square
    images it will see; a timm transformer built for another size is built for this one (patches,
    position embeddings); other models take any size and ignore it.
    """
    if not isinstance(embed_dim, int) or isinstance(embed_dim, bool) or embed_dim < 1:
        raise ValueError(f"embed_dim must be a positive integer, got {embed_dim!r}")
    if not isinstance(in_chans, int) or isinstance(in_chans, bool) or in_chans < 1:
        raise ValueError(f"in_chans must be a positive integer, got {in_chans!r}")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if image_size is not None and (not isinstance(image_size, int) or isinstance(image_size, bool) or image_size < 1):
        raise ValueError(f"image_size must be a positive integer or None, got {image_size!r}")
    check_model_name(name)
    if name == "small_cnn":
        if pretrained:
            raise ValueError("small_cnn has no pretrained weights: use pretrained=False or a timm model")
        backbone: nn.Module = SmallCNN(in_chans)
    else:
        backbone = TimmBackbone(name, in_chans=in_chans, pretrained=pretrained, image_size=image_size)
    head = EmbeddingHead(backbone.num_features, embed_dim, pooling, layer_norm)
    return EmbeddingModel(backbone, head, name, freeze_bn)


@functools.lru_cache(maxsize=64)
def parameter_count(name: str, embed_dim: int = 64, in_chans: int = 3) -> int:
    """The parameters of ``build_model(name, embed_dim, in_chans)``, counted on a copy built on PyTorch's meta
    device (shapes, no memory): a 4-billion-parameter timm name costs under a second and no memory to count."""
    with torch.device("meta"):
        return num_parameters(build_model(name, embed_dim, in_chans), trainable_only=False)


def num_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


__all__ = ["build_model", "check_model_name", "EmbeddingModel", "EmbeddingHead", "GeM", "SmallCNN", "TimmBackbone",
           "MODELS", "POOLINGS", "num_parameters", "parameter_count"]
