//! FastSA's state S: a sequence of T slots, each a nop or the compute of one node of the
//! [`Model`] (repeats are recomputations), with the three mutations and the memory
//! profile M(S) kept in a [`PeakTree`].
//!
//! The memory model is the simulator's, as `schedule::sequence::from_computes` emits it:
//! a compute at slot `t` reads, for each input `u`, the latest production of `u` before
//! `t`; a production of `v` at slot `p` lives on `[p, e]`, `e` its last read before the
//! next production of `v` (`e = p` when unread). The bytes in use at a compute slot are
//! `K + Σ` of the lifetimes covering it (its inputs and its own output among them); at a
//! nop slot they are never more than at the next compute, so the root of the tree (plus
//! `K`) is the peak. A group's transient bytes beyond its output (`extra`, zero for an
//! original node) count at its own slot only.
//!
//! Each mutation touches the lifetimes of the node it moves and of the productions its
//! inputs read at that slot: O(|inputs| · log T).

use super::tree::PeakTree;

/// Nodes inserted between two polls of [`Sequence::new_polled`].
const POLL_EVERY: usize = 4096;
use rand::Rng;

/// A nop slot.
const NOP: u32 = u32::MAX;

/// Slots per compute of the starting sequence (the gaps recomputations are put in).
const SLOTS_PER_COMPUTE: usize = 64;
/// T at least (small graphs), and at most (10,000 nodes: 2^20 slots, the paper's T).
const MIN_SLOTS: usize = 1 << 10;
const MAX_SLOTS: usize = 1 << 22;

/// What the annealer sees of a graph: per node (an original node, or a group of them)
/// its cost, its weight in the objective, the bytes of its output, the bytes alive
/// only while it computes beyond its output, and its inputs.
pub(super) struct Model {
    fixed: i64,
    cost: Vec<f64>,
    weight: Vec<f64>,
    size: Vec<i64>,
    extra: Vec<i64>,
    preds: Vec<Vec<u32>>,
    /// `K + Σ (size + extra)`, to check that every sum of the tree fits an `i64`.
    total: u128,
}

impl Model {
    pub(super) fn empty(fixed: u64) -> Model {
        Model {
            fixed: i64::try_from(fixed).unwrap_or(i64::MAX),
            cost: Vec::new(),
            weight: Vec::new(),
            size: Vec::new(),
            extra: Vec::new(),
            preds: Vec::new(),
            total: u128::from(fixed),
        }
    }

    /// Appends a node reading `preds` (earlier nodes, ascending).
    pub(super) fn push(&mut self, cost: f64, weight: f64, size: u64, extra: u128, preds: Vec<u32>) {
        self.total = self
            .total
            .saturating_add(u128::from(size))
            .saturating_add(extra);
        self.cost.push(cost);
        self.weight.push(weight);
        self.size.push(i64::try_from(size).unwrap_or(i64::MAX));
        self.extra.push(i64::try_from(extra).unwrap_or(i64::MAX));
        self.preds.push(preds);
    }

    /// Whether every memory figure of every sequence fits the tree's `i64`s (with room for
    /// a lifetime counted twice while it is retimed).
    pub(super) fn fits_i64(&self) -> bool {
        self.total
            .checked_mul(2)
            .is_some_and(|t| t <= i64::MAX as u128)
    }

    pub(super) fn len(&self) -> usize {
        self.cost.len()
    }
    #[cfg(test)]
    pub(super) fn size(&self, v: usize) -> i64 {
        self.size[v]
    }
    #[cfg(test)]
    pub(super) fn extra(&self, v: usize) -> i64 {
        self.extra[v]
    }
    pub(super) fn weight(&self, v: usize) -> f64 {
        self.weight[v]
    }
    #[cfg(test)]
    pub(super) fn preds(&self, v: usize) -> &[u32] {
        &self.preds[v]
    }
}

/// One mutation of S (FastSA §2): put a node into a nop slot, remove the node of a compute
/// slot, or rotate (both: the node of one slot moves to a nop slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mutation {
    Insert { node: u32, slot: u32 },
    Remove { node: u32, slot: u32 },
    Rotate { node: u32, from: u32, to: u32 },
}

