"""A remat schedule realized as the forward and backward graphs AOTAutograd runs.

remat's schedule over a joint graph's remat graph (`remat.compiled.joint_graph`) is a list of
events `compute(v)` / `free(v)`. `realize` rewrites the joint fx graph so that its node order *is*
the schedule, then splits it at the schedule's forward/backward boundary:

- **Phases.** The forward graph holds every event before the first computation of a node that
  reads a tangent (directly or not); the backward graph every event from there on. A forward
  output the schedule has not computed by then is computed at the end of the forward phase.
- **One copy per compute event.** Each `compute(v)` emits a fresh copy of `v`'s fx node whose
  arguments are the *current* copies of its inputs (a value computed twice appears twice; the
  second copy reads whatever the schedule holds at that point). Views, aliases and other nodes
  that are no remat node (their output shares a node's storage or is no tensor) are re-emitted on
  demand in each phase, reading the current copies.
- **Saved = kept across the boundary.** The forward graph returns (saves for backward) exactly the
  forward-phase copies, and the primal inputs, that backward-phase nodes read.
- **Frees.** The generated code drops each local after its last use (fx's codegen; boxed
  arguments are cleared by the boxed calling convention), so every copy is released right after
  its last use, which is never later than the schedule's `free`.

What cannot be recomputed is not: random ops (tag `nondeterministic_seeded`: dropout's mask would
differ) and forward outputs (the caller holds them anyway) keep their first copy, which later
reads share. BatchNorm in training (`_native_batch_norm_legit_functional`) recomputed is emitted as
`_native_batch_norm_legit.no_stats`: the same output and batch statistics, without reading or
producing running statistics, so buffers are updated once, by the forward; its new running
statistics (elements 3 and 4) are taken from its first copy, with it, and never recomputed. Any
other tuple op one of whose elements is a forward output (an input mutation's new value) is never
recomputed either. (What a forward output is computed from, such as the model's output that the
loss reads, is recomputed where the schedule says.)

**Recomputed tuple ops.** A copy of a multi-output op allocates its outputs at once; every
element is taken right after it (`take_elements`). The elements that keep an earlier copy
(gradients, which are outputs) are never read from a recomputation, and the graph counts a
parameter's gradient once, in its buffer (`fixed_memory`: its node has no bytes). Where the op takes
an output mask (convolution's and the norms' backward), a recomputation is told not to compute
them (`output_mask`), so that it allocates what the schedule counts; without one it allocates
them again, next to the first, which neither the schedule nor the prediction counts.

**Inputs written in place.** The forward's writes into inputs (the functionalized `copy_` of a
buffer's new value) run in the forward as soon as what they write is resident and every node that
reads the old value has been computed; the values written are kept until then. A recomputation
after the write would read the new value (an EMA's `h - shift`, a step counter's `h + t`, recomputed
in the backward), so `snapshot_written_inputs` first rewrites the joint graph: those reads take a
`clone` of the input made before the first of them, a remat node the solver keeps or not like any
other, while the nodes that still read the input itself (the clone, the values written) are never
recomputed (`written_input_readers`; `solve_graph` prices them like random ops).

`realized_events` reads the two graphs back as a remat schedule (each copy computed where it is,
freed after the last use of it or of any view of it, outputs held): what PyTorch will run, which
remat's simulator judges (`Partitioner.last.predicted`).
"""

from __future__ import annotations

import dataclasses
import operator
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensor

from .errors import ApplyError
from .export import _FIXED, _Builder, _written_args

# meta keys on the rewritten joint's nodes (copied into the forward and backward graphs)
NODE = "remat_node"  # the remat node id a copy computes
ALIAS = "remat_alias"  # names of the copies whose storage a re-emitted view shares
PHASE = "remat_phase"  # "forward" or "backward": the graph a copy runs in
SNAPSHOT = "remat_snapshot"  # on the joint's clones of inputs the forward writes (`snapshot_written_inputs`)

_BN_FUNCTIONAL = torch.ops.aten._native_batch_norm_legit_functional.default
_BN_NO_STATS = torch.ops.aten._native_batch_norm_legit.no_stats
_BN_BACKWARD = torch.ops.aten.native_batch_norm_backward.default


