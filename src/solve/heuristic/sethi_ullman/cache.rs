//! The resident values of a construction, their pins, and the eviction rule (least
//! `c_remat / (s · distance to next use)`).

use super::{Dead, Fail, Variant, SAMPLE};
use crate::graph::Graph;
use crate::solve::heuristic::dtr;
use crate::solve::heuristic::walk::Walk;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The resident values, their pins, and the eviction rule.
pub(super) struct Cache<'g> {
    pub(super) graph: &'g Graph,
    /// Bytes available for values: the budget less `K`.
    pub(super) capacity: u64,
    pub(super) used: u64,
    /// Bytes of the values pinned by the recursion (each counted once).
    pub(super) pinned: u64,
    pub(super) resident: Vec<bool>,
    pub(super) pins: Vec<u32>,
    /// The resident values, in any order, and each one's position there.
    pub(super) pool: Vec<usize>,
    pub(super) slot: Vec<usize>,
    /// `succs(t)[next[t]]` is the first target from the current one on that reads `t`.
    pub(super) next: Vec<usize>,
    /// The current target.
    pub(super) now: usize,
    pub(super) evictions: usize,
    /// `ε` ([`dtr::unit`]), added to every op `c_remat` counts (free ops are no free
    /// recomputation: they cost events and lengthen chains).
    pub(super) unit: f64,
    /// `c_remat`'s walk through the non-resident ancestors, kept between calls.
    pub(super) walk: Walk,
    pub(super) rng: ChaCha8Rng,
    pub(super) variant: Variant,
    /// Values that no target reads again, pushed when they become so (some since evicted).
    pub(super) dead: Vec<usize>,
}

impl<'g> Cache<'g> {
    pub(super) fn new(graph: &'g Graph, capacity: u64, seed: u64, variant: Variant) -> Cache<'g> {
        let n = graph.len();
        Cache {
            graph,
            capacity,
            used: 0,
            pinned: 0,
            resident: vec![false; n],
            pins: vec![0; n],
            pool: Vec::new(),
            slot: vec![usize::MAX; n],
            next: vec![0; n],
            now: 0,
            evictions: 0,
            unit: dtr::unit(graph),
            walk: Walk::new(n),
            rng: ChaCha8Rng::seed_from_u64(seed),
            variant,
            dead: Vec::new(),
        }
    }

    /// Target `t` is done: its inputs' next uses move past it.
    pub(super) fn passed(&mut self, t: usize) {
        for &u in self.graph.preds(t) {
            self.next[u] += 1;
            if self.resident[u] && self.next_use(u).is_none() {
                self.dead.push(u);
            }
        }
    }

    pub(super) fn pin(&mut self, u: usize) {
        if self.pins[u] == 0 {
            self.pinned += self.graph.memory(u);
        }
        self.pins[u] += 1;
    }

    pub(super) fn unpin(&mut self, u: usize) {
        self.pins[u] -= 1;
        if self.pins[u] == 0 {
            self.pinned -= self.graph.memory(u);
        }
    }

    pub(super) fn insert(&mut self, v: usize) {
        if self.next_use(v).is_none() {
            self.dead.push(v);
        }
        self.resident[v] = true;
        self.used += self.graph.memory(v);
        self.slot[v] = self.pool.len();
        self.pool.push(v);
    }

    pub(super) fn evict(&mut self, v: usize) {
        self.resident[v] = false;
        self.used -= self.graph.memory(v);
        let at = self.slot[v];
        self.pool.swap_remove(at);
        if let Some(&moved) = self.pool.get(at) {
            self.slot[moved] = at;
        }
        self.slot[v] = usize::MAX;
        if self.next_use(v).is_some() {
            self.evictions += 1;
        }
    }

    /// The first target from the current one on that reads `t`.
    pub(super) fn next_use(&self, t: usize) -> Option<usize> {
        self.graph.succs(t).get(self.next[t]).copied()
    }

    /// Evicts values until `extra` more bytes fit, for computing `v`.
    pub(super) fn make_room(&mut self, extra: u64, v: usize) -> Result<(), Fail> {
        // used + extra > capacity, without overflow.
        while self
            .capacity
            .checked_sub(extra)
            .is_none_or(|c| self.used > c)
        {
            let Some(victim) = self.victim() else {
                return Err(Fail::NoRoom {
                    node: v,
                    needed: self.pinned.saturating_add(extra),
                });
            };
            self.evict(victim);
        }
        Ok(())
    }

    /// The evictable value of least score: among all when few, else among [`SAMPLE`]
    /// drawn (all again if the draw found none evictable).
    pub(super) fn victim(&mut self) -> Option<usize> {
        if self.variant.dead == Dead::First {
            // Dead values score 0: the first evictable one on the stack is a least one.
            let mut pinned = Vec::new();
            let mut found = None;
            while let Some(d) = self.dead.pop() {
                if !self.resident[d] || self.graph.memory(d) == 0 {
                    continue;
                }
                if self.pins[d] > 0 {
                    pinned.push(d);
                    continue;
                }
                found = Some(d);
                break;
            }
            self.dead.append(&mut pinned);
            if found.is_some() {
                return found;
            }
        }
        let mut best: Option<(f64, u64, usize)> = None;
        if self.pool.len() > SAMPLE {
            for _ in 0..SAMPLE {
                let t = self.pool[self.rng.random_range(0..self.pool.len())];
                self.consider(t, &mut best);
            }
        }
        if best.is_none() {
            for i in 0..self.pool.len() {
                self.consider(self.pool[i], &mut best);
            }
        }
        best.map(|(_, _, t)| t)
    }

    /// Keeps in `best` the evictable value of least (score, −size, index) of `best` and `t`.
    pub(super) fn consider(&mut self, t: usize, best: &mut Option<(f64, u64, usize)>) {
        let size = self.graph.memory(t);
        if self.pins[t] > 0 || size == 0 {
            return;
        }
        let score = self.score(t);
        let better = best.is_none_or(|(s, m, b)| {
            score
                .total_cmp(&s)
                .then(m.cmp(&size))
                .then(t.cmp(&b))
                .is_lt()
        });
        if better {
            *best = Some((score, size, t));
        }
    }

    /// `c_remat(t) / (s_t · (next(t) − now + 1))`; 0 for a value no target reads again.
    pub(super) fn score(&mut self, t: usize) -> f64 {
        let graph = self.graph;
        // Evicted consumers with a future reader need `t` to be recomputed: they count in its
        // cost and their next use is one of its own.
        let mut next = self.next_use(t);
        let mut downstream = 0.0;
        for &w in graph.succs(t) {
            if w < self.now && !self.resident[w] {
                if let Some(nw) = self.next_use(w) {
                    next = Some(next.map_or(nw, |x| x.min(nw)));
                    downstream += graph.cost(w) + self.unit;
                }
            }
        }
        let distance = match next {
            Some(next) => next - self.now + 1,
            None if self.variant.dead != Dead::Far => return 0.0,
            // Read by no target again, though maybe by recomputations: past the end.
            None => 2 * graph.len() - self.now + 1,
        };
        let own = graph.cost(t) + self.unit + downstream;
        let limit = self.variant.neighbourhood;
        let cost = self
            .walk
            .evicted_ancestors(graph, t, &self.resident, self.unit, limit, own);
        cost / (graph.memory(t) as f64 * distance as f64)
    }
}
