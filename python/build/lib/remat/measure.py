"""Measuring what eager PyTorch keeps for backward, to check exports and applied schedules against.

`saved_tensors_hooks` sees every tensor autograd saves (and, with
`respect_saved_tensors_hooks=True`, every output a selective checkpoint region caches). Tensors
are deduplicated by storage, and the storages of the parameters, buffers, inputs and anything in
`exclude` are left out: they are `fixed_memory`, not activations.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from weakref import finalize as weakref_finalize

import torch
import torch.utils._python_dispatch
from torch.utils._pytree import tree_flatten


class SavedBytes:
    """Storages saved for backward while the context is open, by data pointer."""

    def __init__(self, exclude: Iterable[torch.Tensor] = ()) -> None:
        self.exclude = {t.untyped_storage().data_ptr() for t in exclude}
        self.storages: dict[int, int] = {}

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr not in self.exclude and t.device.type != "meta":
            self.storages[ptr] = max(self.storages.get(ptr, 0), int(st.nbytes()))
        return t

    @property
    def total(self) -> int:
        return sum(self.storages.values())


@contextmanager
def saved_bytes(exclude: Iterable[torch.Tensor] = ()) -> Iterator[SavedBytes]:
    """Count the bytes saved for backward inside the block (each storage once)."""
    rec = SavedBytes(exclude)
    with torch.autograd.graph.saved_tensors_hooks(rec.pack, lambda t: t):
        yield rec


def eager_saved_bytes(
    model: torch.nn.Module,
    example_inputs: tuple[torch.Tensor, ...],
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
    exclude: Iterable[torch.Tensor] = (),
) -> int:
    """Bytes eager PyTorch saves for backward in one forward and loss of `model` (real compute)."""
    fixed = [*model.parameters(), *model.buffers(), *example_inputs, *exclude]
    with saved_bytes(fixed) as rec:
        out = model(*example_inputs)
        loss = out if loss_fn is None else loss_fn(out)
    del loss, out
    return rec.total


class LiveBytes(torch.utils._python_dispatch.TorchDispatchMode):
    """Every storage the ops inside the mode create, with the op index at which it was created and
    freed. `peak(exclude)` is the largest sum of live storages at any op, leaving out the storages in
    `exclude` (e.g. the parameters' gradients, which remat counts in `fixed_memory`).

    It sees op outputs (what remat's graph models), not kernels' internal scratch buffers.
    """

    def __init__(self) -> None:
        super().__init__()
        self.clock = 0
        self.storages: dict[int, list[int]] = {}  # id -> [ptr, bytes, born, died]
        self._next = 0
        self._ptrs: set[int] = set()

    def _track(self, t: torch.Tensor) -> None:
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr in self._ptrs or st.nbytes() == 0 or t.device.type == "meta":
            return
        self._ptrs.add(ptr)
        sid = self._next
        self._next += 1
        self.storages[sid] = [ptr, int(st.nbytes()), self.clock, -1]

        def died(sid: int = sid, ptr: int = ptr) -> None:
            self.storages[sid][3] = self.clock
            self._ptrs.discard(ptr)

        weakref_finalize(st, died)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.clock += 1
        # views and in-place results share an input's storage: not a new allocation
        inputs = {
            t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)
        }
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                self._track(t)
        return out

    def peak(self, exclude: Iterable[torch.Tensor] = ()) -> int:
        """The largest sum of live tracked storages, leaving out those of `exclude`."""
        skip = {t.untyped_storage().data_ptr() for t in exclude}
        delta: dict[int, int] = {}
        for ptr, size, born, died in self.storages.values():
            if ptr in skip and died < 0:
                continue
            delta[born] = delta.get(born, 0) + size
            if died >= 0:
                delta[died + 1] = delta.get(died + 1, 0) - size
        live = best = 0
        for t in sorted(delta):
            live += delta[t]
            best = max(best, live)
        return best


@dataclasses.dataclass
class Step:
    """One measured training step: loss, gradients, peak activation bytes, wall time."""

    loss: float
    grads: list[torch.Tensor | None]
    activations: int  # peak bytes of live op outputs, gradients excluded (remat: peak - fixed_memory)
    seconds: float


def measure_step(
    model: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
    *,
    repeats: int = 1,
) -> Step:
    """Run forward, loss and backward `repeats` (+1 warm-up) times, gradients set to None before each; the
    last run's loss and gradients, its peak activation bytes (`LiveBytes`) and the shortest time of
    the runs made without the tracker (the least disturbed by other work on the machine)."""
    times = []
    for _ in range(repeats + 1):  # the first run warms up (allocator, kernels) and is not timed
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        out = model(*inputs)
        (out if loss_fn is None else loss_fn(out)).backward()
        times.append(time.perf_counter() - t0)
    times = times[1:]
    model.zero_grad(set_to_none=True)
    with LiveBytes() as live:
        out = model(*inputs)
        loss = out if loss_fn is None else loss_fn(out)
        loss.backward()
    grads = [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]
    peak = live.peak([p.grad for p in model.parameters() if p.grad is not None])
    return Step(float(loss.item()), grads, peak, min(times))
