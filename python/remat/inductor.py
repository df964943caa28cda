"""remat's partitioner inside Inductor: `torch.compile(model)` users get remat's plan.

Inductor partitions the joint graph itself (after its joint-graph passes) with
`min_cut_rematerialization_partition`, unless `torch._inductor.config.custom_partitioner_fn` holds
a `CustomPartitionerFn`; `RematPartitionerFn` is one, wrapping a `remat.compiled.Partitioner`:

    part = remat.compiled.Partitioner(0.5, remat.Local())
    with remat.inductor.partitioning(part):
        compiled = torch.compile(model)        # or remat.compile(..., compiler="inductor")

Inductor then lowers the two graphs into fused kernels, and what its code holds differs from what
the graphs hold op by op: a pointwise value read by a later kernel is inlined into it (its inputs
live until then), a fused kernel allocates its outputs together, and the generated code frees
dead buffers only where the scheduler flushes its kernels (before an extern kernel or a template,
and at the end). `RematChoices` (`inductor_choices_class`, Inductor's hook for its fusion
heuristics) refuses fusions of nodes that other nodes run between (a schedule places apart two
copies of a recomputed value, or a value's first and last readers, so that others fit in
between); buffer reuse, layout optimization and the scheduler's reordering for its own
estimate of the peak are off (`OPTIONS`): its kernels run in the schedule's order. Where what
the code holds is still above the budget, the graph is lowered again *as scheduled* before any
re-plan: a value the schedule computes apart from its readers or into a concatenation, in place of
an input that dies there, is realized as a buffer where the schedule computes it (`realize_held`:
inlined into its reader, or computed into the concatenation's storage, it would keep that input
alive beside it), and the code frees a dead buffer after every kernel (as Inductor's GPU code
does; its CPU code waits for a group of kernels to end, `free_after_each_kernel`). Not by
default: Inductor's own lowering mostly holds less than the schedule, and compiles faster.
`checked_backend` (the backend of `remat.compile(..., compiler="inductor")`) compiles the
backward with the forward and, after code generation, reads what the step's code holds from
Inductor's scheduler (`held_activations`: `Lowered` records each graph's `GraphLowering` through
`_post_fusion_custom_pass`); the step's prediction is the larger of that and the simulator's,
and a plan above the budget, once lowered as scheduled, is solved again below it (`Replan`,
`Partitioner.tighten`) before anything runs. The `partitioning` context gives plain
`torch.compile` users the partition and reads the same figure for each partition compiled inside
it, checking it as the context closes (after the steps run inside: no re-plan). Measure with
`remat.measure_compiled.AllocatorBytes` (Inductor's buffers are no dispatcher ops).

Caches: `uuid()` (Inductor's and AOTAutograd's caches key compiled code on it) covers the
partitioner's settings and remat's Python sources. AOTAutograd's cache would hand back the compiled
forward and backward without tracing the joint graph, so without calling the partitioner (no
prediction); under remat it is off (`partitioned()`, entered by `partitioning` and around each call
of `remat.compile`'s step), and so is Inductor's FX graph cache (a hit skips the scheduler whose
buffers `held_activations` reads); the cache of generated kernels saves the C++ compile: each
compile traces, solves (`Partitioner.cache` within a process), partitions and schedules, and has
its `Partitioner.last`.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import torch
from torch._inductor import ir
from torch._inductor.choices import InductorChoices
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.custom_graph_pass import CustomPartitionerFn
from torch._inductor.graph import GraphLowering
from torch._inductor.scheduler import BaseSchedulerNode, NopKernelSchedulerNode, Scheduler
from torch._inductor.virtualized import V

from .compiled import Partitioned, Partitioner, Replan
from .errors import NotPartitionedWarning, RematError


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
# schedule placed apart. Inductor's scheduler also reorders its nodes after fusion by its own
# estimate of each graph's peak (`reorder_for_peak_memory`), which knows neither the other graph
# nor the budget: off, so that its kernels run in the order of the schedule (a small U-Net at 0.3
# held 49,544 bytes of activations with it, 22,312 without, for a schedule of 17,524).
OPTIONS: dict[str, Any] = {
    "layout_optimization": False,
    "allow_buffer_reuse": False,
    "reorder_for_peak_memory": False,
    "inductor_choices_class": RematChoices,
    "fx_graph_cache": False,
}


def realize_held(gm: torch.fx.GraphModule) -> int:
    """Marks for realization (`inductor_realize_to_strides`: Inductor then writes it into a buffer
    of its own where it is computed) each value of a partitioned graph at which some input dies
    (its last reader) while one of its own readers runs later, or while a concatenation reads it:
    the schedule holds the value, not the input. Inductor would inline a pointwise value into its
    reader and keep its inputs alive until then, into each reader where there are several (on a
    U-Net at 0.3 a recomputed concatenation, read by a batch norm's backward two hundred kernels
    later through an inlined gradient, stayed beside its next copy; on a ViT at 0.25 a recomputed
    residual sum, read at once and again sixty kernels later, kept its three summands alive); and
    it computes a concatenation's inputs into the concatenation's storage, which it allocates at
    the first of them, so that a later input's own inputs live beside it (a residual sum's two
    inputs beside the skip connection's concatenation). A parameter or input of the step
    (`primals`) is held by the caller and never dies. Returns the number of values marked."""
    nodes = list(gm.graph.nodes)
    place = {n: i for i, n in enumerate(nodes)}
    last_read = {a: place[n] for n in nodes for a in n.all_input_nodes}
    marked = 0
    for v in nodes:
        readers = [place[u] for u in v.users if u.op != "output"]
        if v.op != "call_function" or not isinstance(v.meta.get("val"), torch.Tensor) or not readers:
            continue
        dies = any(
            last_read[a] == place[v]
            and isinstance(a.meta.get("val"), torch.Tensor)
            and not (a.op == "placeholder" and a.name.startswith("primals"))
            for a in v.all_input_nodes
        )
        concatenated = any(u.target == torch.ops.aten.cat.default for u in v.users)
        if dies and (max(readers) > place[v] + 1 or concatenated):
            v.meta["inductor_realize_to_strides"] = True
            marked += 1
    return marked


@contextmanager
def cpu_kernel_groups() -> Iterator[None]:
    """On leaving, Inductor's C++ kernel groups as they were (`free_after_each_kernel` changes
    them for the graphs compiled inside: a class attribute, which every compile reads)."""
    limit = CppScheduling.MAX_FUSED_KERNEL_ARGS_NUM
    try:
        yield
    finally:
        CppScheduling.MAX_FUSED_KERNEL_ARGS_NUM = limit


def free_after_each_kernel() -> None:
    """Inductor's CPU code frees a dead buffer after each kernel, as its GPU code does, until
    `cpu_kernel_groups` ends. Its C++ kernels are generated in groups, and the buffers that die
    inside a group are freed only when the group ends (before an extern kernel, or past
    `MAX_FUSED_KERNEL_ARGS_NUM` arguments): with a limit below every kernel's, each group is one
    kernel (and one more C++ compile)."""
    CppScheduling.MAX_FUSED_KERNEL_ARGS_NUM = -1


def _sources_hash() -> str:
    """A hash of remat's Python sources (what partitions and what decides fusions)."""
    h = hashlib.sha256()
    for source in sorted(Path(__file__).parent.glob("*.py")):
        h.update(source.read_bytes())
    return h.hexdigest()


