"""What eager PyTorch runs under selective activation checkpointing (SAC) policies, as a schedule.

A plan (`remat.apply`) checkpoints regions of the model and tells SAC, per op call of a region,
whether to cache its output (`MUST_SAVE`) or recompute it; `Saves` holds, per region, the cached
op calls (`Key`: op overload, occurrence in the region), None for a region left unchecked.

What eager PyTorch runs is itself a schedule (`Sac.run`), built from what the export records of
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

remat's simulator replays that schedule (on the graph as `Sac.simulation_graph` rewrites it):
its peak is the predicted peak of the applied plan (`Plan.predicted`), which measurements
(`remat.measure.LiveBytes`) are compared with. Scope: eager autograd as torch runs it, measured
on CPU (torch 2.15) and on CUDA (torch 2.11, cuDNN); kernels' internal scratch buffers (cuDNN's
workspaces) are not modelled.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from .errors import ApplyError

Key = tuple[str, int]  # (op overload, occurrence in its region)
Saves = list[set[Key] | None]  # per region: the op calls SAC saves; None: region not checkpointed


class Sac:
    """The graph indexed once for simulating what eager SAC runs (`run`), by node number."""

    def __init__(self, graph: dict[str, Any], hold_output: bool = True) -> None:
        nodes = graph["nodes"]
        self.ids: list[str] = [n["id"] for n in nodes]
        self.index = index = {v: i for i, v in enumerate(self.ids)}
        self.memo: dict[tuple[frozenset[Key] | None, ...], Run] = {}
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
        meta = graph.get("meta", {})
        # a model that returns the loss itself has no output for the caller to hold
        hold_output = hold_output and not meta.get("model_returns_loss", False)
        # regions whose replay would read a value they wrote in place: never checkpointed
        self.unchecked = {int(r) for r in meta.get("region_writes_input", {})}
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
        # the regions exported, those with no node of their own (a view) included
        self.regions = max(
            int(graph.get("meta", {}).get("regions", 0)), 1 + max((r for r in self.region if r is not None), default=-1)
        )
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
        # it, a saving op the export could not pair with its node, or a node wrapping another),
        # the regions of the unpaired ops that saved what it reads, else of any that did
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
            savers = [s for u in reads for s in (self.savers[u] if self.exact else [u])]
            # an in-place op on a view (`h.t().relu_()`): autograd wraps the op's node in one of
            # its own (CopySlices), which applies it; no forward op names that node, and what it
            # reads was saved by paired ops
            unpaired_savers = [s for s in savers if unpaired[s]] or savers
            return sorted({r for s in unpaired_savers if (r := self.region[s]) is not None})

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

    def simulation_graph(self, graph: dict[str, Any], saves: Saves, run: Run) -> dict[str, Any]:
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

    def reads(self, saves: Saves) -> Reads:
        return Reads(self, saves)

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

    def run(self, saves: Saves) -> Run:
        """Simulate what SAC runs under `saves`: peak (fixed memory included), FLOPs computed, the
        event index of the peak and the events (node + 1 computed, -(node + 1) freed)."""
        key = tuple(None if t is None else frozenset(t) for t in saves)
        if key not in self.memo:
            self.memo[key] = self.simulate(saves)
        return self.memo[key]

    def simulate(self, saves: Saves) -> Run:
        """`run` without the memo."""
        return _Simulation(self, saves).run()

    def events(self, run: Run) -> list[dict[str, str]]:
        """`run`'s events as remat's schedule events (over `simulation_graph`)."""
        return [
            {"op": "compute", "node": self.slot_id(e - 1)} if e > 0 else {"op": "free", "node": self.slot_id(-e - 1)}
            for e in run.ev
        ]

    def resident_at(self, run: Run, event: int) -> list[int]:
        """The slots resident after `run`'s event number `event`."""
        on: set[int] = set()
        for e in run.ev[: event + 1]:
            if e > 0:
                on.add(e - 1)
            else:
                on.discard(-e - 1)
        return sorted(on)


@dataclasses.dataclass
class Run:
    peak: int
    flops: float
    peak_event: int
    ev: list[int]  # slot + 1 computed, -(slot + 1) freed


class Reads:
    """Which copy of each forward node the backward reads under `saves`: an autograd node of a
    checkpointed region reads the region's tensors that SAC does not cache from the region's
    replay (slot `v + count`), anything else from the forward (slot `v`); and how many readers
    each slot has (`pending`: readers in the node's own run and runs reading it from outside)."""

    def __init__(self, sac: Sac, saves: Saves) -> None:
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


