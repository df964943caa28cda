//! The sequence of cuts: Checkmate's relaxation aggregated around several moments at once
//! (a chain of first computations), so that a value dropped before one moment and needed
//! after a later one is paid for in every phase between moments that computes it.
//!
//! # The moments and their phases
//!
//! Take nodes `ℓ_1, …, ℓ_m`, each a strict ancestor of the next, and in some schedule the
//! instants `t_1 < … < t_m` of their first computations (a value is computed only while its
//! inputs are resident, so every ancestor of `ℓ_{k+1}`, `ℓ_k` among them, is computed
//! before `t_{k+1}`: the order holds in **every** schedule). They split the schedule into
//! phases `P_0` (before `t_1`), `P_k` (from `t_k` included to `t_{k+1}`) and `P_m`. For a
//! node `v`, `lo(v)` is the largest `k` with `ℓ_k = v` or `ℓ_k` an ancestor of `v` (0 if
//! none; no phase before `P_{lo(v)}` can compute `v`), `hi(v) + 1` the least `k` with `v` an
//! ancestor of `ℓ_k` (`m + 1` if none; `v`'s first computation lies in `P_{lo(v)} …
//! P_{hi(v)}`), and `need(v)` the largest `hi` of `v` and its descendants (after `P_{need(v)}`
//! nothing that reads `v`, directly or not, is computed for the first time). With
//! `R^p_v = 1` when the schedule computes `v` in phase `p` (Checkmate's
//! `Σ_{t ∈ P_p} R[t, v] >= 1`) and `S^k_v = 1` when `v` is resident just before `t_k`
//! (Checkmate's `S[t_k, v]`), every schedule's point satisfies (simulator's model, no
//! storage tier):
//!
//! 1. coverage: `Σ_{p = lo(v)}^{hi(v)} R^p_v >= 1`;
//! 2. dependencies (Checkmate's (c)): a computation of `v` in `P_p` finds each input `u`
//!    resident, resident before `t_p` or computed in `P_p` before it:
//!    `R^p_v <= S^p_u + R^p_u` (nothing is resident before `P_0`);
//! 3. persistence (Checkmate's (b)): `S^{k+1}_v <= S^k_v + R^k_v`;
//! 4. memory at `t_k` (Checkmate's (g)): `ℓ_k` and its inputs are resident, the rest of the
//!    values within the room `B − K − s_{ℓ_k} − Σ_{u ∈ inputs(ℓ_k)} s_u`:
//!    `Σ_{v ∉ inputs(ℓ_k)} s_v S^k_v <= room_k`; a value larger than `room_k` has
//!    `S^k_v = 0`, and each moment gets the memory row's cardinality covers ([`super`]);
//! 5. cost: each phase that computes `v` pays `c_v`, so the schedule costs at least
//!    `Σ_v c_v Σ_p R^p_v`; for a forced value (`F`, [`super`]), computed at least twice
//!    in every schedule, at least `c_v max(2, Σ_p R^p_v)`.
//!
//! The variables that serve no schedule are left out (their value is 0 in the point of
//! every schedule restricted to what serves, at no more cost): `R^p_v` for `p < lo(v)` or
//! `p > need(v)`, `S^k_v` for `k <= lo(v)` or `k > need(v)`. The least cost over (1)-(5)
//! with `R, S ∈ {0, 1}`, or its LP, or HiGHS's dual bound after a limited branch and bound,
//! so bounds every schedule in every order. One moment gives the stage-cut bound's rows;
//! with several, the same value's recomputation is charged in each phase that needs it
//! while the memory rows of the moments between forbid keeping it.
//!
//! # Which moments
//!
//! The cuts whose LP proved most, taken best first while each is comparable (ancestor or
//! descendant) with all those taken, up to [`MAX_MOMENTS`]: a chain around the moments
//! where memory is shortest.

use super::{covers, significant, Cuts};
use crate::solve::exact::checkmate::backend::Lp;
use crate::solve::Stop;
use fixedbitset::FixedBitSet;