class Lowered:
    """The graphs Inductor lowered since the last partition (`_post_fusion_custom_pass`, called
    with each graph's scheduler nodes after fusion): the forward's, then the backward's."""

    def __init__(self) -> None:
        self.graphs: list[GraphLowering] = []

    def __call__(self, nodes: list[BaseSchedulerNode]) -> list[BaseSchedulerNode]:
        self.graphs.append(V.graph)
        return nodes

    def __deepcopy__(self, memo: dict[int, object]) -> Lowered:
        """Itself: Inductor copies its config (this pass included) for its debug reports, and the
        graphs recorded hold fake tensors, which cannot be copied."""
        return self


def _storage_bytes(g: GraphLowering, buffer: object) -> int:
    """Bytes of a buffer's storage (0 for a multi-output kernel's tuple, whose elements are
    buffers of their own, for buffers without storage, and for a value written into the step's
    input it updates in place, such as a batch norm's running statistics: the input's storage,
    fixed memory)."""
    layout = getattr(buffer, "layout", None)
    if not isinstance(layout, ir.Layout) or isinstance(
        layout, (ir.MultiOutputLayout, ir.NoneLayout, ir.MutationLayoutSHOULDREMOVE)
    ):
        return 0
    return int(g.sizevars.optimization_hint(layout.storage_size(), fallback=0)) * layout.dtype.itemsize


