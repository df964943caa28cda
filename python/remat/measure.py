"""Measuring what eager PyTorch keeps for backward, to check exports and applied schedules against.

`saved_tensors_hooks` sees every tensor autograd saves (and, with
`respect_saved_tensors_hooks=True`, every output a selective checkpoint region caches). Tensors
are deduplicated by storage, and the storages of the parameters, buffers, inputs and anything in
`exclude` are left out: they are `fixed_memory`, not activations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch


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
