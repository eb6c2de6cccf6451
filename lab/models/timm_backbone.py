"""timm backbones by name, with pretrained weights when they can be had and a fast fallback.

Offline, ``timm.create_model(name, pretrained=True)`` retries the Hugging Face hub for ~47 s
before raising. We avoid the wait: if ``HF_HUB_OFFLINE`` is unset and the hub is not
reachable (a 2-second socket probe), the hub is put in offline mode for the call, so cached
weights still load and missing ones fail in well under a second; then we fall back to random
initialisation with a visible warning.
"""
from __future__ import annotations

import contextlib
import socket
import warnings
from typing import Iterator, Optional

from torch import Tensor, nn

from ..core.env import hub_offline, hub_offline_set, proxy_set
from ..core.extras import require

HUB_HOST = ("huggingface.co", 443)
PROBE_TIMEOUT_S = 2.0
EXAMPLES = ("resnet18", "resnet50", "deit_small_patch16_224", "deit_small_distilled_patch16_224")


def hub_reachable(timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True if a TCP connection to the hub opens within ``timeout`` seconds (or a proxy is set)."""
    if proxy_set():
        return True  # the probe cannot see through a proxy; let the hub client try
    try:
        socket.create_connection(HUB_HOST, timeout=timeout).close()
        return True
    except OSError:
        return False


@contextlib.contextmanager
def offline_unless_reachable() -> Iterator[None]:
    """Offline hub mode (and a short socket timeout for plain URL downloads) if the hub is unreachable."""
    if hub_offline() or hub_reachable():
        yield
        return
    import huggingface_hub.constants as hub_constants

    # The env var is read when huggingface_hub is imported; it may already be imported, so
    # the module constant (read on every request through is_offline_mode()) is patched too.
    saved_const, saved_timeout = hub_constants.HF_HUB_OFFLINE, socket.getdefaulttimeout()
    hub_constants.HF_HUB_OFFLINE = True
    socket.setdefaulttimeout(PROBE_TIMEOUT_S)
    try:
        with hub_offline_set():
            yield
    finally:
        hub_constants.HF_HUB_OFFLINE = saved_const
        socket.setdefaulttimeout(saved_timeout)


def is_timm_model(name: str) -> bool:
    require("lab.models (timm backbones)")
    import timm

    return timm.is_model(name)


def input_size_kwargs(name: str, image_size: Optional[int]) -> dict[str, int]:
    """``{"img_size": image_size}`` for a timm model built for one input size (its pretrained config's
    ``fixed_input_size``: ViT, DeiT, Swin, EVA) when ``image_size`` is another, else ``{}``. DeiT at the
    dashboard's 32 px refused every image ("Input height (32) doesn't match model (224)"); built for 32 px it
    has a 2 x 2 grid of patches, and timm resamples pretrained position embeddings to it. A model of its own
    size, or of any size (a CNN), is built exactly as without it."""
    if image_size is None:
        return {}
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(name)
    if cfg is None or not cfg.fixed_input_size or tuple(cfg.input_size[-2:]) == (image_size, image_size):
        return {}
    return {"img_size": image_size}


def create_timm(name: str, in_chans: int, pretrained: bool, image_size: Optional[int] = None) -> nn.Module:
    """timm model without classifier, for square images of ``image_size`` pixels (None: the model's own size;
    :func:`input_size_kwargs`); random init with a warning if the weights cannot be had."""
    require("lab.models (timm backbones)")
    import timm

    sized = input_size_kwargs(name, image_size)
    if pretrained:
        try:
            with offline_unless_reachable():
                return timm.create_model(name, pretrained=True, num_classes=0, in_chans=in_chans, **sized)
        except (OSError, RuntimeError, ValueError) as e:  # LocalEntryNotFoundError is an OSError
            warnings.warn(
                f"pretrained weights for {name!r} are not available ({type(e).__name__}: {str(e)[:200]}); "
                "using RANDOM initialisation. Connect to the Hugging Face hub once (or copy the weights "
                "into its cache) to use pretrained weights.",
                UserWarning,
                stacklevel=4,  # create_timm <- TimmBackbone <- build_model <- caller
            )
    return timm.create_model(name, pretrained=False, num_classes=0, in_chans=in_chans, **sized)


class TimmBackbone(nn.Module):
    """images (B, C, H, W) -> feature map (B, F, h, w) for CNNs, pooled tokens (B, F) for transformers.

    Transformers keep timm's own token pooling (the class token for DeiT); CNN maps are
    pooled by the embedding head, so avg / max / GeM can be chosen.
    """

    def __init__(self, name: str, in_chans: int = 3, pretrained: bool = False,
                 image_size: Optional[int] = None) -> None:
        super().__init__()
        self.name = name
        self.model = create_timm(name, in_chans, pretrained, image_size)
        self.num_features = int(self.model.num_features)
        self.output_fmt = getattr(self.model, "output_fmt", "NCHW")

    def forward(self, x: Tensor) -> Tensor:
        feats = self.model.forward_features(x)
        if feats.dim() == 4:
            return feats.permute(0, 3, 1, 2) if self.output_fmt == "NHWC" else feats
        return self.model.forward_head(feats, pre_logits=True)