def _written_into(buffer: object) -> str | None:
    """The buffer whose storage `buffer` is written into (an input of a concatenation Inductor
    lowers in place: `NonOwningLayout`), or None where it has a storage of its own."""
    layout = getattr(buffer, "layout", None)
    if not isinstance(layout, ir.NonOwningLayout):
        return None
    base = _base_buffer(layout.view)
    return base.get_name() if base is not None else None


def _base_buffer(value: object) -> ir.Buffer | None:
    """The buffer whose storage `value` (a buffer, a view or a storage box) is, if any."""
    while not isinstance(value, ir.Buffer) and isinstance(getattr(value, "data", None), ir.IRNode):
        value = getattr(value, "data")  # noqa: B009 (a view's or a storage box's)
    return value if isinstance(value, ir.Buffer) else None


def _reused_storage(name: str, reuses: dict[str, str], storage: dict[str, str]) -> str | None:
    """The storage a buffer takes over from a dying one (`reuses`), through any buffer of the chain
    that Inductor removed (`buf561 = reinterpret_tensor(buf560); del buf560`, where `buf560 =
    buf551`): None where it allocates its own."""
    for _ in range(len(reuses)):
        name = reuses.get(name, "")
        if not name or name in storage:
            break
    return storage.get(name)


def held_peak(
    g: GraphLowering, inputs: dict[str, tuple[str, int]], count_outputs: bool, each_kernel: bool = True
) -> int:
    """The peak of the bytes `g`'s compiled code holds, over its scheduler nodes in the order they
    run: the graph inputs of `inputs` (name -> its storage and the storage's bytes) from the
    start to their last use, each buffer from its kernel on (a buffer the kernel keeps local, one
    written in place of a dying input, through any chain of removed buffers, or into an input it
    updates, takes no storage of its own);
    graph outputs to the end, counted only with `count_outputs`. Inductor frees a buffer after its
    last use (`last_usage`) where it flushes the code generated so far: after each kernel on a GPU
    (`free_buffers_in_scheduler` after each Triton kernel) and on the CPU with `each_kernel`
    (lowered as scheduled: `free_after_each_kernel`; without it, a C++ kernel group that Inductor
    flushes early, past its argument limit, is left out: freeing later is the upper bound), before
    an extern kernel or a template, and at the end; an
    extern kernel's own last uses are freed right after it (and after the elements of its result,
    its outputs), a kernel that runs nothing (`NopKernelSchedulerNode`) frees nothing. The inputs
    of a concatenation Inductor lowers in place write into its storage, which the first of them
    allocates."""
    removed = set(g.removed_buffers) | set(g.inplaced_to_remove)
    reuses = dict(g.wrapper_code.reuses)  # buffer -> the dying buffer whose storage it takes
    outputs = set(g.get_output_names())
    storage: dict[str, str] = {}  # buffer or input name -> its storage's name
    size: dict[str, int] = {}
    names: dict[str, set[str]] = {}  # storage -> the live names on it
    current = 0
    for name, (where, nbytes) in inputs.items():
        storage[name] = where
        if where not in names:
            names[where], size[where] = set(), nbytes
            current += nbytes
        names[where].add(name)
    peak = current
    pending: set[str] = set()  # last uses since the last flush

    def flush() -> None:
        nonlocal current
        for name in pending:
            if name in outputs or name not in storage:
                continue
            where = storage.pop(name)
            names[where].discard(name)
            if not names[where]:
                current -= size[where]
        pending.clear()

    assert g.scheduler is not None
    after_extern = False
    for node in g.scheduler.nodes:
        # an extern kernel's outputs live with its inputs; the elements of a multi-output one's
        # result are its outputs (`MultiOutput`), allocated by it; then its last uses are freed
        if not isinstance(node.node, ir.MultiOutput) and (after_extern or node.is_extern() or node.is_template()):
            flush()
        after_extern = node.is_extern()
        for out in node.get_outputs():
            name = out.get_name()
            if name in removed:
                continue
            # a concatenation's inputs write into its storage, which the first of them allocates
            where = _written_into(out.node) or name
            reused = _reused_storage(name, reuses, storage) or (where if where in names else None)
            if reused is not None:
                storage[name] = reused
                names[reused].add(name)
                continue
            buffer = g.get_buffer(where) if where != name else out.node
            own = _storage_bytes(g, buffer) if count_outputs or where not in outputs else 0
            storage[name], names[where], size[where] = where, {name}, own
            current += own
        peak = max(peak, current)
        pending |= set(node.last_usage)
        device = node.get_device()
        on_gpu = device is not None and device.type != "cpu"  # Triton's code frees after each kernel
        if (each_kernel or on_gpu) and not (node.is_extern() or isinstance(node, NopKernelSchedulerNode)):
            flush()
    return peak


