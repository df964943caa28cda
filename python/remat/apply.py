"""Applying a remat schedule in eager PyTorch: selective activation checkpointing (SAC).

SAC decides, per op *call* inside a checkpointed region, whether its output is kept for backward
(`MUST_SAVE`) or recomputed (`PREFER_RECOMPUTE`); the call is named by (op overload, occurrence in
the region), which is how `remat.export(..., regions=...)` labels each forward node (`meta.region`,
`meta.occurrence`). A remat schedule says more than SAC can run (where each recomputation goes, how
often), so it is **projected** onto save sets, and the plan is chosen among what SAC can run:

1. A forward node is *kept* when the schedule computes it exactly once and it is still resident
   when the first backward node is computed (kept across the forward/backward boundary).
2. An op call of a region is saved when one of its nodes is kept, unless it is an in-place op or
   one of its outputs is later overwritten in place (SAC refuses a cached tensor whose version
   changed, "Tensor cached during selective activation checkpoint has been mutated"), or the
   region's replay never reaches it. Every other call is `PREFER_RECOMPUTE`.
3. `_fit`: while what SAC runs (below) peaks over the budget, saved calls resident at the peak are
   recomputed, those freeing the most bytes per FLOP first.
4. `_fill`: where the budget leaves room, regions are left unchecked and recomputed calls saved.
5. Candidates: the projection (1-4) and per-block checkpointing (every region checkpointed, every
   call recomputed: what `torch.utils.checkpoint` around each region runs, the most any SAC plan
   over these regions recomputes), filled when the projection does not fit. The cheapest that
   fits wins; when none fits, `plan` raises `OverBudget` (or warns, `on_overrun="warn"`).

A region whose replay would not see what its forward saw, or would update state `_KeptBuffers` does
not keep (`meta.region_writes_input`: it writes in place into a value from outside it, as an
`nn.ReLU(inplace=True)` given as a region of its own, or into a parameter or buffer not its own; it
reads a value from outside it that the forward then writes in place, as a block that reads a buffer
and then updates it; or it reassigns a buffer) is never checkpointed, in any candidate.

What eager PyTorch runs under a plan is itself a schedule, simulated by `remat._sac` (its module
doc): its peak is the plan's predicted peak (`Plan.predicted`).

`applied` runs the plan: each checkpointed region's forward is `_Checkpointed`, a non-reentrant
`checkpoint` with the plan's SAC policy. The forward gets the caller's arguments; each replay a
copy of its lists and dicts as they were at the call (DenseNet appends to the list its layers
read), under `_KeptBuffers`, which drops writes into the region's buffers and parameters (BatchNorm's
running statistics and counter), so one step updates them once, as the plain step does, without holding
a copy of them.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import inspect
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from . import budget as _budget
from ._sac import Key, Sac, Saves
from .client import Backend
from .errors import ApplyError, BudgetError, OnOverrun, overrun


@dataclasses.dataclass
class Plan:
    """A schedule projected onto SAC policies, with the simulator's figures for what SAC will run."""

    policies: list[dict[Key, CheckpointPolicy] | None]  # per region; None: not checkpointed
    calls: list[dict[str, int]]  # per region, how many calls of each op SAC will see
    kept: list[str]  # forward node ids kept across forward/backward by the projection
    events: list[dict[str, str]]  # the schedule eager SAC runs
    predicted: dict[str, Any]  # the simulator's report on `events`
    schedule_stats: dict[str, Any] | None  # the solver's schedule's own figures
    fixed_memory: int
    budget: int
    per_block_peak: int = 0  # the simulator's peak for per-block checkpointing over the same regions
    overhead: float = 1.0  # the cost (FLOPs) of what SAC runs over the graph's, each node computed once
    misses: list[str] = dataclasses.field(default_factory=list)  # op calls the policy did not know

    @property
    def predicted_peak(self) -> int:
        return int(self.predicted["stats"]["peak_memory"])

    @property
    def fits(self) -> bool:
        return self.predicted_peak <= self.budget

    @property
    def predicted_activations(self) -> int:
        return self.predicted_peak - self.fixed_memory


