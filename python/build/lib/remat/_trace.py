"""Tracing one training step (forward, loss, backward) into one ATen graph, without real compute.

`trace_joint` runs `make_fx(step, tracing_mode="fake")` on

    step(params, buffers, inputs) = (loss, outputs, autograd.grad(loss, params))

so every tensor is a FakeTensor (shapes and dtypes, no data, no memory) and the graph holds the
ops at the dispatcher level below autograd: the same ops, in the same order, that a
`TorchDispatchMode` sees in eager mode. That is what selective activation checkpointing keys its
decisions on, so a node of the exported graph can be named as (checkpoint region, op, occurrence)
and found again in eager mode (`remat.apply`). `aot_export_module(trace_joint=True)` would
functionalize the graph (other op names than eager runs), which is why it is not used here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx
from torch.func import functional_call
from torch.fx.experimental.proxy_tensor import get_proxy_mode, make_fx
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
    inputs = list(example_inputs)
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise ExportError(f"example_inputs[{i}] is a {type(x).__name__}, not a tensor")

    spans: list[tuple[int, int]] = [(-1, -1)] * len(regions)
    handles = []
    for r, mod in enumerate(regions):

        def pre(_m: Any, _a: Any, r: int = r) -> None:
            spans[r] = (_graph_len(), -1)

        def post(_m: Any, _a: Any, _o: Any, r: int = r) -> None:
            spans[r] = (spans[r][0], _graph_len())

        handles.append(mod.register_forward_pre_hook(pre))
        handles.append(mod.register_forward_hook(post))

    n_out = [0]

    def step(pv: list[torch.Tensor], bv: list[torch.Tensor], xv: list[torch.Tensor]) -> Any:
        state = dict(zip(names, pv, strict=True))
        state.update(zip(bnames, bv, strict=True))
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
        grads = torch.autograd.grad(loss, wrt, allow_unused=True)
        leaves = tree_flatten(out)[0]
        n_out[0] = len(leaves)
        return loss, leaves, list(grads)

    try:
        gm = make_fx(step, tracing_mode="fake", _allow_non_fake_inputs=True)(params, buffers, inputs)
    except ExportError:
        raise
    except Exception as e:  # any tracing failure: data-dependent control flow, unsupported op, ...
        raise ExportError(f"cannot trace {type(model).__name__} under FakeTensorMode: {type(e).__name__}: {e}") from e
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
        for n in nodes[a:b]:
            region_of[n.name] = r
    return JointTrace(
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
    )
