"""remat's eager path (export, solve, plan, applied SAC policies) on five model families, measured.

    REMAT_BIN=target/release/remat python3 python/benchmarks/eager.py [--models llama,bert,...]
        [--fractions 0.8,0.5,0.3] [--time-limit 5]

Per model: the plain step and per-block `torch.utils.checkpoint` (every region, non-reentrant)
measured; then per budget (a fraction of activation memory, and per-block checkpointing's
measured activations) remat's plan applied and measured. Columns: budget (activation bytes),
measured peak activations (`remat.measure.LiveBytes`), met, predicted (`plan.predicted_peak -
fixed_memory`), error %, FLOPs executed (FlopCounterMode) over the plain step's, FLOPs over
per-block's, loss/grads/buffers equal to the plain step's, plan() seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import families

import remat
from remat.apply import applied, plan
from remat.measure import measure_step

Setup = tuple[torch.nn.Module, list[torch.nn.Module], tuple[torch.Tensor, ...], Callable[..., Any]]


def _setup(make: Callable[[], families.Family]) -> Callable[[], Setup]:
    return lambda: families.as_setup(make())


SETUPS = {name: _setup(make) for name, make in families.FAMILIES.items() if name != "densenet121"}
SETUPS["densenet121"] = lambda: families.as_setup(families.densenet121(regions="layers"))


@contextmanager
def per_block(regions: list[torch.nn.Module]) -> Iterator[None]:
    """`torch.utils.checkpoint` (non-reentrant) around every region; list and dict arguments are
    copied at the call (DenseNet's layers read a list their block appends to)."""
    from remat.apply import _as_called

    for m in regions:
        f = m.forward

        def wrapped(*a: Any, _f: Any = f, **k: Any) -> Any:
            return checkpoint(_f, *_as_called(a), use_reentrant=False, **_as_called(k))

        m.forward = wrapped
    try:
        yield
    finally:
        for m in regions:
            del m.forward


def flops(model: torch.nn.Module, inputs: tuple[Any, ...], loss_fn: Any) -> int:
    with FlopCounterMode(display=False) as fc:
        loss_fn(model(*inputs)).backward()
    model.zero_grad(set_to_none=True)
    return int(fc.get_total_flops())


def run_model(name: str, fractions: list[float], time_limit: float, rows: list[dict[str, Any]]) -> None:
    torch.manual_seed(0)
    model, regions, inputs, loss_fn = SETUPS[name]()
    backend = remat.Local()
    graph = remat.export(model, inputs, loss_fn, regions=regions)
    report = backend.inspect(graph)
    fixed = int(report["fixed_memory"])
    buffers0 = {k: b.clone() for k, b in model.named_buffers()}

    def restore() -> None:
        with torch.no_grad():
            for k, b in model.named_buffers():
                b.copy_(buffers0[k])

    base = measure_step(model, inputs, loss_fn)
    restore()
    plain_flops = flops(model, inputs, loss_fn)
    restore()
    # one plain step from the initial buffers: the buffers every other step must leave
    model.zero_grad(set_to_none=True)
    loss_fn(model(*inputs)).backward()
    buffers1 = {k: b.clone() for k, b in model.named_buffers()}
    restore()
    with per_block(regions):
        pb = measure_step(model, inputs, loss_fn)
        restore()
        pb_flops = flops(model, inputs, loss_fn)
        restore()
    nodes = len(graph["nodes"])
    ref = (plain_flops, pb_flops)
    rows.append(row(name, nodes, "plain", ref, measured=base.activations, flops_run=plain_flops, same=True))
    rows.append(row(name, nodes, "per-block", ref, measured=pb.activations, flops_run=pb_flops, same=True))
    span = int(report["checkpoint_all_peak"]) - fixed
    budgets = [(f"{f:.1f}", fixed + int(f * span)) for f in fractions]
    budgets.append(("per-block", fixed + pb.activations))
    for label, budget in budgets:
        try:
            result = backend.solve(graph, budget, time_limit=time_limit)
        except remat.InfeasibleBudget:  # below what any schedule needs: nothing to apply
            rows.append(row(name, nodes, label, ref, budget=budget - fixed))
            continue
        t0 = time.perf_counter()
        try:
            p = plan(graph, result, backend, on_overrun="raise")
        except remat.OverBudget as e:
            seconds = time.perf_counter() - t0
            rows.append(
                row(name, nodes, label, ref, budget=budget - fixed, predicted=e.predicted - fixed, seconds=seconds)
            )
            continue
        seconds = time.perf_counter() - t0
        with applied(regions, p):
            step = measure_step(model, inputs, loss_fn)
            restore()
            model.zero_grad(set_to_none=True)
            loss_fn(model(*inputs)).backward()
            equal_buffers = all(
                torch.equal(b, buffers1[k]) if not b.is_floating_point() else torch.allclose(b, buffers1[k])
                for k, b in model.named_buffers()
            )
            restore()
            f = flops(model, inputs, loss_fn)
            restore()
        same = (
            abs(step.loss - base.loss) <= 1e-5 * max(1.0, abs(base.loss))
            and all(
                torch.allclose(a, b, rtol=1e-4, atol=1e-5)
                for a, b in zip(base.grads, step.grads, strict=True)
                if a is not None and b is not None
            )
            and equal_buffers
        )
        rows.append(
            row(
                name,
                nodes,
                label,
                ref,
                budget=budget - fixed,
                measured=step.activations,
                predicted=p.predicted_activations,
                flops_run=f,
                same=same,
                seconds=seconds,
            )
        )


def row(
    model: str,
    nodes: int,
    label: str,
    reference: tuple[int, int],
    *,
    budget: int | None = None,
    measured: int | None = None,
    predicted: int | None = None,
    flops_run: int | None = None,
    same: bool | None = None,
    seconds: float | None = None,
) -> dict[str, Any]:
    """One table row; `reference`: the FLOPs of the plain step and of per-block checkpointing."""
    plain, pb = reference
    return {
        "model": model,
        "nodes": nodes,
        "budget": label,
        "budget_bytes": budget,
        "measured": measured,
        "met": None if budget is None or measured is None else measured <= budget,
        "predicted": predicted,
        "error": None if measured is None or predicted is None else 100.0 * (predicted - measured) / measured,
        "flops_plain": None if flops_run is None else flops_run / plain,
        "flops_pb": None if flops_run is None else flops_run / pb,
        "equal": same,
        "plan_s": seconds,
    }


def show(rows: list[dict[str, Any]]) -> None:
    def f(x: Any, fmt: str, scale: float = 1.0) -> str:
        return "-" if x is None else format(x * scale if scale != 1.0 else x, fmt)

    mib = 1 / 2**20
    print(
        f"{'model':12} {'nodes':>5} {'budget':>9} {'budget MiB':>10} {'measured':>9} {'met':>5} {'predicted':>9} "
        f"{'err %':>7} {'FLOPs/plain':>11} {'FLOPs/pb':>8} {'equal':>5} {'plan s':>6}"
    )
    for r in rows:
        cells = [
            f"{r['model']:12}",
            f"{r['nodes']:>5}",
            f"{r['budget']:>9}",
            f"{f(r['budget_bytes'], '.2f', mib):>10}",
            f"{f(r['measured'], '.2f', mib):>9}",
            f"{f(r['met'], ''):>5}",
            f"{f(r['predicted'], '.2f', mib):>9}",
            f"{f(r['error'], '+.2f'):>7}",
            f"{f(r['flops_plain'], '.3f'):>11}",
            f"{f(r['flops_pb'], '.3f'):>8}",
            f"{f(r['equal'], ''):>5}",
            f"{f(r['plan_s'], '.2f'):>6}",
        ]
        print(" ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(SETUPS))
    ap.add_argument("--fractions", default="0.8,0.5,0.3")
    ap.add_argument("--time-limit", type=float, default=5.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows: list[dict[str, Any]] = []
    for name in args.models.split(","):
        run_model(name, [float(x) for x in args.fractions.split(",")], args.time_limit, rows)
        show(rows[-6:])
    print()
    show(rows)


if __name__ == "__main__":
    main()
