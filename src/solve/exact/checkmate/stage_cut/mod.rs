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
//! search ends early, lowered by the tolerance within which HiGHS prunes (see "Numerics").
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
//! Costs are divided by the largest and, in an LP, sizes by the larger of the room and the
//! largest size, so that every coefficient is at most 1; those then below [`TINY`] are read
//! as 0 (a looser LP, so still a bound). In an integral program a memory row is in units of
//! its sizes' gcd instead, its room rounded down to one (every coefficient and right-hand
//! side an integer, the integral points unchanged; [`memory_rows`]): divided by the room, a
//! row one byte from full beside a value of 4 bytes had HiGHS's MIP presolve cut off the
//! optimum of a sequence of cuts' window ([`super::resolution`]). An LP's bound taken is not
//! HiGHS's objective, exact only up to its tolerances, but `L(y)` of its row duals
//! ([`super::lagrangian`]); an integral cut's is HiGHS's dual bound, which may lie above the
//! cut's optimum by the tolerance within which its branch and bound prunes (1e-6 of the
//! cut's largest cost: with a cost of 1e12 among its values, 8e5 above was measured). Each
//! becomes a cost through [`super::resolution::within_resolution`], lowered by what it may be
//! off and raised to the next integer where every cost is one.
//!
//! # Scope
//!
//! The bound is on **every** schedule of the graph within the budget, in any order
//! ([`crate::solve::Scope::GlobalOptimum`]), within HiGHS's resolution as above.

use super::backend::{self, Controls, Lp, Run, RunStatus};
use crate::graph::Graph;
use crate::solve::{SolveError, SolveOptions, Stop};

mod cuts;
mod sequence;
use cuts::{memory_rows, significant, CutLp, Cuts, Forced, Room};
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

/// A stage-cut bound: `cost` bounds every schedule of the graph within the budget (within
/// HiGHS's resolution, module docs).
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

/// What a cut's or a window's program proved: `offset + c_max · bound` of HiGHS's bound as it
/// gave it (`raw`: what the cuts are ranked and the windows screened by, as they were
/// measured, so that the resolution changes no choice of work), and the bound that proves
/// within HiGHS's resolution (`cost`).
#[derive(Clone, Copy, Debug)]
struct Proved {
    raw: f64,
    cost: f64,
}

impl Proved {
    /// What `run`'s bound proves on a program whose objective is in units of `c_max` and
    /// leaves out `offset`.
    fn by(run: &Run, graph: &Graph, offset: f64, c_max: f64) -> Option<Proved> {
        Some(Proved {
            raw: offset + run.bound? * c_max,
            cost: run.proves(graph, offset, c_max)?,
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
    /// with the cost each proved (as HiGHS gave it, [`Proved::raw`]), most first.
    fn lp_cuts(&mut self) -> Result<Vec<(f64, usize)>, SolveError> {
        let mut ranked: Vec<(f64, usize)> = Vec::new();
        for l in self.cuts.candidates(&self.forced.rooms) {
            if self.stop.cancelled() {
                return Err(SolveError::Cancelled);
            }
            if self.stop.should_stop() {
                break;
            }
            let Some((proved, keep)) = self.lp_cut(l)? else {
                continue;
            };
            if self.raises(proved.cost) {
                self.best = Some(StageCut::found(proved.cost, l, keep, false));
            }
            ranked.push((proved.raw, l));
        }
        ranked.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        Ok(ranked)
    }

    /// Cut `l`'s LP: what it proves and its `S_v` (1 outside the cut's values); `None` when
    /// the cut has no room or its LP is not solved to optimality.
    fn lp_cut(&mut self, l: usize) -> Result<Option<(Proved, Vec<f64>)>, SolveError> {
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
        let proved = Proved::by(&run, self.cuts.graph, self.base, c_max);
        let (Some(proved), Some(values)) = (proved, run.columns) else {
            return Ok(None);
        };
        let keep = col
            .iter()
            .map(|c| c.map_or(1.0, |(s, _)| values[s]))
            .collect();
        Ok(Some((proved, keep)))
    }

    /// The first [`INTEGRAL_CUTS`] of `ranked` solved again in integral form, until the time
    /// limit.
    fn integral_cuts(&mut self, ranked: &[(f64, usize)]) -> Result<(), SolveError> {
        for &(_, l) in ranked.iter().take(INTEGRAL_CUTS) {
            if self.stop.should_stop() {
                break;
            }
            let cost = self
                .cuts
                .integral_cost(l, &self.forced, &self.controls, self.base)?;
            let Some(cost) = cost else {
                continue;
            };
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
