"""A small convolutional network for small images: the baseline beside the Vision Transformer (chapter 26)."""

from __future__ import annotations

import torch
from torch import nn

from attnbook._validate import require_int, shape_str
from attnbook.torch._checks import require_tensor
from attnbook.torch.linear import Linear


class SmallConvNet(nn.Module):
    """Three 3 x 3 convolutions with ReLU (zero padding keeps the size), a 2 x 2 max-pool after the second,
    the mean over the remaining positions, and a linear layer to the classes.

    ``forward(images)``: ``(B, C, H, W)`` to logits ``(B, n_classes)``; ``widths`` are the three convolutions'
    output channels. Chapter 26.
    """

    def __init__(self, in_channels: int = 1, n_classes: int = 10, widths: tuple[int, int, int] = (16, 32, 64)) -> None:
        super().__init__()
        require_int("in_channels", in_channels, 1)
        require_int("n_classes", n_classes, 1)
        if len(widths) != 3:
            raise ValueError(f"widths must give the output channels of the three convolutions; got {widths!r}")
        for w in widths:
            require_int("every width", w, 1)
        a, b, c = widths
        self.in_channels = in_channels
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, a, 3, padding=1), nn.ReLU(),
            nn.Conv2d(a, b, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(b, c, 3, padding=1), nn.ReLU(),
        )
        self.head = Linear(c, n_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        require_tensor("images", images)
        if images.dim() != 4 or images.shape[1] != self.in_channels or min(images.shape[-2:]) < 2:
            raise ValueError(f"images must have shape (B, {self.in_channels}, H, W) with H, W >= 2; got "
                             f"{shape_str(images.shape)}")
        return self.head(self.features(images).mean(dim=(-2, -1)))  # (B, n_classes)

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