def unread_args(n: fx.Node) -> tuple[int, ...]:
    """Positions of `n`'s arguments its kernel does not read: BatchNorm's backward in training
    takes the running statistics but uses the batch statistics (they are not kept for it)."""
    if n.target is _BN_BACKWARD and len(n.args) > 7 and n.args[7] is True:
        return (3, 4)
    return ()


def output_mask(n: fx.Node) -> int | None:
    """Position of `n`'s argument that says which of its outputs the kernel computes, one flag per
    output (`output_mask` of convolution's and the norms' backward, `grad_input_mask`), if it has
    one among its positional arguments."""
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return None
    for i, arg in enumerate(schema.arguments):
        if arg.name in ("output_mask", "grad_input_mask") and str(arg.type) == "List[bool]":
            flags = n.args[i] if i < len(n.args) else None
            ok = isinstance(flags, (list, tuple)) and len(flags) == len(schema.returns)
            return i if ok else None
    return None


def is_tangent(n: fx.Node) -> bool:
    return n.op == "placeholder" and "tangents" in n.name


def is_random(n: fx.Node) -> bool:
    """Ops whose recomputation would draw other random numbers (dropout)."""
    tags = getattr(n.target, "tags", ())
    if torch.Tag.nondeterministic_seeded not in tags:
        return False
    # attention kernels are tagged for their dropout: without dropout they draw nothing
    schema = n.target._schema  # type: ignore[union-attr]
    for i, arg in enumerate(schema.arguments):
        if arg.name == "dropout_p":
            value = n.args[i] if i < len(n.args) else n.kwargs.get(arg.name, arg.default_value)
            return not (isinstance(value, (int, float)) and value == 0)
    return True


def tangent_dependent(joint: fx.GraphModule) -> set[str]:
    """The joint's nodes that read a tangent, directly or not (the backward proper)."""
    dep: set[fx.Node] = set()
    for n in joint.graph.nodes:
        if is_tangent(n) or any(a in dep for a in n.all_input_nodes):
            dep.add(n)
    return {n.name for n in dep}


def is_mutation(n: fx.Node, built: _Builder) -> bool:
    """An in-place write into an input (no remat node: what it writes is fixed memory), such as
    the functionalized `copy_` of a buffer's new value."""
    schema = getattr(n.target, "_schema", None)
    return n.op == "call_function" and schema is not None and schema.is_mutable and n.name not in built.nodes


def _reads_running_stats_only(n: fx.Node, inputs: set[fx.Node]) -> bool:
    """BatchNorm in training whose only arguments among `inputs` are its running statistics
    (arguments 3 and 4): its recomputation (`_native_batch_norm_legit.no_stats`) reads none."""
    if n.target is not _BN_FUNCTIONAL or len(n.args) < 6 or n.args[5] is not True:
        return False
    return not any(a in inputs for i, a in enumerate(n.args) if i not in (3, 4) and isinstance(a, fx.Node))


def owner(built: _Builder, n: fx.Node) -> str | None:
    """The remat node holding fx node `n`'s value (None: fixed memory or no tensor)."""
    if n.name in built.nodes:
        return n.name
    key = built.key.get(n)
    held = built.current.get(key) if key is not None else None
    return None if held in (None, _FIXED) else held


