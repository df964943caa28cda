"""Models of the five families remat's applied schedules are measured on (issue 25): a Llama-style
decoder, a BERT-style encoder, a CNN with skips (ResNet-18, `models.resnet18_setup`), a
GroupNorm/SiLU residual U-Net and torchvision's DenseNet-121 (unmodified). Each `*_setup` returns
(model, regions, inputs, loss_fn): the regions are the blocks a user would checkpoint."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from models import Setup
from torch import nn

# ---- a Llama-style decoder: RMSNorm, rotary embeddings, SwiGLU ----


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, d: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = RMSNorm(d)
        self.wq = nn.Linear(d, d, bias=False)
        self.wk = nn.Linear(d, d, bias=False)
        self.wv = nn.Linear(d, d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.norm2 = RMSNorm(d)
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.norm1(x)
        q, k, v = (w(h).view(b, t, self.heads, d // self.heads).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(y.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, layers: int, seq: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(LlamaBlock(d, heads, 8 * d // 3) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        half = d // heads // 2
        freqs = 1.0 / (10000 ** (torch.arange(half).float() / half))
        angles = torch.outer(torch.arange(seq).float(), freqs)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx)
        cos, sin = self.cos[:t], self.sin[:t]
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.head(self.norm(x))


def llama_setup(batch: int = 4, seq: int = 128, layers: int = 4, d: int = 128, vocab: int = 512) -> Setup:
    """A Llama-style decoder (RMSNorm, rotary, SwiGLU) on random tokens, next-token loss; blocks are regions."""
    model = Llama(vocab, d, 4, layers, seq)
    idx = torch.randint(0, vocab, (batch, seq))
    tgt = torch.randint(0, vocab, (batch, seq))
    return model, list(model.blocks), (idx,), lambda out: F.cross_entropy(out.reshape(-1, vocab), tgt.reshape(-1))


# ---- a BERT-style encoder: nn.TransformerEncoderLayer, padding mask, MLM loss ----


class Bert(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, layers: int, seq: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True, activation="gelu")
            for _ in range(layers)
        )
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=pad)
        return self.head(self.norm(x))


def bert_setup(batch: int = 4, seq: int = 128, layers: int = 4, d: int = 128, vocab: int = 512) -> Setup:
    """A BERT-style encoder with a padding mask and a masked-LM loss (15% of tokens); layers are regions."""
    model = Bert(vocab, d, 4, layers, seq)
    idx = torch.randint(0, vocab, (batch, seq))
    pad = torch.zeros(batch, seq, dtype=torch.bool)
    pad[:, seq - seq // 8 :] = True
    tgt = torch.where(torch.rand(batch, seq) < 0.15, idx, torch.full_like(idx, -100))
    tgt[:, 0] = idx[:, 0]  # at least one masked token per row

    def loss(out: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out.reshape(-1, vocab), tgt.reshape(-1), ignore_index=-100)

    return model, list(model.layers), (idx, pad), loss


# ---- a GroupNorm/SiLU residual U-Net ----


class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(8, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(8, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


class ResUNet(nn.Module):
    """A diffusion-style U-Net: residual GroupNorm/SiLU blocks, `levels` resolutions, skip concatenation."""

    def __init__(self, base: int = 32, levels: int = 3) -> None:
        super().__init__()
        widths = [base * 2**i for i in range(levels)]
        self.stem = nn.Conv2d(3, base, 3, padding=1)
        self.down = nn.ModuleList(ResBlock(widths[max(i - 1, 0)], w) for i, w in enumerate(widths))
        self.mid = ResBlock(widths[-1], widths[-1])
        self.up = nn.ModuleList(ResBlock(2 * w, widths[max(i - 1, 0)]) for i, w in reversed(list(enumerate(widths))))
        self.head = nn.Conv2d(base, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        skips = []
        for i, blk in enumerate(self.down):
            h = blk(F.avg_pool2d(h, 2) if i else h)
            skips.append(h)
        h = self.mid(h)
        for i, blk in enumerate(self.up):
            if i:
                h = F.interpolate(h, scale_factor=2.0, mode="nearest")
            h = blk(torch.cat([h, skips.pop()], dim=1))
        return self.head(F.silu(h))

    def blocks(self) -> list[nn.Module]:
        return [*self.down, self.mid, *self.up]


def unet_setup(batch: int = 2, resolution: int = 64, base: int = 32, levels: int = 3) -> Setup:
    """ResUNet on random images, a denoising (MSE) loss; its residual blocks are the regions."""
    model = ResUNet(base, levels)
    x = torch.randn(batch, 3, resolution, resolution)
    target = torch.randn(batch, 3, resolution, resolution)
    return model, model.blocks(), (x,), lambda out: F.mse_loss(out, target)


# ---- torchvision's DenseNet-121, unmodified ----


def densenet_setup(batch: int = 2, resolution: int = 64) -> Setup:
    """torchvision's DenseNet-121 (10 classes), unmodified; its 58 dense layers are the regions (each
    reads the Python list of features its block keeps appending to)."""
    import torchvision
    from torchvision.models.densenet import _DenseLayer

    model = torchvision.models.densenet121(num_classes=10)
    regions: list[nn.Module] = [m for m in model.modules() if isinstance(m, _DenseLayer)]
    x = torch.randn(batch, 3, resolution, resolution)
    y = torch.randint(0, 10, (batch,))
    return model, regions, (x,), lambda out: F.cross_entropy(out, y)
