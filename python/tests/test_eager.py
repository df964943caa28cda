"""The eager path's guarantees (issues 25 and 30): buffers updated once per step, regions whose
input is a growing list (DenseNet), an overrun raised (or warned), never worse than per-block
checkpointing, and the prediction within 2% of the measured activation peak."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import families
import pytest
import torch
import torch.nn.functional as F
from models import resnet18_setup
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

import remat
from remat.apply import applied, plan
from remat.measure import LiveBytes, measure_step


@contextmanager
def per_block(regions: list[nn.Module]) -> Iterator[None]:
    """Plain `torch.utils.checkpoint` (non-reentrant) around every region."""
    for m in regions:
        f = m.forward
        m.forward = lambda *a, _f=f, **k: checkpoint(_f, *a, use_reentrant=False, **k)
    try:
        yield
    finally:
        for m in regions:
            del m.forward


def step_flops(model: nn.Module, inputs: tuple[Any, ...], loss_fn: Any) -> int:
    with FlopCounterMode(display=False) as fc:
        loss_fn(model(*inputs)).backward()
    model.zero_grad(set_to_none=True)
    return int(fc.get_total_flops())


def one_step(model: nn.Module, inputs: tuple[Any, ...], loss_fn: Any) -> tuple[float, list[torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = loss_fn(model(*inputs))
    loss.backward()
    return float(loss.item()), [p.grad.clone() for p in model.parameters() if p.grad is not None]


def densenet_setup(batch: int, resolution: int) -> Any:
    """torchvision's DenseNet-121 unmodified, its dense layers the regions."""
    return families.as_setup(families.densenet121(batch, resolution, regions="layers"))


def cumulative_batchnorm_setup(batch: int, resolution: int) -> Any:
    """Blocks of Linear, `BatchNorm1d(momentum=None)` (a cumulative average, which divides by its
    step counter as a Python number) and ReLU."""
    width = 4 * resolution
    regions = [
        nn.Sequential(nn.Linear(width, width), nn.BatchNorm1d(width, momentum=None), nn.ReLU()) for _ in range(6)
    ]
    model = nn.Sequential(*regions, nn.Linear(width, 1))
    x, y = torch.randn(4 * batch, width), torch.randn(4 * batch, 1)
    return model, regions, (x,), lambda out: F.mse_loss(out, y)


@pytest.mark.parametrize(
    "make",
    [resnet18_setup, densenet_setup, cumulative_batchnorm_setup],
    ids=["resnet18", "densenet121", "cumulative-batchnorm"],
)
def test_batchnorm_buffers_are_updated_once(make: Any, binary: str) -> None:
    """After one step under the plan, every buffer (running statistics, num_batches_tracked)
    equals the plain step's, as do loss and gradients; torchvision's DenseNet-121 unmodified."""
    torch.manual_seed(0)
    model, regions, inputs, loss_fn = make(batch=2, resolution=32)
    backend = remat.Local(binary)
    graph = remat.export(model, inputs, loss_fn, regions=regions)
    plain = copy.deepcopy(model)
    loss0, grads0 = one_step(plain, inputs, loss_fn)
    # a tight budget: most regions checkpointed and replayed in backward
    result = backend.solve(graph, 0.6, time_limit=2)
    p = plan(graph, result, backend, on_overrun="warn")
    assert sum(t is not None for t in p.policies) >= len(regions) // 2, "too few regions replayed to test"
    with applied(regions, p):
        loss1, grads1 = one_step(model, inputs, loss_fn)
    assert loss1 == pytest.approx(loss0, rel=1e-6)
    for g0, g1 in zip(grads0, grads1, strict=True):
        torch.testing.assert_close(g1, g0, rtol=1e-4, atol=1e-5)
    buffers0 = dict(plain.named_buffers())
    for name, b in model.named_buffers():
        if b.is_floating_point():
            torch.testing.assert_close(b, buffers0[name], rtol=1e-5, atol=1e-7, msg=name)
        else:
            assert torch.equal(b, buffers0[name]), (name, b, buffers0[name])


