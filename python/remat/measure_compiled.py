"""Measuring what a compiled training step holds (`torch.compile`, AOTAutograd, Inductor).

Two trackers, both independent of what remat predicts:

- `CompiledLiveBytes`: `remat.measure.LiveBytes` (a `TorchDispatchMode` recording every op
  output's storage, its death by `weakref.finalize`) declared to ignore compile internals, so that
  Dynamo still runs the compiled graphs inside it (it runs a frame eagerly under any other dispatch
  mode). It sees every ATen op of an `aot_eager` graph: op outputs, not kernels' scratch.
- `AllocatorBytes`: the CPU allocator's own events (`torch.profiler` with `profile_memory=True`:
  every allocation and free, with its pointer and size). Inductor's generated code allocates its
  buffers without the dispatcher (`empty_strided_cpu`) and fuses ops into C++ kernels, so no
  dispatch mode sees them; the allocator sees every byte, scratch included.
- `CudaBytes`: on a GPU, the CUDA caching allocator's own trace (`torch.cuda.memory`'s recorded
  history: every block allocated and freed, rounded as the allocator rounds it) and its
  `max_memory_allocated`. It sees what `AllocatorBytes` sees on the CPU, kernels' workspaces
  included (cuBLAS, cuDNN), without telling them apart from op outputs.

Both leave out what `remat` counts as fixed memory: storages that exist before the step
(parameters, buffers, inputs) are never seen, and the gradients left in `.grad` at the end are
excluded.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile

from .measure import LiveBytes, Step


class CompiledLiveBytes(LiveBytes):
    """`LiveBytes` that Dynamo runs compiled code under (instead of falling back to eager)."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True


class AllocationTrace:
    """A record of allocations and frees: `events` in order, (time, ptr, +bytes / -bytes)."""

    def __init__(self) -> None:
        self.events: list[tuple[int, int, int]] = []
        self.scratch: set[int] = set()  # indices of the allocations that are an op's scratch

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


class AllocatorBytes(AllocationTrace):
    """Allocations and frees of the CPU allocator while the context is open (`torch.profiler`)."""

    def __init__(self) -> None:
        super().__init__()
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
            if kind == _EventType.Allocation and str(fields.device) == "cpu":
                found.append((int(node.start_time_ns), int(fields.ptr), int(fields.alloc_size), op_end))
            if op_end < 0 and node.name.startswith("aten::"):
                op_end = int(node.end_time_ns)
            stack.extend((c, op_end) for c in node.children)
        found.sort()
        self.events = [(t, ptr, size) for t, ptr, size, _ in found]
        # an allocation freed before the end of the outermost ATen op it was made in is that op's
        # scratch (a kernel's workspace), not an op output
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


class CudaBytes(AllocationTrace):
    """Blocks allocated and freed by the CUDA caching allocator while the context is open (its
    recorded history), and `max_allocated`: `torch.cuda.max_memory_allocated` above what was
    allocated at the start. Allocations that existed before the context are never seen."""

    def __init__(self) -> None:
        super().__init__()
        self.max_allocated = 0
        self._start = 0

    def __enter__(self) -> CudaBytes:
        torch.cuda.synchronize()
        torch.cuda.memory._record_memory_history(context=None, max_entries=10_000_000)
        torch.cuda.reset_peak_memory_stats()
        self._start = torch.cuda.memory_allocated()
        return self

    def __exit__(self, *exc: Any) -> None:
        torch.cuda.synchronize()
        self.max_allocated = torch.cuda.max_memory_allocated() - self._start
        trace = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
        torch.cuda.memory._record_memory_history(enabled=None)
        sign = {"alloc": 1, "free_completed": -1}
        self.events = [
            (i, int(e["addr"]), sign[e["action"]] * int(e["size"])) for i, e in enumerate(trace) if e["action"] in sign
        ]


@dataclasses.dataclass
class CompiledStep(Step):
    """A measured compiled step: `activations` by `CompiledLiveBytes` (live op outputs, what
    aot_eager runs), and by `AllocatorBytes` the peak of live CPU allocations with (`allocated`)
    and without (`buffers`, what Inductor runs) ops' scratch. On a GPU (`CudaBytes`) `allocated`
    and `buffers` are both the CUDA allocator's peak, workspaces included, and `max_allocated`
    is `torch.cuda.max_memory_allocated` above the start (the final gradients included)."""

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
    alloc: AllocatorBytes | CudaBytes
    with CudaBytes() if cuda else AllocatorBytes() as alloc:
        step(*args)
    grads = [p.grad for p in params if p.grad is not None]
    allocated, buffers = alloc.peak(grads), alloc.peak(grads, scratch=False)
    max_allocated = alloc.max_allocated if isinstance(alloc, CudaBytes) else 0
    clear()
    with CompiledLiveBytes() as live:
        loss = step(*args)
    kept = [None if p.grad is None else p.grad.detach().clone() for p in params]
    activations = live.peak([p.grad for p in params if p.grad is not None])
    return CompiledStep(float(loss), kept, activations, min(times[1:]), allocated, buffers, max_allocated)
