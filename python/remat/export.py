"""`remat.export`: one training step of a PyTorch model as a remat graph (native JSON).

The step is traced once under FakeTensorMode (`_trace.trace_joint`): forward, loss and backward
as ATen ops, without real compute or memory. The ops become the graph's nodes by these rules:

- **memory** is the bytes of an op's output (numel * element size).
- **Views and aliases are folded** into the tensor they alias: a `view`, `t`, `expand`, `alias`,
  ... is no node (nor is an op whose output shares an input's fake storage without saying so in
  its schema, like `_unsafe_view`); whoever reads it reads the node that owns the storage.
- **In-place ops** (`relu_`, `add_`) write a new version of their tensor: a new node (output
  bytes, inputs include the old version) that later readers of the storage read. In-place writes
  into parameters or buffers (BatchNorm's running statistics) are no nodes: that state lives in
  `fixed_memory`.
- **Multi-output ops** (BatchNorm, max-pool with indices, convolution backward) are one node whose
  memory is the sum of their fresh outputs, and each output read separately (`getitem`) is a node
  of its own (cost 0, memory its bytes). A schedule can then keep BatchNorm's output and free
  its statistics, or the reverse. The tuple node is resident while its elements are taken, so
  the graph over-counts by one element at that instant (never under-counts).
- **fixed_memory** = parameters + buffers + example inputs + constants captured by the model or
  the loss (e.g. the targets) + one gradient buffer per trainable parameter (+ optimizer state,
  `optimizer=`). The nodes that produce parameter gradients write into those buffers and have
  memory 0.
- **kind**: `forward` up to the model's last output, `loss` up to the loss, `backward` after.
- **cost**: FLOPs (`remat.flops`), or with `cost="time"` the median seconds of each op run on
  real tensors (CPU, `repeats` runs).
- **op**: the ATen op (`aten.convolution.default`); the node's `meta` holds `shape`, `dtype` and,
  for forward nodes, the (region, occurrence) that `remat.apply` uses to find the op again in
  eager mode, `saves`: the nodes its autograd node saves for backward (present when it saves
  anything) and `grad_fn`: the index of that autograd node; for backward nodes, `grad_fn`: the
  index of the autograd node whose apply runs it. Eager autograd holds a saved tensor until that
  node has run, and unpacks them all when it starts, which replays a checkpointed region at its
  first node that saved anything (`remat.apply` simulates this).
- The graph's `meta` says, per region that writes in place into a value from outside it (a model
  input, another region's output: `nn.ReLU(inplace=True)` as a region of its own), which op does
  (`region_writes_input`; `remat.apply` leaves such a region unchecked), and whether the model
  returns the loss itself (`model_returns_loss`, no `loss_fn`: no output for the caller to hold).
- A region is a module the forward calls once; one called again (weights shared across layers),
  given twice, or inside another region is an `ExportError`.
- A reduced `mse_loss`, `smooth_l1_loss` or `binary_cross_entropy` has its input's bytes: the
  kernel returns the mean in the storage of the element-wise losses (CPU and CUDA alike).
"""

from __future__ import annotations

import dataclasses
import operator
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import fx
from torch.utils.checkpoint import SAC_IGNORED_OPS

from . import flops as _flops
from ._trace import JointTrace, LossFn, region_list, trace_joint
from .errors import ExportError

OPTIMIZER_STATES = {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}

_FIXED = "<fixed>"


def tensor_bytes(t: Any) -> int:
    return int(t.numel()) * int(t.element_size()) if isinstance(t, torch.Tensor) else 0


@dataclasses.dataclass
class _Node:
    id: str
    cost: float
    memory: int
    inputs: list[str]
    kind: str
    op: str
    meta: dict[str, Any]
    # the fx node whose op produced it (for getitem nodes: the tuple op)
    source: str
    parent: str | None = None


