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
//! `GREEDY_MAX` such values), and, at quarter steps, the order by `c_v / s_v` alone; of
//! these, an option that costs as much as one with a smaller tape is dropped (along them
//! the tape falls and `e` rises strictly). The *nested* options (`nested.rs`) keep the tape
//! of one of the `NESTED_BASES` options with the least tapes and rematerialize `B_j` under
//! a ladder of caps on the block's own memory, recomputing a value again before a later
//! reader when it had to be evicted: a higher `e(j, k)` for a lower `p_b(j, k)`, which is
//! what a block needs where every other option's backward peaks above the budget.
//! Invariants: the first option keeps the whole tape at `e = 0`; the list is sorted by
//! falling tape, then rising `e`; no option is dominated by another (as small a tape, `e`,
//! `p_f` and `p_b`), so of two options with the same tape the dearer peaks lower; at most
//! `MAX_OPTIONS` options, `NESTED_MOST` of them nested. Each option carries its transient
//! peaks `p_f(j, k)` and `p_b(j, k)` (`transient.rs`).

use super::nested;
use super::transient::Replay;
use crate::schedule::sequence::push_restored_inputs;
use crate::solve::Stopped;

/// One way to run a block: the bytes kept from `F_j` to `B_j`, the cost `B_j` adds to
/// the block's own backward cost, `B_j`'s compute sequence (recomputations included), the
/// block's own transient peaks ([`Replay::local_peak`]) of `F_j` keeping this tape and of
/// `B_j` from it (the gradients `B_j` hands on included), and whether `B_j` is
/// rematerialized under a cap (`nested.rs`).
#[derive(Clone, Debug, Default)]
pub struct TapeOption {
    pub tape: u64,
    pub extra: f64,
    pub backward: Vec<usize>,
    pub forward_peak: u64,
    pub backward_peak: u64,
    pub nested: bool,
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
    /// Whether `v` is a tape value of the block that an option dropping `dropped` keeps.
    pub fn keeps(&self, dropped: &[bool], v: usize) -> bool {
        (self.mine)(v) && self.read_by_backward[v] && !dropped[v]
    }

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
/// option that costs at least as much as one with a smaller tape; then the nested options
/// from the [`NESTED_BASES`] least tapes (blocks of at most `nested::MAX_FORWARD` forward
/// values), less every dominated option (see the module docs). `poll` is asked before
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
        let freed = mark(g, &mut dropped, prefix);
        let backward = recomputing(view, &dropped, &mut again);
        all.push((option(view, &dropped, freed, backward, &mut again), prefix));
    }
    // From the smallest tape up, keep an option only when it costs less than every
    // option kept so far.
    all.sort_by(|a, b| {
        a.0.tape
            .cmp(&b.0.tape)
            .then(a.0.extra.total_cmp(&b.0.extra))
    });
    let mut kept: Vec<(TapeOption, &[usize])> = Vec::with_capacity(all.len());
    for o in all {
        if kept.last().is_none_or(|k| o.0.extra < k.0.extra) {
            kept.push(o);
        }
    }
    kept.reverse();
    let kept = thin(kept, MAX_OPTIONS - NESTED_MOST);
    let mut nested = Vec::new();
    if view.forward.len() <= nested::MAX_FORWARD {
        for (base, prefix) in kept.iter().rev().take(NESTED_BASES) {
            let freed = mark(g, &mut dropped, prefix);
            nested.extend(nested_options(
                view, &dropped, freed, base, &mut again, poll,
            )?);
        }
    }
    let regular: Vec<TapeOption> = kept.into_iter().map(|(o, _)| o).collect();
    let nested = thin(undominated(nested, &regular), NESTED_MOST);
    let mut all = undominated(regular, &nested);
    all.extend(nested);
    all.sort_by(|a, b| b.tape.cmp(&a.tape).then(a.extra.total_cmp(&b.extra)));
    Ok(all)
}

/// `dropped` set to the values of `prefix` alone; the bytes they free.
fn mark(g: &crate::graph::Graph, dropped: &mut [bool], prefix: &[usize]) -> u64 {
    dropped.iter_mut().for_each(|d| *d = false);
    prefix.iter().for_each(|&v| dropped[v] = true);
    prefix.iter().map(|&v| g.memory(v)).sum()
}

