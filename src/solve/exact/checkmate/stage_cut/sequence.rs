//! The sequence of cuts: Checkmate's relaxation aggregated around several moments at once
//! (a chain of first computations), so that a value dropped before one moment and needed
//! after a later one is paid for in every phase between moments that computes it. The
//! stage-cut bound ([`super`]) is its case of one moment: a value the backward pass
//! recomputes several times (a ResNet's first stages at a tight budget, or a U-Net's skip
//! connections) is priced once by a cut, and again by each later moment at which it cannot
//! stay resident.
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
//! (Checkmate's `S[t_k, v]`), every schedule's point satisfies (the simulator's model, no
//! storage tier):
//!
//! 1. coverage: `Σ_{p = lo(v)}^{hi(v)} R^p_v >= 1`;
//! 2. dependencies (Checkmate's (c)): a computation of `v` in `P_p` finds each input `u`
//!    resident before `t_p` or computed in `P_p` before it: `R^p_v <= S^p_u + R^p_u`
//!    (nothing is resident before `P_0`);
//! 3. persistence (Checkmate's (b)): `S^{k+1}_v <= S^k_v + R^k_v`;
//! 4. memory at `t_k` (Checkmate's (g)): `ℓ_k` and its inputs are resident, the rest of the
//!    values within the room `B − K − s_{ℓ_k} − Σ_{u ∈ inputs(ℓ_k)} s_u`:
//!    `Σ_{v ∉ inputs(ℓ_k)} s_v S^k_v <= room_k`; a value larger than `room_k` has
//!    `S^k_v = 0`, and each moment gets the memory row's cardinality covers ([`super`]);
//! 5. cost: each phase that computes `v` pays `c_v`, so the schedule costs at least
//!    `Σ_v c_v Σ_p R^p_v`; for a forced value (`F`, [`super`]), computed at least twice
//!    in every schedule, at least `c_v max(2, Σ_p R^p_v)`;
//! 6. each moment's own stage-cut rows, on `D^k_v` (`v` computed at or after `t_k`:
//!    `D^k_v <= Σ_{p >= k} R^p_v`; `S^k_v + D^k_v >= 1` where a descendant of `ℓ_k` reads
//!    `v`; `D^k_v <= S^k_u + D^k_u` for each input `u`) and `E^k_v` (`v` computed before
//!    `t_k`: `E^k_v <= Σ_{p < k} R^p_v`; `E^k_v <= E^k_u` for an input `u`; `S^k_v <=
//!    E^k_v`; `E^k_v + D^k_v >= 1`). They hold in every schedule by the stage cut's argument
//!    at `t_k`; without them the LP of several moments can fall below one moment's (a
//!    reader whose first computation is split half and half between two phases lets one
//!    half-recomputation of its input serve both halves).
//!
//! The variables that serve no schedule are left out (their value is 0 in the point of
//! every schedule restricted to what serves, at no more cost): `R^p_v` for `p < lo(v)` or
//! `p > need(v)`, `S^k_v` for `k <= lo(v)` or `k > need(v)`. The least cost over (1)-(6),
//! its LP or with `R, S ∈ {0, 1}` (HiGHS's dual bound after a branch and bound of at most
//! [`WINDOW_NODES`] nodes), so bounds every schedule in every order
//! ([`crate::solve::Scope::GlobalOptimum`]), within HiGHS's resolution: an LP's `L(y)` and
//! an integral program's dual bound become a cost through
//! [`super::super::resolution::within_resolution`], lowered by what each may be off (for the
//! dual bound, the tolerance within which HiGHS prunes, 1e-6 of the largest cost) and raised
//! to the next integer where every cost is one.
//!
//! # Which moments
//!
//! Every chain of moments gives a bound, and one with a moment at every node where memory
//! binds would price each recomputation of the backward pass, but its integral program is
//! far beyond branch and bound on graphs of hundreds of nodes. What is solved instead: the
//! *anchor* (the stage cut that proved most) with a *window* of [`WINDOW`] consecutive
//! nodes of a longest chain through it, after it (each a descendant, so in the backward
//! pass when the anchor is the loss's neighbourhood). The windows after the anchor are
//! taken from both ends alternately: the last (where the first layers' large activations
//! are read again), the first after the anchor, the second last, and so on, [`WINDOWS`]
//! of them per unit of effort. Every window's LP is solved first; then the integral programs
//! of the [`INTEGRAL_WINDOWS`] windows per unit of effort whose LP proves most, among those
//! whose LP proves more than the anchor's alone ([`SCREEN_GAIN`]). Every program is its own
//! bound, and the highest counts.
//! On the graphs measured the window that proves most sits either right after the anchor (a
//! U-Net's skip connections) or near the end of the chain (a ResNet's first stages).

