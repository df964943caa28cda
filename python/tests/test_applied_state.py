"""What `applied` leaves intact besides loss and gradients: what a region does to its arguments and
its buffers, copies of the model made while it runs, keyword arguments, repeated backward
passes, and plans that are the same in every process."""

from __future__ import annotations

import copy
import inspect
import io
import json
import os
import subprocess
import sys
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any, cast

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy

import remat
from remat.apply import Plan, applied, plan


class Block(nn.Module):
    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> Any:
        return x + self.l2(torch.tanh(self.l1(x)))


class Net(nn.Module):
    def __init__(self, blocks: list[nn.Module], d: int = 32) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> Any:
        for b in self.blocks:
            x = b(x)
        return self.head(x)


X, Y = torch.randn(16, 32), torch.randint(0, 10, (16,))


def loss_fn(out: Any) -> torch.Tensor:
    return F.cross_entropy(out[0] if isinstance(out, tuple) else out, Y)


def planned(model: nn.Module, regions: list[nn.Module], binary: str, budget: float = 0.6, x: Any = X) -> Plan:
    backend = remat.Local(binary)
    graph = remat.export(model, (x,), loss_fn, regions=regions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return plan(graph, backend.solve(graph, budget, time_limit=5), backend, on_overrun="warn")


def every_region_recomputed(p: Plan) -> Plan:
    """`p` with every region checkpointed and nothing cached (per-block checkpointing)."""
    q = copy.copy(p)
    q.policies = [{k: CheckpointPolicy.PREFER_RECOMPUTE for k in t} if t is not None else {} for t in p.policies]
    return q


def step(model: nn.Module) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = loss_fn(model(X))
    loss.backward()
    return loss.detach(), [q.grad.clone() for q in model.parameters() if q.grad is not None]


def assert_same_step(model: nn.Module, plain: nn.Module, regions: list[nn.Module], p: Plan) -> None:
    loss0, grads0 = step(plain)
    with applied(regions, p):
        loss1, grads1 = step(model)
    assert torch.equal(loss0, loss1)
    for g0, g1 in zip(grads0, grads1, strict=True):
        torch.testing.assert_close(g1, g0, rtol=0, atol=0)
    for (name, b0), b1 in zip(plain.state_dict().items(), model.state_dict().values(), strict=True):
        assert torch.equal(b0, b1), name


def test_a_region_appending_to_a_list_it_is_given_keeps_what_it_appended(binary: str) -> None:
    """An auxiliary loss appended by each block to its caller's list: the forward appends to the
    caller's list (it got a copy), each replay to a copy of it as it was at the call."""

    class Aux(Block):
        def forward(self, x: torch.Tensor, aux: list[torch.Tensor]) -> Any:  # type: ignore[override]
            h = torch.tanh(self.l1(x))
            aux.append(h.pow(2).mean())
            return x + self.l2(h)

    class AuxNet(Net):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
            aux: list[torch.Tensor] = []
            for b in self.blocks:
                x = b(x, aux)
            return self.head(x), len(aux)

    model = AuxNet([Aux() for _ in range(3)])
    regions = list(model.blocks)
    p = every_region_recomputed(planned(model, regions, binary))
    with applied(regions, p):
        out, appended = model(X)
        loss_fn(out).backward()
    assert appended == 3


class Shift(Block):
    """Reads a buffer, then updates it in place (a running shift, an EMA codebook)."""

    shift: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("shift", torch.zeros(128))

    def forward(self, x: torch.Tensor) -> Any:
        a = torch.tanh(self.l1(x) + self.shift)
        with torch.no_grad():
            self.shift.mul_(0.9).add_(0.1)
        return x + self.l2(a)


class InplaceShift(Shift):
    """Reads the buffer through an in-place op (`out.add_(shift)`), then updates it."""

    def forward(self, x: torch.Tensor) -> Any:
        a = self.l1(x)
        a.add_(self.shift)
        with torch.no_grad():
            self.shift.mul_(0.9).add_(0.1)
        return x + self.l2(torch.tanh(a))


class Count(Block):
    """Reassigns a buffer (a counter) instead of writing into it."""

    seen: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> Any:
        self.seen = self.seen + x.shape[0]
        return super().forward(x)


def test_regions_whose_replay_would_see_other_buffers_are_left_unchecked(binary: str) -> None:
    """A replay runs with the buffers as the forward left them: a block that read a buffer before
    updating it would replay on the new value (other gradients), one that reassigns a buffer
    would count twice. Export names them; `plan` never checkpoints them; a plain block beside
    them still is."""
    for kind in (Shift, InplaceShift, Count):
        torch.manual_seed(0)
        model = Net([kind(), kind(), Block(), Block()])
        plain = copy.deepcopy(model)
        regions = list(model.blocks)
        graph = remat.export(model, (X,), loss_fn, regions=regions)
        unchecked = graph["meta"]["region_writes_input"]
        assert sorted(unchecked) == ["0", "1"], unchecked
        p = planned(model, regions, binary, budget=0.5)
        assert p.policies[0] is None and p.policies[1] is None
        assert any(t is not None for t in p.policies[2:]), "too little recomputed to test"
        assert_same_step(model, plain, regions, p)


class FrozenCount(Block):
    """Counts its steps in a frozen `nn.Parameter` of its own, updated in place."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = nn.Parameter(torch.zeros(()), requires_grad=False)

    def forward(self, x: torch.Tensor) -> Any:
        with torch.no_grad():
            self.steps.add_(1)
        return super().forward(x)


class Tally(Block):
    """Counts its calls in a tensor its caller hands it: state that is not its own."""

    def forward(self, x: torch.Tensor, counter: list[torch.Tensor]) -> Any:  # type: ignore[override]
        with torch.no_grad():
            counter[0].add_(1)
        return super().forward(x)


class TallyNet(Net):
    calls: torch.Tensor

    def __init__(self, blocks: list[nn.Module]) -> None:
        super().__init__(blocks)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> Any:
        for b in self.blocks:
            x = b(x, [self.calls])
        return self.head(x)


def test_state_a_region_updates_is_updated_once(binary: str) -> None:
    """A replay's writes into the region's own parameters are dropped as those into its buffers
    (each block's counter ends at 1, not 2); a region writing into state that is not its own (its
    parent's counter, handed to it) is named by export and never checkpointed (the counter ends
    at 4, not 8)."""
    torch.manual_seed(0)
    model = Net([FrozenCount() for _ in range(4)])
    plain = copy.deepcopy(model)
    regions = list(model.blocks)
    assert remat.export(model, (X,), loss_fn, regions=regions)["meta"]["region_writes_input"] == {}
    assert_same_step(model, plain, regions, every_region_recomputed(planned(model, regions, binary)))
    assert [b.steps.item() for b in model.blocks if isinstance(b, FrozenCount)] == [1.0] * 4

    torch.manual_seed(0)
    tallied = TallyNet([Tally() for _ in range(4)])
    plain = copy.deepcopy(tallied)
    regions = list(tallied.blocks)
    unchecked = remat.export(tallied, (X,), loss_fn, regions=regions)["meta"]["region_writes_input"]
    assert sorted(unchecked) == ["0", "1", "2", "3"], unchecked
    assert "writes into calls, not the region's own state" in unchecked["0"], unchecked
    p = planned(tallied, regions, binary, budget=0.5)
    assert p.policies == [None] * 4
    assert_same_step(tallied, plain, regions, p)
    assert int(tallied.calls) == 4


def test_a_result_solved_at_another_batch_size_is_refused(binary: str) -> None:
    """The same model exported at another batch size has the same node ids: its result's budget and
    schedule are not this graph's, which `plan` says instead of planning within that budget."""
    model = Net([Block() for _ in range(3)])
    regions = list(model.blocks)
    backend = remat.Local(binary)
    small = remat.export(model, (X,), loss_fn, regions=regions)
    large = remat.export(model, (torch.randn(64, 32),), lambda out: out.sum(), regions=regions)
    result = backend.solve(large, 0.8, time_limit=5)
    with pytest.raises(remat.ApplyError, match="solved for another graph"):
        plan(small, result, backend)
    assert plan(small, backend.solve(small, 0.8, time_limit=5), backend).fits
    # exported again with measured times (other costs, the same graph): its result still applies
    timed = remat.export(model, (X,), loss_fn, regions=regions, cost="time", repeats=1)
    again = remat.export(model, (X,), loss_fn, regions=regions, cost="time", repeats=1)
    assert plan(again, backend.solve(timed, 0.8, time_limit=5), backend).fits


def test_a_copy_made_while_applied_runs_its_own_weights(binary: str) -> None:
    """`copy.deepcopy` (an EMA or best-model copy) and `torch.save` of the whole model while the plan
    is applied: the copy's regions run the copy's parameters, and its gradients are its own; once
    the context closes the copy runs its plain forward, as the original does (it can be exported)."""
    model = Net([Block() for _ in range(3)])
    regions = list(model.blocks)
    p = every_region_recomputed(planned(model, regions, binary))
    with applied(regions, p):
        ema = copy.deepcopy(model)
        buffer = io.BytesIO()
        torch.save(model, buffer)
    graph = remat.export(ema, (X,), loss_fn, regions=list(ema.blocks))
    assert len(graph["nodes"]) == len(remat.export(model, (X,), loss_fn, regions=regions)["nodes"])
    with torch.no_grad():
        for q in ema.blocks.parameters():
            q.zero_()
    torch.testing.assert_close(ema.blocks[0](X), X)
    model.zero_grad(set_to_none=True)
    loss_fn(ema(X)).backward()
    assert all(q.grad is None for q in model.parameters())
    assert all(q.grad is not None for q in ema.head.parameters())
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=False)
    torch.testing.assert_close(saved(X), model(X))


