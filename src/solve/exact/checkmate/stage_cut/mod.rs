//! The stage-cut bound: Checkmate's relaxation ([`super`]) aggregated around one stage, a
//! proven lower bound on the cost of **every** schedule (any order, any recomputation) that
//! stays small on graphs of thousands of nodes, where the full relaxation does not build.
//!
//! # The cut
//!
//! Take a node `ℓ` and the instant `t*` of its first computation in some schedule (in
//! Checkmate's terms, the stage `t*` that computes `ℓ` for the first time). Let `A` be the
//! ancestors of `ℓ` and `I ⊆ A` its inputs. For `v ∈ A ∖ I` write `S_v = 1` when `v` is
//! resident at `t*` (Checkmate's `S[t*, v]`) and `D_v = 1` when `v` is computed again after
//! `t*` (Checkmate's `Σ_{t > t*} R[t, v] >= 1`). In the simulator's model
//! ([`crate::schedule::simulate()`], without a storage tier, from which a value could come back without a computation):
//!
//! 1. every `v ∈ A` is computed before `t*` (the inputs of `ℓ` are resident at `t*`, and a
//!    value is computed only while its own inputs are resident), so a schedule costs at
//!    least `Σ_v c_v + Σ_{v ∈ A∖I} c_v D_v`;
//! 2. memory at `t*` (Checkmate's budget row (g) at that stage):
//!    `K + s_ℓ + Σ_{u ∈ I} s_u + Σ_{v ∈ A∖I} s_v S_v <= B`;
//! 3. a value `v` that a descendant `r` of `ℓ` reads is resident when `r` runs, after `t*`:
//!    it stayed resident from `t*` or was computed after it, `S_v + D_v >= 1` (Checkmate's
//!    persistence (b) summed over the stages after `t*`);
//! 4. the first computation of `v` after `t*` finds its inputs resident: each input `u` was
//!    resident at `t*` or computed after it, `D_v <= S_u + D_u` (`S_u = 1` for `u ∈ I`;
//!    Checkmate's dependencies (c)).
//!
//! So `Σ_v c_v + min Σ c_v D_v` over (2)-(4) with `S, D ∈ [0, 1]` (an LP of `2|A∖I|`
//! columns, solved by HiGHS's dual simplex) bounds every schedule, for every `ℓ`; the bound
//! is the largest over the cuts tried. It sees what the trivial bound `Σ_v c_v` cannot: at
//! the loss (or any node of the backward pass) the values the backward still reads do not
//! all fit, and (4) prices a dropped value with whatever its recomputation needs (a cheap
//! activation whose input is an expensive matmul's output costs that matmul too).
//!
//! # Values too large for a moment
//!
//! `S_v` is 0 or 1 in a schedule, so where `s_v` exceeds the room left at `t*` (the
//! budget less `K`, `s_ℓ` and `ℓ`'s inputs) `S_v = 0`: the LP fixes it so, and a value
//! read after `t*` then has `D_v = 1` where the plain LP would keep a fraction of it. The
//! same holds for every cut at once: call `v` *forced* (the set `F`) when some node `ℓ`
//! has `v` as a strict ancestor but not as an input, a reader of `v` among its
//! descendants, and `s_v` above its room. Then every schedule computes `v` at least
//! twice: once before `t*` (an ancestor), again between `t*`, where it is not resident,
//! and its reader's first computation. A schedule so costs at least
//! `Σ_v c_v + Σ_{v ∈ F} c_v + Σ_{v ∈ A∖I∖F} c_v D_v` (for `v ∈ F` the count is at least
//! `max(2, 1 + D_v) = 2`, so its `D_v` is free in the objective), the bound taken for each
//! cut; with no cut it is `Σ_v c_v + Σ_{v ∈ F} c_v`. One cut sees one moment: `F` adds
//! what every other moment forces. On a ResNet the stem's convolution is in `F`: its
//! output and `max_pool`'s backward's footprint exceed a tight budget, and the first
//! batch norm's backward reads it after.
//!
//! For the same reason the LP gets the memory row's cardinality covers: if no `k + 1` of a
//! set `T` of values fit in the room together (the `k + 1` smallest of them exceed it),
//! `Σ_{v ∈ T} S_v <= k` holds in every schedule; the plain row lets a fraction of one
//! more through. For each `k` below [`MAX_COVER`] the largest such `T` among the largest
//! values is added.
//!
//! # A third computation
//!
//! A forced value may be needed again *between* the cut and a later moment at which it
//! cannot be resident: a ResNet's stem convolution, not resident at the cut (the loss's
//! backward), comes back before `max_pool`'s backward to rebuild the ReLU output that the
//! backward reads, cannot stay resident through it, and comes back once more for the first
//! batch norm's backward. For a forced `v ∈ A ∖ I` take the first strict descendant `m` of
//! `ℓ` (so after `t*` in every schedule) at which `v` is no input, does not fit and is read
//! after, with an input that has `v` among its ancestors. Write `E_x = 1` when `x` is
//! computed between `t*` and `m`'s first computation, for the values of `A ∖ I` that are
//! ancestors of `m` and have `v` (or another value of that `m`) among their ancestors or
//! are one. Then in every schedule:
//!
//! 5. an input `u` of `m` was resident at `t*` or computed after it, before `m`:
//!    `S_u + E_u >= 1`;
//! 6. such a computation found its inputs resident: `E_x <= S_y + E_y`;
//! 7. it is a computation after `t*`: `E_x <= D_x`;
//! 8. for `v` itself, a computation between `t*` and `m` is neither its first (before `t*`,
//!    `v` being an ancestor of `ℓ`) nor the one after `m` (where it is not resident and is
//!    read after): a third, `c_v E_v` more in the objective.
//!
//! A row or column left out (an input of `x` outside those columns) only relaxes the
//! program, so it stays a bound.
//!
//! # Integral cuts
//!
//! `S` and `D` are 0 or 1 in every schedule, so the same rows with `S, D ∈ {0, 1}` (a
//! knapsack under precedence rows, small enough for branch and bound) bound every schedule
//! too, at least as high as the LP. The [`INTEGRAL_CUTS`] cuts whose LP proved most are
//! solved so by HiGHS, within [`INTEGRAL_NODES`] nodes; its dual bound counts even when the
//! search ends early.
//!
//! # Which cuts
//!
//! The nodes whose cut leaves the most to drop: by the *excess* `Σ_{v needed} s_v − room`
//! (needed: read after `t*`, as in (3); room: `B − K − s_ℓ − Σ_{u ∈ I} s_u`), the
//! [`BEST_CUTS`] largest, then [`SPREAD_CUTS`] more spread evenly over the others with a
//! positive excess; each LP until the time limit. A cut whose LP does not end optimal is
//! skipped: the bound is the best of those that did.
//!
//! # Several moments
//!
//! One cut prices one moment. A value the backward pass drops and needs again several
//! times is paid for once per moment by the sequence of cuts ([`sequence`]), the same
//! relaxation around several moments at once.
//!
//! # Numerics
//!
//! Costs are divided by the largest and sizes by the larger of the room and the largest
//! size, so that every coefficient is at most 1; those then below [`TINY`] are read as 0
//! (a looser LP, so still a bound). The bound taken is not HiGHS's objective, exact only
//! up to its tolerances, but `L(y)` of its row duals ([`super::lagrangian`]).