def written_input_readers(joint: fx.GraphModule, built: _Builder) -> tuple[dict[fx.Node, set[str]], set[str]]:
    """Per in-place write into an input in the forward (a buffer's or an input's new value copied
    into it), the remat nodes of the forward that read what it overwrites (the input, or a view of
    it) before it in the joint graph: they read the old value, so they must run before the write.
    And the nodes never recomputed (`realize` keeps their first copy, `solve_graph` prices them
    like random ops): those of the readers whose recomputation would read the input again, after
    the write, i.e. the new value (BatchNorm reading its running statistics is none of them:
    recomputed, `no_stats`, it reads no running statistics), and the values written, kept until
    the write (BatchNorm's new running statistics: only its first copy has them)."""
    dependent = tangent_dependent(joint)
    nodes = list(joint.graph.nodes)
    pos = {n: i for i, n in enumerate(nodes)}
    # storage key -> the forward remat nodes reading it
    by_key: dict[int, list[fx.Node]] = defaultdict(list)
    for n in nodes:
        if n.name in built.nodes and n.name not in dependent:
            for k in dict.fromkeys(built.key[a] for a in n.all_input_nodes if a in built.key):
                by_key[k].append(n)
    readers: dict[fx.Node, set[str]] = {}
    kept: set[str] = set()
    for m in nodes:
        if not is_mutation(m, built) or m.name in dependent:
            continue
        written = {built.key[a] for a in _written_args(m) if a in built.key}
        found: set[str] = set()
        for n in (n for k in written for n in by_key.get(k, []) if pos[n] < pos[m]):
            found.add(n.name)
            if not _reads_running_stats_only(n, {a for a in n.all_input_nodes if built.key.get(a) in written}):
                kept.add(n.name)
        readers[m] = found
        kept.update(o for o in (owner(built, a) for a in m.all_input_nodes) if o is not None)
    return readers, kept


def snapshot_written_inputs(joint: fx.GraphModule) -> list[fx.Node]:
    """Rewrites `joint` in place so that the forward reads the old value of an input it writes (a
    buffer's EMA, a step counter, an input scaled in place) from a copy: `clone(input)` before the
    first such read, which those reads take instead of the input. A recomputation of a reader after
    the write (in the backward) then reads the copy, which is never recomputed, rather than the
    input, which by then holds the new value. The copy is a remat node like any other (the solver
    keeps it or the readers). Not copied: reads by the values written themselves (kept until the
    write, never recomputed) and BatchNorm's reads of its running statistics (recomputed, it reads
    none). Returns the copies made (none where `joint` has them already)."""
    graph = joint.graph
    nodes = list(graph.nodes)
    pos = {n: i for i, n in enumerate(nodes)}
    dependent = tangent_dependent(joint)
    first_write: dict[fx.Node, int] = {}
    values: set[fx.Node] = set()
    for m in nodes:
        schema = getattr(m.target, "_schema", None)
        if m.op != "call_function" or schema is None or not schema.is_mutable or m.name in dependent:
            continue
        for target in _written_args(m):
            if target.op == "placeholder":
                first_write.setdefault(target, pos[m])
            values.update(a for a in m.all_input_nodes if a is not target)
    made: list[fx.Node] = []
    for p, at in first_write.items():
        readers = [
            u
            for u in p.users
            if pos[u] < at
            and u.name not in dependent
            and u not in values
            and SNAPSHOT not in u.meta
            and not _reads_running_stats_only(u, {p})
        ]
        if not readers:
            continue
        with graph.inserting_before(min(readers, key=pos.__getitem__)):
            old = graph.call_function(torch.ops.aten.clone.default, (p,))
        old.meta[SNAPSHOT] = p.name
        val = p.meta.get("val")
        if isinstance(val, FakeTensor):
            with val.fake_mode:
                old.meta["val"] = torch.ops.aten.clone.default(val)
        elif isinstance(val, torch.Tensor):
            old.meta["val"] = val.clone()
        for u in readers:
            u.replace_input_with(p, old)
        made.append(old)
    if made:
        joint.recompile()
    return made


def bn_stats_element(n: fx.Node) -> bool:
    """Element 3 or 4 of BatchNorm in training: the new running statistics, which only the
    first (functional) copy produces."""
    src = n.args[0] if n.target is operator.getitem and n.args else None
    return isinstance(src, fx.Node) and src.target is _BN_FUNCTIONAL and n.args[1] in (3, 4)


@dataclasses.dataclass
class Realization:
    """The rewritten joint graph and what its forward graph saves."""

    joint: fx.GraphModule
    saved: list[fx.Node]
    saved_sym: list[fx.Node]
    # compute events of the schedule the rewrite could not follow, with the reason
    deviations: list[str]