def kept_nodes(graph: dict[str, Any], events: Sequence[dict[str, str]]) -> set[str]:
    """Step 1 of the projection: forward nodes computed once and resident at the first backward compute."""
    is_bwd = {n["id"]: n.get("kind") == "backward" for n in graph["nodes"]}
    computes: dict[str, int] = defaultdict(int)
    resident: set[str] = set()
    at_boundary: set[str] | None = None
    for e in events:
        v = e["node"]
        if e["op"] == "compute":
            if at_boundary is None and is_bwd.get(v, False):
                at_boundary = set(resident)
            computes[v] += 1
            resident.add(v)
        elif e["op"] == "free":
            resident.discard(v)
    return {v for v in (at_boundary or set()) if not is_bwd[v] and computes[v] == 1}


def _projected(sac: Sac, kept: set[str]) -> Saves:
    """Step 2 of the projection: an op call of a region is saved when one of its nodes is kept
    (and SAC can cache it, and the region's replay reaches it)."""
    kept_ix = {sac.index[v] for v in kept if v in sac.index}
    saves = _per_block(sac)
    for (r, key), vs in sac.key_nodes.items():
        table = saves[r]
        if table is not None and (r, key) in sac.saveable and any(v in kept_ix for v in vs):
            table.add(key)
    return saves


def _per_block(sac: Sac) -> Saves:
    """Every region checkpointed with nothing cached, but those that write into their inputs."""
    return [None if r in sac.unchecked else set() for r in range(sac.regions)]


def _copy(saves: Saves) -> Saves:
    return [None if t is None else set(t) for t in saves]


def _fit(sac: Sac, saves: Saves, budget: int) -> Saves:
    """Step 3: while what SAC runs peaks above `budget`, recompute saved op calls resident at the
    peak, those freeing the most bytes per FLOP first, as many as the overrun calls for."""
    saves = _copy(saves)
    current = sac.run(saves)
    while current.peak > budget:
        at_peak = sac.resident_at(current, current.peak_event)
        freed: dict[tuple[int, Key], int] = defaultdict(int)
        for v in at_peak:
            if v >= len(sac.ids):
                continue  # a replay's copy: recomputed already
            r = sac.region[v]
            if r is not None and (table := saves[r]) is not None and sac.key[v] in table:
                freed[(r, sac.key[v])] += sac.mem[v]
        # ties in the order of their (region, op, occurrence): the same plan in every process
        order = sorted(freed, key=lambda rk: (-freed[rk] / (1.0 + sum(sac.cost[v] for v in sac.key_nodes[rk])), rk))
        improved = False
        for chunk in _chunks(order, freed, current.peak - budget):
            trial = _copy(saves)
            for r, key in chunk:
                table = trial[r]
                assert table is not None
                table.discard(key)
            run = sac.run(trial)
            if run.peak < current.peak:
                saves, current, improved = trial, run, True
                break
        if not improved:
            break
    return saves


def _chunks(
    order: list[tuple[int, Key]], freed: dict[tuple[int, Key], int], overrun: int
) -> Iterator[list[tuple[int, Key]]]:
    """The prefixes of `order` to try in turn: the shortest that frees `overrun` bytes, then all."""
    total = 0
    for i, rk in enumerate(order):
        total += freed[rk]
        if total >= overrun:
            yield order[: i + 1]
            break
    yield order