/// The most moments in a sequence: its program has about `2 n m` columns.
pub(super) const MAX_MOMENTS: usize = 6;

/// The moments (module docs): the longest chain, in the ancestor order, of the nodes whose
/// first computation must drop something (a positive excess), thinned evenly to `most`,
/// in that order; `None` when stopped.
pub(super) fn moments(
    cuts: &Cuts,
    budget: u64,
    most: usize,
    best: usize,
    stop: &Stop,
) -> Option<Vec<usize>> {
    let candidates: Vec<usize> = (0..cuts.graph.len())
        .filter(|&l| l == best || cuts.anc[l].contains(best) || cuts.anc[best].contains(l))
        .filter(|&l| {
            std::env::var("SEQ_ANY").is_ok()
                || cuts
                    .room(l, budget)
                    .is_some_and(|room| cuts.excess(l, room) > 0)
        })
        .collect();
    eprintln!("candidates {}", candidates.len());
    // longest[i]: the most candidates on a chain ending at candidate i, before it parent[i].
    let mut longest = vec![1usize; candidates.len()];
    let mut parent = vec![None; candidates.len()];
    for (i, &l) in candidates.iter().enumerate() {
        if stop.should_stop() {
            return None;
        }
        for (j, &before) in candidates[..i].iter().enumerate() {
            if longest[j] + 1 > longest[i] && cuts.anc[l].contains(before) {
                longest[i] = longest[j] + 1;
                parent[i] = Some(j);
            }
        }
    }
    let mut at = (0..candidates.len()).max_by_key(|&i| (longest[i], std::cmp::Reverse(i)));
    let mut chain = Vec::new();
    while let Some(i) = at {
        chain.push(candidates[i]);
        at = parent[i];
    }
    chain.reverse();
    if most == 1 {
        chain = vec![best];
    }
    if chain.len() > most && most > 1 {
        let last = chain.len() - 1;
        let mut thin: Vec<usize> = (0..most).map(|i| chain[i * last / (most - 1)]).collect();
        if !thin.contains(&best) && chain.contains(&best) {
            thin.push(best);
            thin.sort_unstable_by_key(|&l| cuts.anc[l].count_ones(..));
        }
        chain = thin;
    }
    Some(chain)
}

/// The phases of a chain of moments and each node's window in them (module docs).
pub(super) struct Phases {
    /// `ℓ_1, …, ℓ_m`: each a strict ancestor of the next.
    pub(super) cut: Vec<usize>,
    lo: Vec<usize>,
    hi: Vec<usize>,
    need: Vec<usize>,
}

impl Phases {
    /// The phases of `cut` (a chain in the ancestor order, in that order).
    pub(super) fn new(cuts: &Cuts, cut: Vec<usize>) -> Phases {
        let g = cuts.graph;
        let m = cut.len();
        let lo: Vec<usize> = (0..g.len())
            .map(|v| {
                (1..=m)
                    .rev()
                    .find(|&k| cut[k - 1] == v || cuts.anc[v].contains(cut[k - 1]))
                    .unwrap_or(0)
            })
            .collect();
        let hi: Vec<usize> = (0..g.len())
            .map(|v| {
                (1..=m)
                    .find(|&k| cuts.anc[cut[k - 1]].contains(v))
                    .map_or(m, |k| k - 1)
            })
            .collect();
        let mut need = hi.clone();
        for v in (0..g.len()).rev() {
            for &r in g.succs(v) {
                need[v] = need[v].max(need[r]);
            }
        }
        Phases { cut, lo, hi, need }
    }

    /// The moments `k` at which `S^k_v` has a column.
    fn resident(&self, v: usize) -> std::ops::RangeInclusive<usize> {
        self.lo[v] + 1..=self.need[v].min(self.cut.len())
    }
}

/// Where each node's columns start: `R^p_v` is column `r[v] + p − lo(v)` for `p` in
/// `lo(v)..=need(v)`, `S^k_v` column `s[v] + k − lo(v) − 1` for `k` in
/// [`Phases::resident`].
struct Columns {
    r: Vec<usize>,
    s: Vec<usize>,
    /// `y_v` of a forced value.
    extra: Vec<Option<usize>>,
}