def test_region_reading_a_growing_list_replays_its_input_as_called(binary: str) -> None:
    """DenseNet's dense layers read the list of features their block keeps appending to."""
    torch.manual_seed(0)
    model, regions, inputs, loss_fn = densenet_setup(batch=2, resolution=32)
    backend = remat.Local(binary)
    graph = remat.export(model, inputs, loss_fn, regions=regions)
    result = backend.solve(graph, 0.5, time_limit=2)
    p = plan(graph, result, backend, on_overrun="warn")
    assert all(t is not None for t in p.policies[:6]), "the first block's layers must be replayed"
    plain = copy.deepcopy(model)
    loss0, grads0 = one_step(plain, inputs, loss_fn)
    with applied(regions, p):
        loss1, grads1 = one_step(model, inputs, loss_fn)
    assert loss1 == pytest.approx(loss0, rel=1e-6)
    for g0, g1 in zip(grads0, grads1, strict=True):
        torch.testing.assert_close(g1, g0, rtol=1e-4, atol=1e-5)


def small_unet() -> tuple[nn.Module, list[nn.Module], tuple[torch.Tensor, ...], Any]:
    model = families.UNet(width=16)
    x = torch.randn(2, 3, 32, 32)
    target = torch.randn(2, 3, 32, 32)
    return model, model.blocks(), (x,), lambda out: F.l1_loss(out, target)


def test_overrun_raises_by_default_and_warns_on_request(binary: str) -> None:
    torch.manual_seed(0)
    model, regions, inputs, loss_fn = small_unet()
    backend = remat.Local(binary)
    graph = remat.export(model, inputs, loss_fn, regions=regions)
    result = backend.solve(graph, 0.3, time_limit=2)  # below per-block checkpointing's 0.5-0.6
    budget = int(result["budget"])
    with pytest.raises(remat.OverBudget) as caught:
        plan(graph, result, backend)
    assert caught.value.budget == budget and caught.value.predicted > budget
    assert str(budget) in str(caught.value) and str(caught.value.predicted) in str(caught.value)
    assert "on_overrun='warn'" in str(caught.value)
    with pytest.warns(remat.OverBudgetWarning, match=str(budget)):
        p = plan(graph, result, backend, on_overrun="warn")
    assert not p.fits and p.predicted_peak == caught.value.predicted
    with applied(regions, p):
        step = measure_step(model, inputs, loss_fn)
    assert step.loss > 0
    with pytest.raises(remat.ApplyError, match="on_overrun"):
        plan(graph, result, backend, on_overrun="ignore")  # type: ignore[arg-type]


def small_vit() -> tuple[nn.Module, list[nn.Module], tuple[torch.Tensor, ...], Any]:
    """torchvision's VisionTransformer (`nn.MultiheadAttention` blocks) at a small size."""
    return families.as_setup(families.vit(batch=2, resolution=16, patch=4, layers=3, d=32))


def small_bert() -> tuple[nn.Module, list[nn.Module], tuple[torch.Tensor, ...], Any]:
    """A BERT-style encoder of `nn.TransformerEncoderLayer` (post-norm: a region ends in a
    LayerNorm whose statistics its autograd node saves)."""
    return families.as_setup(families.bert(batch=2, seq=32, layers=2))