def _fill(sac: Sac, saves: Saves, budget: int) -> Saves:
    """Step 4: where the budget leaves room, recompute less: regions, last first, are left
    unchecked (plain autograd); then recomputed op calls (FLOPs per byte, highest first) are saved.
    Changes are tried in runs of growing length (halved when a run does not fit); one is kept when
    what SAC then runs peaks within `budget` and recomputes less. A change whose bytes alone exceed
    the room left is not tried."""
    memory = {rk: sum(sac.mem[v] for v in vs) for rk, vs in sac.key_nodes.items()}
    flops = {rk: sum(sac.cost[v] for v in vs) for rk, vs in sac.key_nodes.items()}

    def uncheck(trial: Saves, r: int) -> None:
        trial[r] = None

    def save(trial: Saves, rk: tuple[int, Key]) -> None:
        table = trial[rk[0]]
        assert table is not None
        table.add(rk[1])

    # backward replays the last region first, while every earlier one is held
    regions = [r for r in reversed(range(sac.regions)) if saves[r] is not None]
    held_by = [sum(sac.mem[v] for v in sac.prefix[r] if sac.n_pending[v]) for r in range(sac.regions)]
    saves = _grow(sac, saves, regions, lambda r: held_by[r], uncheck, budget)
    candidates = sorted(
        (rk for rk in sac.saveable if (t := saves[rk[0]]) is not None and rk[1] not in t and flops[rk] > 0),
        key=lambda rk: (-flops[rk] / (1 + memory[rk]), rk),
    )
    return _grow(sac, saves, candidates, lambda rk: memory[rk], save, budget)


