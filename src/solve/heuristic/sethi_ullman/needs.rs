//! The Sethi–Ullman needs of the nodes: how many bytes computing each from nothing takes,
//! and the order of its inputs that minimises it.

use crate::graph::Graph;

/// The Sethi–Ullman needs and, for each node, its inputs in the order of least need.
pub(super) struct Needs {
    /// `need(v)` in bytes beyond `K` (saturating at `u64::MAX`).
    pub(super) need: Vec<u64>,
    /// The inputs of `v` by `need(u) − s_u` descending: `order[start[v]..start[v + 1]]`.
    pub(super) order: Vec<usize>,
    pub(super) start: Vec<usize>,
}

impl Needs {
    pub(super) fn of(graph: &Graph) -> Needs {
        let n = graph.len();
        let mut need = vec![0u64; n];
        let mut order = Vec::with_capacity(graph.edge_count());
        let mut start = Vec::with_capacity(n + 1);
        for v in 0..n {
            start.push(order.len());
            let first = order.len();
            order.extend_from_slice(graph.preds(v));
            let inputs = &mut order[first..];
            // need(u) ≥ s_u, so the difference never underflows.
            inputs.sort_by_key(|&u| (std::cmp::Reverse(need[u] - graph.memory(u)), u));
            let (mut held, mut peak) = (0u64, 0u64);
            for &u in inputs.iter() {
                peak = peak.max(held.saturating_add(need[u]));
                held = held.saturating_add(graph.memory(u));
            }
            need[v] = peak.max(held.saturating_add(graph.memory(v)));
        }
        start.push(order.len());
        Needs { need, order, start }
    }

    pub(super) fn inputs(&self, v: usize) -> &[usize] {
        &self.order[self.start[v]..self.start[v + 1]]
    }

    /// `K + max_v need(v)`, `None` beyond `u64`.
    pub(super) fn budget(&self, graph: &Graph) -> Option<u64> {
        let max = self.need.iter().copied().max().unwrap_or(0);
        (max < u64::MAX)
            .then(|| graph.fixed_memory().checked_add(max))
            .flatten()
    }
}