use super::backend::{self, Controls, Lp, Run, RunStatus};
use crate::graph::Graph;
use crate::solve::{SolveError, SolveOptions, Stop};
use fixedbitset::FixedBitSet;

mod sequence;
pub(crate) use sequence::sequence_bound;

/// The cuts with the largest excess that are tried first.
const BEST_CUTS: usize = 12;

/// The further cuts, spread over the rest of those with a positive excess.
const SPREAD_CUTS: usize = 12;

/// The largest graph the bound runs on: the ancestor sets take `n²/8` bytes (50 MB here).
pub(crate) const MAX_NODES: usize = 20_000;

/// The cuts, best LP bound first, whose integral form is solved.
const INTEGRAL_CUTS: usize = 2;

/// The branch-and-bound nodes an integral cut may explore (a limit in work: the same bound
/// on every machine).
const INTEGRAL_NODES: u64 = 1_000;

/// The largest cut (values of `A ∖ I`) solved in integral form.
const INTEGRAL_MAX_VALUES: usize = 4_000;

/// The covers of a cut's memory row go up to sets of which this many fit.
const MAX_COVER: usize = 16;

/// HiGHS's `small_matrix_value`: normalised coefficients below it are read as 0.
const TINY: f64 = 1e-9;

/// The most forced values a cut prices a third computation for, the dearest first (at a
/// graph's least budget most of its values may be forced; a program with fewer rows is still
/// a bound, and the cut stays `O(THIRD_VALUES · (n + E))` to build).
const THIRD_VALUES: usize = 32;

