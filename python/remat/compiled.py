"""remat in compiled PyTorch: a partitioner for AOTAutograd and a step that compiles model + loss.

AOTAutograd traces the joint forward + backward graph (functional ATen ops) and asks a
*partitioner* to split it into a forward graph, which returns the tensors it saves, and a backward
graph, which recomputes what was not saved. `Partitioner(budget, backend)` is one that:

1. turns the joint graph into a remat graph by `remat.export`'s rules (`joint_graph`: views
   folded, tuple elements as nodes, FLOPs as cost; the joint's placeholders and the gradients are
   `fixed_memory`); random ops get a cost above the whole graph's, so that a schedule recomputes
   them only where nothing else fits (their recomputation would draw other numbers), and so do
   the nodes that read an input (a buffer) the forward then writes in place (`realize` never
   recomputes them: after the write they would read the new value);
2. solves it at `budget` with remat, once per distinct graph and budget (`cache`: keyed by a hash
   of the remat graph and the solve options, so a recompile of an unchanged graph does not solve
   again);
3. realizes the schedule (`remat.realize`): the forward graph saves exactly what the schedule
   keeps across the forward/backward boundary, the backward graph holds every recomputation where
   the schedule places it, as often as it repeats it, and every value is dropped after its last use;
4. simulates what the two graphs run (`Partitioned.predicted`, remat's simulator) and raises
   `OverBudget` when that peak is above the budget (`on_overrun="warn"`: `OverBudgetWarning`).

`compile(model, loss_fn, budget, backend=...)` puts the loss inside the joint graph: it compiles
`loss_fn(model(*inputs), *targets)` as one module (targets are inputs of the compiled graph, not
constants captured by a closure) and returns a step that runs forward, loss and backward under the
partitioner: `loss = step(*inputs, target)`. What stays outside the graph: the gradients'
accumulation into `.grad` (they are `fixed_memory`), the optimizer, and anything the step's caller
keeps. `compiler="inductor"` plugs the same partitioner into Inductor (`remat.inductor`). The step
is compiled whole (`fullgraph=True`: graphs budgeted apart would hold more than the budget
together), once per shape of its arguments and per training mode (Dynamo's guards); each compiled
graph, when it runs, makes its partition the step's `last`. A call torch.compile would run
uncompiled (past Dynamo's recompile limit) is refused rather than run without a budget.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import types
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal

import torch
from torch import fx, nn
from torch._functorch.partitioners import _extract_fwd_bwd_modules
from torch.utils._ordered_set import OrderedSet

from . import budget as _budget
from ._trace import JointTrace
from .client import Backend
from .errors import ApplyError, OnOverrun, RematError, SolveError, overrun
from .export import _Builder, _fx_costs_flops, graph_dict, tensor_bytes
from .realize import (
    is_random,
    prediction_graph,
    realize,
    realized_events,
    snapshot_written_inputs,
    unread_args,
    written_input_readers,
)


@dataclasses.dataclass
class Partitioned:
    """One partition: the joint's remat graph, remat's answer, the saved values, and what the
    forward and backward graphs run as a remat schedule with the simulator's report on it."""

    graph: dict[str, Any]
    result: dict[str, Any]
    saved: list[str]
    events: list[dict[str, str]]
    predicted: dict[str, Any]
    deviations: list[str]
    cached: bool
    key: str  # the graph's hash (`graph_key`): the Partitioner's re-plans are kept by it
    target: int = 0  # the budget in bytes (the solve's own where 0; a re-plan solves below it)
    inductor: int | None = None  # bytes of activations Inductor's compiled code holds (`remat.inductor`)
    as_scheduled: bool = False  # whether Inductor lowered it as scheduled (`remat.inductor.realize_held`)

    @property
    def budget(self) -> int:
        return self.target or int(self.result["budget"])

    @property
    def predicted_peak(self) -> int:
        """The simulator's peak of what the two graphs run; under Inductor, the larger of it and
        what Inductor's code holds (fusion and inlining keep other buffers alive)."""
        peak = int(self.predicted["stats"]["peak_memory"])
        if self.inductor is not None:
            peak = max(peak, self.inductor + int(self.graph["fixed_memory"]))
        return peak

    @property
    def predicted_activations(self) -> int:
        return self.predicted_peak - int(self.graph["fixed_memory"])

    @property
    def fits(self) -> bool:
        return self.predicted_peak <= self.budget


