"""A partitioner for AOTAutograd (`aot_module`, `torch.compile` backends) that follows a remat schedule.

AOTAutograd traces the joint forward + backward graph (functional ATen ops) and asks a
*partitioner* to split it into a forward graph, which returns the tensors it saves, and a backward
graph, which recomputes what was not saved. `partitioner(budget, backend)` returns one that:

1. turns the joint graph into a remat graph by `remat.export`'s rules (views folded, tuple
   elements as nodes, FLOPs as cost; the joint's placeholders are `fixed_memory`);
2. solves it at `budget` with remat (`backend`: `Client` or `Local`);
3. saves the forward nodes the schedule keeps across the forward/backward boundary (computed once,
   resident at the first backward compute) and the primal inputs the backward reads (parameters and
   inputs, resident anyway), and lets `_extract_fwd_bwd_modules` put every other forward node the backward needs
   into the backward graph;
4. orders the backward graph as the schedule does: each recomputation just before its first use,
   not all of them up front (the built-in min-cut partitioner keeps one copy of each recomputed
   node alive from its first recompute: pytorch#197838). A node the schedule recomputes more than
   once is recomputed once here, before its first use.

`Partitioner.last` keeps the last graph, result and saved set, to compare with measurements.
"""

from __future__ import annotations

import dataclasses
import operator
from collections import defaultdict
from typing import Any

import torch
from torch import fx
from torch._functorch.partitioners import _extract_fwd_bwd_modules

from . import budget as _budget
from ._trace import JointTrace
from .apply import kept_nodes
from .client import Backend
from .errors import ApplyError
from .export import _FIXED, _Builder, _fx_costs_flops, graph_dict, tensor_bytes


@dataclasses.dataclass
class Partitioned:
    """One partition: the joint's remat graph, remat's answer, the saved values, and what the
    forward and backward graphs run as a remat schedule with the simulator's report on it."""

    graph: dict[str, Any]
    result: dict[str, Any]
    saved: list[str]
    events: list[dict[str, str]]
    predicted: dict[str, Any]

    @property
    def predicted_activations(self) -> int:
        return int(self.predicted["stats"]["peak_memory"]) - int(self.graph["fixed_memory"])


def _is_tangent(n: fx.Node) -> bool:
    return n.op == "placeholder" and "tangents" in n.name


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
    grads = sum(tensor_bytes(o.meta.get("val")) for o in trace.grad_nodes)
    meta = {"flops_formula": formula, "flops_per_element": other}
    return graph_dict(b, "aot-joint", b.fixed_bytes + grads, "FLOP", meta), b


class Partitioner:
    """`partition_fn` for `aot_module` / `aot_autograd`, solving each joint graph at `budget`."""

    def __init__(
        self, budget: _budget.Budget, backend: Backend, *, solver: str = "auto", time_limit: float | None = 30
    ) -> None:
        self.budget = budget
        self.backend = backend
        self.solver = solver
        self.time_limit = time_limit
        self.last: Partitioned | None = None

    def __call__(
        self, joint: fx.GraphModule, joint_inputs: Any, *, num_fwd_outputs: int, **_: Any
    ) -> tuple[fx.GraphModule, fx.GraphModule]:
        graph, built = joint_graph(joint, num_fwd_outputs)
        result = self.backend.solve(graph, self.budget, solver=self.solver, time_limit=self.time_limit)
        events = (result.get("schedule") or {}).get("events")
        if not events:
            raise ApplyError(f"remat returned no schedule ({result.get('status')})")
        kept = kept_nodes(graph, events)
        nodes = list(joint.graph.nodes)
        outputs = list(nodes[-1].args[0])
        fwd_out = {o for o in outputs[:num_fwd_outputs] if isinstance(o, fx.Node)}
        # an op whose outputs are forward outputs (the updated running statistics of BatchNorm) is
        # saved whole, never recomputed: the buffer it reads is updated in place after the forward
        pinned = {
            u.name
            for o in fwd_out
            if o.target is operator.getitem
            for u in o.args[0].users  # type: ignore[union-attr]
        }
        saved = [
            n for n in nodes if (n.name in kept or n.name in pinned) and isinstance(n.meta.get("val"), torch.Tensor)
        ]
        primals = [n for n in nodes if n.op == "placeholder" and not _is_tangent(n)]
        activations = [n for n in saved if n not in primals]
        fw, bw = _extract_fwd_bwd_modules(joint, primals + activations, [], num_fwd_outputs=num_fwd_outputs)
        # save only the primals the backward reads
        used = {n.name for n in bw.graph.nodes if n.op == "placeholder" and n.users}
        needed = [n for n in primals if n.name in used]
        fw, bw = _extract_fwd_bwd_modules(joint, needed + activations, [], num_fwd_outputs=num_fwd_outputs)
        _recompute_before_first_use(bw)
        # what the backward really receives (values it does not read are not kept)
        names = {n.name for n in activations}
        received = [n.name for n in bw.graph.nodes if n.op == "placeholder" and n.users and n.name in names]
        ran = partition_events(graph, built, received, fwd_out, bw)
        predicted = self.backend.simulate(graph, {"events": ran})
        self.last = Partitioned(graph, result, received, ran, predicted)
        return fw, bw