class _Rewriter:
    def __init__(self, joint: fx.GraphModule, built: _Builder, num_fwd_outputs: int) -> None:
        self.joint = joint
        self.built = built
        self.nodes = list(joint.graph.nodes)
        self.by_name = {n.name: n for n in self.nodes}
        outputs = list(self.nodes[-1].args[0])
        self.outputs = outputs
        self.fwd_outputs = [o for o in outputs[:num_fwd_outputs] if isinstance(o, fx.Node)]
        self.graph = fx.Graph()
        self.placeholders: dict[fx.Node, fx.Node] = {}
        for n in self.nodes:
            if n.op == "placeholder":
                p = self.graph.placeholder(n.name)
                p.meta = n.meta
                self.placeholders[n] = p
        # remat node id -> its current copy
        self.current: dict[str, fx.Node] = {}
        self.derived: dict[tuple[Any, ...], fx.Node] = {}
        self.phase = "forward"
        self.forward_set: set[fx.Node] = set()
        self.elements: dict[tuple[fx.Node, Any], fx.Node] = {}
        self.deviations: list[str] = []
        self.random: set[str] = set()
        self.seen: set[str] = set()
        self.tangent_dependent = tangent_dependent(joint)
        self.readers, self.kept = written_input_readers(joint, built)
        self._mutations()
        statistics = {n.name for n in self.nodes if n.name in built.nodes and bn_stats_element(n)}
        self.pinned = self._pinned(outputs) | self.kept | statistics

    def _pinned(self, outputs: list[Any]) -> set[str]:
        """Nodes never recomputed: outputs (forward outputs, gradients), random ops, and tuple ops
        one of whose elements is a forward output (input mutations), BatchNorm excepted (recomputed
        as no_stats); not what a forward output is computed from (the loss's input).
        (`__init__` adds the nodes that read an input the forward then writes, the values written
        into inputs, and BatchNorm's new running statistics: `take_statistics`.)"""
        owners = {self.owner(o) for o in self.fwd_outputs}
        pinned = {o for o in (self.owner(o) for o in outputs if isinstance(o, fx.Node)) if o is not None}
        self.random = set()
        for name, nd in self.built.nodes.items():
            fxn = self.by_name.get(nd.source)
            if fxn is None:
                continue
            if is_random(fxn):
                self.random.add(name)
            elif (
                nd.parent is None
                and fxn.target is not _BN_FUNCTIONAL
                and any(u.target is operator.getitem and u.name in owners for u in fxn.users)
            ):
                pinned.add(name)
        return pinned | self.random

    def _mutations(self) -> None:
        """In-place writes into inputs in the forward (a buffer's new running statistics, kept in
        the graph), with what they wait for: the remat nodes holding their inputs (resident) and
        those that read the old value (computed). They run in the forward as soon as both are
        there, so that what they write is not held until the end of the forward, and never before
        a read of the value they overwrite."""
        self.pending: dict[fx.Node, tuple[set[str], set[str]]] = {}
        self.waiting: dict[str, list[fx.Node]] = defaultdict(list)
        for m, readers in self.readers.items():
            inputs = {o for o in (self.owner(a) for a in m.all_input_nodes) if o is not None}
            self.pending[m] = (inputs, readers)
            for v in sorted(inputs | readers):
                self.waiting[v].append(m)

    def owner(self, n: fx.Node) -> str | None:
        """The remat node holding fx node `n`'s value (None: fixed memory or no tensor)."""
        return owner(self.built, n)

    def _storages(self, n: fx.Node) -> set[int]:
        """The storage keys `n`'s output holds (a tuple of views: those of its elements)."""
        b = self.built
        if n in b.key:
            return {b.key[n]}
        return {e[1] for e in b.elements.get(n, []) if e is not None and e[0] == "alias"}

    def _alias_sources(self, n: fx.Node) -> list[fx.Node]:
        """The inputs of `n` whose storage `n`'s output shares (views, aliases)."""
        mine = self._storages(n)
        return [x for x in n.all_input_nodes if mine & self._storages(x)]

    def value(self, n: fx.Node) -> fx.Node:
        """The copy of `n` the node being emitted reads."""
        if n.op == "placeholder":
            return self.placeholders[n]
        if n.name in self.built.nodes:
            found = self.current.get(n.name)
            if found is None:
                # the schedule reads a value it does not hold: recompute it here
                self.deviations.append(f"{n.name} read while not resident: recomputed")
                found = self.compute(n.name)
            return found
        args = tuple(self.value(a) for a in n.all_input_nodes)
        key = (self.phase, n, args)
        found = self.derived.get(key)
        if found is None:
            found = self.graph.node_copy(n, self.value)
            found.meta[ALIAS] = [self.value(a).name for a in self._alias_sources(n)]
            found.meta.pop(NODE, None)
            self.derived[key] = found
        return found

    def compute(self, v: str) -> fx.Node:
        """Emit a copy of remat node `v` (or reuse the copy of a node that is never recomputed)."""
        if v in self.pinned and v in self.current:
            return self.current[v]
        n = self.by_name[v]
        if n.target is _BN_FUNCTIONAL and v in self.seen and n.args[5] is True:
            # recomputed BatchNorm: the batch statistics again, running statistics untouched
            x, w, b = (self.value(a) if isinstance(a, fx.Node) else a for a in n.args[:3])
            copy = self.graph.call_function(_BN_NO_STATS, (x, w, b, True, n.args[6], n.args[7]))
            copy.meta = dict(n.meta)
            val = n.meta.get("val")
            if isinstance(val, (tuple, list)):
                copy.meta["val"] = tuple(val[:3])
        elif n.target is operator.getitem:
            copy = self.element(n)
        else:
            unread = unread_args(n)
            reused = self.reused_elements(n) if v in self.seen else set()
            mask = output_mask(n) if reused else None
            if unread or mask is not None:
                args = [None if i in unread else fx.node.map_arg(a, self.value) for i, a in enumerate(n.args)]
                if mask is not None:
                    args[mask] = [bool(f) and i not in reused for i, f in enumerate(n.args[mask])]
                copy = self.graph.call_function(n.target, tuple(args), fx.node.map_arg(n.kwargs, self.value))
                copy.meta = dict(n.meta)
                val = n.meta.get("val")
                if mask is not None and isinstance(val, (tuple, list)):
                    copy.meta["val"] = tuple(None if i in reused else x for i, x in enumerate(val))
            else:
                copy = self.graph.node_copy(n, self.value)
        copy.meta[NODE] = v
        copy.meta[PHASE] = "forward" if copy in self.forward_set else self.phase
        copy.meta.pop(ALIAS, None)
        self.current[v] = copy
        first = v not in self.seen
        self.seen.add(v)
        if n.target is not operator.getitem:
            self.take_elements(n, copy)
        if first and n.target is _BN_FUNCTIONAL:
            self.take_statistics(n, copy)
        if self.phase == "forward":
            self.flush_mutations(v)
        return copy

    def reused_elements(self, n: fx.Node) -> set[int]:
        """The elements of tuple op `n` that keep a copy taken already (gradients, outputs): a
        recomputation of `n` is never read for them. Where the op takes an output mask, its
        recomputation computes none of them (`compute`): the graph counts their bytes once, in the
        gradient buffers (`fixed_memory`), and a kernel told to compute them would allocate them
        again, next to those."""
        return {
            u.args[1]
            for u in n.users
            if u.target is operator.getitem
            and isinstance(u.args[1], int)
            and u.name in self.pinned
            and u.name in self.current
        }

    def take_statistics(self, n: fx.Node, copy: fx.Node) -> None:
        """BatchNorm's new running statistics (elements 3 and 4) are computed with its first copy,
        the functional one, and kept: a recomputation (`no_stats`) has no such elements, and the
        in-place writes of the running statistics read them."""
        for u in n.users:
            if u.name not in self.built.nodes or not bn_stats_element(u) or u.name in self.seen:
                continue
            element = self.elements.get((copy, u.args[1]))
            if element is not None:
                element.meta[NODE] = u.name
                element.meta[PHASE] = "forward" if copy in self.forward_set else self.phase
                self.current[u.name] = element
                self.seen.add(u.name)
                if self.phase == "forward":
                    self.flush_mutations(u.name)

    def take_elements(self, n: fx.Node, copy: fx.Node) -> None:
        """Take every element of a tuple copy right after it: a getitem emitted later, where the
        schedule reads that element, would keep the tuple, and with it all its elements, alive until
        then (the generated code drops the tuple after its last getitem). Unread ones are dead code."""
        val = copy.meta.get("val")
        if not isinstance(val, (tuple, list)):
            return
        for u in n.users:
            index = u.args[1] if u.target is operator.getitem else None
            if (
                isinstance(index, int)
                and index < len(val)
                and val[index] is not None
                and (copy, index) not in self.elements
            ):
                self.elements[(copy, index)] = self.graph.node_copy(u, lambda a: copy if a is n else self.value(a))

    def flush_mutations(self, v: str) -> None:
        """Emit the in-place writes waiting for `v` whose inputs are resident and whose readers
        (the nodes reading the value they overwrite) are computed."""
        for m in self.waiting.pop(v, []):
            if m in self.pending:
                inputs, readers = self.pending[m]
                if all(o in self.current for o in inputs) and readers <= self.seen:
                    self.emit_mutation(m)

    def emit_mutation(self, m: fx.Node) -> None:
        del self.pending[m]
        self.graph.node_copy(m, self.value)

    def element(self, n: fx.Node) -> fx.Node:
        """A copy of getitem `n` on the current copy of its tuple: one per tuple copy (the tuple holds
        its elements anyway). A tuple does not cross the boundary: an element the backward takes
        from a forward tuple is taken in the forward, right after the tuple, and saved."""
        tup = self.value(n.args[0])  # type: ignore[arg-type]
        key = (tup, n.args[1])
        if key not in self.elements:
            if self.phase == "backward" and tup in self.forward_set:
                with self.graph.inserting_after(tup):
                    self.elements[key] = self.graph.node_copy(n, self.value)
                self.forward_set.add(self.elements[key])
            else:
                self.elements[key] = self.graph.node_copy(n, self.value)
        return self.elements[key]

    def run(self, events: Sequence[dict[str, str]]) -> tuple[fx.GraphModule, list[fx.Node], list[fx.Node]]:
        scheduled: set[str] = set()  # the nodes the schedule has computed so far
        for e in events:
            v = e["node"]
            if v not in self.built.nodes:
                raise ApplyError(f"the schedule names node {v!r}, which the joint graph does not have")
            if e["op"] == "compute":
                if self.phase == "forward" and v in self.tangent_dependent:
                    self.finish_forward()
                again = v in scheduled
                scheduled.add(v)
                if v in self.pinned and v in self.current:
                    if v in self.random and self.current[v].meta.get(PHASE) != self.phase:
                        self.deviations.append(f"{v} (random) kept from the forward rather than recomputed")
                    elif v in self.kept and again:
                        self.deviations.append(f"{v} (reads an input the forward then writes) kept, not recomputed")
                    continue
                self.compute(v)
            elif e["op"] == "free" and v not in self.pinned:
                self.current.pop(v, None)
            else:
                continue
        if self.phase == "forward":
            self.finish_forward()
        outs = tuple(self.forward_values.get(o) or self.value(o) if isinstance(o, fx.Node) else o for o in self.outputs)
        out = self.graph.output(outs)
        out.meta = dict(self.nodes[-1].meta)
        self.graph.eliminate_dead_code()
        gm = fx.GraphModule(self.joint, self.graph)
        return gm, *self.boundary(gm)

    def finish_forward(self) -> None:
        self.forward_values = {o: self.value(o) for o in self.fwd_outputs}
        for m in list(self.pending):
            if m not in self.pending:
                continue  # emitted as a reader below was computed
            for r in sorted(self.pending[m][1] - self.seen):
                # the schedule computes it in the backward, after the write: it would read the new value
                self.deviations.append(f"{r} reads an input {m.name} writes: computed in the forward, before the write")
                self.compute(r)
            if m in self.pending:
                self.emit_mutation(m)
        self.forward_set.update(self.graph.nodes)
        self.phase = "backward"

    def boundary(self, gm: fx.GraphModule) -> tuple[list[fx.Node], list[fx.Node]]:
        """The forward-phase copies (and primal inputs) that backward-phase nodes read."""
        forward = {n.name for n in self.forward_set}
        saved: dict[fx.Node, None] = {}
        for n in gm.graph.nodes:
            if n.op == "output" or n.name in forward:
                continue
            for a in n.all_input_nodes:
                if a.name in forward and not is_tangent(a):
                    saved[a] = None
        tensors = [n for n in saved if isinstance(n.meta.get("val"), torch.Tensor)]
        syms = [n for n in saved if isinstance(n.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool))]
        return tensors, syms