/// A stage-cut bound: `cost` bounds every schedule of the graph within the budget.
#[derive(Clone, Debug, PartialEq)]
pub struct StageCut {
    /// `Σ_v c_v` plus the cut's least extra cost.
    pub cost: f64,
    /// The node `ℓ` whose cut gave the bound.
    pub node: usize,
    /// The cuts whose LP was solved.
    pub cuts: usize,
    /// For each node, the share of its output the cut's LP keeps resident at the cut
    /// (`S_v`): 1 for the cut's inputs and for the nodes that are not its ancestors.
    pub keep: Vec<f64>,
    /// The forced values `F` (module docs), each with a node `ℓ` at which it cannot be
    /// resident.
    pub forced: Vec<(usize, usize)>,
    /// Whether `cost` is an integral cut's bound (module docs) rather than an LP's.
    pub integral: bool,
}

impl StageCut {
    /// The bound `cost` proven at node `node` with `keep` (`S_v`); `integral` for an integral
    /// cut's. Its count of cuts solved and its forced values are the run's, set at its end.
    fn found(cost: f64, node: usize, keep: Vec<f64>, integral: bool) -> StageCut {
        StageCut {
            cost,
            node,
            cuts: 0,
            keep,
            forced: Vec::new(),
            integral,
        }
    }
}

/// The LP of one cut, normalised, with the columns of each value.
struct CutLp {
    lp: Lp,
    /// The cost the objective is in units of.
    c_max: f64,
    /// `(S_v, D_v)` for each value of `A ∖ I`.
    col: Vec<Option<(usize, usize)>>,
}

/// The forced values `F` (module docs) as a set, and the room at each node's first
/// computation ([`Cuts::room`]), where the cuts look for a forced value's later moments.
struct Forced {
    set: FixedBitSet,
    rooms: Vec<Option<u64>>,
}

impl Forced {
    /// The set of the values of `forced` ([`Cuts::forced`]) of a graph of `n` nodes, with
    /// the `rooms` they were found with.
    fn new(n: usize, forced: &[(usize, usize)], rooms: Vec<Option<u64>>) -> Forced {
        let mut set = FixedBitSet::with_capacity(n);
        set.extend(forced.iter().map(|&(v, _)| v));
        Forced { set, rooms }
    }
}

/// HiGHS's controls for an LP of the bound: `options`' threads and seed, `stop`'s deadline.
fn relaxed_controls(options: &SolveOptions, stop: &Stop) -> Controls {
    Controls {
        relax: true,
        stop: stop.clone(),
        mip_rel_gap: None,
        max_nodes: None,
        threads: options.threads,
        seed: options.seed,
        first_order: false,
    }
}

/// The ancestor sets and the reading relation the cuts are built from.
struct Cuts<'g> {
    graph: &'g Graph,
    /// `anc[v]`: the strict ancestors of `v`.
    anc: Vec<FixedBitSet>,
    /// Whether a cut prices a forced value's third computation (module docs); the tests
    /// compare with the program without it.
    third: bool,
}