/// A start sequence that reads a node before producing it.
#[derive(Debug)]
pub(super) struct Unordered {
    pub position: usize,
    pub node: usize,
}

/// The state S with its memory profile and cost.
pub(super) struct Sequence<'m> {
    model: &'m Model,
    /// The node computed at each slot, or [`NOP`].
    slot: Vec<u32>,
    /// For a compute slot, its position in `computes`.
    position: Vec<u32>,
    /// The compute slots, unordered (a random one is drawn in O(1)).
    computes: Vec<u32>,
    /// The slots of each node's productions, ascending.
    productions: Vec<Vec<u32>>,
    /// The slots whose compute reads each node, ascending.
    reads: Vec<Vec<u32>>,
    tree: PeakTree,
    cost: f64,
    weight: f64,
}

impl<'m> Sequence<'m> {
    /// The number of slots T for a sequence of `computes` computes: 64 per compute, a
    /// power of two, at least 2^10 and at most 2^22 (always twice the computes).
    pub(super) fn slots_for(computes: usize) -> usize {
        computes
            .max(1)
            .saturating_mul(SLOTS_PER_COMPUTE)
            .checked_next_power_of_two()
            .unwrap_or(MAX_SLOTS)
            .clamp(MIN_SLOTS, MAX_SLOTS)
            .max(computes.saturating_mul(2).next_power_of_two())
    }

    /// The bytes a sequence of `computes` computes over `model` allocates, about.
    pub(super) fn bytes(model: &Model, computes: usize) -> u64 {
        let edges: usize = model.preds.iter().map(Vec::len).sum();
        Self::bytes_for(model.len(), edges, computes)
    }

    /// [`Sequence::bytes`] of a model of `nodes` nodes and `edges` edges.
    pub(super) fn bytes_for(nodes: usize, edges: usize, computes: usize) -> u64 {
        let slots = Self::slots_for(computes);
        PeakTree::bytes(slots) + 8 * slots as u64 + 8 * (computes + 2 * nodes + edges) as u64 * 4
    }

    /// [`Sequence::new_polled`] without a poll.
    #[cfg(test)]
    pub(super) fn new(model: &'m Model, order: &[usize]) -> Result<Sequence<'m>, Unordered> {
        let Ok(built) =
            Sequence::new_polled(model, order, || Ok::<(), std::convert::Infallible>(()));
        built
    }

    /// S with the computes of `order` spread evenly over T slots (compute `i` at slot
    /// `(i + 1) · T / (m + 1)`), every other slot a nop; `poll` is called every
    /// `POLL_EVERY` nodes inserted, and its error ends the build (a million-node sequence
    /// is a pass of allocations and tree updates).
    pub(super) fn new_polled<E>(
        model: &'m Model,
        order: &[usize],
        mut poll: impl FnMut() -> Result<(), E>,
    ) -> Result<Result<Sequence<'m>, Unordered>, E> {
        let slots = Self::slots_for(order.len());
        let n = model.len();
        let mut s = Sequence {
            model,
            slot: vec![NOP; slots],
            position: vec![0; slots],
            computes: Vec::with_capacity(order.len()),
            productions: vec![Vec::new(); n],
            reads: vec![Vec::new(); n],
            tree: PeakTree::new(slots),
            cost: 0.0,
            weight: 0.0,
        };
        let gap = slots as u64 / (order.len() as u64 + 1);
        for (i, &v) in order.iter().enumerate() {
            if i % POLL_EVERY == 0 {
                poll()?;
            }
            let t = ((i as u64 + 1) * gap) as u32;
            if v >= n || !s.can_insert(v as u32, t) {
                return Ok(Err(Unordered {
                    position: i,
                    node: v,
                }));
            }
            s.insert(v as u32, t);
        }
        Ok(Ok(s))
    }

    /// M(S): the peak bytes, `K` included.
    pub(super) fn peak(&self) -> i64 {
        self.model.fixed + self.tree.peak()
    }
    /// C(S): Σ c over the computes.
    pub(super) fn cost(&self) -> f64 {
        self.cost
    }
    /// Σ weight over the computes: what the objective counts as C(S).
    pub(super) fn weight(&self) -> f64 {
        self.weight
    }
    pub(super) fn slots(&self) -> usize {
        self.slot.len()
    }

