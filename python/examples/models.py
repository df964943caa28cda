"""Small models the examples and tests train: a GPT-style decoder (pre-norm, causal attention)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        out: torch.Tensor = x + self.out(F.gelu(self.fc(self.ln2(x))))
        return out


class TinyGPT(nn.Module):
    """A decoder-only transformer: token and position embeddings, `layers` blocks, a head."""

    def __init__(self, vocab: int = 256, d: int = 64, heads: int = 4, layers: int = 2, seq: int = 32) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits: torch.Tensor = self.head(self.ln(x))
        return logits


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


Setup = tuple[nn.Module, list[nn.Module], tuple[torch.Tensor, ...], Callable[[Any], torch.Tensor]]


def resnet18_setup(batch: int = 8, resolution: int = 64) -> Setup:
    """torchvision's ResNet-18 (10 classes) on random images; its 8 residual blocks are the regions."""
    import torchvision

    model = torchvision.models.resnet18(num_classes=10)
    regions: list[nn.Module] = [b for layer in (model.layer1, model.layer2, model.layer3, model.layer4) for b in layer]
    x = torch.randn(batch, 3, resolution, resolution)
    y = torch.randint(0, 10, (batch,))
    return model, regions, (x,), lambda out: F.cross_entropy(out, y)


def gpt_setup(batch: int = 4, seq: int = 64, layers: int = 4) -> Setup:
    """TinyGPT (d=64, 4 heads) on random tokens; its blocks are the regions."""
    model = TinyGPT(vocab=128, d=64, heads=4, layers=layers, seq=seq)
    idx = torch.randint(0, 128, (batch, seq))
    tgt = torch.randint(0, 128, (batch, seq))
    return model, list(model.blocks), (idx,), lambda out: lm_loss(out, tgt)


class UNet(nn.Module):
    """Ronneberger et al.'s U-Net (4 levels, `base` channels at the top, BatchNorm after each conv)."""

    def __init__(self, classes: int = 2, base: int = 64) -> None:
        super().__init__()

        def double(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
                nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
            )

        widths = [base, 2 * base, 4 * base, 8 * base, 16 * base]
        self.down = nn.ModuleList([double(3, widths[0])] + [double(a, b) for a, b in pairwise(widths)])
        self.up = nn.ModuleList(nn.ConvTranspose2d(b, a, 2, stride=2) for a, b in pairwise(widths))
        self.merge = nn.ModuleList(double(2 * a, a) for a in widths[:-1])
        self.head = nn.Conv2d(base, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for i, block in enumerate(self.down):
            x = block(F.max_pool2d(x, 2) if i else x)
            skips.append(x)
        x = skips.pop()
        for up, merge in zip(reversed(self.up), reversed(self.merge), strict=True):
            x = merge(torch.cat([skips.pop(), up(x)], dim=1))
        out: torch.Tensor = self.head(x)
        return out


class CausalTransformer(nn.Module):
    """A decoder-only transformer from torch.nn's own layers (nn.TransformerEncoderLayer under a
    causal mask: fused scaled-dot-product attention, dropout 0.1, pre-norm)."""

    def __init__(self, vocab: int, d: int, heads: int, layers: int, seq: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
        self.body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        logits: torch.Tensor = self.head(self.body(x, mask=mask, is_causal=True))
        return logits