impl<'g> Cuts<'g> {
    fn new(graph: &'g Graph) -> Cuts<'g> {
        let n = graph.len();
        let mut anc: Vec<FixedBitSet> = Vec::with_capacity(n);
        for v in 0..n {
            let mut set = FixedBitSet::with_capacity(n);
            for &u in graph.preds(v) {
                set.union_with(&anc[u]);
                set.insert(u);
            }
            anc.push(set);
        }
        Cuts {
            graph,
            anc,
            third: true,
        }
    }

    /// Whether a descendant of `l` reads `v`: `v`'s value is needed after `l`'s first
    /// computation.
    fn read_after(&self, v: usize, l: usize) -> bool {
        self.graph.succs(v).iter().any(|&r| self.anc[r].contains(l))
    }

    /// The bytes free at `l`'s first computation for the values of `A ∖ I`, or `None`
    /// when even `l` and its inputs do not fit.
    fn room(&self, l: usize, budget: u64) -> Option<u64> {
        budget.checked_sub(self.graph.fixed_memory() + self.graph.footprint(l))
    }

    /// The values of `A ∖ I` of cut `l`.
    fn values(&self, l: usize) -> impl Iterator<Item = usize> + '_ {
        let inputs = self.graph.preds(l);
        self.anc[l]
            .ones()
            .filter(move |v| inputs.binary_search(v).is_err())
    }

    /// `Σ_{v needed} s_v − room`: what must be dropped at `l`'s first computation.
    fn excess(&self, l: usize, room: u64) -> i128 {
        let needed: u64 = self
            .values(l)
            .filter(|&v| self.read_after(v, l))
            .map(|v| self.graph.memory(v))
            .sum();
        needed as i128 - room as i128
    }

    /// The cuts to try, in order: the largest excesses, then a spread of the others, given
    /// the `rooms` of [`Cuts::rooms`].
    fn candidates(&self, rooms: &[Option<u64>]) -> Vec<usize> {
        let mut ranked: Vec<(i128, usize)> = (0..self.graph.len())
            .filter_map(|l| {
                let excess = self.excess(l, rooms[l]?);
                (excess > 0).then_some((excess, l))
            })
            .collect();
        ranked.sort_unstable_by_key(|&(excess, l)| (std::cmp::Reverse(excess), l));
        let best = ranked.len().min(BEST_CUTS);
        let rest = &ranked[best..];
        let step = rest.len().div_ceil(SPREAD_CUTS).max(1);
        ranked[..best]
            .iter()
            .chain(rest.iter().step_by(step))
            .map(|&(_, l)| l)
            .collect()
    }

    /// The room at each node's first computation ([`Cuts::room`]).
    fn rooms(&self, budget: u64) -> Vec<Option<u64>> {
        (0..self.graph.len())
            .map(|l| self.room(l, budget))
            .collect()
    }

    /// The forced values `F` (module docs), each with the first node `ℓ` found at which it
    /// does not fit, given the `rooms` of [`Cuts::rooms`]. Only a value larger than the
    /// least room can be forced. Each value is proven on its own, so when `stop` ends the
    /// search early those found still count.
    fn forced(&self, rooms: &[Option<u64>], stop: &Stop) -> Vec<(usize, usize)> {
        let g = self.graph;
        let Some(least) = rooms.iter().flatten().min().copied() else {
            return Vec::new();
        };
        let mut forced = Vec::new();
        let mut after = FixedBitSet::with_capacity(g.len());
        for v in (0..g.len()).filter(|&v| g.memory(v) > least) {
            if stop.should_stop() {
                break;
            }
            // The nodes after which a reader of `v` runs: the ancestors of its readers.
            after.clear();
            for &r in g.succs(v) {
                after.union_with(&self.anc[r]);
            }
            let at = after.ones().find(|&l| {
                self.anc[l].contains(v)
                    && g.preds(l).binary_search(&v).is_err()
                    && rooms[l].is_some_and(|room| g.memory(v) > room)
            });
            if let Some(l) = at {
                forced.push((v, l));
            }
        }
        forced
    }