    /// The (slot, node) pairs of the computes, unordered, into `out`.
    pub(super) fn computes_into(&self, out: &mut Vec<(u32, u32)>) {
        out.clear();
        out.extend(self.computes.iter().map(|&t| (t, self.slot[t as usize])));
    }

    /// The computes in slot order.
    pub(super) fn order(&self) -> Vec<usize> {
        let mut slots = self.computes.clone();
        slots.sort_unstable();
        slots
            .iter()
            .map(|&t| self.slot[t as usize] as usize)
            .collect()
    }

    /// A random valid mutation, or `None` when the one drawn is not valid.
    pub(super) fn propose(&self, rng: &mut impl Rng) -> Option<Mutation> {
        match rng.random_range(0..3u8) {
            0 => {
                let node = rng.random_range(0..self.model.len() as u32);
                let slot = self.random_nop(rng)?;
                self.can_insert(node, slot)
                    .then_some(Mutation::Insert { node, slot })
            }
            1 => {
                let slot = self.random_compute(rng);
                self.can_remove(slot, None).then_some(Mutation::Remove {
                    node: self.slot[slot as usize],
                    slot,
                })
            }
            _ => {
                let from = self.random_compute(rng);
                let node = self.slot[from as usize];
                let to = self.random_nop(rng)?;
                (self.can_insert(node, to) && self.can_remove(from, Some(to)))
                    .then_some(Mutation::Rotate { node, from, to })
            }
        }
    }

    /// A random slot, when it is a nop.
    fn random_nop(&self, rng: &mut impl Rng) -> Option<u32> {
        let t = rng.random_range(0..self.slot.len() as u32);
        (self.slot[t as usize] == NOP).then_some(t)
    }

    /// A random compute slot.
    fn random_compute(&self, rng: &mut impl Rng) -> u32 {
        self.computes[rng.random_range(0..self.computes.len())]
    }

    pub(super) fn apply(&mut self, m: Mutation) {
        match m {
            Mutation::Insert { node, slot } => self.insert(node, slot),
            Mutation::Remove { slot, .. } => self.remove(slot),
            Mutation::Rotate { node, from, to } => {
                self.insert(node, to);
                self.remove(from);
            }
        }
    }

    pub(super) fn undo(&mut self, m: Mutation) {
        match m {
            Mutation::Insert { slot, .. } => self.remove(slot),
            Mutation::Remove { node, slot } => self.insert(node, slot),
            Mutation::Rotate { node, from, to } => {
                self.insert(node, from);
                self.remove(to);
            }
        }
    }

    /// Mutation (1) is valid: `t` is a nop and every input of `v` is produced before `t`.
    fn can_insert(&self, v: u32, t: u32) -> bool {
        self.slot[t as usize] == NOP
            && self.model.preds[v as usize]
                .iter()
                .all(|&u| self.productions[u as usize].first().is_some_and(|&p| p < t))
    }

    /// Mutation (2) is valid at compute slot `t` (after a production of the same node is
    /// put at `added`, for a rotation): the node keeps a production, and every read the
    /// production at `t` served is served by an earlier one.
    fn can_remove(&self, t: u32, added: Option<u32>) -> bool {
        let v = self.slot[t as usize] as usize;
        let productions = &self.productions[v];
        if productions.len() + usize::from(added.is_some()) < 2 {
            return false;
        }
        let i = productions.partition_point(|&p| p < t);
        if i > 0 || added.is_some_and(|a| a < t) {
            return true;
        }
        let next = productions
            .get(i + 1)
            .copied()
            .unwrap_or(NOP)
            .min(added.filter(|&a| a > t).unwrap_or(NOP));
        let reads = &self.reads[v];
        reads
            .get(reads.partition_point(|&r| r <= t))
            .is_none_or(|&r| r >= next)
    }