def _saved_storages(forward: GraphLowering) -> dict[str, tuple[str, int]]:
    """The forward's outputs by name: the buffer whose storage each one is (a view keeps its
    whole base alive) and that storage's bytes; 0 for the forward's inputs (fixed memory)."""
    module: Any = forward.module
    outputs: Sequence[Any] = module.graph.output_node().args[0]
    names = [a.name if isinstance(a, torch.fx.Node) else "" for a in outputs]
    saved = {}
    for name, value in zip(names, forward.graph_outputs, strict=False):
        base = _base_buffer(value)
        if name and base is not None:
            own = 0 if isinstance(base, ir.InputBuffer) else _storage_bytes(forward, base)
            saved[name] = (f"forward:{base.get_name()}", own)  # not a name of the backward's buffers
    return saved


def held_activations(forward: GraphLowering, backward: GraphLowering, each_kernel: bool = True) -> int:
    """What Inductor's code for one step holds beyond the fixed memory: the forward's buffers
    (its outputs, the saved tensors and the loss, to its end), then the backward's inputs (the
    saved tensors, each holding its base's storage, and the tangents) until their last use and
    its buffers, the gradients it returns left out (fixed memory); `each_kernel` as `held_peak`."""
    saved = _saved_storages(forward)
    inputs = {
        name: saved.get(name, (name, _storage_bytes(backward, buffer)))
        for name, buffer in backward.graph_inputs.items()
        if not name.startswith("primals")
    }
    return max(held_peak(forward, {}, True, each_kernel), held_peak(backward, inputs, False, each_kernel))


class RematPartitionerFn(CustomPartitionerFn):
    """Inductor's custom partitioner, calling `partitioner` on each joint graph. With `as_scheduled`
    every graph is lowered as scheduled (`realize_held`, `free_after_each_kernel`); otherwise only
    the graphs `lower_as_scheduled` marked (inside `cpu_kernel_groups`, either way)."""

    def __init__(self, partitioner: Partitioner, as_scheduled: bool) -> None:
        self.partitioner = partitioner
        self.lowered = Lowered()
        self.unchecked: list[Partitioned] = []  # `partitioning`: compiled, not yet checked
        self.scheduled: set[str] | None = None if as_scheduled else set()  # graph keys (`graph_key`)

    def __call__(
        self, gm: torch.fx.GraphModule, joint_inputs: Sequence[object], **kwargs: Any
    ) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
        kwargs.pop("compiler", None)
        self.defer_check()
        self.lowered.graphs.clear()
        forward, backward = self.partitioner(gm, joint_inputs, **kwargs)
        last = self.partitioner.last
        assert last is not None  # every partition sets it
        last.as_scheduled = self.scheduled is None or last.key in self.scheduled
        if last.as_scheduled:
            realize_held(forward)
            realize_held(backward)
            free_after_each_kernel()
        return forward, backward

    def lower_as_scheduled(self, p: Partitioned) -> bool:
        """Lowers `p`'s graph as scheduled from its next compile on; False where it already is."""
        if self.scheduled is None or p.key in self.scheduled:
            return False
        self.scheduled.add(p.key)
        return True

    def config(self) -> dict[str, Any]:
        """Inductor's config under remat: this partitioner, the record of lowered graphs and
        `OPTIONS`."""
        return {"custom_partitioner_fn": self, "_post_fusion_custom_pass": self.lowered, **OPTIONS}

    def read_held(self) -> Partitioned | None:
        """The last partition with its `inductor` (what its compiled code holds) read, where its
        forward and backward were lowered and nothing read it yet; None otherwise."""
        last, graphs = self.partitioner.last, self.lowered.graphs
        if last is None or last.inductor is not None or len(graphs) < 2:
            return None
        last.inductor = held_activations(graphs[0], graphs[-1], last.as_scheduled)
        return last

    def defer_check(self) -> None:
        """`partitioning`: the last partition, read (`read_held`), awaits its check."""
        if (p := self.read_held()) is not None:
            self.unchecked.append(p)

    def check_held(self) -> None:
        """`Partitioner.check` on each partition read since the last call (`defer_check`)."""
        self.defer_check()
        unchecked, self.unchecked = self.unchecked, []
        for p in unchecked:
            self.partitioner.check(p)

    def uuid(self) -> str:
        h = hashlib.sha256(_sources_hash().encode())
        p = self.partitioner
        h.update(repr((p.budget, p.solver, p.time_limit, p.seed, p.on_overrun, type(p.backend).__name__)).encode())
        return h.hexdigest()