impl Columns {
    fn r(&self, ph: &Phases, v: usize, p: usize) -> Option<usize> {
        (ph.lo[v]..=ph.need[v])
            .contains(&p)
            .then(|| self.r[v] + p - ph.lo[v])
    }

    fn s(&self, ph: &Phases, v: usize, k: usize) -> Option<usize> {
        ph.resident(v)
            .contains(&k)
            .then(|| self.s[v] + k - ph.lo[v] - 1)
    }
}

/// The program of a chain of moments (module docs, (1)-(5)), its columns integral if
/// `integral`, with costs in units of its second value; `None` when no cost is positive or
/// a moment's node and inputs do not fit.
pub(super) fn program(
    cuts: &Cuts,
    ph: &Phases,
    budget: u64,
    forced: &FixedBitSet,
    integral: bool,
) -> Option<(Lp, f64)> {
    let g = cuts.graph;
    let n = g.len();
    let c_max = (0..n).map(|v| g.cost(v)).fold(0.0, f64::max);
    let rooms: Vec<u64> = ph
        .cut
        .iter()
        .map(|&l| cuts.room(l, budget))
        .collect::<Option<_>>()?;
    if c_max <= 0.0 {
        return None;
    }
    let s_max = (0..n).map(|v| g.memory(v)).max().unwrap_or(0);
    let s_unit = rooms.iter().copied().fold(s_max, u64::max).max(1) as f64;
    let mut lp = Lp::new();
    let cols = columns(cuts, ph, &rooms, c_max, forced, integral, &mut lp);
    let mut terms = Vec::new();
    for v in 0..n {
        let (lo, hi) = (ph.lo[v], ph.hi[v]);
        // (1), unless a single phase: its column's lower bound is then 1.
        if lo < hi {
            terms.extend((lo..=hi).filter_map(|p| Some((cols.r(ph, v, p)?, 1.0))));
            lp.add_row(1.0, f64::INFINITY, &mut terms);
        }
        // (2): an input has every phase its reader has (lo(u) <= lo(v), need(u) >= need(v)).
        for &u in g.preds(v) {
            for p in lo..=ph.need[v] {
                terms.extend(cols.r(ph, v, p).map(|c| (c, 1.0)));
                terms.extend(cols.r(ph, u, p).map(|c| (c, -1.0)));
                terms.extend(cols.s(ph, u, p).map(|c| (c, -1.0)));
                lp.add_row(f64::NEG_INFINITY, 0.0, &mut terms);
            }
        }
        // (3).
        for k in ph.resident(v) {
            terms.extend(cols.s(ph, v, k).map(|c| (c, 1.0)));
            terms.extend(cols.r(ph, v, k - 1).map(|c| (c, -1.0)));
            terms.extend(cols.s(ph, v, k - 1).map(|c| (c, -1.0)));
            lp.add_row(f64::NEG_INFINITY, 0.0, &mut terms);
        }
        // (5) for a forced value: y_v >= Σ_p R^p_v − 2.
        if let Some(y) = cols.extra[v] {
            terms.extend((lo..=ph.need[v]).filter_map(|p| Some((cols.r(ph, v, p)?, 1.0))));
            terms.push((y, -1.0));
            lp.add_row(f64::NEG_INFINITY, 2.0, &mut terms);
        }
    }
    for k in 1..=ph.cut.len() {
        after_moment(cuts, ph, &cols, k, &mut lp);
    }
    // (4), without the inputs of ℓ_k (their columns are fixed at 1, their size in the room).
    for (k, &room) in (1..).zip(&rooms) {
        let inputs = g.preds(ph.cut[k - 1]);
        let values: Vec<usize> = (0..n)
            .filter(|&v| cols.s(ph, v, k).is_some() && inputs.binary_search(&v).is_err())
            .collect();
        terms.extend(values.iter().map(|&v| {
            let size = significant(g.memory(v) as f64 / s_unit);
            (cols.s(ph, v, k).expect("a column"), size)
        }));
        lp.add_row(f64::NEG_INFINITY, room as f64 / s_unit, &mut terms);
        for (set, most) in covers(g, &values, room) {
            terms.extend(set.iter().filter_map(|&v| Some((cols.s(ph, v, k)?, 1.0))));
            lp.add_row(f64::NEG_INFINITY, most as f64, &mut terms);
        }
    }
    Some((lp, c_max))
}