def _tensor_args(n: fx.Node) -> list[fx.Node]:
    """The distinct argument nodes of `n` (in args, kwargs and lists of them) holding a tensor."""
    found: list[fx.Node] = []

    def visit(x: fx.Node) -> fx.Node:
        found.append(x)
        return x

    fx.node.map_arg((n.args, n.kwargs), visit)
    return [a for a in dict.fromkeys(found) if isinstance(a.meta.get("val"), torch.Tensor)]


def _sharing_arg(n: fx.Node, val: torch.Tensor) -> fx.Node | None:
    """The tensor argument whose (fake) storage `val` shares, if any."""
    storage = val.untyped_storage()._cdata
    for a in _tensor_args(n):
        if a.meta["val"].untyped_storage()._cdata == storage:
            return a
    return None


def _written_args(n: fx.Node) -> list[fx.Node]:
    """The argument nodes `n` writes into in place, by its schema (`x.add_(y)`: `x`; `out=`)."""
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return []
    written = (
        n.args[i] if i < len(n.args) else n.kwargs.get(arg.name)
        for i, arg in enumerate(schema.arguments)
        if arg.alias_info is not None and arg.alias_info.is_write
    )
    return [a for a in written if isinstance(a, fx.Node)]


def _aliased_arg(op: Any, n: fx.Node, alias_set: Any) -> fx.Node | None:
    """The argument of `n` whose schema alias set is `alias_set` (a view's base, an in-place target)."""
    schema = op._schema
    for i, arg in enumerate(schema.arguments):
        ai = arg.alias_info
        if ai is not None and ai.before_set == alias_set:
            value = n.args[i] if i < len(n.args) else n.kwargs.get(arg.name)
            if isinstance(value, fx.Node):
                return value
    tensors = _tensor_args(n)
    return tensors[0] if tensors else None


# kernels that return a reduced loss in the storage of the element-wise losses (the storage has
# the input's bytes), on CPU and CUDA alike: what PyTorch holds while the loss is alive
_LOSS_IN_ELEMENTWISE_STORAGE = {"mse_loss", "smooth_l1_loss", "binary_cross_entropy"}


def _output_bytes(n: fx.Node, val: torch.Tensor) -> int:
    """The bytes of `n`'s output storage: its tensor's, or for the losses above (reduced), its
    input's."""
    if getattr(n.target, "_opname", "") in _LOSS_IN_ELEMENTWISE_STORAGE and val.dim() == 0:
        first = n.args[0] if n.args else None
        if isinstance(first, fx.Node):
            return max(tensor_bytes(val), tensor_bytes(first.meta.get("val")))
    return tensor_bytes(val)