use super::{memory_rows, relaxed_controls, run_cut, significant, Cuts, Forced, Proved, Room};
use crate::graph::Graph;
use crate::solve::exact::checkmate::backend::{Controls, Lp, RunStatus};
use crate::solve::{Effort, SolveError, SolveOptions, Stop};
use fixedbitset::FixedBitSet;

/// The moments of a window after the anchor.
const WINDOW: usize = 8;

/// The windows whose LP is solved, per unit of `auto`'s effort ([`Effort::Work`]).
const WINDOWS: usize = 8;

/// The windows whose integral program is solved, per unit of effort: those whose LP proves
/// most, if more than the anchor's alone.
const INTEGRAL_WINDOWS: usize = 3;

/// The branch-and-bound nodes a window's integral program may explore (a limit in work:
/// the same bound on every machine). Most of its time is HiGHS's root node, whose cuts
/// prove most of what branching would.
const WINDOW_NODES: u64 = 10;

/// How much more than the anchor's LP a window's LP must prove for its integral program to
/// be solved (relative): where it proves no more, its integral program rarely did on the
/// graphs measured, and HiGHS's root node costs far more than the LP.
const SCREEN_GAIN: f64 = 1e-6;

/// The largest graph the sequence is built for: a window's program has about `4 m n`
/// columns for `m` moments, and on larger graphs HiGHS's root node of one window takes
/// seconds to tens of seconds (an exported ResNet-50, MobileNetV2, random layered graphs of
/// 1,000 nodes) for little more than the windows' LPs prove.
const MAX_NODES: usize = 500;

/// A bound of the sequence of cuts: `cost` bounds every schedule within the budget (within
/// HiGHS's resolution, module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct SequenceBound {
    /// The least cost of the window that proved most.
    pub cost: f64,
    /// Its moments `ℓ_1, …, ℓ_m`, the anchor first.
    pub moments: Vec<usize>,
    /// Whether `cost` is its integral program's bound rather than its LP's.
    pub integral: bool,
    /// The windows whose LP was solved.
    pub windows: usize,
    /// Whether every window of the effort was solved: not when the time limit ended it.
    pub complete: bool,
}

/// The bound of the sequence of cuts of `graph` within `budget` through the moment
/// `anchor` (module docs, "Which moments"), from the windows solved within `options`'
/// effort and time limit; `None` when no window proves more than `Σ_v c_v` (or the graph has
/// a storage tier, or more than [`MAX_NODES`] nodes, or `anchor` does not fit the budget).
///
/// Every window's LP first: a bound already, the screen for its integral program (solved only
/// where the LP proves more than the anchor's own) and the order of those programs, the
/// highest LP first (module docs).
pub(crate) fn sequence_bound(
    graph: &Graph,
    budget: u64,
    anchor: usize,
    options: &SolveOptions,
) -> Result<Option<SequenceBound>, SolveError> {
    if graph.storage().is_some() || graph.len() > MAX_NODES || anchor >= graph.len() {
        return Ok(None);
    }
    let (windows, integral_windows) = match options.effort {
        Effort::Work(scale) => {
            let scaled = |count: usize| (count as f64 * scale).ceil().max(1.0) as usize;
            (scaled(WINDOWS), scaled(INTEGRAL_WINDOWS))
        }
        Effort::Time => (usize::MAX, usize::MAX),
    };
    let cuts = Cuts::new(graph);
    let stop = Stop::start(options);
    let rooms = cuts.rooms(budget);
    if rooms[anchor].is_none() {
        return Ok(None);
    }
    let forced = cuts.forced(&rooms, &stop);
    let programs = Programs {
        cuts: &cuts,
        forced: Forced::new(graph.len(), &forced, rooms),
        // A forced value's two computations are outside the objective (module docs, (5)).
        twice: forced.iter().map(|&(v, _)| 2.0 * graph.cost(v)).sum(),
    };
    let Some(chain) = chain(&cuts, anchor, &stop) else {
        return Ok(None);
    };
    let relaxed = relaxed_controls(options, &stop);
    let integral = Controls {
        relax: false,
        max_nodes: Some(WINDOW_NODES),
        ..relaxed.clone()
    };
    let alone = programs.cost(vec![anchor], &relaxed)?;
    let mut best = Best::new(graph.total_cost());
    // Every window's LP first: a bound already, and the order of the integral programs.
    let mut relaxations = Vec::new();
    for moments in windows_after(&chain, anchor).into_iter().take(windows) {
        if best.halted(&stop)? {
            break;
        }
        let Some(lp) = programs.cost(moments.clone(), &relaxed)? else {
            continue;
        };
        best.windows += 1;
        best.offer(lp.cost, &moments, false);
        relaxations.push((lp.raw, moments));
    }
    // Then the integral programs of the windows whose LP proves most (a stable sort: equal LPs
    // keep the windows' order), by the LPs' figures as HiGHS gave them ([`Proved::raw`]).
    relaxations.sort_by(|a, b| b.0.total_cmp(&a.0));
    let alone = alone.map(|a| a.raw);
    let screened = relaxations
        .into_iter()
        .filter(|(lp, _)| alone.is_none_or(|alone| *lp > alone * (1.0 + SCREEN_GAIN)));
    for (_, moments) in screened.take(integral_windows) {
        if best.halted(&stop)? {
            break;
        }
        if let Some(proved) = programs.cost(moments.clone(), &integral)? {
            best.offer(proved.cost, &moments, true);
        }
    }
    // A run the time limit ended proved less than it would have.
    best.complete &= !stop.should_stop();
    Ok(best.bound())
}