    /// The LP of cut `l` (module docs, (2)-(4), a value larger than the room not resident,
    /// the forced values' `D_v` free, and (5)-(8) for their later moments), normalised, its
    /// columns integral if `integral`; `None` when it has no column.
    fn lp(&self, l: usize, room: u64, forced: &Forced, integral: bool) -> Option<CutLp> {
        let g = self.graph;
        let values: Vec<usize> = self.values(l).collect();
        let c_max = values.iter().map(|&v| g.cost(v)).fold(0.0, f64::max);
        if c_max <= 0.0 {
            return None;
        }
        let s_max = values.iter().map(|&v| g.memory(v)).max().unwrap_or(0);
        let s_unit = room.max(s_max).max(1) as f64;
        let mut lp = Lp::new();
        // Columns S_v, D_v for each value, by position.
        let mut col = vec![None; g.len()];
        for &v in &values {
            let fits = if g.memory(v) > room { 0.0 } else { 1.0 };
            let s = lp.add_col(0.0, 0.0, fits, integral);
            let price = if forced.set.contains(v) {
                0.0
            } else {
                significant(g.cost(v) / c_max)
            };
            let d = lp.add_col(price, 0.0, 1.0, integral);
            col[v] = Some((s, d));
        }
        let mut terms = Vec::new();
        for &v in &values {
            let (s, d) = col[v].expect("a column");
            if self.read_after(v, l) {
                terms.extend([(s, 1.0), (d, 1.0)]);
                lp.add_row(1.0, f64::INFINITY, &mut terms);
                terms.clear();
            }
            // Inputs of ℓ have no column: resident at t*, they satisfy (4) as they are.
            for &u in g.preds(v) {
                if let Some((su, du)) = col[u] {
                    terms.extend([(d, 1.0), (su, -1.0), (du, -1.0)]);
                    lp.add_row(f64::NEG_INFINITY, 0.0, &mut terms);
                    terms.clear();
                }
            }
        }
        terms.extend(values.iter().map(|&v| {
            let s = col[v].expect("a column").0;
            (s, significant(g.memory(v) as f64 / s_unit))
        }));
        lp.add_row(f64::NEG_INFINITY, room as f64 / s_unit, &mut terms);
        for (set, k) in covers(g, &values, room) {
            terms.extend(set.iter().map(|&v| (col[v].expect("a column").0, 1.0)));
            lp.add_row(f64::NEG_INFINITY, k as f64, &mut terms);
            terms.clear();
        }
        let mut cut = CutLp { lp, c_max, col };
        if self.third {
            for (m, at_m) in self.third_moments(l, forced) {
                self.between(&mut cut, l, m, &at_m, integral);
            }
        }
        Some(cut)
    }

    /// The later moments of cut `l`'s forced values (module docs, "A third computation"):
    /// for each of the [`THIRD_VALUES`] dearest forced values `v` of `A ∖ I`, the first
    /// strict descendant `m` of `l` at which `v` does not fit, is no input, is read after,
    /// and is an ancestor of an input of `m` in `A ∖ I`; grouped by `m`, ascending.
    fn third_moments(&self, l: usize, forced: &Forced) -> Vec<(usize, FixedBitSet)> {
        let g = self.graph;
        let mut moments: Vec<(usize, FixedBitSet)> = Vec::new();
        let inputs = g.preds(l);
        let mut dearest: Vec<usize> = self.values(l).filter(|&v| forced.set.contains(v)).collect();
        dearest.sort_unstable_by(|&a, &b| g.cost(b).total_cmp(&g.cost(a)).then(a.cmp(&b)));
        dearest.truncate(THIRD_VALUES);
        let after: Vec<usize> = (l + 1..g.len())
            .filter(|&m| self.anc[m].contains(l))
            .collect();
        for v in dearest {
            let behind = |u: usize| {
                self.anc[u].contains(v)
                    && self.anc[l].contains(u)
                    && inputs.binary_search(&u).is_err()
            };
            let found = after.iter().copied().find(|&m| {
                self.anc[m].contains(v)
                    && g.preds(m).binary_search(&v).is_err()
                    && forced.rooms[m].is_some_and(|room| g.memory(v) > room)
                    && self.read_after(v, m)
                    && g.preds(m).iter().any(|&u| behind(u))
            });
            let Some(m) = found else { continue };
            match moments.iter_mut().find(|(at, _)| *at == m) {
                Some((_, set)) => set.insert(v),
                None => {
                    let mut set = FixedBitSet::with_capacity(g.len());
                    set.insert(v);
                    moments.push((m, set));
                }
            }
        }
        moments.sort_unstable_by_key(|(m, _)| *m);
        moments
    }

