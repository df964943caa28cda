"""Small models the examples and tests train: a GPT-style decoder (pre-norm, causal attention)."""

from __future__ import annotations

from collections.abc import Callable
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
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


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
        return self.head(self.ln(x))


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
