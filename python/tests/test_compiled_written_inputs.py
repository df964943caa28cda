"""The compiled path (`remat.compiled`) on forwards that write into their inputs in place: a buffer
read then updated (an EMA shift, a step counter), an input read then scaled in place, BatchNorm's
running statistics. One step under remat's partitioner against the same step compiled by plain
`aot_eager`: same loss, gradients and written values; the prediction against the measurement."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.nn import functional as F

import remat
from remat.compiled import _WithLoss
from remat.compiled import compile as remat_compile
from remat.measure_compiled import measure_compiled


class Shift(torch.nn.Module):
    """`h - shift`, then the shift moved towards the batch mean in place (an EMA), then the new
    shift read."""

    shift: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(32, 64)
        self.l2 = torch.nn.Linear(64, 64)
        self.l3 = torch.nn.Linear(64, 10)
        self.register_buffer("shift", torch.linspace(-1, 1, 64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.l1(x))
        h2 = h - self.shift
        with torch.no_grad():
            self.shift.mul_(0.9).add_(0.1 * h.mean(0))
        out: torch.Tensor = self.l3(torch.tanh(self.l2(h2)) * (1 + self.shift))
        return out


class Steps(torch.nn.Module):
    """`h + t`, then the step counter `t` incremented in place."""

    t: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(32, 64)
        self.l2 = torch.nn.Linear(64, 64)
        self.l3 = torch.nn.Linear(64, 10)
        self.register_buffer("t", torch.ones(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.l1(x)) + self.t
        self.t.add_(1)
        out: torch.Tensor = self.l3(torch.tanh(self.l2(h)))
        return out


class Scaled(torch.nn.Module):
    """`h - scale` of an input `scale`, then the input halved in place."""

    def __init__(self) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(32, 64)
        self.l2 = torch.nn.Linear(64, 64)
        self.l3 = torch.nn.Linear(64, 10)

    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.l1(x)) - scale
        scale.mul_(0.5)
        out: torch.Tensor = self.l3(torch.tanh(self.l2(h)))
        return out


def aot_eager_step(model: torch.nn.Module, args: tuple[Any, ...], loss_fn: Callable[..., torch.Tensor]) -> Any:
    """Loss, gradients and buffers after one step of `model` (a copy) compiled by plain aot_eager."""
    ref = copy.deepcopy(model)
    torch._dynamo.reset()
    loss = torch.compile(_WithLoss(ref, loss_fn, 1), backend="aot_eager", dynamic=False)(*args)
    loss.backward()
    torch._dynamo.reset()
    return float(loss), [p.grad for p in ref.parameters()], list(ref.buffers())


def assert_same(model: torch.nn.Module, loss: float, ref: Any) -> None:
    loss0, grads0, buffers0 = ref
    assert loss == loss0
    for (name, p), g0 in zip(model.named_parameters(), grads0, strict=True):
        assert p.grad is not None and g0 is not None
        torch.testing.assert_close(p.grad, g0, rtol=1e-6, atol=1e-7, msg=name)
    for b, b0 in zip(model.buffers(), buffers0, strict=True):
        assert torch.equal(b, b0)


def recomputed(events: list[dict[str, str]]) -> set[str]:
    runs = Counter(e["node"] for e in events if e["op"] == "compute" and "@copy" not in e["node"])
    return {v for v, k in runs.items() if k > 1}


@pytest.mark.parametrize("fraction", [0.9, 0.7])
@pytest.mark.parametrize("make", [Shift, Steps, Scaled], ids=["ema", "counter", "input"])
def test_a_value_read_then_written_in_place_is_recomputed_from_its_old_value(
    make: Callable[[], torch.nn.Module], fraction: float, binary: str
) -> None:
    """The forward reads a buffer (or an input), then writes it in place; the backward recomputes
    what read it. The realized forward writes the new value into the input (the functionalized
    `copy_`) before the backward runs, so a recomputation reading the input read the new value:
    same loss and buffers, gradients off by up to 0.05, with the step `fits` and no deviation.
    Now the forward reads a copy of the old value (`snapshot_written_inputs`), which recomputations
    read too: the gradients equal plain aot_eager's, and the prediction holds (measured within 4
    bytes of it, as before)."""
    torch.manual_seed(0)
    model = make()
    x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))
    args: tuple[Any, ...] = (x, torch.full((64,), 2.0), y) if make is Scaled else (x, y)
    ref = aot_eager_step(model, copy.deepcopy(args), F.cross_entropy)
    mine = copy.deepcopy(args)
    torch._dynamo.reset()
    step = remat_compile(model, F.cross_entropy, fraction, backend=remat.Local(binary), time_limit=2)
    loss = float(step(*mine))
    last = step.last
    assert last is not None and last.fits and not last.deviations
    assert recomputed(last.events), "the budget recomputes forward nodes in the backward"
    assert_same(model, loss, ref)
    if make is Scaled:
        assert torch.equal(mine[1], torch.full((64,), 1.0))
    m = measure_compiled(step, args, list(model.parameters()))
    fixed = int(last.graph["fixed_memory"])
    assert m.activations <= last.budget - fixed
    assert abs(last.predicted_activations - m.activations) <= 8, (last.predicted_activations, m.activations)


class ConvBN(torch.nn.Module):
    """Four convolutions with BatchNorm and ReLU, residual from the second on; dropout before the
    classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = torch.nn.ModuleList(torch.nn.Conv2d(3 if i == 0 else 16, 16, 3, padding=1) for i in range(4))
        self.norms = torch.nn.ModuleList(torch.nn.BatchNorm2d(16) for _ in range(4))
        self.fc = torch.nn.Linear(16, 10)
        self.drop = torch.nn.Dropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms, strict=True)):
            h = F.relu(norm(conv(x)))
            x = h if i == 0 else h + x
        out: torch.Tensor = self.fc(self.drop(x.mean((2, 3))))
        return out


@pytest.mark.parametrize("fraction", [0.8, 0.7])
def test_batchnorm_recomputed_in_the_forward_writes_its_first_statistics(fraction: float, binary: str) -> None:
    """A schedule that recomputes BatchNorm inside the forward, before the forward writes the
    running statistics: the recomputation is `_native_batch_norm_legit.no_stats` (three outputs),
    and the write took element 3 of that copy (IndexError in the generated forward). The new
    statistics are those of the first, functional copy, taken with it: the step runs, buffers and
    gradients equal plain aot_eager's, and the prediction holds."""
    torch.manual_seed(1)
    model = ConvBN()
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    torch.manual_seed(3)
    ref = aot_eager_step(model, (x, y), F.cross_entropy)
    torch._dynamo.reset()
    step = remat_compile(model, F.cross_entropy, fraction, backend=remat.Local(binary), time_limit=5)
    torch.manual_seed(3)  # the same dropout mask
    loss = float(step(x, y))
    last = step.last
    assert last is not None and last.fits
    bn = {
        n["id"] for n in last.graph["nodes"] if "batch_norm_legit_functional" in n["op"] and "element" not in n["meta"]
    }
    assert bn & recomputed(last.events), "the budget recomputes BatchNorm"
    assert_same(model, loss, ref)
    m = measure_compiled(step, (x, y), list(model.parameters()))
    assert m.activations <= last.budget - int(last.graph["fixed_memory"])
    assert abs(last.predicted_activations - m.activations) <= 8, (last.predicted_activations, m.activations)