def test_a_model_compiled_by_torch_compile_runs_its_regions_as_planned(binary: str) -> None:
    """`torch.compile(model)` called inside the context: Dynamo breaks its graph around each region,
    which runs eagerly under the plan (it failed inside Dynamo): the same step, the same activation
    peak as the eager model under the plan."""
    from remat.measure import measure_step

    torch.manual_seed(0)
    model = Net([Block() for _ in range(3)])
    plain = copy.deepcopy(model)
    regions = list(model.blocks)
    p = every_region_recomputed(planned(model, regions, binary))
    compiled = cast(nn.Module, torch.compile(model, backend="aot_eager"))
    with applied(regions, p):
        eager_peak = measure_step(model, (X,), loss_fn).activations
        compiled_peak = measure_step(compiled, (X,), loss_fn).activations
    assert compiled_peak == eager_peak
    assert_same_step(compiled, plain, regions, p)


def test_keyword_arguments_reach_the_region_whatever_their_name(binary: str) -> None:
    """`debug=`, `use_reentrant=`... are the region's own arguments, not `checkpoint`'s."""

    class Flags(Block):
        def forward(self, x: torch.Tensor, debug: bool = False, early_stop: bool = False) -> Any:
            y = super().forward(x)
            return y * 0.5 if early_stop else y

    class FlagNet(Net):
        def forward(self, x: torch.Tensor) -> Any:
            for b in self.blocks:
                x = b(x, early_stop=True, debug=True)
            return self.head(x)

    model = FlagNet([Flags() for _ in range(3)])
    plain = copy.deepcopy(model)
    regions = list(model.blocks)
    p = every_region_recomputed(planned(model, regions, binary))
    assert_same_step(model, plain, regions, p)
    with applied(regions, p):  # tools that read the forward's parameters see the region's own
        assert list(inspect.signature(regions[0].forward).parameters) == ["x", "debug", "early_stop"]