    /// Puts a compute of `v` at nop slot `t` (valid per [`Self::can_insert`]): it reads the
    /// latest production of each input, and serves the reads of `v` up to the next
    /// production of `v`.
    fn insert(&mut self, v: u32, t: u32) {
        let model = self.model;
        for &u in &model.preds[v as usize] {
            let p = self.serving(u, t).expect("inputs are produced before");
            let old = self.end(u, p);
            insert_sorted(&mut self.reads[u as usize], t);
            self.retime(old, self.end(u, p), model.size[u as usize]);
        }
        match self.serving(v, t) {
            Some(p) => {
                let old = self.end(v, p);
                insert_sorted(&mut self.productions[v as usize], t);
                self.retime(old, self.end(v, p), model.size[v as usize]);
            }
            None => insert_sorted(&mut self.productions[v as usize], t),
        }
        self.live(v, t, 1);
        self.slot[t as usize] = v;
        self.position[t as usize] = self.computes.len() as u32;
        self.computes.push(t);
        self.cost += model.cost[v as usize];
        self.weight += model.weight[v as usize];
    }

    /// Takes the compute out of slot `t` (valid per [`Self::can_remove`]).
    fn remove(&mut self, t: u32) {
        let model = self.model;
        let v = self.slot[t as usize];
        self.live(v, t, -1);
        match self.serving(v, t) {
            Some(p) => {
                let old = self.end(v, p);
                remove_sorted(&mut self.productions[v as usize], t);
                self.retime(old, self.end(v, p), model.size[v as usize]);
            }
            None => remove_sorted(&mut self.productions[v as usize], t),
        }
        for &u in &model.preds[v as usize] {
            let p = self.serving(u, t).expect("inputs are produced before");
            let old = self.end(u, p);
            remove_sorted(&mut self.reads[u as usize], t);
            self.retime(old, self.end(u, p), model.size[u as usize]);
        }
        self.slot[t as usize] = NOP;
        let at = self.position[t as usize] as usize;
        self.computes.swap_remove(at);
        if let Some(&moved) = self.computes.get(at) {
            self.position[moved as usize] = at as u32;
        }
        self.cost -= model.cost[v as usize];
        self.weight -= model.weight[v as usize];
    }

    /// Adds (`sign` 1) or takes away (-1) the lifetime of the production of `v` at `t` and
    /// its transient bytes.
    fn live(&mut self, v: u32, t: u32, sign: i64) {
        let end = self.end(v, t);
        let (size, extra) = (self.model.size[v as usize], self.model.extra[v as usize]);
        self.tree.add(t as usize, end as usize, sign * size);
        if extra != 0 {
            self.tree.add(t as usize, t as usize, sign * extra);
        }
    }

    /// The production of `u` a read at slot `t` uses: the latest before `t`.
    fn serving(&self, u: u32, t: u32) -> Option<u32> {
        let productions = &self.productions[u as usize];
        productions
            .partition_point(|&p| p < t)
            .checked_sub(1)
            .map(|i| productions[i])
    }

    /// The last slot of the production of `u` at `p`: its last read before the next
    /// production of `u`, or `p` when it has none.
    fn end(&self, u: u32, p: u32) -> u32 {
        let productions = &self.productions[u as usize];
        let next = productions
            .get(productions.partition_point(|&q| q <= p))
            .copied()
            .unwrap_or(NOP);
        let reads = &self.reads[u as usize];
        match reads.partition_point(|&r| r < next).checked_sub(1) {
            Some(i) if reads[i] > p => reads[i],
            _ => p,
        }
    }

    /// Moves the end of a lifetime of `bytes` from `old` to `new`.
    fn retime(&mut self, old: u32, new: u32, bytes: i64) {
        if new > old {
            self.tree.add(old as usize + 1, new as usize, bytes);
        } else if new < old {
            self.tree.add(new as usize + 1, old as usize, -bytes);
        }
    }
}

fn insert_sorted(list: &mut Vec<u32>, x: u32) {
    let i = list.partition_point(|&y| y < x);
    list.insert(i, x);
}

fn remove_sorted(list: &mut Vec<u32>, x: u32) {
    let i = list.partition_point(|&y| y < x);
    debug_assert_eq!(list.get(i), Some(&x));
    list.remove(i);
}
