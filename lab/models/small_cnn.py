"""The default backbone: a 4-block CNN that trains in minutes on a 2-core CPU.

conv3x3-BN-ReLU blocks 32 -> 64 -> 128 -> 128, the first three followed by 2x2 max pooling (``max_pool``);
~0.24 M parameters. A 1x32x32 image becomes a (128, 4, 4) feature map; any size works.
"""
from __future__ import annotations

from torch import Tensor, nn

from .max_pool import MaxPool2x2

WIDTHS = (32, 64, 128, 128)


def conv_block(c_in: int, c_out: int, pool: bool) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),  # BN has the bias
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    ]
    if pool:
        layers.append(MaxPool2x2())  # nn.MaxPool2d(2) bit for bit, faster on a CPU (max_pool.py)
    return nn.Sequential(*layers)


class SmallCNN(nn.Module):
    """images (B, in_chans, H, W) -> feature map (B, 128, H/8, W/8)."""

    def __init__(self, in_chans: int = 1, widths: tuple[int, ...] = WIDTHS) -> None:
        super().__init__()
        chans = (in_chans, *widths)
        self.blocks = nn.Sequential(
            *[conv_block(chans[i], chans[i + 1], pool=i < len(widths) - 1) for i in range(len(widths))]
        )
        self.num_features = widths[-1]
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: Tensor) -> Tensor:
        return self.blocks(x)