/// The options of `these` that no option of `these` or `others` dominates (as small a
/// tape, `e` and both peaks, one of them smaller) nor equals (of equal options of `these`,
/// the first stays), sorted by falling tape then rising `e`.
fn undominated(these: Vec<TapeOption>, others: &[TapeOption]) -> Vec<TapeOption> {
    let key = |o: &TapeOption| (o.tape, o.extra, o.forward_peak, o.backward_peak);
    let dominates = |a: &TapeOption, b: &TapeOption| {
        let (a, b) = (key(a), key(b));
        a.0 <= b.0 && a.1 <= b.1 && a.2 <= b.2 && a.3 <= b.3 && a != b
    };
    let mut kept: Vec<TapeOption> = Vec::with_capacity(these.len());
    for (i, o) in these.iter().enumerate() {
        let beaten = these.iter().chain(others).any(|p| dominates(p, o))
            || these[..i].iter().chain(others).any(|p| key(p) == key(o));
        if !beaten {
            kept.push(o.clone());
        }
    }
    kept.sort_by(|a, b| b.tape.cmp(&a.tape).then(a.extra.total_cmp(&b.extra)));
    kept
}

/// The options with `B_j` rematerialized under a ladder of [`NESTED_CAPS`] caps on the
/// block's own memory (`nested.rs`), keeping the tape of `base` (`dropped` dropped, `freed`
/// bytes): from `base`'s `p_b` down geometrically to the most any single backward op and
/// its inputs need, each kept when it peaks strictly lower and costs strictly more than
/// every one before it.
fn nested_options(
    view: &BlockView,
    dropped: &[bool],
    freed: u64,
    base: &TapeOption,
    again: &mut [bool],
    poll: &dyn Fn() -> Result<(), Stopped>,
) -> Result<Vec<TapeOption>, Stopped> {
    let g = view.graph;
    let kept = |v: usize| view.keeps(dropped, v);
    let one_op = view
        .backward
        .iter()
        .map(|&b| {
            let inputs: u64 = g.preds(b).iter().map(|&u| g.memory(u)).sum();
            inputs.saturating_add(g.memory(b))
        })
        .max()
        .unwrap_or(0);
    let high = base.backward_peak;
    if one_op >= high {
        return Ok(Vec::new());
    }
    let ratio = one_op.max(1) as f64 / high as f64;
    let mut nested: Vec<TapeOption> = Vec::with_capacity(NESTED_CAPS);
    let (mut peak, mut extra) = (base.backward_peak, base.extra);
    for i in 1..=NESTED_CAPS {
        poll()?;
        let cap = (high as f64 * ratio.powf(i as f64 / NESTED_CAPS as f64)) as u64;
        let backward = nested::under_cap(view, &kept, cap, again, poll)?;
        let o = TapeOption {
            nested: true,
            ..option(view, dropped, freed, backward, again)
        };
        if o.backward_peak < peak && o.extra > extra {
            (peak, extra) = (o.backward_peak, o.extra);
            nested.push(o);
        }
    }
    Ok(nested)
}

/// At most `most` options, evenly spread over the list, the first (the whole tape) and
/// the last (the least) always kept.
fn thin<T>(options: Vec<T>, most: usize) -> Vec<T> {
    let n = options.len();
    if n <= most {
        return options;
    }
    let pick: Vec<usize> = (0..most).map(|i| i * (n - 1) / (most - 1)).collect();
    options
        .into_iter()
        .enumerate()
        .filter(|(i, _)| pick.contains(i))
        .map(|(_, o)| o)
        .collect()
}

/// The most options a block keeps (the DP's step holds an option in a byte).
const MAX_OPTIONS: usize = 32;

/// The caps of each nested options' ladder ([`nested_options`]).
const NESTED_CAPS: usize = 8;

/// The options with the least tapes that nested ladders start from.
const NESTED_BASES: usize = 3;

/// The most nested options a block keeps; the others are thinned to the rest of
/// [`MAX_OPTIONS`].
const NESTED_MOST: usize = 12;

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

/// The option that drops `dropped` (`freed` bytes of the tape) and runs `B_j` as
/// `backward`.
fn option(
    view: &BlockView,
    dropped: &[bool],
    freed: u64,
    backward: Vec<usize>,
    again: &mut [bool],
) -> TapeOption {
    let g = view.graph;
    let extra = recompute_cost(view, &backward);
    let kept = |v: usize| view.keeps(dropped, v);
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
        nested: false,
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
