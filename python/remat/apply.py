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

What eager PyTorch runs is itself a schedule (`_Sac.run`), built from what the export records of
autograd (`meta.saves`: the tensors each forward op's autograd node saves; `meta.grad_fn`: that
autograd node, and the one whose apply runs each backward op):

- forward: each node is freed after its last forward use unless held: saved by an op outside the
  checkpointed regions, cached by SAC, an input of a checkpointed region, or a model output (the
  caller holds `out = model(x)` through backward; `hold_output=False`: the caller passes the
  output straight to the loss, `loss_fn(model(x)).backward()`, and it lives as autograd needs it);
- backward, per autograd node: its saved tensors are unpacked before it applies. The first
  unpack of any tensor an op of a checkpointed region saved, SAC-cached or not, replays the
  region: its forward runs again up to the last tensor it saves (early stop: inputs are saved
  before an op runs and outputs after, so an op whose last save is an input does not run). The
  replay computes its own copy of every call SAC does not cache (slot `v + count`, node
  `<id>@replay` in the simulated graph), even where the forward's copy is still held by another
  reader (a later region's frame, an op outside the regions); the region's autograd nodes read
  those copies, and SAC's cached outputs, which it hands over at the replay. What a node reads
  from outside (saved tensors, input gradients) is released when its apply ends; a region's
  frame (its inputs, what SAC cached) when the last node that saved into it has run;
- a multi-output op holds no bytes of its own: its elements are computed with it; an in-place
  op's output neither: its storage's bytes stay with the first version, resident while any
  version is.

remat's simulator replays that schedule (on the graph as `_Sac.simulation_graph` rewrites it):
its peak is the predicted peak of the applied plan (`Plan.predicted`), which measurements
(`remat.measure.LiveBytes`) are compared with. Scope: single-threaded CPU autograd as torch 2.15
runs it; kernels' internal scratch buffers and storages larger than an op's output (CPU
`mse_loss` returns its mean in the storage of the element-wise losses) are not modelled.

`applied` runs the plan: each checkpointed region's forward is wrapped in a non-reentrant
`checkpoint` with the plan's SAC policy; the region's lists and dicts of inputs are copied at the
call (DenseNet appends to the list its layers read), and its replay runs under `_KeptBuffers`,
which drops writes into the region's buffers (BatchNorm's running statistics and counter), so
one step updates them once, as the plain step does, without holding a copy of them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from .client import Backend
from .errors import ApplyError, OnOverrun, overrun

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


Saves = list[set[Key] | None]  # per region: the op calls SAC saves; None: region not checkpointed