def realize(
    joint: fx.GraphModule, built: _Builder, events: Sequence[dict[str, str]], num_fwd_outputs: int
) -> Realization:
    """The joint graph rewritten in the schedule's order, with the values its forward saves."""
    rw = _Rewriter(joint, built, num_fwd_outputs)
    gm, saved, syms = rw.run(events)
    return Realization(gm, saved, syms, rw.deviations)


def _holders(gm: fx.GraphModule, held: dict[str, set[str]]) -> dict[str, set[str]]:
    """Per node of `gm`, the copies (by name) whose storage it keeps alive."""
    for n in gm.graph.nodes:
        if n.op == "output":
            continue
        if NODE in n.meta:
            held[n.name] = {n.name}
        elif n.name not in held:
            held[n.name] = set().union(*(held.get(a, set()) for a in n.meta.get(ALIAS, [])))
    return held


def _outputs(gm: fx.GraphModule) -> list[Any]:
    args = gm.graph.output_node().args[0]
    return list(args) if isinstance(args, (tuple, list)) else [args]


def _elements(graph: dict[str, Any]) -> dict[str, list[tuple[int, str]]]:
    """Per tuple node of `graph`, its element nodes (index, id)."""
    found: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for n in graph["nodes"]:
        meta = n.get("meta") or {}
        if "element" in meta and n.get("inputs"):
            found[n["inputs"][0]].append((int(meta["element"]), n["id"]))
    return found


