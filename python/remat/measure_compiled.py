"""Measuring what a compiled training step holds (`torch.compile`, AOTAutograd, Inductor).

Two trackers, both independent of what remat predicts:

- `CompiledLiveBytes`: `remat.measure.LiveBytes` (a `TorchDispatchMode` recording every op
  output's storage, its death by `weakref.finalize`) declared to ignore compile internals, so that
  Dynamo still runs the compiled graphs inside it (it runs a frame eagerly under any other dispatch
  mode). It sees every ATen op of an `aot_eager` graph: op outputs, not kernels' scratch.
- `AllocatorBytes`: the allocator's own events (`torch.profiler` with `profile_memory=True`:
  every allocation and free, with its pointer and size), of the CPU allocator or, on a GPU, of
  the CUDA caching allocator (its blocks, rounded as it rounds them). Inductor's generated code
  allocates its buffers without the dispatcher (`empty_strided_cpu`) and fuses ops into kernels,
  so no dispatch mode sees them; the allocator sees every byte, scratch included (an op's
  workspace, cuDNN's among them), and tells scratch apart: an allocation freed before the end of
  the outermost operator that made it (an ATen op, or an op of another namespace whose Python
  implementation calls ATen ops: the min-cut partitioner's
  `prims::_low_memory_max_pool_offsets_to_indices`).

Both leave out what `remat` counts as fixed memory: storages that exist before the step
(parameters, buffers, inputs) are never seen, and the gradients left in `.grad` at the end are
excluded.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile

from .measure import LiveBytes, Step

# an operator's event (`aten::add`, `prims::_low_memory_max_pool_offsets_to_indices`), not a
# scope of the profiler or autograd (`autograd::engine::evaluate_function: ...`)
_OPERATOR = re.compile(r"[A-Za-z_]\w*::\w+(\.\w+)?")


class CompiledLiveBytes(LiveBytes):
    """`LiveBytes` that Dynamo runs compiled code under (instead of falling back to eager)."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True


class AllocatorBytes:
    """Allocations and frees of the allocator of `device` ("cpu", "cuda") while the context is
    open (`torch.profiler`)."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.events: list[tuple[int, int, int]] = []  # (time ns, ptr, +bytes / -bytes)
        self.scratch: set[int] = set()  # indices of the allocations that are an op's scratch
        self._prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)

    def __enter__(self) -> AllocatorBytes:
        self._prof.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._prof.__exit__(*exc)
        found: list[tuple[int, int, int, int]] = []
        stack: list[tuple[Any, int]] = [
            (root, -1)
            for root in self._prof.profiler.kineto_results.experimental_event_tree()  # type: ignore[union-attr]
        ]
        while stack:
            node, op_end = stack.pop()
            kind, fields = node.typed
            if kind == _EventType.Allocation and str(fields.device).startswith(self.device):
                found.append((int(node.start_time_ns), int(fields.ptr), int(fields.alloc_size), op_end))
            if op_end < 0 and _OPERATOR.fullmatch(node.name):
                op_end = int(node.end_time_ns)
            stack.extend((c, op_end) for c in node.children)
        found.sort()
        self.events = [(t, ptr, size) for t, ptr, size, _ in found]
        # an allocation freed before the end of the outermost operator it was made in is that
        # op's scratch (a kernel's workspace), not an op output
        freed_at: dict[int, int] = {}
        self.scratch = set()
        for i in reversed(range(len(found))):
            t, ptr, size, op_end = found[i]
            if size < 0:
                freed_at[ptr] = t
            else:
                if op_end >= 0 and freed_at.get(ptr, op_end + 1) <= op_end:
                    self.scratch.add(i)
                freed_at.pop(ptr, None)

    def peak(self, exclude: Iterable[torch.Tensor] = (), *, scratch: bool = True) -> int:
        """The largest sum of live allocations, leaving out the allocations still live at the end
        whose pointer is a storage of `exclude` (e.g. the parameters' gradients), and with
        `scratch=False` the ops' scratch."""
        skip = {t.untyped_storage().data_ptr() for t in exclude}
        live: dict[int, int] = {}  # ptr -> index of the allocation event live at the end
        for i, (_, ptr, size) in enumerate(self.events):
            if size > 0:
                live[ptr] = i
            else:
                live.pop(ptr, None)
        kept = {i for ptr, i in live.items() if ptr in skip} | (set() if scratch else self.scratch)
        current = best = 0
        sizes: dict[int, int] = {}
        for i, (_, ptr, size) in enumerate(self.events):
            if i in kept:
                continue
            if size > 0:
                sizes[ptr] = size
                current += size
            elif ptr in sizes:
                current -= sizes.pop(ptr)
            best = max(best, current)
        return best


@dataclasses.dataclass
class CompiledStep(Step):
    """A measured compiled step: `activations` by `CompiledLiveBytes` (live op outputs, what
    aot_eager runs), and by `AllocatorBytes` the peak of live CPU allocations with (`allocated`)
    and without (`buffers`, what Inductor runs) ops' scratch. On a GPU the same of the CUDA
    caching allocator, and `max_allocated`: `torch.cuda.max_memory_allocated` above the start (the
    final gradients and ops' workspaces included)."""

    allocated: int = 0
    buffers: int = 0
    max_allocated: int = 0


def measure_compiled(
    step: Callable[..., Any], args: Sequence[Any], params: Sequence[torch.nn.Parameter], *, repeats: int = 1
) -> CompiledStep:
    """Run `step(*args)` (forward, loss and backward, e.g. a `remat.compiled.Step`) `repeats` (+1
    warm-up) times with the gradients of `params` set to None before each; the last run's loss and
    gradients, its peak by both trackers (separate runs) and the shortest untracked time."""

    def clear() -> None:
        for p in params:
            p.grad = None

    cuda = any(p.is_cuda for p in params)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    times = []
    for _ in range(repeats + 1):
        clear()
        sync()
        t0 = time.perf_counter()
        step(*args)
        sync()
        times.append(time.perf_counter() - t0)
    clear()
    start = 0
    if cuda:
        sync()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
    with AllocatorBytes("cuda" if cuda else "cpu") as alloc:
        step(*args)
        sync()
    max_allocated = torch.cuda.max_memory_allocated() - start if cuda else 0
    grads = [p.grad for p in params if p.grad is not None]
    allocated, buffers = alloc.peak(grads), alloc.peak(grads, scratch=False)
    clear()
    with CompiledLiveBytes() as live:
        loss = step(*args)
    kept = [None if p.grad is None else p.grad.detach().clone() for p in params]
    activations = live.peak([p.grad for p in params if p.grad is not None])
    return CompiledStep(float(loss), kept, activations, min(times[1:]), allocated, buffers, max_allocated)
