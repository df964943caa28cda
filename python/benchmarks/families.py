"""Nine model families at small sizes, each as (model, blocks, inputs, targets, loss_fn): the models
of issue 25's acceptance table (`faithful.py`) and of the compiled-path tests.

- `llama`: a Llama-style decoder (RMSNorm, SwiGLU, rotary embeddings, causal attention) with logits
  and next-token cross-entropy;
- `bert`: a BERT-style encoder of `nn.TransformerEncoderLayer` with a padding mask and a masked-LM
  loss (cross-entropy on the masked positions);
- `resnet18`: torchvision's ResNet-18 (a CNN with skip connections and BatchNorm);
- `unet`: a residual U-Net of GroupNorm/SiLU blocks with an MSE loss;
- `densenet121`: torchvision's DenseNet-121, unmodified (BatchNorm, concatenations);
- `vit`: torchvision's VisionTransformer at a small config (patch embedding, class token,
  `nn.MultiheadAttention` encoder blocks);
- `mobilenetv2`: torchvision's MobileNetV2 (depthwise convolutions, inverted residuals, ReLU6,
  BatchNorm);
- `squeezenet`: torchvision's SqueezeNet 1.1 (fire modules: concatenated 1x1/3x3 expansions, no
  normalization);
- `vgg16`: torchvision's VGG16 features, every layer a region of its own, the in-place ReLUs too
  (`regions=list(vgg.features)`, what a user writes first).

`vit`, `mobilenetv2` and `squeezenet` were added for the acceptance run only: nothing in the package
was developed or tuned against them, except MobileNetV2 since: its in-place ReLU6 showed the eager
plan's simulation an autograd node the export had not paired with its forward op (`remat.apply`'s
unpaired savers). `vgg16` came after, for the regions that write into their input.

`loss_fn(output, *targets)`; `blocks` are the modules per-block checkpointing wraps and remat's eager
path uses as regions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

Family = tuple[nn.Module, list[nn.Module], tuple[torch.Tensor, ...], tuple[torch.Tensor, ...], Callable[..., Any]]


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, d: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.norm2 = RMSNorm(d)
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))  # type: ignore[no-any-return]


class Llama(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, layers: int, seq: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(LlamaBlock(d, heads, 8 * d // 3) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        half = d // heads // 2
        freqs = 1.0 / (10000 ** (torch.arange(half).float() / half))
        angles = torch.outer(torch.arange(seq).float(), freqs)
        self.cos: torch.Tensor
        self.sin: torch.Tensor
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.embed(idx)
        for blk in self.blocks:
            x = blk(x, self.cos[:t], self.sin[:t])
        return self.head(self.norm(x))  # type: ignore[no-any-return]


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def llama(batch: int = 4, seq: int = 64, layers: int = 4, d: int = 64, vocab: int = 512) -> Family:
    model = Llama(vocab, d, 4, layers, seq)
    idx = torch.randint(0, vocab, (batch, seq))
    tgt = torch.randint(0, vocab, (batch, seq))
    return model, list(model.blocks), (idx,), (tgt,), lm_loss


class Bert(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, layers: int, seq: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True) for _ in range(layers)
        )
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx) + self.pos[: idx.shape[1]]
        for blk in self.blocks:
            x = blk(x, src_key_padding_mask=padding)
        return self.head(self.norm(x))  # type: ignore[no-any-return]


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def bert(batch: int = 4, seq: int = 64, layers: int = 4, d: int = 64, vocab: int = 512) -> Family:
    model = Bert(vocab, d, 4, layers, seq)
    idx = torch.randint(0, vocab, (batch, seq))
    lengths = torch.tensor([seq - 8 * i for i in range(batch)])
    padding = torch.arange(seq)[None, :] >= lengths[:, None]
    masked = (torch.rand(batch, seq) < 0.15) & ~padding
    labels = torch.where(masked, idx, torch.full_like(idx, -100))
    return model, list(model.blocks), (idx, padding), (labels,), mlm_loss


def resnet18(batch: int = 4, resolution: int = 64) -> Family:
    import torchvision

    model = torchvision.models.resnet18(num_classes=10)
    blocks: list[nn.Module] = [b for layer in (model.layer1, model.layer2, model.layer3, model.layer4) for b in layer]
    x = torch.randn(batch, 3, resolution, resolution)
    y = torch.randint(0, 10, (batch,))
    return model, blocks, (x,), (y,), F.cross_entropy


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
        return self.skip(x) + h  # type: ignore[no-any-return]


class UNet(nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        w = width
        self.stem = nn.Conv2d(3, w, 3, padding=1)
        self.down1 = ResBlock(w, w)
        self.down2 = ResBlock(w, 2 * w)
        self.mid = ResBlock(2 * w, 2 * w)
        self.up2 = ResBlock(4 * w, w)
        self.up1 = ResBlock(2 * w, w)
        self.out = nn.Conv2d(w, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h0 = self.down1(self.stem(x))
        h1 = self.down2(F.avg_pool2d(h0, 2))
        m = self.mid(F.avg_pool2d(h1, 2))
        u = self.up2(torch.cat((F.interpolate(m, scale_factor=2.0), h1), dim=1))
        u = self.up1(torch.cat((F.interpolate(u, scale_factor=2.0), h0), dim=1))
        return self.out(u)  # type: ignore[no-any-return]

    def blocks(self) -> list[nn.Module]:
        return [self.down1, self.down2, self.mid, self.up2, self.up1]


def unet(batch: int = 4, resolution: int = 64, width: int = 32) -> Family:
    model = UNet(width)
    x = torch.randn(batch, 3, resolution, resolution)
    return model, model.blocks(), (x,), (torch.randn(batch, 3, resolution, resolution),), F.mse_loss


def densenet121(batch: int = 2, resolution: int = 64, regions: str = "blocks") -> Family:
    """torchvision's DenseNet-121, unmodified; `regions="layers"` makes its 58 dense layers the
    blocks (each reads the Python list of features its dense block keeps appending to), "blocks"
    its four dense blocks."""
    import torchvision
    from torchvision.models.densenet import _DenseBlock, _DenseLayer

    model = torchvision.models.densenet121(num_classes=10)
    kind = {"blocks": _DenseBlock, "layers": _DenseLayer}[regions]
    blocks: list[nn.Module] = [m for m in model.modules() if isinstance(m, kind)]
    x = torch.randn(batch, 3, resolution, resolution)
    y = torch.randint(0, 10, (batch,))
    return model, blocks, (x,), (y,), F.cross_entropy


def vit(batch: int = 4, resolution: int = 32, patch: int = 4, layers: int = 4, d: int = 64) -> Family:
    from torchvision.models.vision_transformer import VisionTransformer

    model = VisionTransformer(resolution, patch, layers, 4, d, 2 * d, num_classes=10)
    blocks: list[nn.Module] = list(model.encoder.layers)
    x = torch.randn(batch, 3, resolution, resolution)
    y = torch.randint(0, 10, (batch,))
    return model, blocks, (x,), (y,), F.cross_entropy


def mobilenetv2(batch: int = 4, resolution: int = 64) -> Family:
    """torchvision's MobileNetV2, its classifier's dropout off (no random ops: the rows compare
    loss and gradients to the plain step's); the inverted residual blocks are the blocks."""
    import torchvision
    from torchvision.models.mobilenetv2 import InvertedResidual

    model = torchvision.models.mobilenet_v2(num_classes=10, dropout=0.0)
    blocks: list[nn.Module] = [m for m in model.features if isinstance(m, InvertedResidual)]
    x = torch.randn(batch, 3, resolution, resolution)
    y = torch.randint(0, 10, (batch,))
    return model, blocks, (x,), (y,), F.cross_entropy


def squeezenet(batch: int = 4, resolution: int = 64) -> Family:
    """torchvision's SqueezeNet 1.1, its classifier's dropout off; the fire modules are the blocks."""
    import torchvision
    from torchvision.models.squeezenet import Fire

    model = torchvision.models.squeezenet1_1(num_classes=10, dropout=0.0)
    blocks: list[nn.Module] = [m for m in model.features if isinstance(m, Fire)]
    x = torch.randn(batch, 3, resolution, resolution)
    y = torch.randint(0, 10, (batch,))
    return model, blocks, (x,), (y,), F.cross_entropy


def vgg16(batch: int = 4, resolution: int = 64) -> Family:
    """torchvision's VGG16 with its 31 feature layers as the blocks: 13 of them are
    `ReLU(inplace=True)`, regions that write into a value made outside them (the eager plan never
    checkpoints those). The classifier is one linear layer on the flattened features (VGG's three
    4096-wide layers, 120M parameters, and its dropout dropped), so the model is small enough for
    the CPU and has no random ops."""
    import torchvision

    model = torchvision.models.vgg16(num_classes=10)
    model.avgpool = nn.Identity()
    model.classifier = nn.Sequential(nn.Flatten(), nn.Linear(512 * (resolution // 32) ** 2, 10))
    blocks: list[nn.Module] = list(model.features)
    x = torch.randn(batch, 3, resolution, resolution)
    y = torch.randint(0, 10, (batch,))
    return model, blocks, (x,), (y,), F.cross_entropy


def as_setup(family: Family) -> tuple[nn.Module, list[nn.Module], tuple[torch.Tensor, ...], Callable[..., Any]]:
    """The family as (model, blocks, inputs, loss of the output alone): the eager path's form, the
    targets captured by the loss."""
    model, blocks, inputs, targets, loss_fn = family
    return model, blocks, inputs, lambda out: loss_fn(out, *targets)


FAMILIES: dict[str, Callable[[], Family]] = {
    "llama": llama,
    "bert": bert,
    "resnet18": resnet18,
    "unet": unet,
    "densenet121": densenet121,
    "vit": vit,
    "mobilenetv2": mobilenetv2,
    "squeezenet": squeezenet,
    "vgg16": vgg16,
}