def realized_events(
    graph: dict[str, Any], fw: fx.GraphModule, bw: fx.GraphModule, num_fwd_outputs: int
) -> list[dict[str, str]]:
    """What the forward and backward graphs run, as a remat schedule: each copy computed where it
    is and freed after the last use of it or of a view of it; forward outputs held to the end. An
    op's outputs are all allocated by the op: each element of a tuple is computed right after it
    (the graph's element node; an element no getitem takes lives as long as the tuple), but for
    those its output mask turned off (its `val` holds None there: `_Rewriter.compute`).

    A schedule may recompute a tuple while it still holds an element of an earlier copy; the new
    copy's element is allocated too, taken or not, so two copies of that node are alive at once.
    The simulator holds one copy per node: the second is the node `<id>@copy<k>` (`prediction_graph`
    adds it, with the node's memory), and whichever copy dies first frees the `@copy` node, so the
    node itself stays resident for its readers until its last copy dies."""
    elements = _elements(graph)
    events: list[dict[str, str]] = []
    node_of: dict[str, str] = {}
    resident: set[str] = set()  # copies (by name) and untaken elements ("tuple#id")
    untaken: dict[str, list[str]] = defaultdict(list)
    # node -> the simulator's nodes of its live copies, a stack: the node itself, then
    # `<id>@copy1`, `<id>@copy2`, ...; a copy's death frees the top, so the node goes last
    alive: dict[str, list[str]] = defaultdict(list)

    def compute(name: str, v: str) -> None:
        node_of[name] = v
        held = alive[v]
        held.append(f"{v}@copy{len(held)}" if held else v)
        events.append({"op": "compute", "node": held[-1]})
        resident.add(name)

    def free(name: str) -> None:
        events.append({"op": "free", "node": alive[node_of[name]].pop()})
        resident.discard(name)
        for phantom in untaken.pop(name, []):
            free(phantom)

    def run(gm: fx.GraphModule, held: dict[str, set[str]], hold_at_end: set[str]) -> None:
        nodes = list(gm.graph.nodes)
        last: dict[str, int] = {}
        for i, n in enumerate(nodes):
            for h in held.get(n.name, ()):
                last[h] = i
            for a in n.all_input_nodes:
                for h in held.get(a.name, ()):
                    last[h] = i
        for i, n in enumerate(nodes):
            if n.op == "call_function" and NODE in n.meta and n.name not in node_of:
                v = str(n.meta[NODE])
                compute(n.name, v)
                taken = {str(u.meta.get(NODE)): u for u in n.users if NODE in u.meta}
                val = n.meta.get("val")
                made = [x is not None for x in val] if isinstance(val, (tuple, list)) else []
                for index, c in sorted(elements.get(v, [])):
                    if c in taken:
                        compute(taken[c].name, c)
                    elif index < len(made) and made[index]:
                        compute(f"{n.name}#{c}", c)
                        untaken[n.name].append(f"{n.name}#{c}")
            for h in sorted(h for h, at in last.items() if at == i):
                if h in resident and h not in hold_at_end:
                    free(h)

    fw_held = _holders(fw, {})
    fw_out = _outputs(fw)
    descs = fw.graph.output_node().meta.get("desc") or []
    # the new values of mutated inputs (running statistics) are copied into the inputs and
    # dropped when the forward returns; the caller holds the other outputs (the loss)
    mutation = {i for i, d in enumerate(descs[:num_fwd_outputs]) if type(d).__name__ == "InputMutationAOTOutput"}

    def holding(outputs: list[tuple[int, Any]]) -> set[str]:
        return set().union(*(fw_held.get(o.name, set()) for _, o in outputs if isinstance(o, fx.Node)))

    user = list(enumerate(fw_out[:num_fwd_outputs]))
    returned = holding([(i, o) for i, o in user if i not in mutation])
    mutated = holding([(i, o) for i, o in user if i in mutation])
    saved = holding(list(enumerate(fw_out[num_fwd_outputs:])))
    run(fw, fw_held, returned | saved | mutated)
    for h in sorted(mutated - saved - returned):
        if h in resident:
            free(h)
    # backward: the saved values arrive as placeholders of the same names
    bw_held: dict[str, set[str]] = {
        n.name: {n.name} for n in bw.graph.nodes if n.op == "placeholder" and n.name in node_of
    }
    bw_held = _holders(bw, bw_held)
    for n in bw.graph.nodes:
        if n.op == "placeholder" and n.name not in node_of:
            bw_held[n.name] = set()
    leftover = saved - {n.name for n in bw.graph.nodes if n.op == "placeholder"}
    for h in sorted(leftover - returned):
        if h in resident:
            free(h)
    grads = set().union(*(bw_held.get(o.name, set()) for o in _outputs(bw) if isinstance(o, fx.Node)))
    run(bw, bw_held, returned | grads)
    return events


