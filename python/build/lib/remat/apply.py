"""Applying a remat schedule in eager PyTorch: selective activation checkpointing (SAC).

SAC decides, per op *call* inside a checkpointed region, whether its output is kept for backward
(`MUST_SAVE`) or recomputed (`PREFER_RECOMPUTE`); the call is named by (op overload, occurrence in
the region), which is how `remat.export(..., regions=...)` labels each forward node (`meta.region`,
`meta.occurrence`). A remat schedule says more than SAC can run (where each recomputation goes, how
often), so it is **projected** onto save sets:

1. A forward node is *kept* when the schedule computes it exactly once and it is still resident
   when the first backward node is computed (kept across the forward/backward boundary).
2. An op call of a region is `MUST_SAVE` when one of its nodes is kept, or when it produces a
   region's output (held anyway: the next region's checkpoint holds its inputs), unless it is an
   in-place op or one of its outputs is later overwritten in place in the forward: SAC refuses a
   cached tensor whose version changed ("Tensor cached during selective activation checkpoint has
   been mutated", also for the output of an in-place op itself), so such ops are always
   recomputed. Every other call of a region is `PREFER_RECOMPUTE`. Forward nodes outside every
   region are kept by autograd as usual.
3. `fit`: while what SAC runs (below) peaks over the budget, the saved call whose recomputation
   lowers the peak most per FLOP is recomputed instead.
4. `fill`: where the budget leaves room, regions are left unchecked and recomputed calls saved.

What eager PyTorch then runs is itself a schedule (`sac_events`): the forward, each node freed
after its last forward use unless kept, saved by SAC, or the input of a region; in backward, at
the first backward node that reads a region's node, the region's forward is replayed up to its last
node that backward reads (non-reentrant checkpoint with early stop), saved outputs reused, and
every node is freed after its last use. remat's simulator replays that schedule: its peak is the
predicted peak of the applied plan (`Plan.predicted`), which is what measurements are compared with.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from .client import Backend
from .errors import ApplyError

Key = tuple[str, int]  # (op overload, occurrence in its region)


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


class _Graph:
    def __init__(self, graph: dict[str, Any]) -> None:
        self.nodes = graph["nodes"]
        self.by_id = {n["id"]: n for n in self.nodes}
        self.succ: dict[str, list[str]] = defaultdict(list)
        for n in self.nodes:
            for i in n.get("inputs", []):
                self.succ[i].append(n["id"])
        self.fwd = [n["id"] for n in self.nodes if n.get("kind") != "backward"]
        self.bwd = [n["id"] for n in self.nodes if n.get("kind") == "backward"]
        self.is_bwd = {n["id"]: n.get("kind") == "backward" for n in self.nodes}
        self.regions = 1 + max((n["meta"].get("region", -1) for n in self.nodes if "meta" in n), default=-1)

    def region(self, v: str) -> int | None:
        r = self.by_id[v].get("meta", {}).get("region")
        return None if r is None or self.is_bwd[v] else int(r)

    def key(self, v: str) -> Key:
        n = self.by_id[v]
        return (str(n["op"]), int(n["meta"]["occurrence"]))

    def read_by_bwd(self, v: str) -> bool:
        return any(self.is_bwd[s] for s in self.succ[v])


def kept_nodes(graph: dict[str, Any], events: Sequence[dict[str, str]]) -> set[str]:
    """Step 1 of the projection: forward nodes computed once and resident at the first backward compute."""
    g = _Graph(graph)
    computes: dict[str, int] = defaultdict(int)
    resident: set[str] = set()
    at_boundary: set[str] | None = None
    for e in events:
        v = e["node"]
        if e["op"] == "compute":
            if at_boundary is None and g.is_bwd.get(v, False):
                at_boundary = set(resident)
            computes[v] += 1
            resident.add(v)
        elif e["op"] == "free":
            resident.discard(v)
    return {v for v in (at_boundary or set()) if not g.is_bwd[v] and computes[v] == 1}


def policies(graph: dict[str, Any], kept: set[str]) -> list[dict[Key, CheckpointPolicy] | None]:
    """Step 2 of the projection: MUST_SAVE / PREFER_RECOMPUTE per (op, occurrence), per region."""
    g = _Graph(graph)
    overwritten = {
        str(n["meta"]["overwrites"]) for n in g.nodes if not g.is_bwd[n["id"]] and "overwrites" in n.get("meta", {})
    }
    calls: dict[tuple[int, Key], list[str]] = defaultdict(list)
    for v in g.fwd:
        r = g.region(v)
        if r is not None:
            calls[(r, g.key(v))].append(v)
    out: list[dict[Key, CheckpointPolicy]] = [{} for _ in range(g.regions)]
    for (r, key), vs in calls.items():
        output = any(g.region(s) != r for v in vs for s in g.succ[v] if not g.is_bwd[s])
        in_place = any("overwrites" in g.by_id[v].get("meta", {}) for v in vs)
        save = (output or any(v in kept for v in vs)) and not in_place and not any(v in overwritten for v in vs)
        out[r][key] = CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE
    return list(out)


def sac_events(graph: dict[str, Any], pol: Sequence[dict[Key, CheckpointPolicy] | None]) -> list[dict[str, str]]:
    """The schedule eager SAC runs for these policies (see the module doc); a region whose policy is
    None is not checkpointed (plain autograd keeps what backward reads)."""
    g = _Graph(graph)

    def region(v: str) -> int | None:
        r = g.region(v)
        return r if r is not None and pol[r] is not None else None

    saved = {
        v for v in g.fwd if (r := region(v)) is not None and (pol[r] or {}).get(g.key(v)) == CheckpointPolicy.MUST_SAVE
    }
    region_input = {v for v in g.fwd if any(region(s) not in (None, region(v)) for s in g.succ[v])}
    held = {v for v in g.fwd if (region(v) is None and g.read_by_bwd(v)) or v in saved or v in region_input}
    events: list[dict[str, str]] = []
    resident: set[str] = set()
    done: set[str] = set()

    def compute(v: str) -> None:
        events.append({"op": "compute", "node": v})
        resident.add(v)
        done.add(v)

    def free(v: str) -> None:
        events.append({"op": "free", "node": v})
        resident.discard(v)

    # forward: free after the last forward use unless held
    fwd_set = set(g.fwd)
    for v in g.fwd:
        compute(v)
        for u in [*g.by_id[v].get("inputs", []), v]:
            if u in resident and u not in held and all(s in done for s in g.succ[u] if s in fwd_set):
                free(u)
    # backward: replay a region at its first read, free every node after its last use
    replayed: set[int] = set()
    pos = {v: i for i, v in enumerate(g.fwd)}
    bwd_done: set[str] = set()

    def pending_bwd(u: str) -> bool:
        return any(g.is_bwd[s] and s not in bwd_done for s in g.succ[u])

    def replay(r: int) -> None:
        members = [v for v in g.fwd if region(v) == r]
        needed = [v for v in members if g.read_by_bwd(v)]
        if not needed:
            return
        last = max(pos[v] for v in needed)
        prefix = [v for v in members if pos[v] <= last]
        prefix_set = set(prefix)
        recomputed: set[str] = set()
        for v in prefix:
            if v in resident:
                continue
            for u in g.by_id[v].get("inputs", []):
                if u not in resident:
                    raise ApplyError(f"replaying region {r}: node {v} reads {u}, which is not resident")
            compute(v)
            recomputed.add(v)
            for u in g.by_id[v].get("inputs", []):
                later = [s for s in g.succ[u] if s in prefix_set and s not in recomputed and s not in resident]
                if u in prefix_set and not later and not pending_bwd(u):
                    free(u)
        for v in prefix:
            if v in resident and not pending_bwd(v):
                free(v)

    for b in g.bwd:
        for u in g.by_id[b].get("inputs", []):
            if u not in resident and (r := region(u)) is not None and r not in replayed:
                replayed.add(r)
                replay(r)
        compute(b)
        bwd_done.add(b)
        for u in [*g.by_id[b].get("inputs", []), b]:
            if u in resident and not pending_bwd(u) and not any(s not in done for s in g.succ[u]):
                free(u)
    return events


def peak(graph: dict[str, Any], events: Sequence[dict[str, str]]) -> int:
    """The peak of `events` under remat's memory model (a guide for `fit`; remat's simulator judges)."""
    memory = {n["id"]: int(n["memory"]) for n in graph["nodes"]}
    live = best = int(graph.get("fixed_memory", 0))
    for e in events:
        if e["op"] == "compute":
            live += memory[e["node"]]
            best = max(best, live)
        elif e["op"] == "free":
            live -= memory[e["node"]]
    return best


def fit(
    graph: dict[str, Any], pol: list[dict[Key, CheckpointPolicy] | None], budget: int
) -> list[dict[Key, CheckpointPolicy] | None]:
    """Step 3 of the projection: while what SAC runs peaks above `budget`, turn the saved op call
    whose recomputation lowers the peak most per FLOP into PREFER_RECOMPUTE (greedy; region
    outputs stay saved, the next region holds them anyway). Returns the policies it stops at."""
    g = _Graph(graph)
    cost = {n["id"]: float(n["cost"]) for n in g.nodes}
    pol = [None if t is None else dict(t) for t in pol]
    outputs = {
        (r, g.key(v))
        for v in g.fwd
        if (r := g.region(v)) is not None and any(g.region(s) != r for s in g.succ[v] if not g.is_bwd[s])
    }
    current = peak(graph, sac_events(graph, pol))
    while current > budget:
        best: tuple[float, int, Key] | None = None
        for r, table in enumerate(pol):
            for key, choice in (table or {}).items():
                assert table is not None
                if choice != CheckpointPolicy.MUST_SAVE or (r, key) in outputs:
                    continue
                table[key] = CheckpointPolicy.PREFER_RECOMPUTE
                trial = peak(graph, sac_events(graph, pol))
                table[key] = CheckpointPolicy.MUST_SAVE
                gain = current - trial
                if gain <= 0:
                    continue
                flops = sum(cost[v] for v in g.fwd if g.region(v) == r and g.key(v) == key)
                score = gain / (flops + 1.0)
                if best is None or score > best[0]:
                    best = (score, r, key)
        if best is None:
            break
        chosen = pol[best[1]]
        assert chosen is not None
        chosen[best[2]] = CheckpointPolicy.PREFER_RECOMPUTE
        current = peak(graph, sac_events(graph, pol))
    return pol


def fill(
    graph: dict[str, Any], pol: list[dict[Key, CheckpointPolicy] | None], budget: int
) -> list[dict[Key, CheckpointPolicy] | None]:
    """Step 4 of the projection: SAC replays every op of a region it has not cached, so where the
    budget leaves room, recompute less: no region is checkpointed if that fits; else each region,
    last first, is left unchecked (plain autograd) where that fits, then each recomputed op call
    (FLOPs per byte, highest first) turns MUST_SAVE, each change kept when what SAC then
    runs still peaks within `budget` and recomputes less."""
    g = _Graph(graph)
    cost = {n["id"]: float(n["cost"]) for n in g.nodes}
    memory = {n["id"]: int(n["memory"]) for n in g.nodes}
    pol = [None if t is None else dict(t) for t in pol]

    def recompute(events: list[dict[str, str]]) -> float:
        return sum(cost[e["node"]] for e in events if e["op"] == "compute")

    bad = {v for n in g.nodes if "overwrites" in n.get("meta", {}) for v in (n["id"], str(n["meta"]["overwrites"]))}
    members: dict[tuple[int, Key], list[str]] = defaultdict(list)
    for v in g.fwd:
        if (r := g.region(v)) is not None:
            members[(r, g.key(v))].append(v)
    current = recompute(sac_events(graph, pol))
    plain: list[dict[Key, CheckpointPolicy] | None] = [None] * len(pol)
    if peak(graph, trial := sac_events(graph, plain)) <= budget:
        return plain
    # backward replays the last region first, while every earlier one is held
    for r in reversed(range(len(pol))):
        table = pol[r]
        pol[r] = None
        trial = sac_events(graph, pol)
        if peak(graph, trial) <= budget and recompute(trial) < current:
            current = recompute(trial)
        else:
            pol[r] = table
    candidates = [
        (sum(cost[v] for v in vs) / (1 + sum(memory[v] for v in vs)), r, key)
        for (r, key), vs in members.items()
        if (pol[r] or {}).get(key) == CheckpointPolicy.PREFER_RECOMPUTE and not any(v in bad for v in vs)
    ]
    for _, r, key in sorted(candidates, key=lambda c: -c[0]):
        table = pol[r]
        assert table is not None
        table[key] = CheckpointPolicy.MUST_SAVE
        trial = sac_events(graph, pol)
        if peak(graph, trial) <= budget and recompute(trial) < current:
            current = recompute(trial)
        else:
            table[key] = CheckpointPolicy.PREFER_RECOMPUTE
    return pol


def plan(graph: dict[str, Any], result: dict[str, Any], backend: Backend, *, budget: int | None = None) -> Plan:
    """Project `result`'s schedule onto SAC policies, fit them to `budget` (the result's budget by
    default) and simulate what SAC will run. The plan's `predicted` peak may exceed the budget when
    no SAC plan over these regions fits (check `Plan.fits`)."""
    g = _Graph(graph)
    if g.regions == 0:
        raise ApplyError("the graph has no checkpoint regions: export it with regions=[...] (the modules to wrap)")
    events = result.get("schedule", {}).get("events") if result.get("schedule") else None
    if not events:
        raise ApplyError(f"the result holds no schedule (status {result.get('status')!r})")
    kept = kept_nodes(graph, events)
    limit = int(result["budget"]) if budget is None else budget
    pol = fill(graph, fit(graph, policies(graph, kept), limit), limit)
    sac = sac_events(graph, pol)
    predicted = backend.simulate(graph, {"events": sac}, budget=limit)
    calls = graph.get("meta", {}).get("region_calls") or [{} for _ in pol]
    return Plan(
        policies=pol,
        calls=[dict(c) for c in calls],
        kept=sorted(kept),
        events=sac,
        predicted=predicted,
        schedule_stats=result.get("stats"),
        fixed_memory=int(graph.get("fixed_memory", 0)),
        budget=limit,
    )


def _context_fn(table: dict[Key, CheckpointPolicy], calls: dict[str, int], misses: list[str]) -> Callable[[], Any]:
    def make() -> Any:
        seen: dict[str, int] = defaultdict(int)

        def policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
            name = str(op)
            k = seen[name]
            seen[name] += 1
            found = table.get((name, k))
            if found is None:
                # a call with no node of its own (an in-place write to a buffer) is expected
                if k >= calls.get(name, 0):
                    misses.append(f"{name}#{k}")
                return CheckpointPolicy.PREFER_RECOMPUTE
            return found

        return create_selective_checkpoint_contexts(policy)

    return make


@contextmanager
def applied(regions: Sequence[torch.nn.Module], p: Plan) -> Iterator[Plan]:
    """Run `regions` (the modules given to `export(..., regions=...)`, same order) under the plan's
    SAC policies while the context is open. `p.misses` lists op calls the policy did not expect (a
    graph exported from another model or shape): they are recomputed."""
    if len(regions) != len(p.policies):
        raise ApplyError(f"the plan has {len(p.policies)} regions, {len(regions)} modules were given")
    originals = []
    for mod, table, calls in zip(regions, p.policies, p.calls, strict=True):
        if table is None:
            continue
        forward = mod.forward
        originals.append((mod, "forward" in mod.__dict__, forward))
        ctx = _context_fn(table, calls, p.misses)

        def wrapped(*args: Any, _f: Callable[..., Any] = forward, _c: Any = ctx, **kwargs: Any) -> Any:
            return checkpoint(_f, *args, use_reentrant=False, context_fn=_c, **kwargs)

        mod.forward = functools.update_wrapper(wrapped, forward)
    try:
        yield p
    finally:
        for mod, had, forward in originals:
            if had:
                mod.forward = forward
            else:
                del mod.forward
