"""Export the bundled PyTorch graphs (graphs/pytorch/*.json) and print graphs/pytorch/README.md's table.

    python3 python/examples/export_graphs.py [OUT_DIR]

Every graph is one training step (forward, loss, backward) traced under FakeTensorMode: no real
compute, a few seconds each. Costs are FLOPs, memory bytes of float32 outputs.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import torchvision
from models import CausalTransformer, TinyGPT, UNet, lm_loss

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import remat


def classifier(model: torch.nn.Module, batch: int) -> tuple[torch.nn.Module, tuple[torch.Tensor], Callable[[Any], Any]]:
    y = torch.randint(0, 1000, (batch,))
    return model, (torch.randn(batch, 3, 224, 224),), lambda out: F.cross_entropy(out, y)


def language_model(model: torch.nn.Module, vocab: int, batch: int, seq: int) -> tuple[Any, ...]:
    idx = torch.randint(0, vocab, (batch, seq))
    return model, (idx,), lambda out: lm_loss(out, idx)


def segmentation(batch: int, res: int) -> tuple[Any, ...]:
    y = torch.randint(0, 2, (batch, res, res))
    return UNet(classes=2, base=64), (torch.randn(batch, 3, res, res),), lambda out: F.cross_entropy(out, y)


MODELS: dict[str, tuple[str, Callable[[], tuple[Any, ...]]]] = {
    "resnet50": (
        "torchvision resnet50, batch 32, 3x224x224, cross-entropy",
        lambda: classifier(torchvision.models.resnet50(), 32),
    ),
    "resnet18-b32": (
        "torchvision resnet18, batch 32, 3x224x224, cross-entropy",
        lambda: classifier(torchvision.models.resnet18(), 32),
    ),
    "vit-b16": (
        "torchvision vit_b_16, batch 32, 3x224x224, cross-entropy",
        lambda: classifier(torchvision.models.vit_b_16(), 32),
    ),
    "gpt2-small": (
        "GPT-2 small shape (12 layers, d 768, 12 heads, vocab 50257, untied head; TinyGPT in "
        "python/examples/models.py), batch 8, 1024 tokens, next-token cross-entropy",
        lambda: language_model(TinyGPT(vocab=50257, d=768, heads=12, layers=12, seq=1024), 50257, 8, 1024),
    ),
    "decoder-transformer": (
        "torch.nn.TransformerEncoder as a causal decoder (6 layers, d 512, 8 heads, vocab 32000, "
        "dropout 0.1, fused attention), batch 16, 512 tokens",
        lambda: language_model(CausalTransformer(vocab=32000, d=512, heads=8, layers=6, seq=512), 32000, 16, 512),
    ),
    "unet": (
        "U-Net (4 levels, 64 base channels, BatchNorm), batch 8, 3x256x256, 2-class pixel cross-entropy",
        lambda: segmentation(8, 256),
    ),
}


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "graphs" / "pytorch"
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    print("| file | model and settings | nodes | Σ cost (GFLOP) | fixed memory (MiB) | saved for backward (MiB) |")
    print("|---|---|---|---|---|---|")
    for name, (settings, make) in MODELS.items():
        model, inputs, loss_fn = make()
        graph = remat.export(model, inputs, loss_fn, name=name)
        graph["meta"]["settings"] = settings
        path = out / f"{name}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(graph, separators=(",", ":")))
        os.replace(tmp, path)
        total = sum(n["cost"] for n in graph["nodes"]) / 1e9
        print(
            f"| `{path.name}` | {settings} | {len(graph['nodes'])} | {total:.1f} | "
            f"{graph['fixed_memory'] / 2**20:.0f} | {remat.saved_for_backward(graph) / 2**20:.0f} |"
        )


if __name__ == "__main__":
    main()