def prediction_graph(graph: dict[str, Any], events: Sequence[dict[str, str]]) -> dict[str, Any]:
    """`graph` as `realized_events` counts it: without the nodes never computed (dead code the
    partition dropped), and each tuple's memory without its elements' (they are nodes of their own,
    computed with it), so that an op's outputs are counted once; plus a node `<id>@copy<k>` for
    each second copy `realized_events` holds (the node's memory, no inputs: it is computed with
    the tuple copy that made it)."""
    computed = {e["node"] for e in events if e["op"] == "compute"}
    taken: dict[str, int] = defaultdict(int)
    for tup, items in _elements(graph).items():
        memory = {n["id"]: int(n["memory"]) for n in graph["nodes"] if n["id"] in {c for _, c in items}}
        taken[tup] = sum(memory.values())
    nodes = [
        {**n, "memory": max(int(n["memory"]) - taken[n["id"]], 0)} if n["id"] in taken else n
        for n in graph["nodes"]
        if n["id"] in computed
    ]
    by_id = {n["id"]: n for n in nodes}
    copies = sorted(c for c in computed if c not in by_id and "@copy" in c)
    nodes += [{**by_id[c.rsplit("@copy", 1)[0]], "id": c, "inputs": [], "cost": 0.0} for c in copies]
    return {**graph, "nodes": nodes}
