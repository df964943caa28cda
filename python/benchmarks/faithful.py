"""Issue 25's acceptance table: what PyTorch runs under each way of saving activation memory.

For each model family (`families.py`) and activation fraction (0.8, 0.5, 0.3 and the tightest one
remat accepts), one training step (forward, loss, backward) of a fresh copy of the model under:

- `none`: no checkpointing (the baseline: loss, gradients, buffers, FLOPs and time compare to it);
- `per-block`: `torch.utils.checkpoint` (non-reentrant) around every block;
- `torch-budget`: PyTorch's `activation_memory_budget` (min-cut partitioner,
  `aot_eager_decomp_partition`);
- `remat-eager`: `remat.export` + `solve_local` + `remat.apply.plan`/`applied` (SAC policies);
- `remat-compiled`: `remat.compiled.compile` (model and loss in one joint graph, aot_eager);
- `remat-inductor`: the same partitioner inside Inductor (`--inductor`; C++ compile, slow;
  `--only-inductor`: the baseline and these rows alone, at 0.8, 0.5 and 0.3).

Columns: budget = bytes of activations (the compiled joint graph's fraction: `fixed_memory + f *
(checkpoint_all_peak - fixed_memory)` less `fixed_memory`; the eager path gets the same bytes over
its own graph's fixed memory; Inductor rows: the fraction of the joint graph Inductor hands the
partitioner, after its decompositions, the budget the plan's `fits` refers to); measured = peak live
op outputs (`CompiledLiveBytes`; Inductor rows: `AllocatorBytes` without ops' scratch), parameters,
buffers, inputs and gradients excluded; met = measured <= budget; predicted = remat's simulator on
what runs; error = (predicted - measured) / measured; FLOPs = FLOPs dispatched (matmul, convolution,
attention: torch's flop registry) over the baseline's; time = fastest of `--repeats` untracked steps
over the baseline's; equal = loss and gradients (rtol 1e-4) and buffers equal to the baseline's
(where not, the tensor that differs most, its largest difference and that over the tolerance).

With `--device cuda` the models run on the GPU, measured as on the CPU (Inductor rows: the CUDA
caching allocator's blocks, rounded to 512 bytes, without ops' scratch), and three more columns
give the CUDA caching allocator's view: its peak of live blocks without and with ops' scratch
(cuDNN's workspaces; `AllocatorBytes("cuda")`, the final gradients left out) and
`torch.cuda.max_memory_allocated` above the step's start (the gradients and workspaces included).
The allocator's blocks are given for the compiled rows only: in the eager rows the profiler's
events do not add up (their peak exceeds `max_memory_allocated`; cause not established).

    python3 python/benchmarks/faithful.py --models llama,unet [--inductor] [--json out.json]
    python3 python/benchmarks/faithful.py --models unet --eager-only   # none, per-block, remat-eager
    python3 python/benchmarks/faithful.py --check out.json [more.json ...]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.utils.checkpoint
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package, when not installed
import families

import remat
from remat.compiled import compile as remat_compile
from remat.measure_compiled import measure_compiled


class Flops(TorchDispatchMode):
    """FLOPs of the ops dispatched while open (torch's flop registry), compiled graphs included."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        count = flop_registry.get(func.overloadpacket)
        if count is not None:
            self.total += int(count(*args, **(kwargs or {}), out_val=out))
        return out


Row = dict[str, Any]


# `equal`'s tolerances (torch.allclose's rtol, atol; math.isclose's rel_tol for the loss)
LOSS_RTOL = 1e-4
GRAD_TOL = (1e-4, 1e-5)
BUFFER_TOL = (1e-5, 1e-6)


def run_row(
    name: str,
    model: torch.nn.Module,
    step: Callable[..., Any],
    args: Sequence[Any],
    base: Row | None,
    repeats: int,
    *,
    allocator: bool = False,
) -> Row:
    params = list(model.parameters())
    state = copy.deepcopy(list(model.buffers()))
    m = measure_compiled(step, args, params, repeats=repeats)
    for b, s in zip(model.buffers(), state, strict=True):  # one step's buffer update, as the baseline
        b.copy_(s)
    for p in params:
        p.grad = None
    step(*args)
    buffers = [b.detach().clone() for b in model.buffers()]
    for p in params:
        p.grad = None
    with Flops() as fl:
        step(*args)
    row: Row = {
        "row": name,
        "measured": m.buffers if allocator else m.activations,
        "blocks": m.buffers,
        "with_scratch": m.allocated,
        "max_allocated": m.max_allocated,
        "loss": m.loss,
        "seconds": m.seconds,
        "flops": fl.total,
        "grads": m.grads,
        "buffers": buffers,
    }
    if base is not None:
        (g_rtol, g_atol), (b_rtol, b_atol) = GRAD_TOL, BUFFER_TOL
        same = math.isclose(m.loss, base["loss"], rel_tol=LOSS_RTOL) and all(
            (g is None) == (g0 is None) and (g is None or torch.allclose(g, g0, rtol=g_rtol, atol=g_atol))
            for g, g0 in zip(m.grads, base["grads"], strict=True)
        )
        same = same and all(
            torch.equal(b, b0) if not b.dtype.is_floating_point else torch.allclose(b, b0, rtol=b_rtol, atol=b_atol)
            for b, b0 in zip(buffers, base["buffers"], strict=True)
        )
        row["equal"] = same
        if not same:
            row["mismatch"] = mismatch(model, m.loss, m.grads, buffers, base)
    return row


def mismatch(model: torch.nn.Module, loss: float, grads: Sequence[Any], buffers: Sequence[Any], base: Row) -> str:
    """Where a row differs most from the baseline, relative to `equal`'s tolerance: the tensor
    (the loss, a parameter's gradient or a buffer), its largest absolute difference and that
    difference over the tolerance at the element (above 1 fails)."""
    off = abs(loss - base["loss"])
    worst = ("loss", off, off / (LOSS_RTOL * max(abs(loss), abs(base["loss"]))) if off else 0.0)
    names = [f"grad {n}" for n, _ in model.named_parameters()] + [f"buffer {n}" for n, _ in model.named_buffers()]
    pairs = [(g, g0, *GRAD_TOL) for g, g0 in zip(grads, base["grads"], strict=True)]
    pairs += [(b, b0, *BUFFER_TOL) for b, b0 in zip(buffers, base["buffers"], strict=True)]
    for name, (t, t0, rtol, atol) in zip(names, pairs, strict=True):
        if t is None or t0 is None or not t.dtype.is_floating_point:
            if not (t is None and t0 is None) and (t is None or t0 is None or not torch.equal(t, t0)):
                return f"{name} differs"
            continue
        diff = (t.double() - t0.double()).abs()
        ratio = (diff / (atol + rtol * t0.double().abs())).max().item()
        if ratio > worst[2]:
            worst = (name, diff.max().item(), ratio)
    name, diff, ratio = worst
    return f"{name}: max |diff| {diff:.3g}, {ratio:.3g}x the tolerance"


def make_step(model: torch.nn.Module, loss_fn: Callable[..., Any], n_inputs: int) -> Callable[..., Any]:
    def step(*args: Any) -> torch.Tensor:
        loss: torch.Tensor = loss_fn(model(*args[:n_inputs]), *args[n_inputs:])
        loss.backward()
        return loss.detach()

    return step


def per_block(blocks: Sequence[torch.nn.Module]) -> Callable[[], None]:
    """Wrap every block's forward in non-reentrant torch.utils.checkpoint; returns the undo."""
    for b in blocks:
        forward = b.forward

        def wrapped(*a: Any, _f: Any = forward, **k: Any) -> Any:
            return torch.utils.checkpoint.checkpoint(_f, *a, use_reentrant=False, **k)

        b.forward = wrapped

    def undo() -> None:
        for b in blocks:
            del b.forward

    return undo


def on(device: str, make: Callable[[], families.Family]) -> Callable[[], families.Family]:
    """`make`, with the model and its tensors moved to `device` (in place: blocks stay valid)."""

    def made() -> families.Family:
        model, blocks, inputs, targets, loss_fn = make()
        model.to(device)
        return model, blocks, tuple(t.to(device) for t in inputs), tuple(t.to(device) for t in targets), loss_fn

    return made


def fresh(make: Callable[[], families.Family]) -> families.Family:
    torch.manual_seed(0)
    return make()


@dataclasses.dataclass
class Case:
    """One model family's set-up, shared by its rows: a fresh copy of the model (`model_copy`,
    with the blocks per-block checkpointing wraps), its loss, a step's arguments (the first `n_in`
    the model's inputs, the rest the loss's targets) and the baseline row."""

    args: argparse.Namespace
    backend: remat.Local
    model_copy: Callable[[], tuple[torch.nn.Module, list[torch.nn.Module]]]
    loss_fn: Callable[..., Any]
    step_args: Sequence[Any]
    n_in: int
    base: Row


def failed(row: str, e: Exception) -> Row:
    """A row that did not run: what it raised (remat's refusal, or what this torch version or its
    compiler raises)."""
    return {"row": row, "error": f"{type(e).__name__}: {str(e)[:160]}"}


def rows_for(name: str, args: argparse.Namespace, backend: remat.Local) -> list[Row]:
    make = on(args.device, families.FAMILIES[name])
    model0, _, inputs, targets, loss_fn = fresh(make)
    pristine = copy.deepcopy(model0)
    step_args = (*inputs, *targets)
    n_in = len(inputs)

    def model_copy() -> tuple[torch.nn.Module, list[torch.nn.Module]]:
        torch.manual_seed(0)
        m, blocks, *_ = make()
        m.load_state_dict(pristine.state_dict())
        return m, blocks

    out: list[Row] = []
    m, _ = model_copy()
    base = run_row("none", m, make_step(m, loss_fn, n_in), step_args, None, args.repeats)
    base["equal"] = True
    out.append(base)
    m, blocks = model_copy()
    undo = per_block(blocks)
    try:  # VGG's in-place ReLUs as blocks of their own: checkpoint's backward raises
        pb = run_row("per-block", m, make_step(m, loss_fn, n_in), step_args, base, args.repeats)
    except RuntimeError as e:
        pb = failed("per-block", e)
    out.append(pb)
    undo()
    case = Case(args, backend, model_copy, loss_fn, step_args, n_in, base)
    if args.only_inductor:
        rows = [{**remat_row(f, case, "inductor")[0], "fraction": f"{f:.2f}"} for f in (0.8, 0.5, 0.3)]
        return [{**r, "model": name} for r in [base, *rows]]
    if "measured" in pb:  # remat eager at the memory per-block checkpointing measured (never worse than it)
        row = eager_row(pb["measured"], case)
        row.update(fraction="per-block")
        out.append(row)

    if args.eager_only:
        out += [{**eager_row(budget, case), "fraction": f"{f:.2f}"} for f, budget in eager_budgets(case)]
        for r in out:
            r["model"] = name
        return out
    fractions: list[float | str] = [x if x == "tightest" else float(x) for x in args.fractions.split(",")]
    for f in fractions:
        if f == "tightest":
            m, _ = model_copy()
            step = remat_compile(m, loss_fn, 0.8, backend=backend, time_limit=args.time_limit, on_overrun="warn")
            fraction = tightest(step, step_args, backend)
        else:
            fraction = float(f)
        rows = rows_at(fraction, case)
        # the tightest budget the solver finds a schedule for within its time limit: step up
        while f == "tightest" and "error" in rows[0] and fraction < 0.95:
            fraction = min(1.0, fraction + 0.03)
            rows = rows_at(fraction, case)
        out += rows
        if args.json:  # what is measured so far survives an interrupted run
            keep = [{**strip(r), "model": name} for r in out]
            Path(args.json + ".partial").write_text(json.dumps(keep, indent=1))
    for r in out:
        r["model"] = name
    return out


def strip(r: Row) -> Row:
    """The row without its tensors (gradients, buffers): what `--json` writes."""
    return {k: v for k, v in r.items() if k not in ("grads", "buffers")}


def tightest(step: Any, step_args: Sequence[Any], backend: remat.Local) -> float:
    """The smallest activation fraction remat's graph admits (inspect's minimum feasible budget)."""
    step(*step_args)
    graph = step.last.graph
    report = backend.inspect(graph)
    fixed, peak = int(report["fixed_memory"]), int(report["checkpoint_all_peak"])
    return min(1.0, (int(report["min_feasible_budget"]) - fixed) / max(peak - fixed, 1) + 0.02)


def remat_row(budget: float | int, case: Case, compiler: str = "aot_eager") -> tuple[Row, int]:
    """remat compiled with `compiler` at `budget` (a fraction, or bytes with the fixed memory), and
    the joint graph's fixed memory (0 when the run failed). With Inductor the budget is that
    fraction of the joint graph Inductor hands the partitioner (its decompositions give other nodes
    than aot_eager's), the one the plan's `fits` refers to; measured by the allocator."""
    args = case.args
    inductor = compiler == "inductor"
    label = "remat-inductor" if inductor else "remat-compiled"
    m, _ = case.model_copy()
    if inductor:
        torch._dynamo.reset()
    step = remat_compile(
        m,
        case.loss_fn,
        budget,
        backend=case.backend,
        compiler="inductor" if inductor else "aot_eager",
        time_limit=args.time_limit,
        on_overrun="warn",
    )
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            row = run_row(label, m, step, case.step_args, case.base, args.repeats, allocator=inductor)
        last = step.last
        assert last is not None
    except Exception as e:  # remat's refusal (RematError), or what this torch version or its compiler raises
        return failed(label, e), 0
    fixed = int(last.graph["fixed_memory"])
    row.update(budget=last.budget - fixed, predicted=last.predicted_activations, fits=last.fits)
    if last.inductor is not None:  # Inductor's code alone (`predicted` is the larger of it and the simulator's)
        row.update(inductor=last.inductor, simulated=int(last.predicted["stats"]["peak_memory"]) - fixed)
    row["solve_s"] = time.perf_counter() - t0
    return row, fixed


def rows_at(fraction: float, case: Case) -> list[Row]:
    """The rows of `case` at `fraction`: remat compiled, torch's min-cut and remat eager at the
    budget remat's compiled graph gives that fraction, remat compiled again at the memory min-cut
    measured where min-cut meets its budget (check (d) compares at equal memory), and remat with
    Inductor if asked."""
    args, model_copy, loss_fn = case.args, case.model_copy, case.loss_fn
    step_args, n_in, base = case.step_args, case.n_in, case.base
    out: list[Row] = []
    tag = f"{fraction:.2f}"
    # remat compiled (aot_eager): also fixes the budget's bytes for the other rows
    row, fixed = remat_row(fraction, case)
    row.update(fraction=tag)
    if "error" in row:
        return [row]
    budget = row["budget"]
    out.append(row)

    # PyTorch's knob
    m, _ = model_copy()
    try:
        with torch._functorch.config.patch(activation_memory_budget=fraction):
            torch._dynamo.reset()
            module = torch.compile(make_step(m, loss_fn, n_in), backend="aot_eager_decomp_partition", dynamic=False)
            row = run_row("torch-budget", m, module, step_args, base, args.repeats)
    except Exception as e:  # what this torch version raises
        row = failed("torch-budget", e)
    row.update(fraction=tag, budget=budget)
    out.append(row)
    if "error" not in row and row["measured"] <= budget:
        at_min_cut, _ = remat_row(fixed + row["measured"], case)
        at_min_cut.update(fraction=f"{tag}@min-cut")
        out.append(at_min_cut)

    row = eager_row(budget, case)
    row.update(fraction=tag)
    out.append(row)

    if args.inductor and (not args.inductor_fractions or tag in args.inductor_fractions.split(",")):
        out.append({**remat_row(fraction, case, "inductor")[0], "fraction": tag})
    return out


def cuda_blocks(r: Row, key: str = "blocks") -> str:
    """The CUDA allocator's peak, for the compiled rows (see the module doc)."""
    return str(r[key]) if r["row"].startswith(("remat-compiled", "remat-inductor", "torch-budget")) else "-"


def eager_row(budget: int, case: Case) -> Row:
    """remat eager (export, solve, SAC plan, applied) at `budget` bytes of activations."""
    loss_fn, step_args, n_in = case.loss_fn, case.step_args, case.n_in
    m, blocks = case.model_copy()
    try:
        from remat.apply import applied, plan

        graph = remat.export(m, step_args[:n_in], lambda o: loss_fn(o, *step_args[n_in:]), regions=blocks)
        result = remat.solve_local(
            graph, int(graph["fixed_memory"]) + budget, binary=case.backend.binary, time_limit=case.args.time_limit
        )
        # make_step passes the model's output straight to the loss: nothing else holds it
        p = plan(graph, result, case.backend, on_overrun="warn", hold_output=False)
        plain = make_step(m, loss_fn, n_in)

        def eager(*a: Any) -> Any:
            with applied(blocks, p):
                return plain(*a)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            row = run_row("remat-eager", m, eager, step_args, case.base, case.args.repeats)
        row.update(predicted=p.predicted_activations, fits=p.fits)
    except Exception as e:  # the eager path as it stands: report what it raises
        row = failed("remat-eager", e)
    row.update(budget=budget)
    return row


def eager_budgets(case: Case) -> list[tuple[float, int]]:
    """`--eager-only`: the budgets (bytes of activations) of 0.8, 0.5 and 0.3 over the eager
    path's own graph (`fixed_memory + f * (checkpoint_all_peak - fixed_memory)`, the float form of
    a budget), not over the compiled joint graph as the other rows' budgets are."""
    m, blocks = case.model_copy()
    graph = remat.export(
        m, case.step_args[: case.n_in], lambda o: case.loss_fn(o, *case.step_args[case.n_in :]), regions=blocks
    )
    report = case.backend.inspect(graph)
    fixed, peak = int(report["fixed_memory"]), int(report["checkpoint_all_peak"])
    return [(f, int(f * (peak - fixed))) for f in (0.8, 0.5, 0.3)]


def table(rows: list[Row], bases: dict[str, Row], cuda: bool = False) -> str:
    head = "| model | f | row | budget | measured | met | predicted | error % | FLOPs / base | time / base | equal |"
    head += " CUDA blocks | with scratch | max_memory_allocated |" if cuda else ""
    lines = [head, "|" + "---|" * (14 if cuda else 11)]
    for r in rows:
        base = bases[r["model"]]
        if "error" in r:
            lines.append(f"| {r['model']} | {r.get('fraction', '')} | {r['row']} | | {r['error']} | | | | | | |")
            continue
        budget = r.get("budget")
        met = "" if budget is None else ("yes" if r["measured"] <= budget else "NO")
        pred = r.get("predicted")
        err = "" if pred is None else f"{100 * (pred - r['measured']) / max(r['measured'], 1):+.2f}"
        lines.append(
            f"| {r['model']} | {r.get('fraction', '-')} | {r['row']} | {budget if budget is not None else '-'} | "
            f"{r['measured']} | {met} | {pred if pred is not None else '-'} | {err} | "
            f"{r['flops'] / max(base['flops'], 1):.3f} | {r['seconds'] / base['seconds']:.2f} | "
            f"{'yes' if r.get('equal') else 'NO (' + r.get('mismatch', '') + ')'} |"
            + (f" {cuda_blocks(r)} | {cuda_blocks(r, 'with_scratch')} | {r['max_allocated']} |" if cuda else "")
        )
    return "\n".join(lines)


REMAT = ("remat-eager", "remat-compiled", "remat-inductor")


def check(rows: list[Row]) -> list[tuple[str, bool, str]]:
    """Issue 25's acceptance checks over the rows of `--json` files: (check, passed, the figures).

    (a) remat eager / compiled / Inductor measured <= budget wherever remat says the plan fits;
    (b) prediction within 2% of the measurement (Inductor: not below it by more than 2%);
    (c) remat eager at every budget >= per-block checkpointing's measured peak: measured <= budget,
        the plan says it fits, and FLOPs <= per-block's;
    (d) for every torch-budget run that meets its budget, the remat run (compiled or eager, any
        fraction of the same model) of least FLOPs among those measuring at most as much memory
        executes no more FLOPs, and fewer where torch recomputes.
    """
    out: list[tuple[str, bool, str]] = []
    ok = [r for r in rows if "error" not in r]
    for r in ok:
        if r["row"] not in REMAT:
            continue
        where = f"{r['model']} {r['fraction']} {r['row']}"
        if r.get("fits"):
            out.append(("a", r["measured"] <= r["budget"], f"{where}: measured {r['measured']} budget {r['budget']}"))
        err = (r["predicted"] - r["measured"]) / max(r["measured"], 1)
        good = err >= -0.02 if r["row"] == "remat-inductor" else abs(err) <= 0.02
        out.append(("b", good, f"{where}: predicted {r['predicted']} measured {r['measured']} ({100 * err:+.2f}%)"))
    for model in dict.fromkeys(r["model"] for r in ok):
        mine = [r for r in ok if r["model"] == model]
        pb = next((r for r in mine if r["row"] == "per-block"), None)
        base = next((r for r in mine if r["row"] == "none"), None)
        if base is None:
            continue
        for r in mine:  # none where per-block checkpointing itself failed
            if pb is not None and r["row"] == "remat-eager" and r["budget"] >= pb["measured"]:
                good = r["measured"] <= r["budget"] and bool(r.get("fits")) and r["flops"] <= pb["flops"]
                out.append(
                    (
                        "c",
                        good,
                        f"{model} {r['fraction']}: budget {r['budget']} >= per-block {pb['measured']}: measured "
                        f"{r['measured']} fits {r.get('fits')} FLOPs {r['flops'] / pb['flops']:.3f} of per-block's",
                    )
                )
        for t in mine:
            if t["row"] != "torch-budget" or t["measured"] > t["budget"]:
                continue
            at = [r for r in mine if r["row"] in REMAT[:2] and r["measured"] <= t["measured"]]
            where = (
                f"{model} {t['fraction']} torch-budget measured {t['measured']} FLOPs {t['flops'] / base['flops']:.3f}"
            )
            if not at:
                out.append(("d", False, f"{where}: no remat run measures as little"))
                continue
            best = min(at, key=lambda r: r["flops"])
            recomputes = t["flops"] > base["flops"]
            good = best["flops"] < t["flops"] if recomputes else best["flops"] <= t["flops"]
            out.append(
                (
                    "d",
                    good,
                    f"{where}; remat {best['fraction']} {best['row']} measured {best['measured']} "
                    f"FLOPs {best['flops'] / base['flops']:.3f}",
                )
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(families.FAMILIES))
    ap.add_argument(
        "--time-limit", type=float, default=None, help="remat solve time limit (s; default: the solver's own)"
    )
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--inductor", action="store_true", help="add remat-inductor rows (slow C++ compiles)")
    ap.add_argument(
        "--eager-only",
        action="store_true",
        help="only none, per-block and remat-eager rows (budgets of 0.8/0.5/0.3 over the eager graph)",
    )
    ap.add_argument(
        "--only-inductor", action="store_true", help="only the baseline and remat-inductor rows, at 0.8, 0.5 and 0.3"
    )
    ap.add_argument(
        "--fractions", default="0.8,0.5,0.3,tightest", help="the activation fractions of the remat rows, e.g. 0.8"
    )
    ap.add_argument("--inductor-fractions", default="", help="only these fractions for Inductor, e.g. 0.50")
    ap.add_argument("--binary", default=None, help="the remat binary ($REMAT_BIN, PATH)")
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: measured by the CUDA caching allocator")
    ap.add_argument("--check", nargs="+", default=None, help="the table and acceptance checks of these --json files")
    args = ap.parse_args()
    if args.check:
        read: list[Row] = [r for f in args.check for r in json.loads(Path(f).read_text())]
        cuda = any(r.get("max_allocated") for r in read)  # rows measured with --device cuda
        print(table(read, {r["model"]: r for r in read if r["row"] == "none"}, cuda) + "\n")
        results = check(read)
        for name, passed, text in results:
            print(f"({name}) {'met' if passed else 'NOT MET'}: {text}")
        for name in "abcd":
            mine = [p for n, p, _ in results if n == name]
            print(f"({name}) {sum(mine)} of {len(mine)} met")
        sys.exit(0 if all(p for _, p, _ in results) else 1)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    args.inductor |= args.only_inductor
    if args.device != "cpu":  # the same kernels in every row, so that "equal" compares like with like
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    backend = remat.Local(args.binary)
    rows: list[Row] = []
    bases: dict[str, Row] = {}
    for name in args.models.split(","):
        got = rows_for(name, args, backend)
        bases[name] = got[0]
        rows += got
        print(table(got, bases, args.device != "cpu"), flush=True)
    print("\n" + table(rows, bases, args.device != "cpu"))
    if args.json:
        keep = [strip(r) for r in rows]
        Path(args.json).write_text(json.dumps(keep, indent=1))


if __name__ == "__main__":
    main()
