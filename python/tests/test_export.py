"""remat.export against published FLOPs and against what eager PyTorch saves for backward."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
import torchvision
from models import TinyGPT, lm_loss
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import remat
from remat.measure import eager_saved_bytes

REPO = Path(__file__).resolve().parents[2]


def classify(
    model: nn.Module, batch: int, res: int, classes: int = 1000
) -> tuple[tuple[torch.Tensor], Callable[[Any], torch.Tensor], torch.Tensor]:
    x = torch.randn(batch, 3, res, res)
    y = torch.randint(0, classes, (batch,))
    return (x,), (lambda out: F.cross_entropy(out, y)), y


@pytest.mark.parametrize(
    ("name", "gmac"),
    [("resnet50", 4.09), ("vgg16", 15.47)],  # torchvision's forward GMAC per 224x224 image
)
def test_batch32_flops_match_torchvision(name: str, gmac: float) -> None:
    # x2 FLOP per MAC, x3 for forward + backward, x32 images
    published = gmac * 1e9 * 2 * 3 * 32
    model = getattr(torchvision.models, name)()
    inputs, loss_fn, _ = classify(model, 32, 224)
    g = remat.export(model, inputs, loss_fn)
    total = sum(n["cost"] for n in g["nodes"])
    assert abs(total - published) / published < 0.03, total
    # the formula ops alone (convolutions, matmuls) are within 3% too; the rest is below 1%
    assert abs(g["meta"]["flops_formula"] - published) / published < 0.03
    assert g["meta"]["flops_per_element"] < 0.01 * total


def test_resnet50_saved_bytes_equal_eager_and_scale_with_batch() -> None:
    # eager ResNet-50 at batch 32 on CPU takes ~25 s on 2 cores: compare eager at batch 4 and show
    # that the export is linear in the batch, so batch 32 is 8x batch 4 within 1%.
    model = torchvision.models.resnet50()
    inputs, loss_fn, y = classify(model, 4, 224)
    export4 = remat.saved_for_backward(remat.export(model, inputs, loss_fn))
    eager4 = eager_saved_bytes(model, inputs, loss_fn, exclude=[y])
    assert abs(export4 - eager4) / eager4 < 0.01, (export4, eager4)
    inputs32, loss_fn32, _ = classify(model, 32, 224)
    export32 = remat.saved_for_backward(remat.export(model, inputs32, loss_fn32))
    assert abs(export32 - 8 * eager4) / (8 * eager4) < 0.01, (export32, eager4)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torchvision.models.resnet18(),
        lambda: torchvision.models.mobilenet_v3_small(),
        lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10)),
    ],
    ids=["resnet18", "mobilenet_v3_small", "conv-bn-relu"],
)
def test_saved_bytes_equal_eager(make: object) -> None:
    model = make()  # type: ignore[operator]
    inputs, loss_fn, y = classify(model, 2, 32, classes=10)
    model(*inputs)  # materialise lazy modules
    g = remat.export(model, inputs, loss_fn)
    eager = eager_saved_bytes(model, inputs, loss_fn, exclude=[y])
    assert abs(remat.saved_for_backward(g) - eager) <= 0.01 * eager


def test_gpt_saved_bytes_equal_eager() -> None:
    model = TinyGPT()
    idx = torch.randint(0, 256, (2, 32))
    tgt = torch.randint(0, 256, (2, 32))
    g = remat.export(model, (idx,), lambda out: lm_loss(out, tgt))
    eager = eager_saved_bytes(model, (idx,), lambda out: lm_loss(out, tgt), exclude=[tgt])
    assert abs(remat.saved_for_backward(g) - eager) <= 0.01 * eager


def test_depthwise_convolution_backward_costs_twice_its_forward() -> None:
    model = nn.Sequential(nn.Conv2d(16, 16, 3, groups=16, bias=False), nn.Flatten())
    x = (torch.randn(2, 16, 10, 10, requires_grad=True),)
    with FlopCounterMode(display=False) as fc:
        model(*x)
    g = remat.export(model, x, lambda out: out.sum())
    bwd = [n for n in g["nodes"] if n["op"] == "aten.convolution_backward.default" and "element" not in n["meta"]]
    # grad-input is not needed (the input is not a parameter): grad-weight only, as its forward
    assert [n["cost"] for n in bwd] == [float(fc.get_total_flops())]


def test_graph_shape_views_folded_tuples_split_fixed_memory() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(5, 8)
    g = remat.export(model, (x,), lambda out: out.pow(2).mean(), name="mlp")
    ids = {n["id"] for n in g["nodes"]}
    assert all(i in ids for n in g["nodes"] for i in n.get("inputs", []))
    ops = {n["op"] for n in g["nodes"]}
    assert not ops & {"aten.t.default", "aten.view.default", "aten.alias.default", "aten.expand.default"}
    # BatchNorm's outputs are separate nodes, read separately
    bn = next(n for n in g["nodes"] if n["op"] == "aten.native_batch_norm.default")
    elements = [n for n in g["nodes"] if n.get("inputs") == [bn["id"]] and n["op"] == bn["op"]]
    assert len(elements) == 3 and sum(e["memory"] for e in elements) == bn["memory"]
    params = sum(p.numel() * 4 for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    assert g["fixed_memory"] == 2 * params + buffers + x.numel() * 4
    adam = remat.export(model, (x,), lambda out: out.pow(2).mean(), optimizer="adam")
    assert adam["fixed_memory"] == g["fixed_memory"] + 2 * params
    assert {n["kind"] for n in g["nodes"]} == {"forward", "loss", "backward"}
    assert g["cost_unit"] == "FLOP"


def test_time_mode_costs_are_seconds() -> None:
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    g = remat.export(model, (torch.randn(16, 32),), lambda out: out.mean(), cost="time")
    assert g["cost_unit"] == "s"
    costs = {n["op"]: n["cost"] for n in g["nodes"]}
    assert costs["aten.addmm.default"] > 0 and all(c < 1.0 for c in costs.values())


class DataDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y: torch.Tensor = self.lin(x)
        return y * 2 if y.sum() > 0 else y


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_a_reduced_loss_holds_its_elementwise_storage_on_every_device(device: str) -> None:
    """A reduced `mse_loss` returns its mean in the storage of the element-wise losses, on CPU and
    on CUDA alike (measured on CUDA, torch 2.11: the U-Net's 0-dim MSE held 196,608 bytes, the
    constant by which the eager prediction there was low). The export counts it on any device
    (`meta` stands in for CUDA, which the tests do not need); on the CPU, as the kernel holds it."""
    model = nn.Linear(16, 16).to(device)
    x, y = torch.randn(8, 16, device=device), torch.randn(8, 16, device=device)
    g = remat.export(model, (x,), lambda out: F.mse_loss(out, y))
    (loss,) = [n for n in g["nodes"] if n["op"] == "aten.mse_loss.default"]
    assert loss["memory"] == 8 * 16 * 4
    if device == "cpu":
        assert F.mse_loss(model(x), y).untyped_storage().nbytes() == loss["memory"]


def test_untraceable_model_names_the_model_and_cause() -> None:
    with pytest.raises(remat.ExportError, match="cannot trace DataDependent under FakeTensorMode: "):
        remat.export(DataDependent(), (torch.randn(2, 4),), lambda out: out.sum())
    # inside a model, the submodule whose forward the trace stopped in is named
    nested = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), DataDependent()))
    with pytest.raises(remat.ExportError, match=r"cannot trace Sequential .*in module '1\.1', a DataDependent"):
        remat.export(nested, (torch.randn(2, 4),), lambda out: out.sum())


def test_non_scalar_loss_is_refused() -> None:
    with pytest.raises(remat.ExportError, match=r"scalar.*shape \(2, 4\)"):
        remat.export(nn.Linear(4, 4), (torch.randn(2, 4),))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(remat.ExportError, match="not a tensor"):
        remat.export(nn.Linear(4, 4), ([1, 2],), lambda out: out.sum())
    with pytest.raises(remat.ExportError, match="optimizer"):
        remat.export(nn.Linear(4, 4), (torch.randn(2, 4),), lambda out: out.sum(), optimizer="lion")


def test_regions_are_modules_called_once_none_given_twice_or_nested() -> None:
    blocks = [nn.Sequential(nn.Linear(8, 8), nn.GELU()) for _ in range(2)]
    model = nn.Sequential(*blocks)
    x = torch.randn(2, 8)

    def export(regions: list[Any], inputs: Any = (x,), m: nn.Module = model) -> Any:
        return remat.export(m, inputs, lambda out: out.sum(), regions=regions)

    with pytest.raises(remat.ExportError, match=r"regions\[0\] is a str, not a torch.nn.Module"):
        export(["0"])
    with pytest.raises(remat.ExportError, match=r"regions\[1\] \(Sequential\) is regions\[0\] again"):
        export([blocks[0], blocks[0]])
    with pytest.raises(remat.ExportError, match=r"regions\[1\] \(Linear\) is inside regions\[0\]"):
        export([blocks[0], blocks[0][0]])
    with pytest.raises(remat.ExportError, match=r"example_inputs is a tensor"):
        export([], x)
    with pytest.raises(remat.ExportError, match=r"regions is a Linear: give a list of modules"):
        export(blocks[0][0])  # type: ignore[arg-type]
    with pytest.raises(remat.ExportError, match=r"regions is a int, not a list of modules"):
        export(3)  # type: ignore[arg-type]
    assert export(b for b in blocks)["meta"]["regions"] == 2  # type: ignore[arg-type]

    class Shared(nn.Module):
        """One block called three times (weights shared across layers)."""

        def __init__(self) -> None:
            super().__init__()
            self.block = nn.Sequential(nn.Linear(8, 8), nn.GELU())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for _ in range(3):
                x = self.block(x)
            return x

    shared = Shared()
    with pytest.raises(remat.ExportError, match=r"regions\[0\] \(Sequential\) is called 3 times"):
        export([shared.block], m=shared)
    assert export([shared], m=shared)["meta"]["regions"] == 1


def test_a_region_writing_into_its_input_is_recorded() -> None:
    """`nn.ReLU(inplace=True)` as a region of its own writes into the convolution's output; a
    block that adds into a value it computed writes into its own."""
    layers = [nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU()]
    model = nn.Sequential(*layers)
    g = remat.export(model, (torch.randn(1, 3, 8, 8),), lambda out: out.sum(), regions=layers)
    writes = g["meta"]["region_writes_input"]
    assert list(writes) == ["1"] and "relu_" in writes["1"], writes
    assert g["meta"]["model_returns_loss"] is False


def test_export_loads_in_remat(tmp_path: Path, binary: str) -> None:
    model = TinyGPT(layers=1)
    idx = torch.randint(0, 256, (2, 32))
    g = remat.export(model, (idx,), lambda out: lm_loss(out, idx))
    path = tmp_path / "g.json"
    path.write_text(json.dumps(g))
    out = subprocess.run(
        [binary, "inspect", str(path), "--json"], capture_output=True, text=True, timeout=60, check=True
    )
    report = json.loads(out.stdout)
    assert report["nodes"] == len(g["nodes"]) and report["fixed_memory"] == g["fixed_memory"]


@pytest.mark.parametrize("path", sorted((REPO / "graphs" / "pytorch").glob("*.json")), ids=lambda p: p.stem)
def test_bundled_pytorch_graphs_load_in_remat(path: Path, binary: str) -> None:
    graph = json.loads(path.read_text())
    assert graph["meta"]["settings"] and graph["meta"]["torch"].startswith("2.15")
    out = subprocess.run(
        [binary, "inspect", str(path), "--json"], capture_output=True, text=True, timeout=60, check=True
    )
    report = json.loads(out.stdout)
    assert report["nodes"] == len(graph["nodes"]) > 300
    published = {"resnet50": 4.09e9 * 6 * 32, "resnet18-b32": 1.81e9 * 6 * 32, "vit-b16": 17.56e9 * 6 * 32}.get(
        path.stem
    )
    if published is not None:
        assert abs(report["total_cost"] - published) / published < 0.03
