"""FLOPs of one ATen op, from `torch.utils.flop_counter`'s formulas, with two rules of our own.

- Ops with a formula in `flop_counter.flop_registry` (matmuls, convolutions, attention) cost what the
  formula says (2 FLOPs per multiply-accumulate).
- `convolution_backward` is recounted: the registry's grad-weight term ignores `groups` and counts
  a grouped convolution's weight gradient `groups` times over (a depthwise convolution's by its
  channel count). Here grad-input and grad-weight each cost what the forward convolution costs,
  2 · N · C_out · (C_in / groups) · Π kernel · Π output spatial.
- Ops without a formula (elementwise, normalisation, reductions, copies) cost one FLOP per element
  they write: never zero, so that no recomputation is free, and small beside the matmuls.
- Views and ops that only write parameters or buffers cost nothing in the graph (they are not nodes).
"""

from __future__ import annotations

from math import prod
from typing import Any

import torch
from torch.utils.flop_counter import flop_registry

aten = torch.ops.aten


def _numel(t: Any) -> int:
    return int(t.numel()) if isinstance(t, torch.Tensor) else 0


def written_elements(out: Any) -> int:
    """Elements of every tensor in an op's output (a tensor, or a tuple or list of them)."""
    if isinstance(out, (tuple, list)):
        return sum(_numel(t) for t in out)
    return _numel(out)


def conv_backward_flops(args: tuple[Any, ...], out: Any) -> int:
    """grad-input and grad-weight of a (possibly grouped) convolution, each as its forward."""
    grad_out, x, w = args[0], args[1], args[2]
    transposed = bool(args[7])
    output_mask = args[10]
    # The forward convolution's spatial extent that each weight slides over: its output's
    # (grad_out) for a convolution, its input's (x) for a transposed one. w is (C_out, C_in/groups,
    # k...) or (C_in, C_out/groups, k...), so Π w.shape multiply-accumulates per image and position.
    spatial = (x if transposed else grad_out).shape[2:]
    per_pass = 2 * x.shape[0] * prod(spatial) * prod(w.shape)
    return int(per_pass) * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def op_flops(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> tuple[int, bool]:
    """(FLOPs, whether a formula gave them) of `op` on fake `args` producing `out`."""
    packet = getattr(op, "_overloadpacket", None)
    if packet is aten.convolution_backward:
        return conv_backward_flops(args, out), True
    formula = flop_registry.get(packet) if packet is not None else None
    if formula is not None:
        return int(formula(*args, out_val=out, **kwargs)), True
    return written_elements(out), False