def _grow(
    sac: Sac,
    saves: Saves,
    items: Sequence[Any],
    size_of: Callable[[Any], int],
    change: Callable[[Saves, Any], None],
    budget: int,
) -> Saves:
    """Apply `change` for `items` in order, in runs of growing length, keeping each run after which
    SAC's run fits `budget` and recomputes less (see `_fill`)."""
    current = sac.run(saves)
    i, size = 0, 8
    while i < len(items):
        room = budget - current.peak
        chunk = [j for j in range(i, min(i + size, len(items))) if size_of(items[j]) <= room]
        if not chunk:
            i += size
            continue
        trial = _copy(saves)
        for j in chunk:
            change(trial, items[j])
        run = sac.run(trial)
        if run.peak <= budget and run.flops < current.flops:
            saves, current = trial, run
            i, size = chunk[-1] + 1, size * 2
        elif len(chunk) > 1:
            size = max(1, len(chunk) // 2)
            i = chunk[0]
        else:
            i = chunk[0] + 1  # this one change does not fit
    return saves


def _table(saves: Saves, sac: Sac) -> list[dict[Key, CheckpointPolicy] | None]:
    out: list[dict[Key, CheckpointPolicy] | None] = []
    for r, table in enumerate(saves):
        if table is None:
            out.append(None)
            continue
        keys = [k for (rr, k) in sac.key_nodes if rr == r]
        out.append({k: CheckpointPolicy.MUST_SAVE if k in table else CheckpointPolicy.PREFER_RECOMPUTE for k in keys})
    return out


def plan(
    graph: dict[str, Any],
    result: dict[str, Any],
    backend: Backend,
    *,
    budget: int | float | None = None,
    on_overrun: OnOverrun = "raise",
    hold_output: bool = True,
) -> Plan:
    """Project `result`'s schedule onto SAC policies within `budget` (the result's budget by
    default; bytes, or a float in [0, 1]: a fraction of activation memory, as `remat.budget` reads
    it) and simulate what SAC will run. Candidates: the projection of the schedule fitted
    to the budget, and per-block checkpointing (every region checkpointed, only region inputs
    kept), each filled where the budget leaves room; the one that recomputes least among those
    that fit wins. When none fits, `remat.OverBudget` is raised (`on_overrun="warn"`: an
    `OverBudgetWarning`, and the plan with the lowest peak is returned). `hold_output`: the caller
    holds the model's output through backward (`out = model(x); loss_fn(out).backward()`); False
    when it goes straight into the loss (`loss_fn(model(x)).backward()`)."""
    if on_overrun not in ("raise", "warn"):
        raise ApplyError(f"on_overrun must be 'raise' or 'warn', got {on_overrun!r}")
    if not isinstance(result, dict):
        raise ApplyError(f"the result is a {type(result).__name__}, not a solve result (a dict)")
    sac = Sac(graph, hold_output)
    if sac.regions == 0:
        raise ApplyError("the graph has no checkpoint regions: export it with regions=[...] (the modules to wrap)")
    schedule = result.get("schedule", {}).get("events") if result.get("schedule") else None
    if not schedule:
        raise ApplyError(f"the result holds no schedule (status {result.get('status')!r})")
    unknown = next((e.get("node") for e in schedule if e.get("node") not in sac.index), None)
    if unknown is not None:
        raise ApplyError(
            f"the schedule names node {unknown!r}, which the graph does not have: it was solved for another graph"
        )
    _check_peak(result, schedule, graph, backend)
    kept = kept_nodes(graph, schedule)
    limit = int(result["budget"]) if budget is None else _plan_budget(budget, graph, backend)
    per_block = _per_block(sac)
    plain: Saves = [None] * sac.regions
    plain_peak = sac.run(plain).peak
    if plain_peak <= limit:
        filled = [plain, per_block]  # nothing to recompute
    else:
        # the projection of the schedule, else per-block checkpointing (which recomputes the most
        # any SAC plan over these regions does), filled where the budget leaves room
        projected = _fit(sac, _projected(sac, kept), limit)
        if sac.run(projected).peak <= limit:
            filled = [_fill(sac, projected, limit), per_block]
        else:
            fallback = sac.run(per_block).peak <= limit
            filled = [projected, _fill(sac, per_block, limit) if fallback else per_block]
    runs = [sac.run(c) for c in filled]
    fitting = [i for i, run in enumerate(runs) if run.peak <= limit]
    best = (
        min(fitting, key=lambda i: (runs[i].flops, runs[i].peak))
        if fitting
        else min(range(len(runs)), key=lambda i: runs[i].peak)
    )
    events = sac.events(runs[best])
    predicted = backend.simulate(
        sac.simulation_graph(graph, filled[best], runs[best]), {"events": events}, budget=limit
    )
    calls = graph.get("meta", {}).get("region_calls") or [{} for _ in range(sac.regions)]
    p = Plan(
        policies=_table(filled[best], sac),
        calls=[dict(c) for c in calls],
        kept=sorted(kept),
        events=events,
        predicted=predicted,
        schedule_stats=result.get("stats"),
        fixed_memory=sac.fixed,
        budget=limit,
        per_block_peak=runs[1].peak if filled[1] == per_block else sac.run(per_block).peak,
        overhead=runs[best].flops / max(sum(sac.cost), 1e-300),
    )
    if not p.fits:
        _overrun(p, on_overrun, frees=p.per_block_peak < plain_peak)
    return p


def _check_peak(
    result: dict[str, Any], schedule: list[dict[str, str]], graph: dict[str, Any], backend: Backend
) -> None:
    """An `ApplyError` where the result's schedule peaks on this graph other than the result says:
    it was solved for another graph with the same node ids (the model exported at another batch size,
    input shape or dtype), whose budget and figures are not this graph's. (Memory, not cost: an
    export with `cost="time"` times each op anew.)"""
    claimed = (result.get("stats") or {}).get("peak_memory")
    if not isinstance(claimed, int):
        return
    replayed = int(backend.simulate(graph, {"events": schedule})["stats"]["peak_memory"])
    if replayed != claimed:
        raise ApplyError(
            f"the result's schedule peaks at {claimed} bytes by its own figures and at {replayed} on this graph: "
            "it was solved for another graph with the same nodes (the model exported at another batch size, "
            "input shape or dtype?); solve this graph"
        )


def _plan_budget(budget: Any, graph: dict[str, Any], backend: Backend) -> int:
    """`plan`'s budget in bytes: bytes, or a fraction of activation memory (`remat.budget`)."""
    if isinstance(budget, str):
        raise BudgetError(
            f"budget {budget!r}: plan takes bytes (int) or a fraction of activation memory (float); "
            "a size or a percentage is resolved by the solve: solve with it and leave plan's budget unset"
        )
    return int(_budget.resolve(budget, lambda: backend.inspect(graph)))


def _overrun(p: Plan, on_overrun: OnOverrun, *, frees: bool) -> None:
    """`frees`: checkpointing every region lowers the peak at all. Where it does not (regions of one
    layer, or layers that write into their input), smaller regions cannot help: larger ones can."""
    mib = 1 / 2**20
    regions = (
        "or export with smaller or more regions"
        if frees
        else "or export with regions of several layers each: checkpointing these regions frees nothing (a region "
        "frees only values it makes and uses inside itself, and one writing into its input is never checkpointed)"
    )
    message = (
        f"remat: the applied plan peaks at {p.predicted_peak} bytes ({p.predicted_peak * mib:.1f} MiB, "
        f"{p.predicted_activations * mib:.1f} MiB of activations), over the budget of {p.budget} bytes "
        f"({p.budget * mib:.1f} MiB) by {(p.predicted_peak - p.budget) * mib:.1f} MiB; no SAC plan over these regions "
        f"fits (per-block checkpointing peaks at {p.per_block_peak} bytes). Give a budget of at least "
        f"{min(p.predicted_peak, p.per_block_peak)} bytes, {regions}"
    )
    overrun(message, budget=p.budget, predicted=p.predicted_peak, on_overrun=on_overrun)


# ops that update running statistics in training without saying so in their schema (their
# `running_mean` / `running_var` are `Tensor?`, not `Tensor(a!)?`)
_RUNNING_STATS = {
    torch.ops.aten.native_batch_norm,
    torch.ops.aten.cudnn_batch_norm,
    torch.ops.aten.miopen_batch_norm,
}


class _KeptBuffers(TorchDispatchMode):
    """A region's buffers (BatchNorm's running statistics and counter, ...) and parameters (a
    running statistic kept in a frozen `nn.Parameter`) kept as the forward left them while its
    replay runs: the replay runs the region's forward again, and the state it
    updates must end as one forward left it. Below SAC's recomputation mode, it drops what an op
    would write into a buffer: an in-place write (`num_batches_tracked.add_(1)`) returns the buffer
    unchanged, BatchNorm in training gets no running statistics (same output), any other op
    writing into a buffer writes into a copy that lives as long as the op. No copy of the
    buffers is held otherwise."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module
        self.storages: set[int] = set()

    def __enter__(self) -> _KeptBuffers:
        state = (*self.module.buffers(), *self.module.parameters())
        self.storages = {t.untyped_storage().data_ptr() for t in state} - {0}
        return super().__enter__()  # type: ignore[no-any-return]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        args, kwargs = list(args), dict(kwargs or {})
        schema = func._schema
        values = [args[i] if i < len(args) else kwargs.get(a.name) for i, a in enumerate(schema.arguments)]
        written = self.written(func, values)
        if not written:
            return func(*args, **kwargs)
        by_set = {frozenset(a.alias_info.before_set): i for i, a in written.items() if a.alias_info is not None}
        sets = [frozenset(r.alias_info.before_set) if r.alias_info is not None else None for r in schema.returns]
        if sets and all(s in by_set for s in sets):
            # an in-place or out= write into the buffer: what it returns is the buffer as it is
            out = [values[by_set[s]] for s in sets if s is not None]
            return out[0] if len(out) == 1 else tuple(out)
        for i, a in written.items():
            replacement = None if isinstance(a.type, torch.OptionalType) else values[i].clone()
            if i < len(args):
                args[i] = replacement
            else:
                kwargs[a.name] = replacement
        return func(*args, **kwargs)

    def written(self, func: Any, values: list[Any]) -> dict[int, Any]:
        """The arguments (position: schema argument) of this call that are buffers it writes."""
        training = func.overloadpacket in _RUNNING_STATS and values[5] is True
        return {
            i: a
            for i, (a, v) in enumerate(zip(func._schema.arguments, values, strict=True))
            if isinstance(v, torch.Tensor)
            and v.untyped_storage().data_ptr() in self.storages
            and (
                (a.alias_info is not None and a.alias_info.is_write)
                or (training and a.name in ("running_mean", "running_var"))
            )
        }


class _Policy:
    """A checkpointed region's SAC policy, by (op, occurrence), occurrences counted apart in the
    forward and in each replay: torch 2.11 (not 2.15) asks the policy again as the replay runs
    each op (`ctx.is_recompute`) and takes a cached output only where it answers MUST_SAVE again
    (one counter made every replayed call a new occurrence: each cached op ran again, its cache
    held beside the copy). A call the table does not know is recomputed and named in `misses`,
    once."""

    def __init__(self, table: dict[Key, CheckpointPolicy], calls: dict[str, int], misses: list[str]) -> None:
        self.table, self.calls, self.misses = table, calls, misses
        self.seen: dict[tuple[bool, str], int] = defaultdict(int)

    def replaying(self) -> None:
        """A replay begins (one per backward that unpacks the region: `retain_graph` runs two)."""
        for k in [k for k in self.seen if k[0]]:
            del self.seen[k]

    def __call__(self, ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        name, replay = str(op), bool(ctx.is_recompute)
        k = self.seen[(replay, name)]
        self.seen[(replay, name)] += 1
        found = self.table.get((name, k))
        if found is None:
            # a call with no node of its own (an in-place write to a buffer) is expected
            miss = f"{name}#{k}"
            if k >= self.calls.get(name, 0) and not replay and miss not in self.misses:
                self.misses.append(miss)
            return CheckpointPolicy.PREFER_RECOMPUTE
        return found


class _Replaying:
    """SAC's recomputation context above `_KeptBuffers` (SAC's op counts see the ops as called);
    entered once per replay."""

    def __init__(self, module: torch.nn.Module, recompute: Any, policy: _Policy) -> None:
        self.module, self.recompute, self.policy = module, recompute, policy
        self.stacks: list[contextlib.ExitStack] = []

    def __enter__(self) -> None:
        self.policy.replaying()
        stack = contextlib.ExitStack()
        stack.enter_context(_KeptBuffers(self.module))
        stack.enter_context(self.recompute)
        self.stacks.append(stack)

    def __exit__(self, *exc: Any) -> bool:
        return bool(self.stacks.pop().__exit__(*exc))


def _as_called(x: Any) -> Any:
    """`x` with its lists and dicts copied (recursively, through tuples), tensors shared: what a
    region's replay must see is its input as it was at the call (DenseNet's blocks append to the
    list of features a layer read). Subclasses of list and dict are copied as their own type
    (`defaultdict`), one level; other tuples (`torch.Size`, named tuples) are kept."""
    t = type(x)
    if t is list:
        return [_as_called(y) for y in x]
    if t is tuple:
        return tuple(_as_called(y) for y in x)
    if t is dict:
        return {k: _as_called(y) for k, y in x.items()}
    if isinstance(x, (list, dict)):
        return copy.copy(x)
    return x


@functools.cache
def _checkpointing() -> Callable[[_Checkpointed, Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any]:
    """`_Checkpointed.checkpointed`, run eagerly when torch.compile traces a model calling it (a
    graph break around it): the plan's selective checkpointing is eager PyTorch's. Made at the first
    call, so that importing remat does not import Dynamo."""
    checkpointed: Callable[[_Checkpointed, Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any]
    checkpointed = torch.compiler.disable(_Checkpointed.checkpointed)
    return checkpointed


class _Checkpointed:
    """A checkpointed region's `forward` while the plan is applied: its own forward in a
    non-reentrant `checkpoint` with the plan's SAC policy. The forward gets the caller's
    arguments (what it appends to a list it was given stays appended); each replay gets a copy
    of them as they were at the call. Keyword arguments reach the forward, never `checkpoint`
    (a region's `debug=` or `use_reentrant=` is its own). It refers to its module, not to a bound
    method, so that a copy of the module (`copy.deepcopy`, `torch.save`) runs the copy; and to the
    context it was applied in, shared with its copies, so that a copy made inside the context runs
    its plain forward once the context has closed, as the original does."""

    def __init__(
        self,
        module: torch.nn.Module,
        inner: Callable[..., Any] | None,
        table: dict[Key, CheckpointPolicy],
        calls: dict[str, int],
        misses: list[str],
        entered: _Entered,
    ) -> None:
        self.module, self.inner = module, inner  # inner: a forward set on the instance before
        self.table, self.calls, self.misses = table, calls, misses
        self.entered = entered
        # what `inspect.signature(module.forward)` reads: the region's own parameters
        try:
            self.__signature__ = inspect.signature(inner if inner is not None else module.forward)
        except (TypeError, ValueError):
            pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module = self.module
        forward = self.inner if self.inner is not None else type(module).forward.__get__(module)
        if not self.entered.open:
            return forward(*args, **kwargs)
        return _checkpointing()(self, forward, args, kwargs)

    def checkpointed(self, forward: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """`forward(*args, **kwargs)` in the plan's checkpoint."""
        module = self.module
        at_call = _as_called((args, kwargs))
        ran = False

        def region(*_tensors: Any) -> Any:
            nonlocal ran
            if not ran:
                ran = True
                return forward(*args, **kwargs)
            a, k = _as_called(at_call)
            return forward(*a, **k)

        def contexts() -> Any:
            policy = _Policy(self.table, self.calls, self.misses)
            first, recompute = create_selective_checkpoint_contexts(policy)
            return first, _Replaying(module, recompute, policy)

        # the arguments go to checkpoint too (unused by `region`): it takes the devices whose
        # random state a replay restores from them
        return checkpoint(region, *args, kwargs, use_reentrant=False, context_fn=contexts)


class _Entered:
    """One entry of an `applied` context, open until it exits; a copy of a module made inside it
    (`copy.deepcopy`) shares it rather than copying it."""

    def __init__(self) -> None:
        self.open = True

    def __deepcopy__(self, memo: dict[int, Any]) -> _Entered:
        return self


class applied:
    """Run `regions` (the modules given to `export(..., regions=...)`, same order) under the plan's
    SAC policies while the context is open. `p.misses` lists op calls the policy did not expect (a
    graph exported from another model or shape), each once: they are recomputed. A region's
    replay in backward sees its inputs as they were at the call (lists and dicts copied) and
    leaves its buffers as the forward left them (BatchNorm's statistics are updated once per
    step). The same object may be entered again, after it has exited."""

    def __init__(self, regions: Iterable[torch.nn.Module], p: Plan) -> None:
        self.regions, self.plan = list(regions), p
        if len(self.regions) != len(p.policies):
            raise ApplyError(f"the plan has {len(p.policies)} regions, {len(self.regions)} modules were given")
        self.originals: list[tuple[_Entered, list[tuple[torch.nn.Module, Any]]]] = []

    def __enter__(self) -> Plan:
        p, originals, entered = self.plan, [], _Entered()
        for mod, table, calls in zip(self.regions, p.policies, p.calls, strict=True):
            if table is None:
                continue
            own = mod.__dict__.get("forward")
            originals.append((mod, own))
            mod.forward = _Checkpointed(mod, own, table, calls, p.misses, entered)
        self.originals.append((entered, originals))
        return p

    def __exit__(self, *exc: Any) -> None:
        entered, originals = self.originals.pop()
        entered.open = False
        for mod, own in originals:
            if own is not None:
                mod.forward = own
            else:
                del mod.forward