class _Builder:
    def __init__(self, trace: JointTrace, cost_of: dict[str, float]) -> None:
        self.trace = trace
        self.cost_of = cost_of
        self.nodes: dict[str, _Node] = {}
        # fx node -> storage key of its (single) tensor output; storage key -> current node id
        self.key: dict[fx.Node, int] = {}
        self.current: dict[int, str] = {}
        # multi-output fx node -> per element: ("fresh", bytes) | ("alias", key) | None
        self.elements: dict[fx.Node, list[tuple[str, int] | None]] = {}
        self.fixed_bytes = 0
        # storage keys of the model's inputs; per region whose replay would not see what its
        # forward saw, the first cause: a value from outside it (a model input, a parameter or
        # buffer, a node another region or no region computed) that it writes into in place, or
        # that it reads and the forward writes into later (its replay reads it as written)
        self.input_keys: set[int] = set()
        # storage key of a placeholder or constant -> its fx node's name
        self.fixed_names: dict[int, str] = {}
        self.writes_input: dict[int, str] = dict(trace.region_reassigns)
        # storage key -> (region, reading node) of the reads of its current version from outside
        # the reading region, since its last in-place write
        self.outside_reads: dict[int, list[tuple[int, str]]] = defaultdict(list)
        self.occurrence: dict[tuple[int, str], int] = defaultdict(int)
        pos = {n: i for i, n in enumerate(trace.gm.graph.nodes)}
        self.pos = pos

    def kind(self, n: fx.Node) -> str:
        i = self.pos[n]
        if i <= self.trace.forward_end:
            return "forward"
        return "loss" if i <= self.trace.loss_end else "backward"

    def new_key(self, owner: str) -> int:
        k = len(self.current)
        self.current[k] = owner
        return k

    def fixed(self, n: fx.Node) -> None:
        self.fixed_bytes += tensor_bytes(n.meta.get("val"))
        self.key[n] = self.new_key(_FIXED)
        self.fixed_names[self.key[n]] = n.name
        if n in self.trace.input_nodes:
            self.input_keys.add(self.key[n])

    def note_write(self, n: fx.Node, k: int) -> None:
        """Records a region's in-place write `n` into the storage `k` when that storage's current
        version was not computed in the region: its replay would read the value as written; or,
        for a parameter or buffer, write into it again (`apply` drops the replay's writes into
        the region's own state only: a parent's buffer handed to it would be updated twice). So
        would the replay of every region that read that version from outside itself before `n`
        (a buffer a block reads, then updates: a running shift, an EMA codebook)."""
        if self.kind(n) == "backward":
            return
        for reader_region, reader in self.outside_reads.pop(k, []):
            self.writes_input.setdefault(
                reader_region, f"{reader} reads a value from outside the region that {n.name} ({n.target}) then writes"
            )
        r = self.trace.region_of.get(n.name)
        if r is None or r in self.writes_input:
            return
        owner = self.current[k]
        if owner == _FIXED:
            fixed = self.fixed_names[k]
            if k in self.input_keys:
                self.writes_input[r] = f"{n.name} ({n.target}) writes into a model input"
            elif fixed not in self.trace.region_state[r]:
                state = self.trace.state_names.get(fixed, f"the constant {fixed}")
                self.writes_input[r] = f"{n.name} ({n.target}) writes into {state}, not the region's own state"
        elif self.nodes[owner].meta.get("region") != r:
            self.writes_input[r] = f"{n.name} ({n.target}) writes into {owner}"

    def note_reads(self, n: fx.Node) -> None:
        """Records the forward reads of region node `n` of values from outside its region, for
        `note_write`: every tensor argument but those it writes in place (`out.add_(shift)` reads
        `shift`); a view reads nothing yet."""
        r = self.trace.region_of.get(n.name)
        schema = getattr(n.target, "_schema", None)
        if r is None or self.kind(n) == "backward" or schema is None:
            return
        written = {self.key.get(a) for a in _written_args(n)}
        if not written and schema.returns and all(a.alias_info is not None for a in schema.returns):
            return
        for a in _tensor_args(n):
            k = self.key.get(a)
            if k is None or k in written:
                continue
            owner = self.current[k]
            if owner == _FIXED or self.nodes[owner].meta.get("region") != r:
                self.outside_reads[k].append((r, n.name))

    def inputs_of(self, n: fx.Node) -> list[str]:
        ids = [self.current[self.key[a]] for a in _tensor_args(n) if a in self.key]
        return [i for i in dict.fromkeys(ids) if i != _FIXED]

    def add(self, n: fx.Node, memory: int, inputs: list[str], cost: float, source: fx.Node) -> str:
        meta: dict[str, Any] = {}
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor):
            meta = {"shape": list(val.shape), "dtype": str(val.dtype).removeprefix("torch.")}
        kind = self.kind(source)
        op = str(source.target)
        if kind != "backward" and source.name in self.trace.region_of:
            meta["region"] = self.trace.region_of[source.name]
        if kind != "backward" and "remat_occurrence" in source.meta:
            meta["occurrence"] = source.meta["remat_occurrence"]
        if kind == "backward" and source.name in self.trace.grad_fn:
            meta["grad_fn"] = self.trace.grad_fn[source.name]
        self.nodes[n.name] = _Node(n.name, cost, memory, inputs, kind, op, meta, source.name)
        return n.name

    def call(self, n: fx.Node) -> None:
        op = n.target
        val = n.meta.get("val")
        if op is operator.getitem:
            self.getitem(n)
            return
        schema = getattr(op, "_schema", None)
        cost = self.cost_of.get(n.name, 0.0)
        if schema is None or not schema.returns:
            if isinstance(val, torch.Tensor):
                self.key[n] = self.new_key(self.add(n, tensor_bytes(val), self.inputs_of(n), cost, n))
            return
        returns = schema.returns
        if isinstance(val, (tuple, list)):
            elements: list[tuple[str, int] | None] = []
            fresh = 0
            for i, v in enumerate(val):
                ai = returns[min(i, len(returns) - 1)].alias_info
                if not isinstance(v, torch.Tensor):
                    elements.append(None)
                elif ai is None:
                    elements.append(("fresh", tensor_bytes(v)))
                    fresh += tensor_bytes(v)
                else:
                    base = _aliased_arg(op, n, ai.before_set)
                    elements.append(("alias", self.key[base]) if base in self.key else None)
            self.elements[n] = elements
            if fresh:
                self.add(n, fresh, self.inputs_of(n), cost, n)
            return
        if not isinstance(val, torch.Tensor):
            return
        ai = returns[0].alias_info
        if ai is None:
            shared = _sharing_arg(n, val)
            if shared is not None and shared in self.key:
                # an alias the schema does not annotate (`_unsafe_view`): the same storage
                self.key[n] = self.key[shared]
                return
            self.key[n] = self.new_key(self.add(n, _output_bytes(n, val), self.inputs_of(n), cost, n))
            return
        base = _aliased_arg(op, n, ai.before_set)
        if base is None or base not in self.key:
            raise ExportError(f"node {n.name} ({op}) aliases an input the exporter does not know")
        k = self.key[base]
        self.key[n] = k
        if not ai.is_write:
            return
        self.note_write(n, k)
        if self.current[k] != _FIXED:
            # a new version of the storage: later readers read this node
            previous = self.current[k]
            self.current[k] = self.add(n, tensor_bytes(val), self.inputs_of(n), cost, n)
            self.nodes[self.current[k]].meta["overwrites"] = previous

    def getitem(self, n: fx.Node) -> None:
        src, i = n.args[0], n.args[1]
        assert isinstance(src, fx.Node) and isinstance(i, int)
        element = self.elements.get(src, [None] * (i + 1))[i] if src in self.elements else None
        if element is None:
            return
        what, x = element
        if what == "alias":
            self.key[n] = x
            return
        node = self.add(n, x, [src.name], 0.0, src)
        self.nodes[node].parent = src.name
        self.nodes[node].meta["element"] = i
        self.key[n] = self.new_key(node)

    def mark_saves(self) -> None:
        """`meta.saves` of a forward or loss op: the nodes its autograd node saves for backward
        (present, maybe empty, when it saves anything, parameters included): what eager
        checkpointing replays a region up to, and what autograd holds outside checkpoints."""
        fx_nodes = {n.name: n for n in self.trace.gm.graph.nodes}
        for saver, saved in self.trace.saves:
            node = self.nodes.get(saver)
            if node is None or node.kind == "backward":
                continue
            target = self.nodes.get(saved)
            if target is None and saved in fx_nodes and fx_nodes[saved] in self.key:
                owner = self.current[self.key[fx_nodes[saved]]]
                target = self.nodes.get(owner)
            found = node.meta.setdefault("saves", [])
            if target is not None and target.id not in found:
                found.append(target.id)
            if saver in self.trace.saver_fn:
                node.meta["grad_fn"] = self.trace.saver_fn[saver]

    def run(self) -> None:
        tr = self.trace
        region_counts: dict[tuple[int, str], int] = defaultdict(int)
        for n in tr.gm.graph.nodes:
            # occurrences as selective checkpointing counts them: ops it ignores are not counted
            if n.op == "call_function" and n.target is not operator.getitem and n.target not in SAC_IGNORED_OPS:
                r = tr.region_of.get(n.name, -1)
                n.meta["remat_occurrence"] = region_counts[(r, str(n.target))]
                region_counts[(r, str(n.target))] += 1
        self.region_calls: list[dict[str, int]] = [{} for _ in tr.region_spans]
        for (r, op), count in region_counts.items():
            if r >= 0:
                self.region_calls[r][op] = count
        for n in tr.gm.graph.nodes:
            if n.op in ("placeholder", "get_attr"):
                self.fixed(n)
            elif n.op == "call_function":
                self.call(n)
                self.note_reads(n)
        self.mark_saves()
        # gradient outputs live in the gradient buffers counted in fixed_memory
        for g in tr.grad_nodes:
            owner = self.current.get(self.key.get(g, -1), _FIXED)
            if owner == _FIXED:
                continue
            node = self.nodes[owner]
            if node.parent is not None:
                self.nodes[node.parent].memory -= node.memory
            node.memory = 0


