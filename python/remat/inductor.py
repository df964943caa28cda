"""remat's partitioner inside Inductor: `torch.compile(model)` users get remat's plan.

Inductor partitions the joint graph itself (after its joint-graph passes) with
`min_cut_rematerialization_partition`, unless `torch._inductor.config.custom_partitioner_fn` holds
a `CustomPartitionerFn`; `RematPartitionerFn` is one, wrapping a `remat.compiled.Partitioner`:

    part = remat.compiled.Partitioner(0.5, remat.Local())
    with remat.inductor.partitioning(part):
        compiled = torch.compile(model)        # or remat.compile(..., compiler="inductor")

Inductor then compiles the two graphs: it fuses pointwise ops into kernels (their intermediate
buffers disappear) and may reorder nodes (its peak-memory reordering keeps the graph's order
unless its own estimate of another order is lower), so what it holds can differ from
what the graphs hold op by op; `Partitioner.last.predicted` is the prediction for the unfused
graphs. Fusion lowers it, except a fusion of nodes the schedule placed apart: a *horizontal* one
(two kernels with no dependency, sharing inputs, run as one) allocates the later one's output at
the earlier one's place, a *vertical* one (a producer into a consumer) keeps the producer's inputs
until the consumer's place. A realized schedule makes such pairs (a value recomputed twice in the
backward, each copy freed before the next exists; a value's first and last readers);
`RematChoices` (`inductor_choices_class`, Inductor's hook for its fusion heuristics) refuses
fusions of nodes that other nodes run between. Inductor's buffer reuse is off (`OPTIONS`).
Measure with `remat.measure_compiled.AllocatorBytes` (Inductor's buffers are no dispatcher ops).

Caches: `uuid()` (Inductor's and AOTAutograd's caches key compiled code on it) covers the
partitioner's settings and remat's Python sources. AOTAutograd's cache would hand back the compiled
forward and backward without tracing the joint graph, so without calling the partitioner (no
prediction); under remat it is off (`partitioned()`, entered by `partitioning` and around each call
of `remat.compile`'s step), and Inductor's cache of compiled graphs, keyed by the partitioned
graphs, saves the C++ compile: each compile traces, solves (`Partitioner.cache` within a process)
and partitions, and has its `Partitioner.last`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import torch
from torch._inductor.choices import InductorChoices
from torch._inductor.custom_graph_pass import CustomPartitionerFn
from torch._inductor.scheduler import BaseSchedulerNode, Scheduler

from .compiled import Partitioner


class RematChoices(InductorChoices):
    """Inductor's heuristics, but no fusion of nodes that other nodes run between. A fused kernel
    runs its nodes at one place: a horizontal fusion (no dependency, shared inputs) allocates the
    later node's outputs at the earlier one's place, a vertical one (producer into a consumer)
    keeps the producer's inputs until the consumer's place. In a realized schedule such pairs are
    two computations of one value (each copy freed before the next exists) or a value's first
    and last readers, which the schedule placed apart so that other values fit in between."""

    @staticmethod
    def can_fuse(
        scheduler: Scheduler, node1: BaseSchedulerNode, node2: BaseSchedulerNode, shared_data_score: int
    ) -> bool:
        orders = {n.min_order for n in (*node1.get_nodes(), *node2.get_nodes())}
        if max(orders) - min(orders) + 1 != len(orders):
            return False
        return InductorChoices.can_fuse(scheduler, node1, node2, shared_data_score)

    def uuid(self) -> str:
        return f"remat.inductor.RematChoices:{_sources_hash()}"


# Inductor's layout optimization copies every convolution weight into channels-last at the start
# of the forward and keeps the copies for backward (parameter-sized memory remat's graph does not
# hold); remat's partitioning turns it off. Inductor's buffer reuse keeps a dead buffer allocated
# until a later buffer of the same size takes it over (where Inductor's own peak estimate, not
# remat's, allows it: a ViT at 0.3 held 18% above remat's prediction): off, each buffer is freed
# after its last use, as the schedule frees it. `RematChoices` keeps Inductor from fusing apart what the
# schedule placed apart.
OPTIONS: dict[str, Any] = {
    "layout_optimization": False,
    "allow_buffer_reuse": False,
    "inductor_choices_class": RematChoices,
}


def _sources_hash() -> str:
    """A hash of remat's Python sources (what partitions and what decides fusions)."""
    h = hashlib.sha256()
    for source in sorted(Path(__file__).parent.glob("*.py")):
        h.update(source.read_bytes())
    return h.hexdigest()


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
        h = hashlib.sha256(_sources_hash().encode())
        p = self.partitioner
        h.update(repr((p.budget, p.solver, p.time_limit, p.seed, p.on_overrun, type(p.backend).__name__)).encode())
        return h.hexdigest()


def partitioned() -> AbstractContextManager[None]:
    """AOTAutograd's cache off while compiling: a hit hands back the compiled forward and backward
    without tracing the joint graph, so without calling the partitioner (no `Partitioner.last`).
    Inductor's own cache of compiled graphs stays on: after the partitioner, a graph compiled
    before is loaded, not compiled again."""
    patch: AbstractContextManager[None] = torch._functorch.config.patch(enable_autograd_cache=False)
    return patch


@contextmanager
def partitioning(partitioner: Partitioner) -> Iterator[RematPartitionerFn]:
    """Inductor partitions with `partitioner` while the context is open (compiles happen at the
    first call of a compiled module, so call it inside)."""
    fn = RematPartitionerFn(partitioner)
    with torch._inductor.config.patch(custom_partitioner_fn=fn, **OPTIONS), partitioned():
        yield fn
