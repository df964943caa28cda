"""Tracing one training step (forward, loss, backward) into one ATen graph, without real compute.

`trace_joint` runs `make_fx(step, tracing_mode="fake")` on

    step(params, buffers, inputs) = (loss, outputs, autograd.grad(loss, params))

so every tensor is a FakeTensor (shapes and dtypes, no data, no memory) and the graph holds the
ops at the dispatcher level below autograd: the same ops, in the same order, that a
`TorchDispatchMode` sees in eager mode. That is what selective activation checkpointing keys its
decisions on, so a node of the exported graph can be named as (checkpoint region, op, occurrence)
and found again in eager mode (`remat.apply`). `aot_export_module(trace_joint=True)` would
functionalize the graph (other op names than eager runs), which is why it is not used here.

Two records of autograd come with the graph: which op saved each tensor for backward
(`saved_tensors_hooks` around the forward and loss; `JointTrace.saves`) and which autograd node
ran each backward op (a dispatch mode around `autograd.grad`; `JointTrace.grad_fn`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import operator
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import fx
from torch.func import functional_call
from torch.fx.experimental.proxy_tensor import get_proxy_mode, get_proxy_slot, make_fx
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .errors import ExportError

LossFn = Callable[[Any], torch.Tensor]


@dataclasses.dataclass
class JointTrace:
    """The traced step and what each placeholder and output of its graph is."""

    gm: fx.GraphModule
    param_nodes: list[fx.Node]
    trainable: list[bool]
    buffer_nodes: list[fx.Node]
    input_nodes: list[fx.Node]
    loss_node: fx.Node
    grad_nodes: list[fx.Node]
    # position (in graph order) of the last forward node and of the loss node
    forward_end: int
    loss_end: int
    # fx node name -> index of the checkpoint region (a module of `regions`) it was traced in
    region_of: dict[str, int]
    region_spans: list[tuple[int, int]]
    # region -> the first buffer a module inside it reassigns in its forward (`self.n = self.n + 1`):
    # a replay would reassign it again
    region_reassigns: dict[int, str] = dataclasses.field(default_factory=dict)
    # parameter or buffer placeholder name -> its name in the model (`blocks.1.bn.running_mean`)
    state_names: dict[str, str] = dataclasses.field(default_factory=dict)
    # region -> the placeholder names of its own parameters and buffers (its module's, tied ones
    # included): the state its replay may write into, since `apply` drops those writes
    region_state: list[set[str]] = dataclasses.field(default_factory=list)
    # (op node name, saved node name): the tensors autograd saves for backward in the forward
    # and loss, by the op whose backward reads them
    saves: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    # backward op node name -> index of the autograd node (grad_fn) whose apply ran it: the engine
    # releases that node's saved tensors and input gradients when its apply returns
    grad_fn: dict[str, int] = dataclasses.field(default_factory=dict)
    # forward or loss op node name -> index (as in `grad_fn`) of the autograd node its saves belong
    # to: that node's apply unpacks them (which replays a checkpointed region in eager mode)
    saver_fn: dict[str, int] = dataclasses.field(default_factory=dict)


def _graph_len() -> int:
    mode = get_proxy_mode()
    return len(mode.tracer.graph.nodes) if mode is not None else 0


def trace_joint(
    model: torch.nn.Module,
    example_inputs: Sequence[Any],
    loss_fn: LossFn | None,
    regions: Sequence[torch.nn.Module] = (),
) -> JointTrace:
    """Trace one training step of `model` on `example_inputs` under FakeTensorMode."""
    names = [n for n, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]
    trainable = [p.requires_grad for p in params]
    if not any(trainable):
        raise ExportError(f"{type(model).__name__} has no parameter that requires grad: nothing to train")
    bnames = [n for n, _ in model.named_buffers()]
    buffers = [b for _, b in model.named_buffers()]
    if isinstance(example_inputs, torch.Tensor):
        raise ExportError("example_inputs is a tensor: give the forward's positional arguments as a tuple, e.g. (x,)")
    inputs = list(example_inputs)
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise ExportError(f"example_inputs[{i}] is a {type(x).__name__}, not a tensor")

    _check_regions(regions)
    spans: list[tuple[int, int]] = [(-1, -1)] * len(regions)
    calls = [0] * len(regions)
    inside: list[int] = []  # the region whose forward is running
    handles = []
    for r, mod in enumerate(regions):

        def pre(_m: Any, _a: Any, r: int = r) -> None:
            spans[r] = (_graph_len(), -1)
            calls[r] += 1
            inside.append(r)

        def post(_m: Any, _a: Any, _o: Any, r: int = r) -> None:
            spans[r] = (spans[r][0], _graph_len())
            inside.pop()

        handles.append(mod.register_forward_pre_hook(pre))
        handles.append(mod.register_forward_hook(post))
    # the submodules whose forward is running, outermost first: where a failed trace stopped
    running: list[tuple[str, str]] = []

    def enter(m: torch.nn.Module, _a: Any, name: str) -> None:
        running.append((name, type(m).__name__))

    def leave(_m: Any, _a: Any, _o: Any) -> None:
        running.pop()

    path = {id(m): name for name, m in model.named_modules()}
    reassigns: dict[int, str] = {}

    def reassigned(m: torch.nn.Module, name: str, _value: Any) -> None:
        if inside and inside[-1] not in reassigns:
            where = path.get(id(m), type(m).__name__)
            reassigns[inside[-1]] = f"module '{where}' reassigns its buffer '{name}' in its forward"

    handles.append(torch.nn.modules.module.register_module_buffer_registration_hook(reassigned))
    for name, mod in model.named_modules():
        if name:
            handles.append(mod.register_forward_pre_hook(functools.partial(enter, name=name)))
            handles.append(mod.register_forward_hook(leave))

    n_out = [0]
    # (graph length when autograd saved it, saved node name, sequence number of the autograd node
    # saving it: the last one created, as `torch.fx`'s own seq_nr annotation takes it)
    packed: list[tuple[int, str, int]] = []
    applying: list[tuple[int, tuple[str, int]]] = []  # (graph length, autograd node) per backward op

    def pack(t: torch.Tensor) -> torch.Tensor:
        mode = get_proxy_mode()
        if mode is not None and isinstance(t, torch.Tensor):
            try:
                name = get_proxy_slot(t, mode.tracer).proxy.node.name
            except (KeyError, AttributeError, RuntimeError):
                return t  # a tensor the tracer does not track (a constant)
            packed.append((len(mode.tracer.graph.nodes), name, torch._C._autograd._get_sequence_nr() - 1))
        return t

    def step(pv: list[torch.Tensor], bv: list[torch.Tensor], xv: list[torch.Tensor]) -> Any:
        state = dict(zip(names, pv, strict=True))
        state.update(zip(bnames, bv, strict=True))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = functional_call(model, state, tuple(xv))
            loss = out if loss_fn is None else loss_fn(out)
        if not isinstance(loss, torch.Tensor):
            raise ExportError(f"the loss is a {type(loss).__name__}, not a tensor")
        if loss.numel() != 1:
            raise ExportError(
                f"the loss must be a scalar (one element) to differentiate, got shape {tuple(loss.shape)}: "
                "reduce it (e.g. .mean()) in loss_fn"
            )
        if not loss.requires_grad:
            raise ExportError("the loss does not depend on any parameter that requires grad")
        wrt = [p for p, t in zip(pv, trainable, strict=True) if t]
        with _NodeOfOps(applying):
            grads = torch.autograd.grad(loss, wrt, allow_unused=True)
        leaves = tree_flatten(out)[0]
        n_out[0] = len(leaves)
        return loss, leaves, list(grads)

    try:
        with _momentum_as_constant(model):
            gm = make_fx(step, tracing_mode="fake", _allow_non_fake_inputs=True)(params, buffers, inputs)
    except ExportError:
        raise
    except Exception as e:  # any tracing failure: data-dependent control flow, unsupported op, ...
        where = f" (in module '{running[-1][0]}', a {running[-1][1]})" if running else ""
        raise ExportError(
            f"cannot trace {type(model).__name__} under FakeTensorMode{where}: {type(e).__name__}: {e}"
        ) from e
    finally:
        for h in handles:
            h.remove()

    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    np_, nb = len(params), len(buffers)
    flat = list(next(n for n in nodes if n.op == "output").args[0])
    loss_node, out_nodes, grad_list = flat[0], flat[1 : 1 + n_out[0]], flat[1 + n_out[0] :]
    pos = {n: i for i, n in enumerate(nodes)}
    fwd = [pos[o] for o in out_nodes if isinstance(o, fx.Node) and o.op != "placeholder"]
    loss_end = pos[loss_node]
    forward_end = max(fwd) if fwd and loss_fn is not None else loss_end - 1
    # graph index i of a node: the tracer's graph held i nodes before it was created.
    region_of: dict[str, int] = {}
    for r, (a, b) in enumerate(spans):
        if a < 0 or b < 0:
            raise ExportError(f"regions[{r}] ({type(regions[r]).__name__}) was not called by the model's forward")
        if calls[r] > 1:
            raise ExportError(
                f"regions[{r}] ({type(regions[r]).__name__}) is called {calls[r]} times by the model's forward: "
                "a region is checkpointed as one call, so give modules that the forward calls once each "
                "(the modules it calls, or a module around the repeated calls)"
            )
        for n in nodes[a:b]:
            region_of[n.name] = r
    saves, saver_seq = _savers(nodes, packed)
    grad_fn, fn_of_seq = _grad_fns(nodes, applying)
    state = list(zip(placeholders[: np_ + nb], names + bnames, params + buffers, strict=True))
    owned = [{id(t) for t in (*mod.parameters(), *mod.buffers())} for mod in regions]
    return JointTrace(
        state_names={n.name: name for n, name, _ in state},
        region_state=[{n.name for n, _, t in state if id(t) in ids} for ids in owned],
        saves=saves,
        grad_fn=grad_fn,
        saver_fn={op: fn_of_seq[seq] for op, seq in saver_seq.items() if seq in fn_of_seq},
        gm=gm,
        param_nodes=placeholders[:np_],
        trainable=trainable,
        buffer_nodes=placeholders[np_ : np_ + nb],
        input_nodes=placeholders[np_ + nb :],
        loss_node=loss_node,
        grad_nodes=[g for g in grad_list if isinstance(g, fx.Node)],
        forward_end=forward_end,
        loss_end=loss_end,
        region_of=region_of,
        region_spans=spans,
        region_reassigns=reassigns,
    )


@contextlib.contextmanager
def _momentum_as_constant(model: torch.nn.Module) -> Iterator[None]:
    """BatchNorm with `momentum=None` (a cumulative average) in training divides by its step
    counter as a Python number, which a FakeTensor has none of; any constant momentum traces the
    same ops (the factor is a scalar argument of the same `batch_norm`), so one is set for the
    trace and the modules are given back as they were."""
    cumulative = [
        m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.momentum is None
    ]
    for m in cumulative:
        m.momentum = 0.0
    try:
        yield
    finally:
        for m in cumulative:
            m.momentum = None


def region_list(regions: Any) -> list[torch.nn.Module]:
    """`regions` as a list (a generator is read once, a `ModuleList` gives its modules); an
    `ExportError` for a single module or what is not a collection."""
    if isinstance(regions, torch.nn.Module) and not isinstance(regions, (torch.nn.ModuleList, torch.nn.Sequential)):
        raise ExportError(f"regions is a {type(regions).__name__}: give a list of modules, e.g. regions=[model.block]")
    try:
        return list(regions)
    except TypeError:
        raise ExportError(f"regions is a {type(regions).__name__}, not a list of modules") from None


def _check_regions(regions: Sequence[Any]) -> None:
    """Each region a module, given once, none inside another (a nested region's ops would belong
    to two checkpoints)."""
    index: dict[int, int] = {}
    for r, mod in enumerate(regions):
        if not isinstance(mod, torch.nn.Module):
            raise ExportError(f"regions[{r}] is a {type(mod).__name__}, not a torch.nn.Module")
        if id(mod) in index:
            raise ExportError(
                f"regions[{r}] ({type(mod).__name__}) is regions[{index[id(mod)]}] again: give each module once"
            )
        index[id(mod)] = r
    for r, mod in enumerate(regions):
        for inner in mod.modules():
            j = index.get(id(inner), r)
            if j != r:
                raise ExportError(
                    f"regions[{j}] ({type(inner).__name__}) is inside regions[{r}] ({type(mod).__name__}): "
                    "regions must not nest; give the outer module or the inner ones"
                )


# ops whose backward reads their own result (derivatives.yaml: `result`), single-output
_SAVE_RESULT = {
    "relu",
    "relu_",
    "threshold",
    "sigmoid",
    "sigmoid_",
    "tanh",
    "tanh_",
    "exp",
    "exp_",
    "_softmax",
    "_log_softmax",
    "sqrt",
    "rsqrt",
    "elu",
    "elu_",
    "hardsigmoid",
    "reciprocal",
}


def _savers(nodes: list[fx.Node], packed: list[tuple[int, str, int]]) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Which op saved each packed tensor, and the sequence number of each saving op's autograd
    node. Autograd saves an op's inputs before the op runs (the op's node is the next one created)
    and its outputs after (the op's node, or its elements' getitem nodes, are the last created).
    A tensor the last op produced and the next op reads, packed twice at one graph length, was
    saved by both; packed once, by the last op when that op saves its result, else by the next op.
    A tensor neither produced by the last op nor read by the next was saved by the last op that is
    not a view: an in-place op on a view saves its result after the view's node is made
    (`h.t().relu_()`), a custom `autograd.Function` what `ctx.save_for_backward` got once its
    forward's ops ran (the next op is another's, often a weight's transpose)."""
    seen: dict[tuple[int, str], int] = defaultdict(int)
    out: list[tuple[str, str]] = []
    seq_of: dict[str, int] = {}
    for length, name, seq in packed:
        nth = seen[(length, name)]
        seen[(length, name)] += 1
        last = nodes[length - 1] if 0 < length <= len(nodes) else None
        if last is not None and last.target is operator.getitem and isinstance(last.args[0], fx.Node):
            last = last.args[0]
        following = next((n for n in nodes[length:] if n.op == "call_function"), None)
        reads = following is not None and any(a.name == name for a in following.all_input_nodes)
        produced = last is not None and (
            last.name == name or any(u.name == name and u.target is operator.getitem for u in last.users)
        )
        saves_result = last is not None and getattr(last.target, "_opname", "") in _SAVE_RESULT
        if last is not None and produced and (not reads or (nth == 0 and saves_result)):
            saver = last
        elif following is not None and reads:
            saver = following
        elif (op := _before_views(nodes, length)) is not None:
            saver = op
        elif following is not None:
            saver = following
        else:
            continue
        out.append((saver.name, name))
        seq_of.setdefault(saver.name, seq)
    return list(dict.fromkeys(out)), seq_of