/// The best bound of a run of [`sequence_bound`] so far, and the windows whose LP was
/// solved.
struct Best {
    /// `Σ_v c_v`: what the first window must prove more than.
    sum_of_costs: f64,
    /// The highest cost proven, its moments and whether its integral program proved it.
    found: Option<(f64, Vec<usize>, bool)>,
    windows: usize,
    complete: bool,
}

impl Best {
    fn new(sum_of_costs: f64) -> Best {
        Best {
            sum_of_costs,
            found: None,
            windows: 0,
            complete: true,
        }
    }

    /// Whether the run must end before its next program: an error when cancelled; true, with
    /// the bound marked incomplete, when the time limit has passed.
    fn halted(&mut self, stop: &Stop) -> Result<bool, SolveError> {
        if stop.cancelled() {
            return Err(SolveError::Cancelled);
        }
        if stop.should_stop() {
            self.complete = false;
        }
        Ok(!self.complete)
    }

    /// Keeps `cost`, proven over `moments` (by their integral program if `integral`), if it
    /// is the highest so far.
    fn offer(&mut self, cost: f64, moments: &[usize], integral: bool) {
        if cost > self.found.as_ref().map_or(self.sum_of_costs, |f| f.0) {
            self.found = Some((cost, moments.to_vec(), integral));
        }
    }

    /// The bound found, if any window proved more than `Σ_v c_v`.
    fn bound(self) -> Option<SequenceBound> {
        let (cost, moments, integral) = self.found?;
        Some(SequenceBound {
            cost,
            moments,
            integral,
            windows: self.windows,
            complete: self.complete,
        })
    }
}

/// What the program of every window is built from.
struct Programs<'c, 'g> {
    cuts: &'c Cuts<'g>,
    forced: Forced,
    /// `2 Σ_{v ∈ F} c_v`, which every program's objective leaves out.
    twice: f64,
}

impl Programs<'_, '_> {
    /// What the program over `moments` (a chain in the ancestor order, in that order)
    /// proves: its LP's least cost or, with integral `controls`, HiGHS's dual bound on its
    /// integral program within their node limit; `None` when a moment does not fit or HiGHS
    /// proves nothing.
    fn cost(&self, moments: Vec<usize>, controls: &Controls) -> Result<Option<Proved>, SolveError> {
        let phases = Phases::new(self.cuts, moments);
        let integral = !controls.relax;
        let Some((lp, c_max)) = program(self.cuts, &phases, &self.forced, integral) else {
            return Ok(None);
        };
        let run = run_cut(lp, controls)?;
        Ok(match run.status {
            RunStatus::Infeasible => None,
            // An LP's bound counts only when solved; a branch and bound's dual bound always.
            RunStatus::Optimal => Proved::by(&run, self.cuts.graph, self.twice, c_max),
            _ if !controls.relax => Proved::by(&run, self.cuts.graph, self.twice, c_max),
            _ => None,
        })
    }
}

