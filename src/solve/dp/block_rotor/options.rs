//! A block's options (Rockmate's rk-Rotor: several ways to run one block, each a trade of
//! memory kept between `F_j` and `B_j` against compute in `B_j`).
//!
//! Option `k` keeps the tape less the first `k` of the block's tape values ranked by
//! `c_v / s_v` (cheapest to recompute per byte first), the block's output `x_j` always
//! kept. `B_j` then recomputes a dropped value just before the first backward op of the
//! block that reads it, with the block's values it needs that are not kept (post-order,
//! each at most once), as the saved-set knapsack does for a whole graph. The prefixes are
//! `0, ⌈n/4⌉, ⌈n/2⌉, ⌈3n/4⌉, n` of the `n` droppable values.

use crate::schedule::sequence::push_restored_inputs;

/// One way to run a block: the bytes kept from `F_j` to `B_j`, the cost `B_j` adds to
/// the block's own backward cost, and `B_j`'s compute sequence (recomputations included).
#[derive(Clone, Debug, Default)]
pub struct TapeOption {
    pub tape: u64,
    pub extra: f64,
    pub backward: Vec<usize>,
}

/// What [`options`] needs to know of a block: its nodes, the full tape and the flags.
pub struct BlockView<'a> {
    pub graph: &'a crate::graph::Graph,
    /// Whether a node is one of this block's forward values.
    pub mine: &'a dyn Fn(usize) -> bool,
    /// Forward values some backward op reads (this block's tape).
    pub read_by_backward: &'a [bool],
    pub cut: usize,
    pub forward: &'a [usize],
    pub backward: &'a [usize],
    pub tape: u64,
}

/// The options of a block, the full tape first.
pub fn options(view: &BlockView) -> Vec<TapeOption> {
    let g = view.graph;
    let mut droppable: Vec<usize> = view
        .forward
        .iter()
        .copied()
        .filter(|&v| v != view.cut && view.read_by_backward[v] && g.memory(v) > 0)
        .collect();
    let price = |v: usize| g.cost(v) / g.memory(v) as f64;
    droppable.sort_by(|&a, &b| price(a).total_cmp(&price(b)).then(a.cmp(&b)));
    let n = droppable.len();
    let mut prefixes: Vec<usize> = [0, n.div_ceil(4), n.div_ceil(2), (3 * n).div_ceil(4), n].into();
    prefixes.dedup();
    let mut dropped = vec![false; g.len()];
    let mut again = vec![false; g.len()];
    prefixes
        .into_iter()
        .map(|k| {
            for (i, &v) in droppable.iter().enumerate() {
                dropped[v] = i < k;
            }
            let freed: u64 = droppable[..k].iter().map(|&v| g.memory(v)).sum();
            let backward = recomputing(view, &dropped, &mut again);
            let extra = backward
                .iter()
                .filter(|&&v| (view.mine)(v))
                .map(|&v| g.cost(v))
                .sum();
            TapeOption {
                tape: view.tape.saturating_sub(freed),
                extra,
                backward,
            }
        })
        .collect()
}

/// `B_j` with the recomputations that `dropped` needs; `again` is left all false.
fn recomputing(view: &BlockView, dropped: &[bool], again: &mut [bool]) -> Vec<usize> {
    let g = view.graph;
    let absent =
        |u: usize| (view.mine)(u) && u != view.cut && (dropped[u] || !view.read_by_backward[u]);
    let mut computes = Vec::with_capacity(view.backward.len());
    for &b in view.backward {
        push_restored_inputs(g, b, absent, again, &mut computes);
        computes.push(b);
    }
    for &x in &computes {
        again[x] = false;
    }
    computes
}