def _before_views(nodes: list[fx.Node], length: int) -> fx.Node | None:
    """The last op among the first `length` nodes that is not a view (every output aliasing an
    input, as `t` and `view`) nor an element of another's outputs; `None` when there is none."""
    for i in range(min(length, len(nodes)) - 1, -1, -1):
        n = nodes[i]
        if n.op != "call_function":
            return None
        if n.target is operator.getitem:
            continue
        schema = getattr(n.target, "_schema", None)
        returns = schema.returns if schema is not None else []
        if returns and all(r.alias_info is not None and not r.alias_info.is_write for r in returns):
            continue
        return n
    return None


class _NodeOfOps(TorchDispatchMode):
    """Records, for each op the backward runs, the autograd node executing it. The mode sits below
    the tracer's, so the op's fx node is the next one created."""

    def __init__(self, out: list[tuple[int, tuple[str, int]]]) -> None:
        super().__init__()
        self.out = out

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        node = torch._C._current_autograd_node()
        mode = get_proxy_mode()
        if node is not None and mode is not None:
            self.out.append((len(mode.tracer.graph.nodes), (node.name(), int(node._sequence_nr()))))
        return func(*args, **(kwargs or {}))


def _grad_fns(
    nodes: list[fx.Node], applying: list[tuple[int, tuple[str, int]]]
) -> tuple[dict[str, int], dict[int, int]]:
    """The index of the autograd node running each backward op, and the index of each autograd
    node by its sequence number."""
    ids: dict[tuple[str, int], int] = {}
    out: dict[str, int] = {}
    for length, node in applying:  # of several ops before a node is created, the last made it
        if length < len(nodes):
            out[nodes[length].name] = ids.setdefault(node, len(ids))
    return out, {seq: i for (_, seq), i in ids.items()}
