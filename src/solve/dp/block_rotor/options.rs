//! A block's options (Rockmate's rk-Rotor: several ways to run one block, each a trade of
//! memory kept between `F_j` and `B_j` against compute in `B_j`).
//!
//! Option `k` keeps the tape less the first `k` values of a drop order, the block's output
//! `x_j` always kept. `B_j` then recomputes a dropped value just before the first backward
//! op of the block that reads it, with the block's values it needs that are not kept
//! (post-order, each at most once), as the saved-set knapsack does for a whole graph. The
//! options are the prefixes of two drop orders: a greedy one, each next value the one
//! whose drop adds the least to `B_j`'s recomputation cost `e(j, ·)` per byte freed, given
//! the values dropped before it (a value whose inputs are kept is nearly free to drop; one
//! whose recomputation needs a dropped matmul is not; only in blocks of at most
//! `GREEDY_MAX` such values), and, at quarter steps, the order by `c_v / s_v` alone.
//! Invariants: the first option keeps the whole tape at `e = 0`; along the
//! list the tape falls and `e` rises strictly (an option that costs as much as one with a
//! smaller tape is dropped); at most `MAX_OPTIONS` options. Each option also carries its
//! transient peaks `p_f(j, k)` and `p_b(j, k)` (`transient.rs`).

use super::transient::Replay;
use crate::schedule::sequence::push_restored_inputs;
use crate::solve::Stopped;

/// One way to run a block: the bytes kept from `F_j` to `B_j`, the cost `B_j` adds to
/// the block's own backward cost, `B_j`'s compute sequence (recomputations included), and
/// the block's own transient peaks ([`Replay::local_peak`]) of `F_j` keeping this tape and
/// of `B_j` from it (the gradients `B_j` hands on included).
#[derive(Clone, Debug, Default)]
pub struct TapeOption {
    pub tape: u64,
    pub extra: f64,
    pub backward: Vec<usize>,
    pub forward_peak: u64,
    pub backward_peak: u64,
}

/// What [`options`] needs to know of a block: its nodes, the full tape and the flags.
pub struct BlockView<'a> {
    pub graph: &'a crate::graph::Graph,
    /// Whether a node is one of this block's forward values.
    pub mine: &'a dyn Fn(usize) -> bool,
    /// Forward values some backward op reads (this block's tape).
    pub read_by_backward: &'a [bool],
    pub cut: usize,
    /// Whether a node, forward or backward, is this block's.
    pub own: &'a dyn Fn(usize) -> bool,
    pub forward: &'a [usize],
    pub backward: &'a [usize],
    pub tape: u64,
}

impl BlockView<'_> {
    /// The transient peak of `F_j` keeping only what `kept` says (and `x_j`).
    pub fn forward_peak(&self, kept: &dyn Fn(usize) -> bool, later: &mut [bool]) -> u64 {
        let stays = |v: usize| v == self.cut || kept(v);
        Replay {
            graph: self.graph,
            counted: self.own,
            stays: &stays,
        }
        .local_peak(&[], self.forward, later)
    }
}

/// The options of a block, the full tape first: one option per prefix of the greedy drop
/// order ([`drop_order`], blocks of at most [`GREEDY_MAX`] droppable values) and per
/// quarter-step prefix of the order by `c_v / s_v` (rotor's cheapest-to-recompute-per-byte,
/// which the greedy order need not contain), the whole tape and none of it, less every
/// option that costs at least as much as one with a smaller tape. `poll` is asked before
/// each option's replays and each step of the greedy order (a merged block of a large graph
/// replays hundreds of thousands of values per option).
pub fn options(
    view: &BlockView,
    poll: &dyn Fn() -> Result<(), Stopped>,
) -> Result<Vec<TapeOption>, Stopped> {
    let g = view.graph;
    let mut again = vec![false; g.len()];
    let droppable: Vec<usize> = view
        .forward
        .iter()
        .copied()
        .filter(|&v| v != view.cut && view.read_by_backward[v] && g.memory(v) > 0)
        .collect();
    let greedy = if droppable.len() <= GREEDY_MAX {
        drop_order(view, droppable.clone(), &mut again, poll)?
    } else {
        Vec::new()
    };
    let mut by_price = droppable;
    let price = |v: usize| g.cost(v) / g.memory(v) as f64;
    by_price.sort_by(|&a, &b| price(a).total_cmp(&price(b)).then(a.cmp(&b)));
    let n = by_price.len();
    let quarters = [n.div_ceil(4), n.div_ceil(2), (3 * n).div_ceil(4)];
    let mut dropped = vec![false; g.len()];
    let mut all = Vec::with_capacity(n + 4);
    let prefixes = (0..=greedy.len())
        .map(|k| &greedy[..k])
        .chain(std::iter::once(&by_price[..n]))
        .chain(quarters.iter().map(|&k| &by_price[..k]));
    for prefix in prefixes {
        poll()?;
        dropped.iter_mut().for_each(|d| *d = false);
        prefix.iter().for_each(|&v| dropped[v] = true);
        let freed = prefix.iter().map(|&v| g.memory(v)).sum();
        all.push(option(view, &dropped, freed, &mut again));
    }
    // From the smallest tape up, keep an option only when it costs less than every
    // option kept so far.
    all.sort_by(|a, b| a.tape.cmp(&b.tape).then(a.extra.total_cmp(&b.extra)));
    let mut kept: Vec<TapeOption> = Vec::with_capacity(all.len());
    for o in all {
        if kept.last().is_none_or(|k| o.extra < k.extra) {
            kept.push(o);
        }
    }
    kept.reverse();
    Ok(thin(kept))
}