    /// The rows of a forced moment `m` after the cut `l` (module docs, "A third
    /// computation"): `E_x`, `x` computed between `t*` and `m`'s first computation, for the
    /// values of `A ∖ I` that are ancestors of `m` and have a value forced at `m` among
    /// their ancestors or are one; an input `u` of `m` resident at `t*` or computed after it
    /// (`S_u + E_u >= 1`), inputs resident for each computation (`E_x <= S_y + E_y`), a
    /// computation after `t*` counted by `D_x` (`E_x <= D_x`), or, for a value forced at
    /// `m`, priced `c_x` as its third computation.
    fn between(&self, cut: &mut CutLp, l: usize, m: usize, at_m: &FixedBitSet, integral: bool) {
        let g = self.graph;
        let CutLp { lp, c_max, col } = cut;
        // Whether a value of `at_m` is `x` or among its ancestors, in solver order.
        let mut behind = vec![false; g.len()];
        for x in 0..g.len() {
            behind[x] = at_m.contains(x) || g.preds(x).iter().any(|&y| behind[y]);
        }
        let mut e = vec![None; g.len()];
        for x in self.values(l).filter(|&x| self.anc[m].contains(x)) {
            if behind[x] {
                let price = if at_m.contains(x) {
                    significant(g.cost(x) / *c_max)
                } else {
                    0.0
                };
                e[x] = Some(lp.add_col(price, 0.0, 1.0, integral));
            }
        }
        let mut terms = Vec::new();
        for (x, ex) in e.iter().enumerate() {
            let Some(ex) = *ex else { continue };
            let (_, dx) = col[x].expect("a column");
            if !at_m.contains(x) {
                terms.extend([(ex, 1.0), (dx, -1.0)]);
                lp.add_row(f64::NEG_INFINITY, 0.0, &mut terms);
                terms.clear();
            }
            for &y in g.preds(x) {
                if let (Some((sy, _)), Some(ey)) = (col[y], e[y]) {
                    terms.extend([(ex, 1.0), (sy, -1.0), (ey, -1.0)]);
                    lp.add_row(f64::NEG_INFINITY, 0.0, &mut terms);
                    terms.clear();
                }
            }
        }
        for &u in g.preds(m) {
            if let (Some((su, _)), Some(eu)) = (col[u], e[u]) {
                terms.extend([(su, 1.0), (eu, 1.0)]);
                lp.add_row(1.0, f64::INFINITY, &mut terms);
                terms.clear();
            }
        }
    }

    /// HiGHS's dual bound on the extra cost of cut `l` with `S` and `D` integral (module
    /// docs), within [`INTEGRAL_NODES`] branch-and-bound nodes; `None` for a cut of more than
    /// [`INTEGRAL_MAX_VALUES`] values or when HiGHS proves nothing.
    fn integral_extra(
        &self,
        l: usize,
        forced: &Forced,
        controls: &Controls,
    ) -> Result<Option<f64>, SolveError> {
        let Some(room) = forced.rooms[l] else {
            return Ok(None);
        };
        if self.values(l).count() > INTEGRAL_MAX_VALUES {
            return Ok(None);
        }
        let Some(CutLp { lp, c_max, .. }) = self.lp(l, room, forced, true) else {
            return Ok(None);
        };
        let controls = Controls {
            relax: false,
            max_nodes: Some(INTEGRAL_NODES),
            ..controls.clone()
        };
        let run = run_cut(lp, &controls)?;
        Ok(match run.status {
            RunStatus::Infeasible => None,
            _ => run.bound.filter(|b| b.is_finite()).map(|b| b * c_max),
        })
    }
}