/// The stage-cut rows of moment `k` ([`super`], (3) and (4)) on columns `D^k_v` for every
/// `v` but the inputs of `ℓ_k` that may serve after `t_k`: `D^k_v <= Σ_{p >= k} R^p_v`
/// (`v` is computed at or after `t_k`), `S^k_v + D^k_v >= 1` where a descendant of `ℓ_k` reads `v`, and
/// `D^k_v <= S^k_u + D^k_u` for each input `u` of `v`. Without them a reader whose first
/// computation is split between two phases lets one fractional recomputation count in both.
fn after_moment(cuts: &Cuts, ph: &Phases, cols: &Columns, k: usize, lp: &mut Lp) {
    let g = cuts.graph;
    let l = ph.cut[k - 1];
    let mut d = vec![None; g.len()];
    let inputs = g.preds(l);
    let values: Vec<usize> = (0..g.len())
        .filter(|&v| ph.need[v] >= k && inputs.binary_search(&v).is_err())
        .collect();
    for &v in &values {
        d[v] = Some(lp.add_col(0.0, 0.0, 1.0, false));
    }
    let mut terms = Vec::new();
    // E^k_v: v computed before t_k.
    let mut e = vec![None; g.len()];
    for v in 0..g.len() {
        if ph.lo[v] < k && ph.need[v] >= k && inputs.binary_search(&v).is_err() {
            let col = lp.add_col(0.0, 0.0, 1.0, false);
            e[v] = Some(col);
            terms.push((col, 1.0));
            terms.extend((ph.lo[v]..k).filter_map(|p| Some((cols.r(ph, v, p)?, -1.0))));
            lp.add_row(f64::NEG_INFINITY, 0.0, &mut terms);
            for &u in g.preds(v) {
                if let Some(eu) = e[u] {
                    terms.extend([(col, 1.0), (eu, -1.0)]);
                    lp.add_row(f64::NEG_INFINITY, 0.0, &mut terms);
                }
            }
            if let Some(sv) = cols.s(ph, v, k) {
                terms.extend([(sv, 1.0), (col, -1.0)]);
                lp.add_row(f64::NEG_INFINITY, 0.0, &mut terms);
            }
            if let Some(dv) = d[v] {
                terms.extend([(col, 1.0), (dv, 1.0)]);
                lp.add_row(1.0, f64::INFINITY, &mut terms);
            }
        }
    }
    for &v in &values {
        let dv = d[v].expect("a column");
        terms.push((dv, 1.0));
        terms.extend((k..=ph.need[v]).filter_map(|p| Some((cols.r(ph, v, p)?, -1.0))));
        lp.add_row(f64::NEG_INFINITY, 0.0, &mut terms);
        if cuts.read_after(v, l) {
            terms.push((dv, 1.0));
            terms.extend(cols.s(ph, v, k).map(|c| (c, 1.0)));
            lp.add_row(1.0, f64::INFINITY, &mut terms);
        }
        for &u in g.preds(v) {
            if let Some(du) = d[u] {
                terms.extend([(dv, 1.0), (du, -1.0)]);
                terms.extend(cols.s(ph, u, k).map(|c| (c, -1.0)));
                lp.add_row(f64::NEG_INFINITY, 0.0, &mut terms);
            }
        }
    }
}