class _Simulation:
    """One simulation of what SAC runs under `saves` (`Sac.simulate`). Slots: node `v`, and
    `v + count` for the copy of `v` a region's replay computes (a checkpointed region's op calls
    that SAC does not cache are computed again, in storage of their own, whether the forward's
    copy is still held or not)."""

    def __init__(self, sac: Sac, saves: Saves) -> None:
        self.sac, self.saves = sac, saves
        self.count = count = len(sac.ids)
        self.reg = sac.checked(saves)
        self.held = sac.held(saves, self.reg)
        self.reads = sac.reads(saves)
        self.mem, self.cost = sac.mem * 2, sac.cost * 2
        self.resident = [False] * (2 * count)
        self.pending = self.reads.pending
        self.frames = [0] * count
        for closing in sac.frames_ending:
            for holder in closing:
                if saves[holder] is not None:
                    for u in sac.region_inputs[holder]:
                        self.frames[u] += 1
        # per storage (its first version's slot): later versions resident, and whether the first
        # version is done with (freed once no later version is resident)
        self.versions = [0] * (2 * count)
        self.done = [False] * (2 * count)
        self.replayed = [False] * sac.regions
        self.ev: list[int] = []
        self.live = self.peak = sac.fixed
        self.peak_at = 0
        self.flops = 0.0

    def run(self) -> Run:
        self.forward()
        for k in range(len(self.sac.runs)):
            self.backward(k)
        return Run(peak=self.peak, flops=self.flops, peak_event=self.peak_at, ev=self.ev)

    def root(self, s: int) -> int:
        """The slot of the first version of `s`'s storage."""
        return self.sac.root[s % self.count] + (s - s % self.count)

    def compute(self, group: list[int]) -> None:
        for w in group:
            self.resident[w] = True
            self.live += self.mem[w]
            self.flops += self.cost[w]
            self.ev.append(w + 1)
            if (base := self.root(w)) != w:
                self.versions[base] += 1
            if self.live > self.peak:
                self.peak, self.peak_at = self.live, len(self.ev) - 1

    def drop(self, u: int) -> None:
        self.resident[u] = False
        self.live -= self.mem[u]
        self.ev.append(-u - 1)

    def free(self, u: int) -> None:
        base = self.root(u)
        if base == u and self.versions[u]:
            self.done[u] = True  # a later version still uses the storage
            return
        self.drop(u)
        if base != u:
            self.versions[base] -= 1
            if self.versions[base] == 0 and self.done[base] and self.resident[base]:
                self.drop(base)

    def releasable(self, s: int) -> bool:
        """Resident, read by nobody still to run, held by no frame, not held by the caller."""
        return (
            self.resident[s]
            and self.pending[s] == 0
            and (s >= self.count or (not self.frames[s] and not self.sac.output[s]))
        )

    def forward(self) -> None:
        """Each node freed after its last forward use, unless held."""
        sac, resident, held = self.sac, self.resident, self.held
        remaining = [len(s) for s in sac.fwd_succ]
        for group in sac.fwd_groups:
            self.compute(group)
            for w in group:
                for u in sac.inputs[w]:
                    remaining[u] -= 1
                    if remaining[u] == 0 and resident[u] and not held[u]:
                        self.free(u)
            for w in group:
                if remaining[w] == 0 and resident[w] and not held[w]:
                    self.free(w)

    def replay(self, r: int) -> None:
        """Region `r`'s forward again, up to the last tensor it saves, into copies of its own."""
        sac, reads, count = self.sac, self.reads, self.count
        self.replayed[r] = True
        todo = [v for v in sac.prefix[r] if not sac.is_element[v] and reads.replayed(v, r) >= count]
        later: dict[int, int] = defaultdict(int)
        for v in todo:
            for u in sac.inputs[v]:
                later[reads.replayed(u, r)] += 1
        ran: list[int] = []
        for v in todo:
            source = [reads.replayed(u, r) for u in sac.inputs[v]]
            for s in source:
                if not self.resident[s]:
                    raise ApplyError(
                        f"replaying region {r}: node {sac.ids[v]} reads {sac.slot_id(s)}, which is not resident"
                    )
            group = [v + count, *(c + count for c in sac.children[v])]
            self.compute(group)
            ran.extend(group)
            for s in source:
                later[s] -= 1
                if s >= count and later[s] == 0 and self.releasable(s):
                    self.free(s)
        # SAC hands its cached outputs over at the replay: from then on only readers hold them
        cached = [v for v in sorted(sac.prefix_set[r]) if reads.replayed(v, r) == v]
        for s in [*ran, *cached]:
            if later[s] == 0 and self.releasable(s):
                self.free(s)

    def backward(self, k: int) -> None:
        """Autograd node `k`: it unpacks its saved tensors (replaying regions), applies, and
        releases what it read from outside and the frames it was the last to unpack."""
        sac, resident, pending = self.sac, self.resident, self.pending
        for r in sac.unpacks[k]:
            if self.saves[r] is not None and not self.replayed[r]:
                self.replay(r)
        for s in self.reads.outside[k]:
            late = self.reg[s % self.count]
            if not resident[s] and late is not None and not self.replayed[late]:
                self.replay(late)
        for group in sac.bwd_groups[k]:
            self.compute(group)
            for w in group:
                for u in sac.inputs[w]:
                    if sac.run_of[u] == k:
                        pending[u] -= 1
                        if pending[u] == 0 and resident[u]:
                            self.free(u)
            for w in group:
                if pending[w] == 0 and resident[w]:
                    self.free(w)
        for s in self.reads.outside[k]:
            pending[s] -= 1
            if self.releasable(s):
                self.free(s)
        for ending in sac.frames_ending[k]:
            table = self.saves[ending]
            if table is None:
                continue
            cached = [v for v in sac.members[ending] if sac.key[v] in table]
            for u in sac.region_inputs[ending]:
                self.frames[u] -= 1
            for u in [*sac.region_inputs[ending], *cached]:
                if self.releasable(u):
                    self.free(u)