/// HiGHS on a cut's LP or integral program: its failure is the bound's error, the caller's
/// cancellation ends the bound.
fn run_cut(lp: Lp, controls: &Controls) -> Result<Run, SolveError> {
    let run = backend::run(lp, None, controls).map_err(|e| SolveError::Failed {
        solver: "stage-cut bound",
        reason: e.to_string(),
    })?;
    if run.status == RunStatus::Cancelled {
        return Err(SolveError::Cancelled);
    }
    Ok(run)
}

/// The cardinality covers of the memory row (module docs): for each `k < MAX_COVER`, the
/// largest set `T` of the largest values of which no `k + 1` fit in `room` together, with
/// `k`. Values that do not fit alone (fixed at 0) or take no memory are left out.
fn covers(graph: &Graph, values: &[usize], room: u64) -> Vec<(Vec<usize>, usize)> {
    let mut by_size: Vec<usize> = values
        .iter()
        .copied()
        .filter(|&v| (1..=room).contains(&graph.memory(v)))
        .collect();
    by_size.sort_unstable_by_key(|&v| (std::cmp::Reverse(graph.memory(v)), v));
    // `fits[m]`: the most of the `m + 1` largest that fit together (its smallest ones).
    let fits = |m: usize| -> usize {
        let mut used = 0u64;
        by_size[..=m]
            .iter()
            .rev()
            .take_while(|&&v| {
                used += graph.memory(v);
                used <= room
            })
            .count()
    };
    let mut rows: Vec<(Vec<usize>, usize)> = Vec::new();
    for m in 0..by_size.len() {
        let k = fits(m);
        if k >= MAX_COVER {
            break;
        }
        if k <= m {
            match rows.last_mut() {
                Some(last) if last.1 == k => last.0 = by_size[..=m].to_vec(),
                _ => rows.push((by_size[..=m].to_vec(), k)),
            }
        }
    }
    rows
}

/// A normalised coefficient, or 0 below [`TINY`]: HiGHS would drop it with a warning.
/// A size or cost read as 0 only loosens the LP, so its optimum stays a lower bound.
fn significant(value: f64) -> f64 {
    if value < TINY {
        0.0
    } else {
        value
    }
}

/// The stage-cut bound of `graph` within `budget`, from the cuts tried before `options`'
/// time limit; `None` when no cut raises `Σ_v c_v` (or the graph has a storage tier, or
/// more than [`MAX_NODES`] nodes, or the budget is below its minimum feasible one).
///
/// The steps of the module docs: the forced values `F` (their second computation is in every
/// schedule's cost), then each candidate cut's LP, then the [`INTEGRAL_CUTS`] cuts whose LP
/// proved most solved again in integral form; the highest cost proven is the bound.
pub(crate) fn stage_cut_bound(
    graph: &Graph,
    budget: u64,
    options: &SolveOptions,
) -> Result<Option<StageCut>, SolveError> {
    if graph.storage().is_some() || graph.len() > MAX_NODES {
        return Ok(None);
    }
    bound_over(&Cuts::new(graph), budget, options)
}

/// [`stage_cut_bound`] over `cuts`.
fn bound_over(
    cuts: &Cuts,
    budget: u64,
    options: &SolveOptions,
) -> Result<Option<StageCut>, SolveError> {
    let stop = Stop::start(options);
    let rooms = cuts.rooms(budget);
    let forced = cuts.forced(&rooms, &stop);
    let mut bounding = Bounding::new(cuts, &forced, rooms, options, stop);
    let ranked = bounding.lp_cuts()?;
    bounding.integral_cuts(&ranked)?;
    let solved = bounding.solved;
    Ok(bounding.best.map(|b| StageCut {
        cuts: solved,
        forced,
        ..b
    }))
}