def joint_graph(joint: fx.GraphModule, num_fwd_outputs: int) -> tuple[dict[str, Any], _Builder]:
    """The remat graph of an AOTAutograd joint graph (forward: up to the last forward output; the
    backward outputs, the gradients, live in `fixed_memory` as `export` counts them)."""
    nodes = list(joint.graph.nodes)
    outputs = list(next(n for n in nodes if n.op == "output").args[0])
    fwd_outs = [o for o in outputs[:num_fwd_outputs] if isinstance(o, fx.Node)]
    pos = {n: i for i, n in enumerate(nodes)}
    forward_end = max((pos[o] for o in fwd_outs if o.op != "placeholder"), default=0)
    trace = JointTrace(
        gm=joint,
        param_nodes=[],
        trainable=[],
        buffer_nodes=[],
        input_nodes=[],
        loss_node=nodes[forward_end],
        grad_nodes=[o for o in outputs[num_fwd_outputs:] if isinstance(o, fx.Node)],
        forward_end=forward_end,
        loss_end=forward_end,
        region_of={},
        region_spans=[],
    )
    costs, formula, other = _fx_costs_flops(trace)
    b = _Builder(trace, costs)
    b.run()
    _kernel_facts(b)
    grads = sum(tensor_bytes(o.meta.get("val")) for o in trace.grad_nodes)
    meta = {"flops_formula": formula, "flops_per_element": other}
    return graph_dict(b, "aot-joint", b.fixed_bytes + grads, "FLOP", meta), b


def _kernel_facts(b: _Builder) -> None:
    """What kernels really read, where it differs from the ops' signatures: inputs a kernel does
    not read are no inputs of its node (`realize` passes None for them). (What a loss kernel
    holds beyond its output, `remat.export` counts as it builds the node.)"""

    def owner(a: fx.Node) -> str | None:
        return b.current.get(b.key[a]) if a in b.key else None

    for n in b.trace.gm.graph.nodes:
        node = b.nodes.get(n.name)
        if node is None:
            continue
        skip = {a for i in unread_args(n) if isinstance(a := n.args[i], fx.Node)}
        if skip:
            read = {owner(a) for a in n.all_input_nodes if a not in skip}
            node.inputs = [i for i in node.inputs if i in read]


def solve_graph(graph: dict[str, Any], built: _Builder, num_fwd_outputs: int) -> dict[str, Any]:
    """The graph remat solves: the outputs the caller holds (the loss) are resident from the
    forward to the end of the step, so their bytes are fixed memory, and they are inputs of every
    node that reads a tangent (the backward begins once the forward has returned them: a schedule
    computing the loss after the backward began would be realized with the loss's chain recomputed
    into the forward, far above the schedule's peak); random ops cost more than all
    other nodes together (recomputing them would draw other numbers), and so do the nodes that
    read an input the forward then writes in place (a buffer's EMA, a step counter: recomputed
    after the write they would read the new value; `realize` never recomputes them)."""
    total = 1.0 + sum(float(n["cost"]) for n in graph["nodes"])
    joint = built.trace.gm.graph
    fx_nodes = {n.name: n for n in joint.nodes}
    output = joint.output_node()
    descs = output.meta.get("desc") or []
    held = set()
    for i, o in enumerate(list(output.args[0])[:num_fwd_outputs]):  # type: ignore[arg-type]
        if isinstance(o, fx.Node) and not (i < len(descs) and type(descs[i]).__name__ == "InputMutationAOTOutput"):
            key = built.key.get(o)
            owner = built.current.get(key) if key is not None else None
            if owner in built.nodes:
                held.add(owner)
    _, kept = written_input_readers(built.trace.gm, built)
    nodes = []
    fixed = int(graph["fixed_memory"])
    for n in graph["nodes"]:
        source = fx_nodes.get(built.nodes[n["id"]].source)
        if (source is not None and is_random(source)) or n["id"] in kept:
            n = {**n, "cost": total}
        if n["id"] in held:
            fixed += int(n["memory"])
            n = {**n, "memory": 0}
        if source is not None and any(_is_tangent(a) for a in source.all_input_nodes):
            n = {**n, "inputs": [*n.get("inputs", []), *sorted(held - set(n.get("inputs", [])))]}
        nodes.append(n)
    return {**graph, "fixed_memory": fixed, "nodes": nodes}