def _recompute_before_first_use(gm: fx.GraphModule) -> None:
    """Reorder `gm` so that every node comes right before its first user (outputs last)."""
    g = gm.graph
    order: list[fx.Node] = []
    placed: set[fx.Node] = set()

    def place(n: fx.Node) -> None:
        stack = [n]
        while stack:
            top = stack[-1]
            missing = [a for a in top.all_input_nodes if a not in placed]
            if missing:
                stack.extend(reversed(missing))
                continue
            stack.pop()
            if top not in placed:
                placed.add(top)
                order.append(top)

    for n in g.nodes:
        if n.op == "placeholder":
            placed.add(n)
    # the backward proper reads a tangent, directly or not; everything else is a recomputation
    backward: set[fx.Node] = set()
    for n in g.nodes:
        if _is_tangent(n) or any(a in backward for a in n.all_input_nodes):
            backward.add(n)
    anchors = [n for n in g.nodes if n.op not in ("placeholder", "output") and n in backward]
    for n in anchors:
        place(n)
    for n in g.nodes:
        if n.op != "placeholder":
            place(n)
    # move nodes into the new order (placeholders stay first)
    cursor = next(n for n in reversed(list(g.nodes)) if n.op == "placeholder")
    for n in order:
        cursor.append(n)
        cursor = n
    g.lint()
    gm.recompile()


def partition_events(
    graph: dict[str, Any], built: _Builder, saved: list[str], fwd_out: set[fx.Node], bw: fx.GraphModule
) -> list[dict[str, str]]:
    """What the partition runs, as a remat schedule: every forward node, each freed after its last
    forward use unless saved or returned; then the backward graph in its order (recomputations
    included), each node freed after its last use."""
    by_fx = {n.name: n for n in built.trace.gm.graph.nodes}

    def owner(name: str) -> str | None:
        """The remat node holding the value of fx node `name` (None: fixed memory, or no tensor)."""
        if name in built.nodes:
            return name
        fxn = by_fx.get(name)
        key = built.key.get(fxn) if fxn is not None else None
        held = built.current.get(key) if key is not None else None
        return None if held in (None, _FIXED) else held

    ids = [n["id"] for n in graph["nodes"]]
    inputs = {n["id"]: n.get("inputs", []) for n in graph["nodes"]}
    forward = [n["id"] for n in graph["nodes"] if n.get("kind") != "backward"]
    keep = {o for o in (owner(s) for s in saved) if o} | {o for o in (owner(f.name) for f in fwd_out) if o}
    order = [n.name for n in bw.graph.nodes if n.op == "call_function" and owner(n.name) == n.name]
    order += [v for v in ids if v not in set(forward) and v not in set(order)]  # dead backward nodes
    returned = {o for o in (owner(f.name) for f in fwd_out) if o}
    keep = {o for o in (owner(s) for s in saved) if o} | returned
    events: list[dict[str, str]] = []
    resident: set[str] = set()

    def phase(sequence: list[str], hold: set[str]) -> None:
        """Compute `sequence` (skipping what is resident), freeing each value after its last use in it."""
        uses: dict[str, int] = defaultdict(int)
        for v in sequence:
            for u in inputs[v]:
                uses[u] += 1
        for u in sorted(resident):  # held values the sequence does not read go first
            if uses[u] == 0 and u not in hold:
                events.append({"op": "free", "node": u})
                resident.discard(u)
        for v in sequence:
            if v not in resident:
                events.append({"op": "compute", "node": v})
                resident.add(v)
            for u in inputs[v]:
                uses[u] -= 1
            for u in [*inputs[v], v]:
                if u in resident and uses[u] == 0 and u not in hold:
                    events.append({"op": "free", "node": u})
                    resident.discard(u)

    phase(forward, keep)
    phase(order, returned)
    return events