class _Sac:
    """The graph indexed once for simulating what eager SAC runs (`run`), by node number."""

    def __init__(self, graph: dict[str, Any], hold_output: bool = True) -> None:
        nodes = graph["nodes"]
        self.ids: list[str] = [n["id"] for n in nodes]
        self.index = index = {v: i for i, v in enumerate(self.ids)}
        self.memo: dict[tuple[frozenset[Key] | None, ...], _Run] = {}
        succ_ids: dict[str, list[str]] = defaultdict(list)
        for n in nodes:
            for u in n.get("inputs", []):
                succ_ids[u].append(n["id"])
        count = len(nodes)
        self.fixed = int(graph.get("fixed_memory", 0))
        # a multi-output op's node holds no bytes of its own here: its elements (getitem nodes)
        # are computed right after it and hold the bytes (the graph counts them twice meanwhile)
        self.is_element = ["element" in n.get("meta", {}) and len(n.get("inputs", [])) == 1 for n in nodes]
        parents = {n["inputs"][0] for n, e in zip(nodes, self.is_element, strict=True) if e}
        # an in-place op writes into its input's storage: the storage's bytes are counted once, on
        # the first version (`root`), which stays resident while a later version is
        self.root = list(range(count))
        for i, n in enumerate(nodes):
            previous = n.get("meta", {}).get("overwrites")
            while previous in index and self.root[i] == i:
                j = index[previous]
                self.root[i] = j if self.root[j] == j else self.root[j]
                previous = None
        self.mem = [0 if n["id"] in parents or self.root[i] != i else int(n["memory"]) for i, n in enumerate(nodes)]
        self.cost = [float(n["cost"]) for n in nodes]
        self.inputs = [[index[u] for u in n.get("inputs", [])] for n in nodes]
        self.is_bwd = [n.get("kind") == "backward" for n in nodes]
        is_loss = {n["id"] for n in nodes if n.get("kind") == "loss"}
        # the model's outputs and the loss: the caller holds them (`out = model(x)`, `loss =
        # loss_fn(out)`) until the step ends; the outputs only with `hold_output`
        self.output = [
            hold_output and any(s in is_loss for s in succ_ids[n["id"]])
            if n.get("kind") == "forward"
            else n["id"] in is_loss and not any(s in is_loss for s in succ_ids[n["id"]])
            for n in nodes
        ]
        self.region: list[int | None] = [None] * count
        self.key: list[Key] = [("", 0)] * count
        for i, n in enumerate(nodes):
            meta = n.get("meta", {})
            if not self.is_bwd[i] and meta.get("region") is not None:
                self.region[i] = int(meta["region"])
                self.key[i] = (str(n["op"]), int(meta["occurrence"]))
        self.regions = 1 + max((r for r in self.region if r is not None), default=-1)
        self.fwd_succ: list[list[int]] = [[] for _ in range(count)]
        self.n_bwd_succ = [0] * count
        for i, ins in enumerate(self.inputs):
            for u in ins:
                if self.is_bwd[i]:
                    self.n_bwd_succ[u] += 1
                else:
                    self.fwd_succ[u].append(i)
        self.fwd = [i for i in range(count) if not self.is_bwd[i]]
        self.children: list[list[int]] = [[] for _ in range(count)]
        for i in range(count):
            if self.is_element[i]:
                self.children[self.inputs[i][0]].append(i)
        self.bwd = [i for i in range(count) if self.is_bwd[i]]
        # backward ops by the autograd node that runs them (`meta.grad_fn`; else one op each):
        # what a node reads from outside is held until its last op has run
        self.runs: list[list[int]] = []
        self.run_of = [-1] * count
        run_fn: list[Any] = []
        for b in self.bwd:
            fn = nodes[b].get("meta", {}).get("grad_fn", ("op", b))
            if not self.runs or fn != run_fn[-1]:
                self.runs.append([])
                run_fn.append(fn)
            self.runs[-1].append(b)
            self.run_of[b] = len(self.runs) - 1
        self.ext_reads: list[list[int]] = []
        self.n_own = [0] * count  # per node: readers in its own run
        for k, ops in enumerate(self.runs):
            outside: dict[int, None] = {}
            for b in ops:
                for u in self.inputs[b]:
                    if self.run_of[u] == k:
                        self.n_own[u] += 1
                    else:
                        outside[u] = None
            self.ext_reads.append(list(outside))
        self.n_pending = list(self.n_own)  # per node: readers in its own run + runs reading it from outside
        for reads in self.ext_reads:
            for u in reads:
                self.n_pending[u] += 1
        self.bwd_groups = [[[b, *self.children[b]] for b in ops if not self.is_element[b]] for ops in self.runs]
        self.members: list[list[int]] = [[] for _ in range(self.regions)]
        self.key_nodes: dict[tuple[int, Key], list[int]] = defaultdict(list)
        for v in self.fwd:
            if (r := self.region[v]) is not None:
                self.members[r].append(v)
                self.key_nodes[(r, self.key[v])].append(v)
        # the replay of a region runs up to its last node that backward reads (early stop)
        # `meta.saves` (remat.export): what each op's autograd node saves. Without it, a node
        # that backward reads is taken as saved by its region, or by autograd outside it when a
        # forward reader lies outside
        self.exact = any("saves" in n.get("meta", {}) for n in nodes)
        self.saves_any = [self.exact and "saves" in n.get("meta", {}) for n in nodes]
        self.savers: list[list[int]] = [[] for _ in range(count)]
        for i, n in enumerate(nodes):
            for u in n.get("meta", {}).get("saves", []):
                if u in index:
                    self.savers[index[u]].append(i)
        # the replay of a region stops at the last tensor its ops save (early stop): inputs are
        # saved before an op runs, outputs after, so that op runs only if it saves an output
        self.prefix: list[list[int]] = []
        for ms in self.members:
            saving = [j for j, v in enumerate(ms) if (self.saves_any[v] if self.exact else self.n_bwd_succ[v])]
            if not saving:
                self.prefix.append([])
                continue
            last = ms[saving[-1]]
            outputs = {last, *self.children[last]}
            runs = not self.exact or any(index.get(u) in outputs for u in nodes[last]["meta"]["saves"])
            self.prefix.append(ms[: saving[-1] + 1] if runs else ms[: saving[-1]])
        # what a replay computes: the prefix, and the elements of its multi-output ops
        self.prefix_set = [set(p) | {c for v in p for c in self.children[v]} for p in self.prefix]
        # an autograd node unpacks all it saved when its apply starts: the first unpack of a
        # tensor saved inside a checkpointed region replays it, cached (MUST_SAVE) or not, and
        # what the node reads of the region is the replay's copy. The node's forward op: the one
        # whose `meta.grad_fn` it is; for a node no forward op names (a graph exported without
        # it, or a saving op the export could not pair with its node), the regions of the
        # unpaired ops that saved what it reads
        fn_regions: dict[Any, set[int]] = defaultdict(set)
        unpaired = [True] * count
        for v in self.fwd:
            meta = nodes[v].get("meta", {})
            if "saves" in meta and "grad_fn" in meta:
                unpaired[v] = False
                regions = fn_regions[meta["grad_fn"]]  # the node is paired, maybe outside any region
                if (r := self.region[v]) is not None:
                    regions.add(r)

        def saved_in(reads: list[int]) -> list[int]:
            savers = (s for u in reads for s in (self.savers[u] if self.exact else [u]) if unpaired[s])
            return sorted({r for s in savers if (r := self.region[s]) is not None})

        self.unpacks = [
            sorted(fn_regions[fn]) if fn in fn_regions else saved_in(reads)
            for fn, reads in zip(run_fn, self.ext_reads, strict=True)
        ]
        in_prefix = {v for p in self.prefix for v in p}
        self.fwd_groups = [[v, *self.children[v]] for v in self.fwd if not self.is_element[v]]
        # a checkpointed region's frame holds its inputs (and SAC's cache) until the last autograd
        # node that saved a tensor in the region has run
        self.region_inputs: list[list[int]] = [
            list(dict.fromkeys(u for v in ms for u in self.inputs[v] if self.region[u] != r))
            for r, ms in enumerate(self.members)
        ]
        frame_end = [-1] * self.regions
        for k, unpacking in enumerate(self.unpacks):
            for r in unpacking:
                frame_end[r] = k
        self.frames_ending: list[list[int]] = [[] for _ in self.runs]
        for r, k in enumerate(frame_end):
            if k >= 0:
                self.frames_ending[k].append(r)
        # SAC refuses cached tensors whose version changed: in-place ops and what they overwrite
        by_id = {n["id"]: n for n in nodes}
        bad = {i for i, n in enumerate(nodes) if "overwrites" in n.get("meta", {})}
        bad |= {index[str(by_id[n["id"]]["meta"]["overwrites"])] for n in nodes if "overwrites" in n.get("meta", {})}
        self.saveable = {
            rk for rk, vs in self.key_nodes.items() if not any(v in bad for v in vs) and any(v in in_prefix for v in vs)
        }

    def simulation_graph(self, graph: dict[str, Any], saves: Saves, run: _Run) -> dict[str, Any]:
        """`graph` as `run` runs it, for remat's simulator: the memory `run` counts (a multi-output
        op's node holds no bytes: the events compute its elements right after it), a node of its
        own for each copy a region's replay computes (`slot_id`: the node's id and `@replay`, its
        inputs the copies it reads), and backward nodes reading those copies."""
        count = len(self.ids)
        reads = self.reads(saves)
        nodes = []
        for i, n in enumerate(graph["nodes"]):
            ins = [self.ids[u] for u in self.inputs[i]]
            if self.is_bwd[i]:
                ins = [self.slot_id(reads.slot(u, self.run_of[i])) for u in self.inputs[i]]
            if n["memory"] != self.mem[i] or ins != n.get("inputs", []):
                n = {**n, "memory": self.mem[i], "inputs": ins}
            nodes.append(n)
        twins = dict.fromkeys(e - 1 - count for e in run.ev if e > count)
        for v in twins:
            r = self.region[v]
            assert r is not None
            source = [self.slot_id(reads.replayed(u, r)) for u in self.inputs[v]]
            nodes.append({**graph["nodes"][v], "id": self.slot_id(v + count), "memory": self.mem[v], "inputs": source})
        return {**graph, "nodes": nodes}

    def slot_id(self, s: int) -> str:
        """The node id of slot `s`: node `s`, or for `s` >= the node count, the copy of node
        `s - count` a region's replay computes."""
        count = len(self.ids)
        return self.ids[s] if s < count else f"{self.ids[s - count]}@replay"

    def reads(self, saves: Saves) -> _Reads:
        return _Reads(self, saves)

    def checked(self, saves: Saves) -> list[int | None]:
        return [r if r is not None and saves[r] is not None else None for r in self.region]

    def held(self, saves: Saves, reg: list[int | None]) -> list[bool]:
        """Forward nodes whose storage outlives their last forward use: saved by autograd outside
        the checkpointed regions, cached by SAC, or an input of a checkpointed region."""
        held = [False] * len(self.ids)
        for v in self.fwd:
            r = reg[v]
            succ = self.fwd_succ[v]
            if self.output[v]:
                held[v] = True
            elif r is None:
                held[v] = self.n_bwd_succ[v] > 0 or any(reg[s] is not None for s in succ)
            else:
                table = saves[r]
                outside = (
                    any(reg[s] != r for s in self.savers[v])
                    if self.exact
                    else self.n_bwd_succ[v] > 0 and any(reg[s] is None for s in succ)
                )
                held[v] = (
                    (table is not None and self.key[v] in table)
                    or any(reg[s] is not None and reg[s] != r for s in succ)
                    or outside
                )
        return held

    def run(self, saves: Saves) -> _Run:
        """Simulate what SAC runs under `saves`: peak (fixed memory included), FLOPs computed, the
        event index of the peak and the events (node + 1 computed, -(node + 1) freed)."""
        key = tuple(None if t is None else frozenset(t) for t in saves)
        if key not in self.memo:
            self.memo[key] = self.simulate(saves)
        return self.memo[key]

    def simulate(self, saves: Saves) -> _Run:
        """`run` without the memo. Slots: node `v`, and `v + count` for the copy of `v` a region's
        replay computes (a checkpointed region's op calls that SAC does not cache are computed
        again, in storage of their own, whether the forward's copy is still held or not)."""
        reg = self.checked(saves)
        held = self.held(saves, reg)
        reads = self.reads(saves)
        count = len(self.ids)
        mem, cost, inputs, output, run_of = self.mem * 2, self.cost * 2, self.inputs, self.output, self.run_of
        resident = [False] * (2 * count)
        rem_fwd = [len(s) for s in self.fwd_succ]
        pending = reads.pending
        frames = [0] * count
        for closing in self.frames_ending:
            for holder in closing:
                if saves[holder] is not None:
                    for u in self.region_inputs[holder]:
                        frames[u] += 1
        ev: list[int] = []
        live = peak = self.fixed
        peak_at = 0
        flops = 0.0
        # per storage (its first version's slot): later versions resident, and whether the first
        # version is done with (freed once no later version is resident)
        versions = [0] * (2 * count)
        done = [False] * (2 * count)

        def root(s: int) -> int:
            return self.root[s % count] + (s - s % count)

        def compute(group: list[int]) -> None:
            nonlocal live, peak, peak_at, flops
            for w in group:
                resident[w] = True
                live += mem[w]
                flops += cost[w]
                ev.append(w + 1)
                if (base := root(w)) != w:
                    versions[base] += 1
                if live > peak:
                    peak, peak_at = live, len(ev) - 1

        def drop(u: int) -> None:
            nonlocal live
            resident[u] = False
            live -= mem[u]
            ev.append(-u - 1)

        def free(u: int) -> None:
            base = root(u)
            if base == u and versions[u]:
                done[u] = True  # a later version still uses the storage
                return
            drop(u)
            if base != u:
                versions[base] -= 1
                if versions[base] == 0 and done[base] and resident[base]:
                    drop(base)

        def releasable(s: int) -> bool:
            """Resident, read by nobody still to run, held by no frame, not held by the caller."""
            return resident[s] and pending[s] == 0 and (s >= count or (not frames[s] and not output[s]))

        def replay(r: int) -> None:
            todo = [v for v in self.prefix[r] if not self.is_element[v] and reads.replayed(v, r) >= count]
            later: dict[int, int] = defaultdict(int)
            for v in todo:
                for u in inputs[v]:
                    later[reads.replayed(u, r)] += 1
            ran: list[int] = []
            for v in todo:
                source = [reads.replayed(u, r) for u in inputs[v]]
                for s in source:
                    if not resident[s]:
                        raise ApplyError(
                            f"replaying region {r}: node {self.ids[v]} reads {self.slot_id(s)}, which is not resident"
                        )
                group = [v + count, *(c + count for c in self.children[v])]
                compute(group)
                ran.extend(group)
                for s in source:
                    later[s] -= 1
                    if s >= count and later[s] == 0 and releasable(s):
                        free(s)
            # SAC hands its cached outputs over at the replay: from then on only readers hold them
            cached = [v for v in sorted(self.prefix_set[r]) if reads.replayed(v, r) == v]
            for s in [*ran, *cached]:
                if later[s] == 0 and releasable(s):
                    free(s)

        for group in self.fwd_groups:
            compute(group)
            for w in group:
                for u in inputs[w]:
                    rem_fwd[u] -= 1
                    if rem_fwd[u] == 0 and resident[u] and not held[u]:
                        free(u)
            for w in group:
                if rem_fwd[w] == 0 and resident[w] and not held[w]:
                    free(w)
        replayed = [False] * self.regions
        for k, groups in enumerate(self.bwd_groups):
            # an autograd node unpacks its saved tensors (replaying regions) before it applies
            for r in self.unpacks[k]:
                if saves[r] is not None and not replayed[r]:
                    replayed[r] = True
                    replay(r)
            for s in reads.outside[k]:
                late = reg[s % count]
                if not resident[s] and late is not None and not replayed[late]:
                    replayed[late] = True
                    replay(late)
            for group in groups:
                compute(group)
                for w in group:
                    for u in inputs[w]:
                        if run_of[u] == k:
                            pending[u] -= 1
                            if pending[u] == 0 and resident[u]:
                                free(u)
                for w in group:
                    if pending[w] == 0 and resident[w]:
                        free(w)
            # its saved tensors and input gradients are released when the apply returns
            for s in reads.outside[k]:
                pending[s] -= 1
                if releasable(s):
                    free(s)
            for ending in self.frames_ending[k]:
                table = saves[ending]
                if table is None:
                    continue
                cached = [v for v in self.members[ending] if self.key[v] in table]
                for u in self.region_inputs[ending]:
                    frames[u] -= 1
                for u in [*self.region_inputs[ending], *cached]:
                    if releasable(u):
                        free(u)
        return _Run(peak=peak, flops=flops, peak_event=peak_at, ev=ev)

    def events(self, run: _Run) -> list[dict[str, str]]:
        """`run`'s events as remat's schedule events (over `simulation_graph`)."""
        return [
            {"op": "compute", "node": self.slot_id(e - 1)} if e > 0 else {"op": "free", "node": self.slot_id(-e - 1)}
            for e in run.ev
        ]

    def resident_at(self, run: _Run, event: int) -> list[int]:
        """The slots resident after `run`'s event number `event`."""
        on: set[int] = set()
        for e in run.ev[: event + 1]:
            if e > 0:
                on.add(e - 1)
            else:
                on.discard(-e - 1)
        return sorted(on)


