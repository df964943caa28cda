"""remat's partitioner inside Inductor: `torch.compile(model)` users get remat's plan.

Inductor partitions the joint graph itself (after its joint-graph passes) with
`min_cut_rematerialization_partition`, unless `torch._inductor.config.custom_partitioner_fn` holds
a `CustomPartitionerFn`; `RematPartitionerFn` is one, wrapping a `remat.compiled.Partitioner`:

    part = remat.compiled.Partitioner(0.5, remat.Local())
    with remat.inductor.partitioning(part):
        compiled = torch.compile(model)        # or remat.compile(..., compiler="inductor")

Inductor then compiles the two graphs: it fuses pointwise ops into kernels (their intermediate
buffers disappear), reuses dead buffers and may reorder nodes, so what it holds can differ from
what the graphs hold op by op; `Partitioner.last.predicted` is the prediction for the unfused
graphs, which fusion can only lower unless a reorder moves an allocation earlier (measure with
`remat.measure_compiled.AllocatorBytes`: Inductor's buffers are no dispatcher ops).

`uuid()` (Inductor's and AOTAutograd's caches key compiled code on it) covers the partitioner's
settings and remat's Python sources: a cached artifact was partitioned by the same code at the
same budget. A cache hit skips the partitioner (and leaves `Partitioner.last` as it was).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch._inductor.custom_graph_pass import CustomPartitionerFn

from .compiled import Partitioner

# Inductor's layout optimization copies every convolution weight into channels-last at the start
# of the forward and keeps the copies for backward (parameter-sized memory remat's graph does not
# hold); remat's partitioning turns it off
OPTIONS: dict[str, Any] = {"layout_optimization": False}


class RematPartitionerFn(CustomPartitionerFn):
    """Inductor's custom partitioner, calling `partitioner` on each joint graph."""

    def __init__(self, partitioner: Partitioner) -> None:
        self.partitioner = partitioner

    def __call__(
        self, gm: torch.fx.GraphModule, joint_inputs: Sequence[object], **kwargs: Any
    ) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
        kwargs.pop("compiler", None)
        return self.partitioner(gm, joint_inputs, **kwargs)

    def uuid(self) -> str:
        h = hashlib.sha256()
        for source in sorted(Path(__file__).parent.glob("*.py")):
            h.update(source.read_bytes())
        p = self.partitioner
        h.update(repr((p.budget, p.solver, p.time_limit, p.seed, p.on_overrun, type(p.backend).__name__)).encode())
        return h.hexdigest()


@contextmanager
def partitioning(partitioner: Partitioner) -> Iterator[RematPartitionerFn]:
    """Inductor partitions with `partitioner` while the context is open (compiles happen at the
    first call of a compiled module, so call it inside)."""
    fn = RematPartitionerFn(partitioner)
    with torch._inductor.config.patch(custom_partitioner_fn=fn, **OPTIONS):
        yield fn