def _fx_costs_flops(trace: JointTrace) -> tuple[dict[str, float], int, int]:
    """FLOPs of every op node: (costs, formula FLOPs, FLOPs by the one-per-element rule)."""
    costs: dict[str, float] = {}
    formula_total = other_total = 0
    for n in trace.gm.graph.nodes:
        if n.op != "call_function" or n.target is operator.getitem:
            continue
        schema = getattr(n.target, "_schema", None)
        if schema is not None and schema.returns and all(r.alias_info is not None for r in schema.returns):
            continue  # views and in-place writes into fixed state get no cost of their own here
        args, kwargs = fx.node.map_arg((n.args, n.kwargs), lambda a: a.meta.get("val"))
        f, by_formula = _flops.op_flops(n.target, args, kwargs, n.meta.get("val"))
        if by_formula:
            formula_total += f
        else:
            other_total += f
        costs[n.name] = float(f)
    # in-place ops write as many elements as their output has
    for n in trace.gm.graph.nodes:
        if n.op == "call_function" and n.name not in costs and n.target is not operator.getitem:
            schema = getattr(n.target, "_schema", None)
            if schema is not None and any(r.alias_info is not None and r.alias_info.is_write for r in schema.returns):
                costs[n.name] = float(_flops.written_elements(n.meta.get("val")))
    return costs, formula_total, other_total