/// One run of [`stage_cut_bound`]: the cuts, what every cut's cost starts from, and the best
/// bound so far.
struct Bounding<'c, 'g> {
    cuts: &'c Cuts<'g>,
    /// The forced values `F`, with the rooms of the budget.
    forced: Forced,
    /// `Σ_v c_v + Σ_{v ∈ F} c_v`: every schedule's cost is at least this.
    base: f64,
    controls: Controls,
    stop: Stop,
    best: Option<StageCut>,
    /// The cuts whose LP was solved.
    solved: usize,
}

impl<'c, 'g> Bounding<'c, 'g> {
    fn new(
        cuts: &'c Cuts<'g>,
        forced: &[(usize, usize)],
        rooms: Vec<Option<u64>>,
        options: &SolveOptions,
        stop: Stop,
    ) -> Self {
        let graph = cuts.graph;
        let base = graph.total_cost() + forced.iter().map(|&(v, _)| graph.cost(v)).sum::<f64>();
        // With forced values and no cut, the bound is `base`, at the moment of the forced
        // value of the largest cost.
        let best = forced
            .iter()
            .max_by(|a, b| graph.cost(a.0).total_cmp(&graph.cost(b.0)))
            .map(|&(_, l)| StageCut::found(base, l, vec![1.0; graph.len()], false));
        let controls = relaxed_controls(options, &stop);
        Bounding {
            cuts,
            forced: Forced::new(graph.len(), forced, rooms),
            base,
            controls,
            stop,
            best,
            solved: 0,
        }
    }

    /// Whether `cost` raises the best bound (or `Σ_v c_v`, before any).
    fn raises(&self, cost: f64) -> bool {
        cost > self
            .best
            .as_ref()
            .map_or(self.cuts.graph.total_cost(), |b| b.cost)
    }

    /// Each candidate cut's LP, until the time limit: the best bound among them, and the cuts
    /// with the cost each proved, most first.
    fn lp_cuts(&mut self) -> Result<Vec<(f64, usize)>, SolveError> {
        let mut ranked: Vec<(f64, usize)> = Vec::new();
        for l in self.cuts.candidates(&self.forced.rooms) {
            if self.stop.cancelled() {
                return Err(SolveError::Cancelled);
            }
            if self.stop.should_stop() {
                break;
            }
            let Some((cost, keep)) = self.lp_cut(l)? else {
                continue;
            };
            if self.raises(cost) {
                self.best = Some(StageCut::found(cost, l, keep, false));
            }
            ranked.push((cost, l));
        }
        ranked.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        Ok(ranked)
    }

    /// Cut `l`'s LP: the cost it proves and its `S_v` (1 outside the cut's values); `None`
    /// when the cut has no room or its LP is not solved to optimality.
    fn lp_cut(&mut self, l: usize) -> Result<Option<(f64, Vec<f64>)>, SolveError> {
        let Some(room) = self.forced.rooms[l] else {
            return Ok(None);
        };
        let Some(CutLp { lp, c_max, col }) = self.cuts.lp(l, room, &self.forced, false) else {
            return Ok(None);
        };
        let run = run_cut(lp, &self.controls)?;
        if run.status != RunStatus::Optimal {
            return Ok(None);
        }
        self.solved += 1;
        let (Some(bound), Some(values)) = (run.bound, run.columns) else {
            return Ok(None);
        };
        let keep = col
            .iter()
            .map(|c| c.map_or(1.0, |(s, _)| values[s]))
            .collect();
        Ok(Some((self.base + bound * c_max, keep)))
    }

    /// The first [`INTEGRAL_CUTS`] of `ranked` solved again in integral form, until the time
    /// limit.
    fn integral_cuts(&mut self, ranked: &[(f64, usize)]) -> Result<(), SolveError> {
        for &(_, l) in ranked.iter().take(INTEGRAL_CUTS) {
            if self.stop.should_stop() {
                break;
            }
            let extra = self.cuts.integral_extra(l, &self.forced, &self.controls)?;
            let Some(extra) = extra else {
                continue;
            };
            let cost = self.base + extra;
            if self.raises(cost) {
                let keep = self
                    .best
                    .take()
                    .map_or_else(|| vec![1.0; self.cuts.graph.len()], |b| b.keep);
                self.best = Some(StageCut::found(cost, l, keep, true));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