@dataclasses.dataclass
class _Run:
    peak: int
    flops: float
    peak_event: int
    ev: list[int]  # slot + 1 computed, -(slot + 1) freed


class _Reads:
    """Which copy of each forward node the backward reads under `saves`: an autograd node of a
    checkpointed region reads the region's tensors that SAC does not cache from the region's
    replay (slot `v + count`), anything else from the forward (slot `v`); and how many readers
    each slot has (`pending`: readers in the node's own run and runs reading it from outside)."""

    def __init__(self, sac: _Sac, saves: Saves) -> None:
        self.sac, self.saves = sac, saves
        self.count = count = len(sac.ids)
        self.outside = [[self.slot(u, k) for u in reads] for k, reads in enumerate(sac.ext_reads)]
        self.pending = [*sac.n_own, *([0] * count)]
        for slots in self.outside:
            for s in slots:
                self.pending[s] += 1

    def replayed(self, v: int, r: int) -> int:
        """The slot region `r`'s replay reads or computes for node `v`: its own copy of the
        region's op calls that SAC does not cache, the forward's copy of anything else."""
        sac, table = self.sac, self.saves[r]
        if table is None or sac.region[v] != r or v not in sac.prefix_set[r] or sac.key[v] in table:
            return v
        return v + self.count

    def slot(self, u: int, k: int) -> int:
        """The slot backward run `k` reads for node `u`."""
        r = self.sac.region[u]
        return self.replayed(u, r) if r is not None and r in self.sac.unpacks[k] else u


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


