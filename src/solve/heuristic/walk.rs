//! The walk through an evicted neighbourhood that eviction scores take: DTR's `h_DTR` and
//! Sethi–Ullman's `c_remat` through the non-resident ancestors of a candidate, DTR-ahead's
//! `next(t)` through its evicted descendants. A score is computed for every evictable value
//! at every eviction, so one walk serves all of a run's scores and none allocates: its stack,
//! and the nodes seen in the current walk, those whose stamp is the walk's (a new walk
//! takes the next stamp instead of clearing a set).

use crate::graph::Graph;

/// A depth-first walk over nodes, each seen at most once ([`Walk::see`]), reused walk
/// after walk. `Walk::default()` walks over no nodes: it holds a run's place while the run
/// lends its walk out (`std::mem::take`).
#[derive(Default)]
pub(crate) struct Walk {
    stack: Vec<usize>,
    /// The walk that last saw each node.
    stamp: Vec<u32>,
    current: u32,
    seen: usize,
}

impl Walk {
    /// A walk over the nodes `0..n`.
    pub(crate) fn new(n: usize) -> Walk {
        Walk {
            stamp: vec![0; n],
            ..Walk::default()
        }
    }

    /// Starts a walk at `from` (the last first), nothing seen.
    pub(crate) fn start(&mut self, from: &[usize]) {
        self.stack.clear();
        self.stack.extend_from_slice(from);
        self.seen = 0;
        self.current = self.current.wrapping_add(1);
        if self.current == 0 {
            // The stamps wrapped around: none may read as this walk's.
            self.stamp.fill(0);
            self.current = 1;
        }
    }

    /// The next node on the stack.
    pub(crate) fn next(&mut self) -> Option<usize> {
        self.stack.pop()
    }

    /// Marks `u` seen by this walk; false when it was already.
    pub(crate) fn see(&mut self, u: usize) -> bool {
        if self.stamp[u] == self.current {
            return false;
        }
        self.stamp[u] = self.current;
        self.seen += 1;
        true
    }

    /// The nodes this walk has seen.
    pub(crate) fn seen(&self) -> usize {
        self.seen
    }

    /// Goes on from `nodes` too.
    pub(crate) fn extend(&mut self, nodes: &[usize]) {
        self.stack.extend_from_slice(nodes);
    }

    /// `cost` plus `c_u + ε` (`unit`) for each node `u` not `resident` that a walk from `t`'s
    /// inputs reaches through such nodes, at most `limit` of them: what rematerialising `t`
    /// recomputes with it (the neighbourhood of DTR's `h_DTR` and Sethi–Ullman's `c_remat`),
    /// added to `cost` in the walk's order.
    pub(crate) fn evicted_ancestors(
        &mut self,
        graph: &Graph,
        t: usize,
        resident: &[bool],
        unit: f64,
        limit: usize,
        mut cost: f64,
    ) -> f64 {
        self.start(graph.preds(t));
        while let Some(u) = self.next() {
            if resident[u] || !self.see(u) {
                continue;
            }
            cost += graph.cost(u) + unit;
            if self.seen() == limit {
                break;
            }
            self.extend(graph.preds(u));
        }
        cost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A walk sees each node once, counts what it saw, and a new walk has seen nothing, also
    /// where the stamps wrap around.
    #[test]
    fn a_walk_sees_each_node_once_and_the_next_walk_none() {
        let n = 8;
        let mut walk = Walk::new(n);
        for current in [0, u32::MAX - 1, u32::MAX] {
            walk.current = current;
            for _ in 0..3 {
                walk.start(&[1, 0]);
                assert_eq!(walk.next(), Some(0));
                assert!(walk.see(0));
                assert!(!walk.see(0));
                walk.extend(&[2]);
                assert_eq!(
                    (walk.next(), walk.next(), walk.next()),
                    (Some(2), Some(1), None)
                );
                assert!(walk.see(1) && !walk.see(1));
                assert!((2..n).all(|u| walk.see(u)));
                assert_eq!(walk.seen(), n);
            }
        }
    }
}