def test_backward_twice_and_a_gradient_penalty_run_where_nothing_is_cached(binary: str) -> None:
    """`retain_graph=True` and double backward replay a region twice: the replay's context is entered
    again (torch's own SAC refuses a second backward through ops it cached, so the regions here
    cache none)."""
    model = Net([Block() for _ in range(3)])
    regions = list(model.blocks)
    plain = copy.deepcopy(model)
    p = every_region_recomputed(planned(model, regions, binary))
    x0, x1 = X.clone().requires_grad_(), X.clone().requires_grad_()
    for m, x, ctx in ((plain, x0, None), (model, x1, applied(regions, p))):
        if ctx is not None:
            ctx.__enter__()
        loss = loss_fn(m(x))
        loss.backward(retain_graph=True)
        (gx,) = torch.autograd.grad(loss, x, create_graph=True)
        (loss + gx.pow(2).sum()).backward()
        if ctx is not None:
            ctx.__exit__(None, None, None)
    for q0, q1 in zip(plain.parameters(), model.parameters(), strict=True):
        assert q0.grad is not None and q1.grad is not None
        torch.testing.assert_close(q1.grad, q0.grad)


def test_regions_of_views_arguments_of_container_types_and_reentry(binary: str) -> None:
    """A last region that allocates nothing (`nn.Flatten`) still counts as a region; a
    `torch.Size` and a `defaultdict` reach a region as themselves; one `applied` object is
    entered twice, from a generator of modules; a miss is named once however many steps run."""

    class Typed(Block):
        def forward(self, x: torch.Tensor, shape: torch.Size, cfg: dict[str, float]) -> Any:  # type: ignore[override]
            return super().forward(x).reshape(shape.numel() // 32, 32) * cfg["absent"]

    class TypedNet(Net):
        def forward(self, x: torch.Tensor) -> Any:
            a, b, flat = self.blocks
            x = a(x, x.shape, defaultdict(lambda: 1.0))
            return self.head(flat(b(x, x.shape, defaultdict(lambda: 1.0))))

    model = TypedNet([Typed(), Typed(), nn.Flatten(1)])
    plain = copy.deepcopy(model)
    p = every_region_recomputed(planned(model, list(model.blocks), binary, budget=0.9))
    assert len(p.policies) == 3
    context = applied((b for b in model.blocks), p)
    for _ in range(2):
        with context:
            loss1, grads1 = step(model)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss_fn(model(X)).backward()  # ops the float32 export did not see: misses
    assert "forward" not in model.blocks[0].__dict__
    assert p.misses and len(p.misses) == len(set(p.misses))
    loss0, grads0 = step(plain)
    assert torch.equal(loss0, loss1)
    for g0, g1 in zip(grads0, grads1, strict=True):
        torch.testing.assert_close(g1, g0, rtol=0, atol=0)


def test_the_plan_is_the_same_in_every_process(binary: str, tmp_path: Path) -> None:
    """Ties among the op calls to recompute or save are broken by region, op and occurrence, not
    by the order of a set of strings, which changes with PYTHONHASHSEED."""

    class Regularized(Block):
        def __init__(self) -> None:
            super().__init__(64)
            self.drop, self.norm = nn.Dropout(0.2), nn.BatchNorm1d(64)

        def forward(self, x: torch.Tensor) -> Any:
            return self.norm(x + self.l2(self.drop(torch.tanh(self.l1(x)))))

    model = Net([Regularized() for _ in range(4)], d=64)
    x = torch.randn(16, 64)
    backend = remat.Local(binary)
    graph = remat.export(model, (x,), loss_fn, regions=list(model.blocks))
    (tmp_path / "graph.json").write_text(json.dumps(graph))
    (tmp_path / "result.json").write_text(json.dumps(backend.solve(graph, 0.6, time_limit=5)))
    script = (
        "import json, sys, warnings, remat\n"
        "from remat.apply import plan\n"
        "g, r = (json.load(open(sys.argv[i])) for i in (1, 2))\n"
        "warnings.simplefilter('ignore')\n"
        "p = plan(g, r, remat.Local(sys.argv[3]), on_overrun='warn')\n"
        "print(json.dumps([sorted((str(k), v.name) for k, v in t.items()) if t else None for t in p.policies]))\n"
    )
    package = str(Path(remat.__file__).resolve().parents[1])
    plans = set()
    for seed in range(4):
        env = dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=package)
        args = [sys.executable, "-c", script, str(tmp_path / "graph.json"), str(tmp_path / "result.json"), binary]
        plans.add(subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout)
    assert len(plans) == 1, plans