def _is_tangent(n: fx.Node) -> bool:
    """A placeholder of the joint graph for an output's gradient (AOTAutograd names them
    `tangents_<i>`)."""
    return n.op == "placeholder" and n.name.startswith("tangents")


def graph_key(graph: dict[str, Any]) -> str:
    """A hash of a remat graph (the Partitioner's cache keys it with the solve's options)."""
    return hashlib.sha256(json.dumps(graph, sort_keys=True).encode()).hexdigest()


REPLANS = 3  # re-plans per graph where what Inductor holds is above the budget


class Partitioner:
    """`partition_fn` for `aot_module` / `aot_autograd` (and, through `remat.inductor`, Inductor),
    solving each joint graph at `budget` (module doc)."""

    def __init__(
        self,
        budget: _budget.Budget,
        backend: Backend,
        *,
        solver: str = "auto",
        time_limit: float | None = 30,
        seed: int | None = None,
        on_overrun: OnOverrun = "raise",
    ) -> None:
        if on_overrun not in ("raise", "warn"):
            raise ApplyError(f"on_overrun must be 'raise' or 'warn', got {on_overrun!r}")
        self.budget = budget
        self.backend = backend
        self.solver = solver
        self.time_limit = time_limit
        self.seed = seed
        self.on_overrun = on_overrun
        self.cache: dict[str, dict[str, Any]] = {}
        self.solves = 0  # solves run (cache misses)
        self.partitions = 0  # joint graphs partitioned
        self.last: Partitioned | None = None
        # re-plans (`tighten`): per graph, the bytes solved below the budget, and the graphs whose
        # last tightening failed (their plan stands as it is)
        self.squeeze: dict[str, list[int]] = {}
        self.settled: set[str] = set()

    def solve(
        self, graph: dict[str, Any], key: str, budget: _budget.Budget | None = None
    ) -> tuple[dict[str, Any], bool]:
        """remat's result for `graph` (its `graph_key`: `key`) at `budget` (default: the
        partitioner's), from the cache when the graph was solved at it before."""
        budget = self.budget if budget is None else budget
        entry = f"{key}:{(budget, self.solver, self.time_limit, self.seed)!r}"
        if entry in self.cache:
            return self.cache[entry], True
        result = self.backend.solve(graph, budget, solver=self.solver, time_limit=self.time_limit, seed=self.seed)
        self.solves += 1
        self.cache[entry] = result
        return result, False

    def tighten(self, p: Partitioned) -> bool:
        """Solve `p`'s graph again below the budget by what `p` holds above it (and 1% of the
        budget's activations more), at most `REPLANS` times per graph; False where no re-plan is
        left (the last tightening failed, or the limit is reached)."""
        squeeze = self.squeeze.setdefault(p.key, [0])
        if p.key in self.settled or len(squeeze) > REPLANS:
            return False
        activations = p.budget - int(p.graph["fixed_memory"])
        squeeze.append(squeeze[-1] + p.predicted_peak - p.budget + max(1, activations // 100))
        return True

    def planned(self, graph: dict[str, Any], key: str) -> tuple[dict[str, Any], bool, int]:
        """remat's result for `graph` (hash `key`) at the budget, less the graph's re-plans
        (`tighten`), with whether it came from the cache and the budget in bytes. A tightened solve
        that finds no schedule settles the graph on the plan before it, which stands."""
        result, cached = self.solve(graph, key)
        target = int(result["budget"])
        squeeze = self.squeeze.get(key, [0])
        while squeeze[-1]:
            try:
                tight, cached = self.solve(graph, key, max(0, target - squeeze[-1]))
            except SolveError:
                tight = {}
            if (tight.get("schedule") or {}).get("events") or key in self.settled:
                return tight or result, cached, target
            squeeze.pop()
            self.settled.add(key)
        return result, cached, target

    def __call__(
        self,
        joint: fx.GraphModule,
        joint_inputs: Any,
        *,
        num_fwd_outputs: int,
        static_lifetime_input_indices: list[int] | None = None,
        **_: Any,
    ) -> tuple[fx.GraphModule, fx.GraphModule]:
        snapshot_written_inputs(joint)
        graph, built = joint_graph(joint, num_fwd_outputs)
        solved = solve_graph(graph, built, num_fwd_outputs)
        key = graph_key(solved)
        result, cached, target = self.planned(solved, key)
        events = (result.get("schedule") or {}).get("events")
        if not events:
            raise ApplyError(f"remat returned no schedule ({result.get('status')})")
        real = realize(joint, built, events, num_fwd_outputs)
        primals = [n for n in real.joint.graph.nodes if n.op == "placeholder" and "primals" in n.name]
        static = OrderedSet(primals[i] for i in static_lifetime_input_indices or [])
        fw, bw = _extract_fwd_bwd_modules(
            real.joint,
            real.saved,
            real.saved_sym,
            num_fwd_outputs=num_fwd_outputs,
            static_lifetime_input_nodes=static,
        )
        ran = realized_events(graph, fw, bw, num_fwd_outputs)
        predicted = self.backend.simulate(prediction_graph(graph, ran), {"events": ran})
        saved = [str(n.name) for n in bw.graph.nodes if n.op == "placeholder" and "tangents" not in n.name]
        self.last = Partitioned(graph, result, saved, ran, predicted, real.deviations, cached, key, target)
        self.partitions += 1
        self.check(self.last)
        return fw, bw

    def check(self, p: Partitioned) -> None:
        """`OverBudget` (or its warning) when what will run peaks above the budget."""
        if p.fits:
            return
        fixed = int(p.graph["fixed_memory"])
        message = (
            f"remat: the compiled step is predicted to peak at {p.predicted_peak} bytes "
            f"({p.predicted_activations} of activations), above the budget of {p.budget} bytes "
            f"({p.budget - fixed} of activations; fixed memory {fixed}). The solver's schedule peaks at "
            f"{int(p.result['stats']['peak_memory'])}"
            + (f"; the partition deviates from it: {'; '.join(p.deviations[:5])}" if p.deviations else "")
            + (
                f"; Inductor's code holds {p.inductor} bytes of activations"
                + (", lowered as scheduled," if p.as_scheduled else "")
                + f" after {len(self.squeeze.get(p.key, [0])) - 1} re-plans below the budget"
                if p.inductor is not None
                else ""
            )
            + ". Raise the budget"
        )
        overrun(message, budget=p.budget, predicted=p.predicted_peak, on_overrun=self.on_overrun)


def masked_backwards() -> dict[Any, Callable[..., Any]]:
    """The decompositions the aot_eager joint graph is traced with: ReLU's backward,
    `threshold_backward(grad, out, 0)`, as PyTorch's own `where(out <= 0, 0, grad)`. It reads only
    where the output was positive, but as one ATen op it reads the whole float output, so a schedule
    would have to keep 4 bytes an element (float32) through the backward where the one-byte mask
    (`le`, a node of its own once decomposed) suffices. Inductor's graphs and PyTorch's min-cut
    partitioner's are decomposed this way too."""
    return dict(torch._decomp.get_decompositions([torch.ops.aten.threshold_backward]))


class Replan(RematError):
    """Inside a compile: what the compiled code would hold is above the budget, and the
    partitioner solves the graph again tighter (`Partitioner.tighten`); `Step` compiles again."""


def _with_loss(self: _WithLoss, *args: Any) -> torch.Tensor:
    cut = len(args) - self.targets
    loss = self.loss_fn(self.model(*args[:cut]), *args[cut:])
    if loss.numel() != 1:
        shape = tuple(loss.shape)
        raise ValueError(f"the loss has shape {shape}, not one element to differentiate (reduction='none'?)")
    return loss


class _WithLoss(nn.Module):
    """`loss_fn(model(*inputs), *targets)` as one module (the last `targets` arguments are targets).
    Each has a `forward` of its own code object: Dynamo counts compiles per code object
    (`recompile_limit`, 8), and past it runs the frame uncompiled, so steps sharing one would stop
    being partitioned from the ninth graph on, whatever step it belongs to."""

    def __init__(self, model: nn.Module, loss_fn: Callable[..., torch.Tensor], targets: int) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn
        self.targets = targets
        code = _with_loss.__code__.replace()
        self.forward = types.MethodType(types.FunctionType(code, _with_loss.__globals__, "forward"), self)


class Step:
    """A compiled training step: `step(*inputs, *targets)` runs forward, loss and backward (the
    gradients accumulate into the parameters' `.grad`) and returns the loss, detached.

    `module` is compiled with `backend` (`torch.compile`, one graph per shape of the arguments and
    per training mode or other guard), each compiled graph tagged with the partition it was built
    from: when it runs, it is `last`."""

    def __init__(
        self,
        module: nn.Module,
        backend: Callable[[fx.GraphModule, list[Any]], Any],
        partitioner: Partitioner,
        context: Callable[[], AbstractContextManager[Any]] = nullcontext,
    ) -> None:
        self.partitioner = partitioner
        self.context = context  # entered around each call (where compiles happen)
        self.graphs = 0  # graphs compiled
        self.ran: Partitioned | None = None
        self.module: Callable[..., torch.Tensor] = torch.compile(
            module, backend=self._tagging(backend), dynamic=False, fullgraph=True
        )

    def _tagging(self, backend: Callable[[fx.GraphModule, list[Any]], Any]) -> Callable[..., Any]:
        """`backend`, whose compiled graphs set `ran` to their partition each time they run (Dynamo
        picks the graph by its guards, which the arguments' shapes alone do not tell)."""

        def compile_graph(gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
            partitions = self.partitioner.partitions
            compiled = backend(gm, example_inputs)
            if self.partitioner.partitions == partitions:
                raise ApplyError(
                    "torch.compile compiled the step without remat's partitioner: nothing in it needs a "
                    "gradient (no parameter or input requires grad), so there is no backward pass to budget"
                )
            partition = self.partitioner.last
            self.graphs += 1

            @functools.wraps(compiled)  # keeps `_boxed_call`, how Dynamo calls it
            def run(*args: Any) -> Any:
                self.ran = partition
                return compiled(*args)

            return run

        return compile_graph

    @property
    def last(self) -> Partitioned | None:
        """The partition of the graph the last call ran, or failed to compile (`OverBudget`)."""
        return self.ran

    def __call__(self, *args: Any) -> torch.Tensor:
        if not torch.is_grad_enabled():
            raise ApplyError(
                "the compiled step trains (forward, loss and backward) and needs gradients: call it outside "
                "torch.no_grad(); to evaluate, call the model itself"
            )
        self.ran = None
        partitions = self.partitioner.partitions
        try:
            loss = self._run(args)
        except RematError:
            if self.partitioner.partitions != partitions:
                self.ran = self.partitioner.last  # the partition that failed (OverBudget), to inspect
            raise
        if self.ran is None:  # Dynamo ran the step uncompiled
            raise ApplyError(_recompile_limit(self.graphs))
        loss.backward()
        return loss.detach()

    def _run(self, args: tuple[Any, ...]) -> torch.Tensor:
        """The loss of one compiled forward, after as many compiles as it takes (re-plans)."""
        while True:
            try:
                with self.context():
                    return self.module(*args)
            except (torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError) as e:
                raised = re.search(r"raised exception (.+)", str(e))
                if raised is not None:
                    # not a graph break: the model or the loss raised while Dynamo traced them
                    raise ApplyError(
                        f"the step raised {raised.group(1).strip()} while torch.compile traced it (the "
                        "model, the loss, or how many trailing arguments are targets)"
                    ) from e
                raise ApplyError(
                    "remat.compiled budgets the step as one graph, and torch.compile breaks it here: "
                    f"{_first_line(e)}. Remove the graph break (a print, .item(), data-dependent control "
                    "flow) or apply the plan in eager mode (remat.apply)"
                ) from e
            except torch._dynamo.exc.FailOnRecompileLimitHit as e:
                raise ApplyError(_recompile_limit(self.graphs)) from e
            except torch._dynamo.exc.BackendCompilerFailed as e:
                # a compile stopped before anything ran: Inductor's code would hold more than the
                # budget (the partitioner solves again tighter)
                if isinstance(e.inner_exception, Replan):
                    continue
                # remat's own errors (OverBudget, InfeasibleBudget, ...) reach the caller as they are
                if isinstance(e.inner_exception, RematError):
                    raise e.inner_exception from None
                raise


def compile(
    model: nn.Module,
    loss_fn: Callable[..., torch.Tensor],
    budget: _budget.Budget,
    *,
    backend: Backend,
    targets: int = 1,
    compiler: Literal["aot_eager", "inductor"] = "aot_eager",
    solver: str = "auto",
    time_limit: float | None = 30,
    seed: int | None = None,
    on_overrun: OnOverrun = "raise",
) -> Step:
    """A training step of `model` with `loss_fn(output, *targets)` compiled in one joint graph and
    partitioned by remat at `budget` (see `remat.budget`). `targets`: how many trailing arguments
    of the step are the loss's targets. The graph is compiled (and solved) at the first call, again
    when shapes change (`torch.compile`, `dynamic=False`), as one graph (`fullgraph=True`: a graph
    break is an `ApplyError`, since graphs budgeted apart would together exceed the budget)."""
    _check_compile_args(budget, backend, targets)
    part = Partitioner(budget, backend, solver=solver, time_limit=time_limit, seed=seed, on_overrun=on_overrun)
    wrapped = _WithLoss(model, loss_fn, targets)
    if compiler == "aot_eager":
        from torch._dynamo.backends.common import aot_autograd
        from torch._dynamo.backends.debugging import boxed_nop

        # buffer updates stay in the graph (copy_), where the partition runs them as early as it can
        backend_fn: Any = aot_autograd(
            fw_compiler=boxed_nop,
            bw_compiler=boxed_nop,
            partition_fn=part,
            keep_inference_input_mutations=True,
            decompositions=masked_backwards(),
        )
        return Step(wrapped, backend_fn, part)
    if compiler == "inductor":
        from .inductor import checked_backend, partitioned

        return Step(wrapped, checked_backend(part), part, partitioned)
    raise ApplyError(f"compiler must be 'aot_eager' or 'inductor', got {compiler!r}")


def _check_compile_args(budget: _budget.Budget, backend: Backend, targets: int) -> None:
    """What `compile` can check before the first call compiles: the budget's type and range, a
    backend that solves and simulates, a count of targets."""
    _budget.check(budget)
    if not all(callable(getattr(backend, m, None)) for m in ("solve", "inspect", "simulate")):
        raise ApplyError(
            f"backend is a {type(backend).__name__}: give remat.Local() or remat.Client(url), which solve and simulate"
        )
    if isinstance(targets, bool) or not isinstance(targets, int) or targets < 0:
        raise ApplyError(f"targets is how many trailing arguments of the step are the loss's targets, got {targets!r}")


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _recompile_limit(graphs: int) -> str:
    return (
        "torch.compile will not compile this step again, so remat would partition nothing and the budget "
        f"would not hold: Dynamo's recompile limit (torch._dynamo.config.recompile_limit = "
        f"{torch._dynamo.config.recompile_limit}) is reached after {graphs} graphs (one per shape of the "
        "arguments and per training mode); give fewer distinct shapes (pad the batch) or raise the limit"
    )