def _projected(sac: _Sac, kept: set[str]) -> Saves:
    """Step 2 of the projection: an op call of a region is saved when one of its nodes is kept
    (and SAC can cache it, and the region's replay reaches it)."""
    kept_ix = {sac.index[v] for v in kept if v in sac.index}
    saves: Saves = [set() for _ in range(sac.regions)]
    for (r, key), vs in sac.key_nodes.items():
        if (r, key) in sac.saveable and any(v in kept_ix for v in vs):
            table = saves[r]
            assert table is not None
            table.add(key)
    return saves


def _copy(saves: Saves) -> Saves:
    return [None if t is None else set(t) for t in saves]


def _fit(sac: _Sac, saves: Saves, budget: int) -> Saves:
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
        order = sorted(freed, key=lambda rk: -freed[rk] / (1.0 + sum(sac.cost[v] for v in sac.key_nodes[rk])))
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


def _fill(sac: _Sac, saves: Saves, budget: int) -> Saves:
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
        key=lambda rk: -flops[rk] / (1 + memory[rk]),
    )
    return _grow(sac, saves, candidates, lambda rk: memory[rk], save, budget)


def _grow(
    sac: _Sac,
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


def _table(saves: Saves, sac: _Sac) -> list[dict[Key, CheckpointPolicy] | None]:
    out: list[dict[Key, CheckpointPolicy] | None] = []
    for r, table in enumerate(saves):
        if table is None:
            out.append(None)
            continue
        keys = [k for (rr, k) in sac.key_nodes if rr == r]
        out.append({k: CheckpointPolicy.MUST_SAVE if k in table else CheckpointPolicy.PREFER_RECOMPUTE for k in keys})
    return out


def _saves(pol: Sequence[dict[Key, CheckpointPolicy] | None]) -> Saves:
    return [None if t is None else {k for k, c in t.items() if c == CheckpointPolicy.MUST_SAVE} for t in pol]


def sac_events(graph: dict[str, Any], pol: Sequence[dict[Key, CheckpointPolicy] | None]) -> list[dict[str, str]]:
    """The schedule eager SAC runs for these policies (see the module doc); a region whose policy is
    None is not checkpointed (plain autograd keeps what backward reads)."""
    sac = _Sac(graph)
    return sac.events(sac.run(_saves(pol)))


def plan(
    graph: dict[str, Any],
    result: dict[str, Any],
    backend: Backend,
    *,
    budget: int | None = None,
    on_overrun: OnOverrun = "raise",
    hold_output: bool = True,
) -> Plan:
    """Project `result`'s schedule onto SAC policies within `budget` (the result's budget by
    default) and simulate what SAC will run. Candidates: the projection of the schedule fitted
    to the budget, and per-block checkpointing (every region checkpointed, only region inputs
    kept), each filled where the budget leaves room; the one that recomputes least among those
    that fit wins. When none fits, `remat.OverBudget` is raised (`on_overrun="warn"`: an
    `OverBudgetWarning`, and the plan with the lowest peak is returned). `hold_output`: the caller
    holds the model's output through backward (`out = model(x); loss_fn(out).backward()`); False
    when it goes straight into the loss (`loss_fn(model(x)).backward()`)."""
    if on_overrun not in ("raise", "warn"):
        raise ApplyError(f"on_overrun must be 'raise' or 'warn', got {on_overrun!r}")
    sac = _Sac(graph, hold_output)
    if sac.regions == 0:
        raise ApplyError("the graph has no checkpoint regions: export it with regions=[...] (the modules to wrap)")
    schedule = result.get("schedule", {}).get("events") if result.get("schedule") else None
    if not schedule:
        raise ApplyError(f"the result holds no schedule (status {result.get('status')!r})")
    kept = kept_nodes(graph, schedule)
    limit = int(result["budget"]) if budget is None else budget
    per_block: Saves = [set() for _ in range(sac.regions)]
    plain: Saves = [None] * sac.regions
    if sac.run(plain).peak <= limit:
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
        _overrun(p, on_overrun)
    return p


def _overrun(p: Plan, on_overrun: OnOverrun) -> None:
    mib = 1 / 2**20
    message = (
        f"remat: the applied plan peaks at {p.predicted_peak} bytes ({p.predicted_peak * mib:.1f} MiB, "
        f"{p.predicted_activations * mib:.1f} MiB of activations), over the budget of {p.budget} bytes "
        f"({p.budget * mib:.1f} MiB) by {(p.predicted_peak - p.budget) * mib:.1f} MiB; no SAC plan over these regions "
        f"fits (per-block checkpointing peaks at {p.per_block_peak} bytes). Give a budget of at least "
        f"{min(p.predicted_peak, p.per_block_peak)} bytes, export with smaller or more regions, or pass "
        "on_overrun='warn' to run over the budget"
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
    """A region's buffers (BatchNorm's running statistics and counter, ...) kept as the forward
    left them while its replay runs: the replay runs the region's forward again, and the state it
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
        self.storages = {b.untyped_storage().data_ptr() for b in self.module.buffers()} - {0}
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


def _context_fn(
    table: dict[Key, CheckpointPolicy], calls: dict[str, int], misses: list[str], module: torch.nn.Module
) -> Callable[[], Any]:
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

        forward, recompute = create_selective_checkpoint_contexts(policy)
        return forward, _restoring(module, recompute)

    return make


@contextmanager
def _restoring(module: torch.nn.Module, recompute: Any) -> Iterator[None]:
    """SAC's recomputation context above `_KeptBuffers` (SAC's op counts see the ops as called)."""
    with _KeptBuffers(module), recompute:
        yield


def _as_called(x: Any) -> Any:
    """`x` with its lists, tuples and dicts copied (recursively), tensors shared: what a region's
    replay must see is its input as it was at the call (DenseNet's blocks append to the list of
    features a layer read)."""
    if isinstance(x, list):
        return [_as_called(y) for y in x]
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(_as_called(y) for y in x)
    if isinstance(x, dict):
        return {k: _as_called(y) for k, y in x.items()}
    return x


@contextmanager
def applied(regions: Sequence[torch.nn.Module], p: Plan) -> Iterator[Plan]:
    """Run `regions` (the modules given to `export(..., regions=...)`, same order) under the plan's
    SAC policies while the context is open. `p.misses` lists op calls the policy did not expect (a
    graph exported from another model or shape): they are recomputed. A region's replay in
    backward sees its inputs as they were at the call (lists and dicts copied) and leaves its
    buffers as the forward left them (BatchNorm's statistics are updated once per step)."""
    if len(regions) != len(p.policies):
        raise ApplyError(f"the plan has {len(p.policies)} regions, {len(regions)} modules were given")
    originals = []
    for mod, table, calls in zip(regions, p.policies, p.calls, strict=True):
        if table is None:
            continue
        forward = mod.forward
        originals.append((mod, "forward" in mod.__dict__, forward))
        ctx = _context_fn(table, calls, p.misses, mod)

        def wrapped(*args: Any, _f: Callable[..., Any] = forward, _c: Any = ctx, **kwargs: Any) -> Any:
            return checkpoint(_f, *_as_called(args), use_reentrant=False, context_fn=_c, **_as_called(kwargs))

        mod.forward = functools.update_wrapper(wrapped, forward)
    try:
        yield p
    finally:
        for mod, had, forward in originals:
            if had:
                mod.forward = forward
            else:
                del mod.forward