/// At most [`MAX_OPTIONS`] options (the DP's step holds an option in a byte), evenly
/// spread over the list, the first (the whole tape) and the last (the least) always kept.
fn thin(options: Vec<TapeOption>) -> Vec<TapeOption> {
    let n = options.len();
    if n <= MAX_OPTIONS {
        return options;
    }
    let pick: Vec<usize> = (0..MAX_OPTIONS)
        .map(|i| i * (n - 1) / (MAX_OPTIONS - 1))
        .collect();
    options
        .into_iter()
        .enumerate()
        .filter(|(i, _)| pick.contains(i))
        .map(|(_, o)| o)
        .collect()
}

/// The most options a block keeps.
const MAX_OPTIONS: usize = 32;

/// The most droppable values a block orders greedily: the order replays `B_j` once per
/// candidate per step, `O(n² · |B_j|)`; a block with more (a long merged stretch of a
/// chain) has the quarter prefixes by `c_v / s_v` alone.
const GREEDY_MAX: usize = 128;

/// The block's droppable tape values `left` (read by the backward pass, not `x_j`, of
/// nonzero size) in a greedy order: each next the one whose drop adds the least to `B_j`'s
/// recomputation cost per byte freed, given the values dropped before it.
fn drop_order(
    view: &BlockView,
    mut left: Vec<usize>,
    again: &mut [bool],
    poll: &dyn Fn() -> Result<(), Stopped>,
) -> Result<Vec<usize>, Stopped> {
    let g = view.graph;
    let mut dropped = vec![false; g.len()];
    let mut order = Vec::with_capacity(left.len());
    let mut extra = 0.0;
    while !left.is_empty() {
        poll()?;
        let mut best = (f64::INFINITY, 0, 0.0);
        for (i, &v) in left.iter().enumerate() {
            dropped[v] = true;
            let with = recompute_cost(view, &recomputing(view, &dropped, again));
            dropped[v] = false;
            let price = (with - extra) / g.memory(v) as f64;
            if price < best.0 {
                best = (price, i, with);
            }
        }
        let (_, i, with) = best;
        let v = left.remove(i);
        dropped[v] = true;
        extra = with;
        order.push(v);
    }
    Ok(order)
}

/// The cost of the block's forward values `B_j` recomputes.
fn recompute_cost(view: &BlockView, backward: &[usize]) -> f64 {
    backward
        .iter()
        .filter(|&&v| (view.mine)(v))
        .map(|&v| view.graph.cost(v))
        .sum()
}

/// The option that drops `dropped` (`freed` bytes of the tape).
fn option(view: &BlockView, dropped: &[bool], freed: u64, again: &mut [bool]) -> TapeOption {
    let g = view.graph;
    let backward = recomputing(view, dropped, again);
    let extra = recompute_cost(view, &backward);
    let kept = |v: usize| (view.mine)(v) && view.read_by_backward[v] && !dropped[v];
    let forward_peak = view.forward_peak(&kept, again);
    let tape: Vec<usize> = view
        .forward
        .iter()
        .copied()
        .filter(|&v| v == view.cut || kept(v))
        .collect();
    // B_j keeps what other blocks read of its own values (δ_{j−1} among them).
    let handed_on = |v: usize| (view.own)(v) && g.succs(v).iter().any(|&w| !(view.own)(w));
    let backward_peak = Replay {
        graph: g,
        counted: view.own,
        stays: &handed_on,
    }
    .local_peak(&tape, &backward, again);
    TapeOption {
        tape: view.tape.saturating_sub(freed),
        extra,
        backward,
        forward_peak,
        backward_peak,
    }
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