def _fx_costs_time(
    trace: JointTrace, model: torch.nn.Module, inputs: Sequence[torch.Tensor], repeats: int
) -> dict[str, float]:
    """Median seconds of each op, run one by one on real tensors (clones of the model's state)."""
    real: list[torch.Tensor] = (
        [p.detach().clone() for p in model.parameters()]
        + [b.detach().clone() for b in model.buffers()]
        + [x.detach().clone() for x in inputs]
    )
    samples: dict[str, list[float]] = defaultdict(list)
    for _ in range(repeats):
        env: dict[fx.Node, Any] = {}
        it = iter(real)
        for n in trace.gm.graph.nodes:
            if n.op == "placeholder":
                env[n] = next(it).clone()
            elif n.op == "get_attr":
                env[n] = getattr(trace.gm, str(n.target))
            elif n.op == "call_function":
                args, kwargs = fx.node.map_arg((n.args, n.kwargs), env.__getitem__)
                t0 = time.perf_counter()
                env[n] = n.target(*args, **kwargs)
                samples[n.name].append(time.perf_counter() - t0)
    return {name: statistics.median(s) for name, s in samples.items()}


def export(
    model: torch.nn.Module,
    example_inputs: Sequence[Any],
    loss_fn: LossFn | None = None,
    *,
    name: str | None = None,
    cost: Literal["flops", "time"] = "flops",
    optimizer: str | None = None,
    regions: Sequence[torch.nn.Module] = (),
    repeats: int = 3,
) -> dict[str, Any]:
    """The training graph of one step of `model` (remat's native JSON, as a dict).

    `loss_fn(output) -> scalar tensor` turns the model's output into the loss (close over the
    targets); without it the model must return the scalar loss itself. `cost` is "flops" (from
    shapes, no compute) or "time" (each op timed on real tensors, `repeats` runs, median seconds).
    `optimizer` ("sgd", "momentum", "adam", "adamw") adds its state per trainable parameter to
    `fixed_memory`. `regions`: the submodules `remat.apply` will checkpoint; each forward node
    records the region it belongs to and its occurrence there.
    """
    if cost not in ("flops", "time"):
        raise ExportError(f"cost must be 'flops' or 'time', got {cost!r}")
    if optimizer is not None and optimizer not in OPTIMIZER_STATES:
        raise ExportError(f"unknown optimizer {optimizer!r}: one of {', '.join(OPTIMIZER_STATES)}")
    if repeats < 1:
        raise ExportError(f"repeats must be at least 1, got {repeats}")
    regions = region_list(regions)
    trace = trace_joint(model, example_inputs, loss_fn, regions)
    costs, formula, other = _fx_costs_flops(trace)
    if cost == "time":
        costs = _fx_costs_time(trace, model, example_inputs, repeats)
    b = _Builder(trace, costs)
    b.run()
    trainable_bytes = sum(tensor_bytes(p) for p, t in zip(model.parameters(), trace.trainable, strict=True) if t)
    states = OPTIMIZER_STATES[optimizer] if optimizer else 0
    fixed = b.fixed_bytes + trainable_bytes * (1 + states)
    meta = {
        "exporter": "remat.export (make_fx joint trace under FakeTensorMode)",
        "torch": torch.__version__,
        "flops_formula": formula,
        "flops_per_element": other,
        "optimizer": optimizer,
        "regions": len(regions),
        # per region, the op calls selective checkpointing will see (also those with no node)
        "region_calls": b.region_calls,
        # per region whose replay would not see what its forward saw, the first cause (it writes in
        # place into a value from outside it, reads one that is written later, or reassigns a
        # buffer): `remat.apply` never checkpoints it
        "region_writes_input": {str(r): what for r, what in sorted(b.writes_input.items())},
        # the model returns the loss itself (no `loss_fn`): there is no output for the caller to hold
        "model_returns_loss": loss_fn is None,
    }
    return graph_dict(b, name or type(model).__name__, fixed, "FLOP" if cost == "flops" else "s", meta)


def graph_dict(b: _Builder, name: str, fixed: int, cost_unit: str, meta: dict[str, Any]) -> dict[str, Any]:
    """The native JSON graph (as a dict) of a built graph."""
    nodes = []
    for nd in b.nodes.values():
        out: dict[str, Any] = {"id": nd.id, "cost": nd.cost, "memory": max(nd.memory, 0)}
        if nd.inputs:
            out["inputs"] = nd.inputs
        out["kind"] = nd.kind
        out["op"] = nd.op
        out["meta"] = nd.meta
        nodes.append(out)
    return {"name": name, "fixed_memory": fixed, "cost_unit": cost_unit, "meta": meta, "nodes": nodes}


def saved_for_backward(graph: dict[str, Any]) -> int:
    """Bytes of the forward and loss outputs that some backward node reads (each counted once)."""
    by_id = {n["id"]: n for n in graph["nodes"]}
    saved = {
        i
        for n in graph["nodes"]
        if n.get("kind") == "backward"
        for i in n.get("inputs", [])
        if by_id[i].get("kind") != "backward"
    }
    return sum(by_id[i]["memory"] for i in saved)