/// Adds the columns `R^p_v` (cost `c_v / c_max`, 0 for a forced value; at least 1 where
/// `v`'s first computation has a single phase), `S^k_v` (1 for an input of `ℓ_k`, 0 for a
/// value larger than `room_k`) and, for a forced value, `y_v` (cost `c_v / c_max`).
fn columns(
    cuts: &Cuts,
    ph: &Phases,
    rooms: &[u64],
    c_max: f64,
    forced: &FixedBitSet,
    integral: bool,
    lp: &mut Lp,
) -> Columns {
    let g = cuts.graph;
    let n = g.len();
    let mut cols = Columns {
        r: vec![0; n],
        s: vec![0; n],
        extra: vec![None; n],
    };
    for v in 0..n {
        let price = significant(g.cost(v) / c_max);
        cols.r[v] = lp.num_cols();
        let single = ph.lo[v] == ph.hi[v];
        let r_price = if forced.contains(v) { 0.0 } else { price };
        for p in ph.lo[v]..=ph.need[v] {
            let lower = if single && p == ph.lo[v] { 1.0 } else { 0.0 };
            lp.add_col(r_price, lower, 1.0, integral);
        }
        cols.s[v] = lp.num_cols();
        for k in ph.resident(v) {
            let l = ph.cut[k - 1];
            let (lower, upper) = if g.preds(l).binary_search(&v).is_ok() {
                (1.0, 1.0)
            } else if g.memory(v) > rooms[k - 1] {
                (0.0, 0.0)
            } else {
                (0.0, 1.0)
            };
            lp.add_col(0.0, lower, upper, integral);
        }
        if forced.contains(v) {
            cols.extra[v] = Some(lp.add_col(price, 0.0, f64::INFINITY, false));
        }
    }
    cols
}

#[cfg(test)]
mod probe {
    use super::super::tests::graph;
    use super::*;
    use crate::solve::exact::checkmate::backend::{self, Controls};
    use crate::solve::SolveOptions;

    fn lp_of(g: &crate::graph::Graph, cuts: &Cuts, m: Vec<usize>, budget: u64) -> Option<f64> {
        let ph = Phases::new(cuts, m);
        let forced = FixedBitSet::with_capacity(g.len());
        let (lp, c_max) = program(cuts, &ph, budget, &forced, false)?;
        let stop = Stop::start(&SolveOptions::default());
        let controls = Controls {
            relax: true,
            stop,
            mip_rel_gap: None,
            max_nodes: None,
            threads: None,
            seed: 0,
            first_order: false,
        };
        let run = backend::run(lp, None, &controls).unwrap();
        (run.status == backend::RunStatus::Optimal).then(|| run.bound.unwrap() * c_max)
    }

    #[test]
    fn probe_more_moments_weaker() {
        use crate::graph::generate::{random_dag, DagShape};
        for seed in 0..3000u64 {
            let n = 3 + (seed % 7) as usize;
            let shape = DagShape {
                sizes: 1..=6,
                ..DagShape::dense(n)
            };
            let g = random_dag(&shape, seed);
            let cuts = Cuts::new(&g);
            let (low, _) = g.min_feasible_budget();
            for budget in low..low + 6 {
                for a in 0..g.len() {
                    let Some(one) = lp_of(&g, &cuts, vec![a], budget) else {
                        continue;
                    };
                    for b in 0..g.len() {
                        let pair = if cuts.anc[b].contains(a) {
                            vec![a, b]
                        } else if cuts.anc[a].contains(b) {
                            vec![b, a]
                        } else {
                            continue;
                        };
                        let Some(two) = lp_of(&g, &cuts, pair.clone(), budget) else {
                            continue;
                        };
                        if two < one - 1e-6 {
                            let nodes: Vec<_> = (0..g.len())
                                .map(|v| {
                                    (
                                        g.id(v).to_string(),
                                        g.cost(v),
                                        g.memory(v),
                                        g.preds(v).to_vec(),
                                    )
                                })
                                .collect();
                            panic!("seed {seed} budget {budget} one {a} {one} pair {pair:?} {two} K {} {nodes:?}", g.fixed_memory());
                        }
                    }
                }
            }
        }
    }
}