@pytest.mark.parametrize("make", [small_unet, small_vit, small_bert], ids=["unet", "vit", "bert"])
def test_fits_at_per_block_memory_with_no_more_flops(make: Any, binary: str) -> None:
    """At the activation memory plain per-block checkpointing measures, the plan fits (measured)
    and executes no more FLOPs than per-block checkpointing, its prediction within 2%."""
    torch.manual_seed(0)
    model, regions, inputs, loss_fn = make()
    backend = remat.Local(binary)
    graph = remat.export(model, inputs, loss_fn, regions=regions)
    with per_block(regions):
        pb = measure_step(model, inputs, loss_fn)
        pb_flops = step_flops(model, inputs, loss_fn)
    budget = int(graph["fixed_memory"]) + pb.activations
    result = backend.solve(graph, budget, time_limit=2)
    p = plan(graph, result, backend)
    assert p.fits
    with applied(regions, p):
        step = measure_step(model, inputs, loss_fn)
        flops = step_flops(model, inputs, loss_fn)
    assert step.activations <= pb.activations, (step.activations, pb.activations)
    assert flops <= pb_flops, (flops, pb_flops)
    assert abs(p.predicted_activations - step.activations) <= 0.02 * step.activations


@pytest.mark.parametrize("make", [small_unet, small_vit], ids=["unet", "vit"])
def test_prediction_within_two_percent_across_budgets(make: Any, binary: str) -> None:
    """From 0.9 of activations down to below per-block checkpointing's memory: the predicted
    activation peak within 2% of the measured one, and the measured peak within the budget
    wherever the plan says it fits. A checkpointed region replays at the first unpack of any
    tensor its ops saved, cached or not (ViT's MLP backward unpacks a cached tensor and replays
    the attention's uncached in-projection long before its backward reads it); the replay's
    copies are its own, while the forward's copy lives as long as something else holds it."""
    torch.manual_seed(0)
    model, regions, inputs, loss_fn = make()
    backend = remat.Local(binary)
    graph = remat.export(model, inputs, loss_fn, regions=regions)
    misses = []
    for fraction in (0.9, 0.8, 0.7, 0.6, 0.5):
        result = backend.solve(graph, fraction, time_limit=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", remat.OverBudgetWarning)  # below per-block's memory
            p = plan(graph, result, backend, on_overrun="warn")
        with applied(regions, p):
            step = measure_step(model, inputs, loss_fn)
        error = (p.predicted_activations - step.activations) / step.activations
        over = p.fits and step.activations > p.budget - p.fixed_memory
        if abs(error) > 0.02 or over:
            misses.append((fraction, p.predicted_activations, step.activations, f"{100 * error:+.2f}%", p.fits))
    assert not misses, misses


class Swish(torch.autograd.Function):
    """A custom autograd function: `ctx.save_for_backward` packs its input once its forward ran."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        x: torch.Tensor = ctx.saved_tensors[0]
        s = torch.sigmoid(x)
        return g * (s + x * s * (1 - s))


class CustomBlock(nn.Module):
    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> Any:
        return x + self.l2(Swish.apply(self.l1(x)))


class ViewReluBlock(CustomBlock):
    """An in-place op on a view (autograd wraps its node in a CopySlices node that applies it)."""

    def forward(self, x: torch.Tensor) -> Any:
        return x + self.l2(self.l1(x).t().contiguous().t().relu_())


@pytest.mark.parametrize("block", [CustomBlock, ViewReluBlock], ids=["custom-function", "relu-on-view"])
def test_saves_packed_after_their_op_are_planned_and_predicted(block: Any, binary: str) -> None:
    """Tensors saved where no following op reads them, by a custom autograd function or an
    in-place op on a view, are paired with their op: the plan's schedule is valid (it was refused
    as "not resident"), the step is the plain one, the prediction within 2% of the measured."""
    torch.manual_seed(0)
    model = nn.Sequential(*[block() for _ in range(3)], nn.Linear(32, 10))
    regions = list(model)[:3]
    x, y = torch.randn(64, 32), torch.randint(0, 10, (64,))

    def loss_fn(out: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out, y)

    backend = remat.Local(binary)
    graph = remat.export(model, (x,), loss_fn, regions=regions)
    plain = one_step(copy.deepcopy(model), (x,), loss_fn)
    for fraction in (0.95, 0.9, 0.85):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", remat.OverBudgetWarning)
            p = plan(graph, backend.solve(graph, fraction, time_limit=2), backend, on_overrun="warn")
        with applied(regions, p):
            loss, grads = one_step(model, (x,), loss_fn)
            step = measure_step(model, (x,), loss_fn)
        assert loss == plain[0]
        for g, g0 in zip(grads, plain[1], strict=True):
            torch.testing.assert_close(g, g0, rtol=0, atol=0)
        error = (p.predicted_activations - step.activations) / step.activations
        assert abs(error) <= 0.02, (fraction, p.predicted_activations, step.activations)


@pytest.mark.parametrize("fraction", [0.8, 0.5])
@pytest.mark.parametrize("make", [small_unet, resnet18_setup], ids=["unet", "resnet18"])
def test_prediction_within_two_percent(make: Any, fraction: float, binary: str) -> None:
    torch.manual_seed(0)
    model, regions, inputs, loss_fn = make()
    backend = remat.Local(binary)
    graph = remat.export(model, inputs, loss_fn, regions=regions)
    result = backend.solve(graph, fraction, time_limit=2)
    p = plan(graph, result, backend, on_overrun="warn")
    with applied(regions, p):
        step = measure_step(model, inputs, loss_fn)
    error = (p.predicted_activations - step.activations) / step.activations
    assert abs(error) <= 0.02, (p.predicted_activations, step.activations, f"{100 * error:+.2f}%")


def test_output_not_held_prediction_exact(binary: str) -> None:
    """`loss_fn(model(x)).backward()` drops the logits once the loss's autograd no longer needs
    them: `plan(..., hold_output=False)` predicts that step within 2% (held, the prediction is the
    logits above it) and fits at the memory per-block checkpointing measures in it."""
    torch.manual_seed(0)
    model, regions, inputs, targets, loss_fn = families.llama(batch=2, seq=32, layers=2)
    backend = remat.Local(binary)
    graph = remat.export(model, inputs, lambda o: loss_fn(o, *targets), regions=regions)

    def peak() -> int:
        model.zero_grad(set_to_none=True)
        with LiveBytes() as live:
            loss_fn(model(*inputs), *targets).backward()
        return int(live.peak([p.grad for p in model.parameters() if p.grad is not None]))

    with per_block(regions):
        pb = peak()
    result = backend.solve(graph, int(graph["fixed_memory"]) + pb, time_limit=2)
    p = plan(graph, result, backend, hold_output=False)
    assert p.fits
    with applied(regions, p):
        measured = peak()
    assert measured <= pb
    assert abs(p.predicted_activations - measured) <= 0.02 * measured, (p.predicted_activations, measured)


def test_a_region_writing_into_its_input_is_left_unchecked(binary: str) -> None:
    """VGG's way of listing regions (every module of `features`, `nn.ReLU(inplace=True)` among
    them): a ReLU region overwrites the convolution's output in place, so replaying it would read
    its own result (autograd refused: "modified by an inplace operation"). It is never
    checkpointed; the step's loss and gradients are plain eager's, and the prediction holds."""
    layers: list[nn.Module] = []
    for _ in range(3):
        layers += [nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True)]
    model = nn.Sequential(*layers, nn.Flatten(), nn.Linear(8 * 16 * 16, 10))
    x, y = torch.randn(2, 8, 16, 16), torch.randint(0, 10, (2,))
    loss_fn = lambda out: F.cross_entropy(out, y)  # noqa: E731
    backend = remat.Local(binary)
    graph = remat.export(model, (x,), loss_fn, regions=layers)
    p = plan(graph, backend.solve(graph, 0.6, time_limit=2), backend, on_overrun="warn")
    assert [t is None for t in p.policies[1::2]] == [True] * 3
    assert any(t is not None for t in p.policies[::2]), "no convolution checkpointed: nothing to test"
    twin = copy.deepcopy(model)
    loss, grads = one_step(model, (x,), loss_fn)
    with applied(list(twin)[: len(layers)], p):
        loss_applied, grads_applied = one_step(twin, (x,), loss_fn)
        step = measure_step(twin, (x,), loss_fn)
    assert loss_applied == loss and all(torch.equal(a, b) for a, b in zip(grads, grads_applied, strict=True))
    assert abs(p.predicted_activations - step.activations) <= 0.02 * step.activations


def test_regions_that_free_nothing_say_so(binary: str) -> None:
    """One region per layer of a conv/in-place-ReLU stack (VGG's `list(features)`): checkpointing
    them frees nothing, so the overrun's advice is regions of several layers, not smaller ones; and
    it holds: the same layers in regions of two convolutions each fit the same budget."""
    torch.manual_seed(0)
    blocks = [
        nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        for _ in range(3)
    ]
    model = nn.Sequential(*blocks, nn.Flatten(), nn.Linear(8 * 16 * 16, 10))
    x, y = torch.randn(2, 8, 16, 16), torch.randint(0, 10, (2,))
    loss_fn = lambda out: F.cross_entropy(out, y)  # noqa: E731
    backend = remat.Local(binary)
    layers = remat.export(model, (x,), loss_fn, regions=[m for b in blocks for m in b])
    with pytest.raises(
        remat.OverBudget, match="regions of several layers each: checkpointing these regions frees nothing"
    ):
        plan(layers, backend.solve(layers, 0.8, time_limit=2), backend)
    grouped = remat.export(model, (x,), loss_fn, regions=blocks)
    assert plan(grouped, backend.solve(grouped, 0.8, time_limit=2), backend).fits


def test_a_model_returning_its_loss_holds_no_output(binary: str) -> None:
    """Exported without `loss_fn`, the model's output is the loss: there is no output for the
    caller to hold, so `plan`'s default predicts the step as it runs."""

    class WithLoss(nn.Module):
        target: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(64, 64), nn.GELU()) for _ in range(4))
            self.register_buffer("target", torch.randn(16, 64))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for b in self.blocks:
                x = b(x)
            return F.mse_loss(x, self.target)

    model, x = WithLoss(), torch.randn(16, 64)
    backend = remat.Local(binary)
    graph = remat.export(model, (x,), None, regions=list(model.blocks))
    assert graph["meta"]["model_returns_loss"] is True
    p = plan(graph, backend.solve(graph, 0.5, time_limit=2), backend, on_overrun="warn")
    with applied(list(model.blocks), p):
        step = measure_step(model, (x,))
    assert abs(p.predicted_activations - step.activations) <= 0.02 * step.activations


def test_applied_holds_no_copy_of_the_buffers(binary: str) -> None:
    """A replayed region's buffers (BatchNorm's running statistics) stay as the forward left them
    without a copy held: a step that enters `applied` inside the measurement holds what a step
    entering it outside does, the plan's prediction."""
    torch.manual_seed(0)
    model, regions, inputs, loss_fn = resnet18_setup(batch=2, resolution=32)
    backend = remat.Local(binary)
    graph = remat.export(model, inputs, loss_fn, regions=regions)
    p = plan(graph, backend.solve(graph, 0.8, time_limit=2), backend, on_overrun="warn")
    assert any(t is not None for t in p.policies), "no region replayed: nothing to test"

    def peak(inside: bool) -> int:
        model.zero_grad(set_to_none=True)
        if inside:
            with LiveBytes() as live, applied(regions, p):
                out = model(*inputs)
                loss_fn(out).backward()
        else:
            with applied(regions, p), LiveBytes() as live:
                out = model(*inputs)
                loss_fn(out).backward()
        return int(live.peak([q.grad for q in model.parameters() if q.grad is not None]))

    assert peak(inside=True) == peak(inside=False) == p.predicted_activations