/// The windows after `anchor` on `chain` (module docs, "Which moments"), each with the
/// anchor first, in the order they are solved: the [`WINDOW`] last moments of the chain, the
/// [`WINDOW`] first after the anchor, then the windows before and after those, alternately,
/// until they meet (the last may overlap its neighbour: every window is full unless fewer
/// than [`WINDOW`] moments follow the anchor).
fn windows_after(chain: &[usize], anchor: usize) -> Vec<Vec<usize>> {
    let Some(at) = chain.iter().position(|&l| l == anchor) else {
        return Vec::new();
    };
    let after = &chain[at + 1..];
    let count = after.len().div_ceil(WINDOW);
    let width = WINDOW.min(after.len());
    // The i-th window from the end, then the i-th from the anchor, each clamped into `after`.
    let starts = (0..count).flat_map(|i| {
        let from_end = after.len().saturating_sub(WINDOW * (i + 1));
        let from_anchor = (WINDOW * i).min(after.len() - width);
        [from_end, from_anchor]
    });
    let mut seen = Vec::with_capacity(count);
    for start in starts {
        if seen.len() == count {
            break;
        }
        if !seen.contains(&start) {
            seen.push(start);
        }
    }
    seen.into_iter()
        .map(|start| {
            let mut moments = Vec::with_capacity(width + 1);
            moments.push(anchor);
            moments.extend_from_slice(&after[start..start + width]);
            moments
        })
        .collect()
}

/// The longest chain through `anchor` of nodes comparable with it (each a strict ancestor of
/// the next), in that order; `None` when stopped.
fn chain(cuts: &Cuts, anchor: usize, stop: &Stop) -> Option<Vec<usize>> {
    let candidates: Vec<usize> = (0..cuts.graph.len())
        .filter(|&l| l == anchor || cuts.anc[l].contains(anchor) || cuts.anc[anchor].contains(l))
        .collect();
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
    Some(chain)
}

/// The phases of a chain of moments and each node's window in them (module docs).
struct Phases {
    /// `ℓ_1, …, ℓ_m`: each a strict ancestor of the next.
    cut: Vec<usize>,
    lo: Vec<usize>,
    hi: Vec<usize>,
    need: Vec<usize>,
}