def checked_backend(partitioner: Partitioner) -> Callable[[torch.fx.GraphModule, list[Any]], Any]:
    """A `torch.compile` backend: Inductor, partitioning with `partitioner`, that after compiling
    each backward sets `partitioner.last.inductor` to what the step's compiled code holds
    (`held_activations`) and, where that is above the budget, raises `Replan`: the graph is
    compiled again lowered as scheduled (`lower_as_scheduled`), then, where that still holds too
    much, solved again below the budget; with no re-plan left, `OverBudget` / its warning."""
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    fn = RematPartitionerFn(partitioner, as_scheduled=False)

    def inner(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Any:
        compiled = compile_fx_inner(gm, example_inputs, **kwargs)
        if kwargs.get("is_backward") and (last := fn.read_held()) is not None:
            above = f"Inductor's code holds {last.predicted_peak} bytes, above the budget of {last.budget}"
            if not last.fits and fn.lower_as_scheduled(last):
                raise Replan(f"{above}: lowered again as scheduled")
            if not last.fits and partitioner.tighten(last):
                raise Replan(above)
            partitioner.check(last)
        return compiled

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        with cpu_kernel_groups():
            return compile_fx(gm, example_inputs, inner_compile=inner, config_patches=fn.config())

    return backend


def partitioned() -> AbstractContextManager[None]:
    """AOTAutograd's cache off while compiling: a hit hands back the compiled forward and backward
    without tracing the joint graph, so without calling the partitioner (no `Partitioner.last`);
    the backward compiled with the forward, so that what both hold is known before the step runs.
    Inductor's cache of generated kernels stays on (a graph lowered before is not compiled again)."""
    patch: AbstractContextManager[None] = torch._functorch.config.patch(
        enable_autograd_cache=False, force_non_lazy_backward_lowering=True
    )
    return patch


@contextmanager
def partitioning(partitioner: Partitioner) -> Iterator[RematPartitionerFn]:
    """Inductor partitions with `partitioner` while the context is open (compiles happen at the
    first call of a compiled module, so call it inside). On leaving it, each partition compiled
    inside has what its compiled code holds (`Partitioned.inductor`, so `fits` and
    `predicted_peak` count it) and is checked: `OverBudget` (or its warning) where that is above
    the budget. The steps run inside have run by then: `torch.compile` compiles a module's graphs
    as it first runs them, so no re-plan can come before (`remat.compile(..., compiler="inductor")`
    re-plans before its step runs), and every graph is lowered as scheduled at once. remat's errors
    raised while compiling (`InfeasibleBudget`, `OverBudget`) reach the caller as they are, not
    wrapped in Dynamo's `BackendCompilerFailed`. A context in which nothing was partitioned warns
    (`NotPartitionedWarning`): a function compiled before it runs its compiled code, unbudgeted."""
    fn = RematPartitionerFn(partitioner, as_scheduled=True)
    before = partitioner.partitions
    with torch._inductor.config.patch(**fn.config()), partitioned(), cpu_kernel_groups():
        try:
            yield fn
        except torch._dynamo.exc.BackendCompilerFailed as e:
            if isinstance(e.inner_exception, RematError):
                raise e.inner_exception from None
            raise
    if partitioner.partitions == before:
        warnings.warn(
            "remat.inductor.partitioning: nothing was compiled inside the context, so nothing was "
            "partitioned under its budget (a function compiled before runs its compiled code: call "
            "it for the first time inside, or torch._dynamo.reset() first)",
            NotPartitionedWarning,
            stacklevel=3,
        )
    fn.check_held()