impl Phases {
    /// The phases of `cut` (a chain in the ancestor order, in that order).
    fn new(cuts: &Cuts, cut: Vec<usize>) -> Phases {
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

/// The integral program of a chain of moments (module docs, (1)-(6)), with costs in units
/// of its second value; `None` when no cost is positive or a moment's node and inputs do not
/// fit.
fn program(cuts: &Cuts, ph: &Phases, forced: &Forced, integral: bool) -> Option<(Lp, f64)> {
    let g = cuts.graph;
    let n = g.len();
    let c_max = (0..n).map(|v| g.cost(v)).fold(0.0, f64::max);
    let rooms: Vec<u64> = ph
        .cut
        .iter()
        .map(|&l| forced.rooms[l])
        .collect::<Option<_>>()?;
    if c_max <= 0.0 {
        return None;
    }
    let s_max = (0..n).map(|v| g.memory(v)).max().unwrap_or(0);
    let s_unit = rooms.iter().copied().fold(s_max, u64::max).max(1) as f64;
    let mut lp = Lp::new();
    let cols = columns(cuts, ph, &rooms, c_max, &forced.set, &mut lp);
    for v in 0..n {
        node_rows(cuts, ph, &cols, v, &mut lp);
    }
    for k in 1..=ph.cut.len() {
        after_moment(cuts, ph, &cols, k, &mut lp);
    }
    for (k, &room) in (1..).zip(&rooms) {
        let room = Room {
            bytes: room,
            s_unit,
            integral,
        };
        moment_memory_rows(cuts, ph, &cols, k, room, &mut lp);
    }
    Some((lp, c_max))
}

/// Rows (1), (2), (3) and, for a forced value, (5) of `v` (module docs).
fn node_rows(cuts: &Cuts, ph: &Phases, cols: &Columns, v: usize, lp: &mut Lp) {
    let g = cuts.graph;
    let mut terms = Vec::new();
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

/// Row (4) of moment `k` with its `room` (module docs) and the memory row's cardinality
/// covers, without the inputs of `ℓ_k` (their columns are fixed at 1, their size in the
/// room); sizes in units of the room's `s_unit` in an LP, of their gcd in an integral
/// program ([`memory_rows`]).
fn moment_memory_rows(cuts: &Cuts, ph: &Phases, cols: &Columns, k: usize, room: Room, lp: &mut Lp) {
    let g = cuts.graph;
    let inputs = g.preds(ph.cut[k - 1]);
    let values: Vec<usize> = (0..g.len())
        .filter(|&v| cols.s(ph, v, k).is_some() && inputs.binary_search(&v).is_err())
        .collect();
    memory_rows(lp, g, &values, room, |v| cols.s(ph, v, k));
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
            lp.add_col(r_price, lower, 1.0, true);
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
            lp.add_col(0.0, lower, upper, true);
        }
        if forced.contains(v) {
            cols.extra[v] = Some(lp.add_col(price, 0.0, f64::INFINITY, false));
        }
    }
    cols
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::random_layered;
    use crate::solve::{solve, Instance};

    /// The anchor then `moments`.
    fn window(anchor: usize, moments: std::ops::Range<usize>) -> Vec<usize> {
        [anchor].into_iter().chain(moments).collect()
    }

    /// Windows of eight from the chain's end and from the anchor alternately, until they
    /// meet; each full, the anchor first.
    #[test]
    fn windows_come_from_the_end_and_from_the_anchor_alternately() {
        let chain: Vec<usize> = (100..140).collect();
        // 37 moments after the anchor: five windows, the middle one where the two meet.
        let windows = windows_after(&chain, 102);
        let expected = vec![
            window(102, 132..140),
            window(102, 103..111),
            window(102, 124..132),
            window(102, 111..119),
            window(102, 116..124),
        ];
        assert_eq!(windows, expected);
        // 17 after it: three windows, the third overlapping the first by seven.
        let windows = windows_after(&chain[..20], 102);
        let expected = vec![
            window(102, 112..120),
            window(102, 103..111),
            window(102, 104..112),
        ];
        assert_eq!(windows, expected);
        // Fewer than eight: one window of all of them.
        assert_eq!(windows_after(&chain, 135), vec![window(135, 136..140)]);
        assert!(windows_after(&chain, 139).is_empty());
        assert!(windows_after(&chain, 7).is_empty());
    }

    /// `random_layered(11, 349)` at 244,318,209 bytes (233 MiB and a byte; sizes in MiB but
    /// the loss's 4 bytes), the window `f0, loss, b4, b3, b1`: with the memory rows divided by
    /// the largest room (coefficients down to 2e-8, a row 4e-9 from full at the optimum), HiGHS's
    /// MIP presolve proved 75 where the exhaustive optimum is 73. In units of the sizes' gcd
    /// every coefficient and right-hand side is an integer, and the bound stays below it.
    #[test]
    fn a_window_in_integral_units_is_never_above_the_optimum() {
        let g = random_layered(11, 349);
        let budget = 244_318_209;
        let instance = Instance { graph: &g, budget };
        let exhaustive = solve(&instance, "exhaustive", &SolveOptions::default()).unwrap();
        let best = exhaustive.stats.expect("a schedule").total_cost;
        assert_eq!(best, 73.0);
        let node = |id: &str| (0..g.len()).find(|&v| g.id(v) == id).expect("a node");
        let moments: Vec<usize> = ["f0", "loss", "b4", "b3", "b1"].map(node).to_vec();
        let cuts = Cuts::new(&g);
        let options = SolveOptions::default();
        let stop = Stop::start(&options);
        let rooms = cuts.rooms(budget);
        let forced = cuts.forced(&rooms, &stop);
        let programs = Programs {
            cuts: &cuts,
            forced: Forced::new(g.len(), &forced, rooms),
            twice: forced.iter().map(|&(v, _)| 2.0 * g.cost(v)).sum(),
        };
        let integral = Controls {
            relax: false,
            max_nodes: Some(WINDOW_NODES),
            ..relaxed_controls(&options, &stop)
        };
        let proved = programs.cost(moments, &integral).unwrap().expect("a bound");
        assert!(proved.cost <= best, "{proved:?} above the optimum {best}");
    }
}
