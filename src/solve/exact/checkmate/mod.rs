//! Checkmate's MILP (Jain et al., "Checkmate: Breaking the Memory Wall with Optimal
//! Tensor Rematerialization", MLSys 2020, §4; `checkmate.md` §1), its LP relaxation and
//! two-phase LP rounding (§5 of the paper; `checkmate.md` §2), on HiGHS.
//!
//! # The model
//! Nodes `0..n` are in solver order; there are `T = n` *frontier-advancing* stages: stage
//! `t` is the one that computes node `t` for the first time (`R[t,t] = 1`). Variables:
//! * `R[t,i] ∈ {0,1}`, `i <= t`: node `i` is (re)computed in stage `t`;
//! * `S[t,i] ∈ {0,1}`, `i < t`: the output of `i` is resident entering stage `t`;
//! * `FREE[t,(i,k)] ∈ {0,1}` for an edge `(i,k)` with `k <= t`: `i` is freed right after `k`
//!   is evaluated in stage `t`;
//! * `U[t,k] >= 0`, `k <= t`: memory in use while `k` is evaluated in stage `t`.
//!
//! Only the lower triangle is created (Checkmate's code creates all `T²` and fixes the rest
//! to zero with constraints). Further, a value is only ever useful in stage `t` when one of
//! its descendants has an index `>= t`: with `h(i)` the largest index among `i` and its
//! descendants (its *horizon*), `R[t,i]` and `S[t,i]` exist only for `t <= h(i)`. Zeroing
//! them in any feasible solution keeps it feasible and no costlier (every node reading `i`
//! also has horizon `<= h(i)`; fewer computations and checkpoints only free memory), so
//! the optimum is unchanged.
//!
//! Minimise `Σ_t Σ_i C_i R[t,i]` subject to (paper eq. numbers as in `checkmate.md` §1.3):
//! * dependencies (c): `R[t,v] <= R[t,u] + S[t,u]` for every edge `(u,v)`;
//! * persistence (b): `S[t+1,i] <= S[t,i] + R[t,i]`;
//! * the FREE linearisation (d), Lemmas 4.1-4.2: with the hazards
//!   `H = (1 − R[t,k]) + S[t+1,i] + Σ_{j ∈ succ(i), k < j <= t} R[t,j]` and `κ` their
//!   number, `1 − FREE <= H` and `κ (1 − FREE) >= H`, so that
//!   `FREE = R[t,k] · (1 − S[t+1,i]) · Π_j (1 − R[t,j])`;
//! * memory (e, f): `U[t,0] = M_0 R[t,0] + Σ_i M_i S[t,i]` and
//!   `U[t,k+1] = U[t,k] + M_{k+1} R[t,k+1] − Σ_{(i,k) ∈ E} M_i FREE[t,(i,k)]`;
//! * budget (g): `U[t,k] <= B − K`, the budget less the graph's `fixed_memory` `K`.
//!
//! Measured and left out: the valid tightening rows of Checkmate's max-batch-size model
//! (`checkmate.md` §1.9: `Σ_k FREE[t,(i,k)] <= 1`, `FREE + S[t+1,i] <= 1`,
//! `FREE + R[t,j] <= 1`) made HiGHS no faster (linear-8 at budget 4: 2.8 s vs 2.9 s; FCN8
//! at 0.9 / 0.8: 26 / 47 s vs 23 / 24 s, from a baseline start on a loaded machine), and
//! neither did replacing the big-M rows by the product's upper bounds alone (FREE only
//! lowers memory, so its lower bound may go): 3.6 s and 24 / 34 s, although that LP is
//! tighter (23 instead of 22 on linear-8 at 4).
//!
//! Memory is divided by the gcd of the sizes (exact: the budget row becomes
//! `U <= ⌊(B − K)/g⌋`), costs by their gcd when they are integers, else by the largest.
//!
//! # Memory semantics
//! `U` counts more than the simulator (§6.2): no node frees its own output, and a
//! checkpoint kept but unused in a stage stays counted. So the (R,S) of any MILP-feasible
//! point, turned into events by [`Stages::into_schedule`], never peaks above the budget in
//! the simulator; the reported cost and peak are always the simulator's.
//!
//! # Scope
//! The optimum is over frontier-advancing stage schedules in the solver order
//! ([`Scope::OptimalForOrder`]), not over every schedule: on Checkmate's chains it equals
//! the exhaustive optimum at every budget, but on the 200 random DAGs of `tests/milp.rs`
//! (759 graph/budget cases, many sinks) it is strictly worse in 331 cases, 18 of them
//! infeasible where another order fits; `tests/fixtures/milp_above_exhaustive.json`
//! lists them.
//!
//! # Extraction (two-phase, `checkmate.md` §2)
//! From a solution only S is read; R is rebuilt as the minimal recomputation for that S
//! ([`Stages::from_s`]), which never costs more and never needs more memory.

mod backend;
mod lp_rounding;
mod milp;
mod size;

use lp_rounding::solve_rounding;
pub use lp_rounding::{LpBound, LpRounding};
pub(crate) use milp::solve_milp;
pub use milp::Milp;
pub use size::{model_size, ModelSize};

use crate::graph::Graph;
use crate::schedule::stages::{empty_s, Stages};
use crate::schedule::{simulate, Schedule};
use crate::solve::details::{CheckmateDetails, Details};
use crate::solve::heuristic::baseline::recompute_all;
use crate::solve::heuristic::chen::{ChenGreedy, ChenSqrt};
use crate::solve::heuristic::dtr;
use crate::solve::{
    Claim, Instance, Outcome, Plan, Scope, SolveError, SolveOptions, Solver, Stop, Stopped,
};
use backend::{Controls, Lp};
use fixedbitset::FixedBitSet;
use std::time::{Duration, Instant};

const NONE: u32 = u32::MAX;

/// The Checkmate model of one instance, with the map from (R, S, FREE, U) to columns.
pub(crate) struct StageModel {
    /// Taken by the HiGHS run ([`StageModel::take_lp`]); the maps below stay.
    lp: Lp,
    /// Its counts, as built (bytes by [`ModelSize`]'s calibration).
    pub size: ModelSize,
    /// `r[t][i]`: column of `R[t,i]`, or `NONE`.
    r: Vec<Vec<u32>>,
    /// `s[t][i]`: column of `S[t,i]` (`i < t`), or `NONE`.
    s: Vec<Vec<u32>>,
    /// `u[t][k]`: column of `U[t,k]`.
    u: Vec<Vec<u32>>,
    /// Every FREE column as `(t, i, k, column)`.
    free: Vec<(u32, u32, u32, u32)>,
    /// Objective units: cost `c` is `c / cost_scale` in the model.
    cost_scale: f64,
    /// Memory in units of `mem_scale` bytes.
    mem_scale: u64,
    /// `⌊(B − K) / mem_scale⌋`.
    budget_units: f64,
    pub build_time: Duration,
}

/// `h(i)`: the largest index among `i` and its descendants.
fn horizons(graph: &Graph) -> Vec<usize> {
    let n = graph.len();
    let mut h: Vec<usize> = (0..n).collect();
    for i in (0..n).rev() {
        for &j in graph.succs(i) {
            h[i] = h[i].max(h[j]);
        }
    }
    h
}

/// The memory unit `g` of the model: the gcd of the sizes.
fn memory_scale(graph: &Graph) -> u64 {
    graph.nodes().iter().map(|v| v.memory).fold(0, gcd).max(1)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The unit costs are expressed in: their gcd when they are all (not too large)
/// integers and the ratio to the largest stays moderate, else the largest cost.
fn cost_scale(graph: &Graph) -> f64 {
    let max = graph.nodes().iter().map(|n| n.cost).fold(0.0, f64::max);
    if max <= 0.0 {
        return 1.0;
    }
    let integral = graph
        .nodes()
        .iter()
        .all(|n| n.cost.fract() == 0.0 && n.cost < 9.0e15);
    if integral {
        let g = graph
            .nodes()
            .iter()
            .map(|n| n.cost as u64)
            .fold(0, gcd)
            .max(1) as f64;
        if max / g <= 1.0e9 {
            return g;
        }
    }
    max
}

impl StageModel {
    /// Builds the model of `instance` (`budget >= fixed_memory` is the caller's check,
    /// and [`admit`] the check that it fits in memory), polling `stop` once per stage.
    pub(crate) fn build(instance: &Instance, stop: &Stop) -> Result<StageModel, Stopped> {
        StageModel::build_within(instance, 0, stop)
    }

    /// The model with its budget rows tightened by `margin` memory units:
    /// `U <= ⌊(B − K)/g⌋ − margin`.
    pub(crate) fn build_within(
        instance: &Instance,
        margin: u64,
        stop: &Stop,
    ) -> Result<StageModel, Stopped> {
        let began = Instant::now();
        let graph = instance.graph;
        let n = graph.len();
        let h = horizons(graph);
        let mem_scale = memory_scale(graph);
        let m = |i: usize| (graph.memory(i) / mem_scale) as f64;
        let budget_units = (instance.budget.saturating_sub(graph.fixed_memory()) / mem_scale)
            .saturating_sub(margin) as f64;
        let cost_scale = cost_scale(graph);
        let mut lp = Lp::new();
        let mut r = vec![Vec::new(); n];
        let mut s = vec![Vec::new(); n];
        let mut u = vec![Vec::new(); n];
        for t in 0..n {
            if t % 64 == 0 {
                stop.poll()?;
            }
            r[t] = (0..=t)
                .map(|i| {
                    if t > h[i] {
                        NONE
                    } else {
                        let lower = if i == t { 1.0 } else { 0.0 };
                        lp.add_col(graph.cost(i) / cost_scale, lower, 1.0, true) as u32
                    }
                })
                .collect();
            s[t] = (0..t)
                .map(|i| {
                    if t > h[i] {
                        NONE
                    } else {
                        lp.add_col(0.0, 0.0, 1.0, true) as u32
                    }
                })
                .collect();
            u[t] = (0..=t)
                .map(|_| lp.add_col(0.0, 0.0, budget_units, false) as u32)
                .collect();
        }
        let col = |c: u32| (c != NONE).then_some(c as usize);
        let mut free = Vec::new();
        // free_of[t][k]: the FREE columns (i, column) of the edges into k, in stage t.
        let mut free_of: Vec<Vec<(usize, usize)>> = Vec::new();
        let mut row = Vec::new();
        for t in 0..n {
            stop.poll()?;
            free_of.clear();
            free_of.resize(t + 1, Vec::new());
            for k in 0..=t {
                if col(r[t][k]).is_some() {
                    for &i in graph.preds(k) {
                        let c = lp.add_col(0.0, 0.0, 1.0, true);
                        free.push((t as u32, i as u32, k as u32, c as u32));
                        free_of[k].push((i, c));
                    }
                }
            }
            let r_t = |i: usize| col(r[t][i]);
            let s_t = |i: usize| if i < t { col(s[t][i]) } else { None };
            let s_next = |i: usize| s.get(t + 1).and_then(|row| col(row[i]));
            // (e) U[t,0] = M_0 R[t,0] + Σ_i M_i S[t,i].
            row.push((u[t][0] as usize, 1.0));
            row.extend(r_t(0).map(|c| (c, -m(0))));
            row.extend((0..t).filter_map(|i| s_t(i).map(|c| (c, -m(i)))));
            lp.add_row(0.0, 0.0, &mut row);
            // (f) U[t,k+1] = U[t,k] + M_{k+1} R[t,k+1] − Σ_{(i,k)} M_i FREE[t,(i,k)].
            for k in 0..t {
                row.push((u[t][k + 1] as usize, 1.0));
                row.push((u[t][k] as usize, -1.0));
                row.extend(r_t(k + 1).map(|c| (c, -m(k + 1))));
                row.extend(free_of[k].iter().map(|&(i, c)| (c, m(i))));
                lp.add_row(0.0, 0.0, &mut row);
            }
            // (b) persistence S[t,i] <= S[t-1,i] + R[t-1,i].
            if t >= 1 {
                for (i, &r_prev) in r[t - 1].iter().enumerate() {
                    if let Some(c) = s_t(i) {
                        row.push((c, 1.0));
                        row.extend(col(r_prev).map(|c| (c, -1.0)));
                        row.extend(s[t - 1].get(i).and_then(|&c| col(c)).map(|c| (c, -1.0)));
                        lp.add_row(f64::NEG_INFINITY, 0.0, &mut row);
                    }
                }
            }
            // (c) dependencies R[t,v] <= R[t,u] + S[t,u].
            for v in 0..=t {
                let Some(rv) = r_t(v) else { continue };
                for &p in graph.preds(v) {
                    row.push((rv, 1.0));
                    row.extend(r_t(p).map(|c| (c, -1.0)));
                    row.extend(s_t(p).map(|c| (c, -1.0)));
                    lp.add_row(f64::NEG_INFINITY, 0.0, &mut row);
                }
            }
            // (d) FREE[t,(i,k)] = R[t,k] (1 − S[t+1,i]) Π_{j>k} (1 − R[t,j]).
            for (k, frees) in free_of.iter().enumerate() {
                let Some(rk) = r_t(k) else { continue };
                for &(i, f) in frees {
                    let later: Vec<usize> = graph
                        .succs(i)
                        .iter()
                        .filter(|&&j| j > k && j <= t)
                        .filter_map(|&j| r_t(j))
                        .collect();
                    let keep = s_next(i);
                    let kappa = 1.0 + keep.is_some() as u8 as f64 + later.len() as f64;
                    // 1 − FREE <= H
                    row.push((f, -1.0));
                    row.push((rk, 1.0));
                    row.extend(keep.map(|c| (c, -1.0)));
                    row.extend(later.iter().map(|&c| (c, -1.0)));
                    lp.add_row(f64::NEG_INFINITY, 0.0, &mut row);
                    // κ (1 − FREE) >= H
                    row.push((f, kappa));
                    row.push((rk, -1.0));
                    row.extend(keep.map(|c| (c, 1.0)));
                    row.extend(later.iter().map(|&c| (c, 1.0)));
                    lp.add_row(f64::NEG_INFINITY, kappa - 1.0, &mut row);
                }
            }
        }
        let size = ModelSize::of_counts(
            lp.num_cols() as u64,
            lp.num_integer() as u64,
            lp.num_rows() as u64,
            lp.num_nonzeros() as u64,
        );
        Ok(StageModel {
            lp,
            size,
            r,
            s,
            u,
            free,
            cost_scale,
            mem_scale,
            budget_units,
            build_time: began.elapsed(),
        })
    }

    pub(crate) fn num_variables(&self) -> u64 {
        self.size.columns
    }
    pub(crate) fn num_constraints(&self) -> u64 {
        self.size.rows
    }

    /// The sparse program, for the one HiGHS run of this model; its memory goes with it.
    fn take_lp(&mut self) -> Lp {
        std::mem::take(&mut self.lp)
    }

    /// Model figures for a result's `details`.
    fn details(&self) -> CheckmateDetails {
        CheckmateDetails {
            variables: Some(self.size.columns as usize),
            binaries: Some(self.size.integer_columns as usize),
            constraints: Some(self.size.rows as usize),
            build_time_s: Some(self.build_time.as_secs_f64()),
            ..CheckmateDetails::default()
        }
    }

    /// An objective value in the graph's cost units.
    fn cost(&self, objective: f64) -> f64 {
        objective * self.cost_scale
    }

    /// The value of `S[t,i]` in `columns` (0 where the variable does not exist).
    fn s_value(&self, columns: &[f64], t: usize, i: usize) -> f64 {
        match self.s[t].get(i) {
            Some(&c) if c != NONE => columns[c as usize],
            _ => 0.0,
        }
    }

    /// S rounded at `threshold`: `S[t,i] = 1` where the value is `>= threshold`.
    fn s_at(&self, columns: &[f64], threshold: f64) -> Vec<FixedBitSet> {
        let n = self.s.len();
        let mut s = empty_s(n);
        for (t, row) in s.iter_mut().enumerate() {
            for i in 0..t {
                if self.s_value(columns, t, i) >= threshold {
                    row.insert(i);
                }
            }
        }
        s
    }

    /// A complete column vector for the stage schedule `stages` (R, S as given, FREE and
    /// U by their definitions), or `None` when it is not a feasible point of this model
    /// (a variable it needs does not exist, or `U` exceeds the budget).
    fn point(&self, graph: &Graph, stages: &Stages) -> Option<Vec<f64>> {
        let n = graph.len();
        let mut x = vec![0.0; self.size.columns as usize];
        for t in 0..n {
            for i in stages.r[t].ones() {
                x[*self.r[t].get(i).filter(|&&c| c != NONE)? as usize] = 1.0;
            }
            for i in stages.s[t].ones() {
                x[*self.s[t].get(i).filter(|&&c| c != NONE)? as usize] = 1.0;
            }
        }
        let kept = |t: usize, i: usize| t + 1 < n && stages.s[t + 1].contains(i);
        let mut freed: Vec<Vec<f64>> = (0..n).map(|t| vec![0.0; t + 1]).collect();
        for &(t, i, k, c) in &self.free {
            let (t, i, k) = (t as usize, i as usize, k as usize);
            let r = &stages.r[t];
            let value = r.contains(k)
                && !kept(t, i)
                && !graph
                    .succs(i)
                    .iter()
                    .any(|&j| j > k && j <= t && r.contains(j));
            if value {
                x[c as usize] = 1.0;
                freed[t][k] += (graph.memory(i) / self.mem_scale) as f64;
            }
        }
        let m = |i: usize| (graph.memory(i) / self.mem_scale) as f64;
        for t in 0..n {
            let mut used: f64 = stages.s[t].ones().map(m).sum();
            for k in 0..=t {
                if k > 0 {
                    used -= freed[t][k - 1];
                }
                if stages.r[t].contains(k) {
                    used += m(k);
                }
                if used > self.budget_units + 1e-9 {
                    return None;
                }
                x[self.u[t][k] as usize] = used;
            }
        }
        Some(x)
    }
}

/// Drops checkpoints that no stage reads (`S[t,i] = 1` with no consumer of `i` computed in
/// stage `t` and `S[t+1,i] = 0`) and rebuilds the minimal R, until nothing changes. The
/// simulator frees such values anyway; the MILP counts them, so a MIP start needs them
/// gone.
fn without_spurious(graph: &Graph, mut stages: Stages) -> Stages {
    let n = graph.len();
    loop {
        let mut changed = false;
        for t in (1..n).rev() {
            let spurious: Vec<usize> = stages.s[t]
                .ones()
                .filter(|&i| {
                    let kept = t + 1 < n && stages.s[t + 1].contains(i);
                    let read = graph.succs(i).iter().any(|&j| stages.r[t].contains(j));
                    !kept && !read
                })
                .collect();
            for i in spurious {
                stages.s[t].remove(i);
                changed = true;
            }
        }
        if !changed {
            return stages;
        }
        stages = Stages::from_s(graph, stages.s);
    }
}

/// A stage schedule verified by the simulator to fit the budget.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    /// Where it came from (a baseline's name, a rounding).
    pub source: String,
    pub schedule: Schedule,
    pub cost: f64,
}

impl Candidate {
    /// Simulates `stages`; `Some` when the schedule fits `budget`.
    fn check(graph: &Graph, stages: Stages, budget: u64, source: String) -> Option<Candidate> {
        let schedule = stages.into_schedule(graph);
        let stats = simulate(graph, &schedule).ok()?;
        (stats.peak_memory <= budget).then_some(Candidate {
            source,
            schedule,
            cost: stats.total_cost,
        })
    }

    /// A plan's stage schedule as a candidate (`None` without stages or when it does not
    /// simulate).
    fn from_plan(graph: &Graph, plan: &Plan) -> Option<Candidate> {
        let stats = simulate(graph, &plan.schedule).ok()?;
        plan.schedule.stages.as_ref()?;
        let source = match &plan.details {
            Some(Details::Checkmate(d)) => d.source.as_deref(),
            _ => None,
        };
        Some(Candidate {
            source: source.unwrap_or(plan.solver).to_string(),
            schedule: plan.schedule.clone(),
            cost: stats.total_cost,
        })
    }

    fn stages(&self) -> &Stages {
        self.schedule
            .stages
            .as_ref()
            .expect("candidates are stage schedules")
    }

    /// The schedule as a plan of `solver`.
    fn into_plan(self, solver: &'static str, claim: Claim, scope: Scope) -> Plan {
        Plan {
            schedule: self.schedule,
            claim,
            solver,
            scope,
            lower_bound: None,
            message: None,
            details: None,
        }
    }
}

/// The cheapest baseline stage schedule within the budget, among checkpoint-all (every
/// output kept until its last use, as stages), Chen's greedy and √n, recompute-all and
/// the stage form of DTR's schedule.
pub(crate) fn best_baseline(
    instance: &Instance,
    options: &SolveOptions,
) -> Result<Option<Candidate>, SolveError> {
    let graph = instance.graph;
    let n = graph.len();
    // S[t] = the values whose last consumer is at or after t.
    let s = (0..n)
        .map(|t| {
            let mut row = FixedBitSet::with_capacity(n);
            row.extend((0..t).filter(|&i| graph.succs(i).last().is_some_and(|&l| l >= t)));
            row
        })
        .collect();
    let mut found: Vec<(String, Stages)> =
        vec![("checkpoint-all".into(), Stages::from_s(graph, s))];
    for solver in [&ChenGreedy as &dyn Solver, &ChenSqrt] {
        if let Outcome::Plan(plan) = solver.solve(instance, options)? {
            if let Some(stages) = plan.schedule.stages {
                found.push((solver.info().name.to_string(), stages));
            }
        }
    }
    if let Some(stages) = recompute_all(graph).stages {
        found.push(("recompute-all".into(), stages));
    }
    if let Some(stages) = dtr::stages(graph, instance.budget) {
        found.push(("dtr".into(), stages));
    }
    Ok(found
        .into_iter()
        .filter_map(|(name, st)| Candidate::check(graph, st, instance.budget, name))
        .min_by(|a, b| a.cost.total_cmp(&b.cost)))
}

/// The HiGHS controls for a solve that must end when `stop` says.
fn controls(options: &SolveOptions, relax: bool, stop: &Stop) -> Controls {
    Controls {
        relax,
        stop: stop.clone(),
        mip_rel_gap: options.mip_gap,
        threads: options.threads,
        seed: options.seed,
        ipm: relax,
    }
}

/// Answers that need no model: a budget below the trivial lower bound.
fn precheck(instance: &Instance, solver: &'static str) -> Option<Outcome> {
    let (min_budget, widest) = instance.graph.min_feasible_budget();
    (instance.budget < min_budget).then(|| Outcome::Infeasible {
        solver,
        proven: Some(Scope::GlobalOptimum),
        reason: format!(
            "no schedule fits: computing node '{}' needs {min_budget} bytes (fixed_memory \
             included), more than the budget {}",
            instance.graph.id(widest),
            instance.budget
        ),
    })
}

/// HiGHS indexes columns, rows and nonzeros with 32-bit integers.
const HIGHS_MAX_INDEX: u64 = i32::MAX as u64;

/// Refuses, before anything is allocated, a model that would need more than
/// `options.memory_limit` bytes ([`model_size`], plus what abandoned HiGHS runs still
/// hold) or more entries than HiGHS can index.
fn admit(graph: &Graph, options: &SolveOptions, solver: &'static str) -> Result<(), SolveError> {
    let size = model_size(graph);
    // HiGHS runs abandoned at their deadline hold their memory until they stop.
    let held = backend::abandoned_bytes();
    let needed = size.bytes.saturating_add(held);
    if let Some(limit) = options.memory_limit.filter(|&limit| needed > limit) {
        let what = if held > 0 {
            format!(
                "{size}, beside {held} bytes still held by HiGHS runs abandoned at their deadline"
            )
        } else {
            size.to_string()
        };
        return Err(SolveError::TooLarge {
            solver,
            what,
            needed,
            limit,
        });
    }
    let largest = size.columns.max(size.rows).max(size.nonzeros);
    if largest > HIGHS_MAX_INDEX {
        return Err(SolveError::Unsupported {
            solver,
            reason: format!(
                "its model would be {size}, more than HiGHS's 32-bit indices allow \
                 ({HIGHS_MAX_INDEX})"
            ),
        });
    }
    Ok(())
}

fn failed(solver: &'static str, e: backend::HighsError) -> SolveError {
    SolveError::Failed {
        solver,
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::schedule::checkpoint_all_peak;

    #[test]
    fn model_has_only_the_lower_triangle() {
        let g = linear(4); // T = 9, |E| = 12
        let stop = Stop::start(&SolveOptions::default());
        let model = StageModel::build(
            &Instance {
                graph: &g,
                budget: 5,
            },
            &stop,
        )
        .unwrap();
        let n = g.len();
        // R and S: the horizon of every node of the linear graph is the last node.
        let r: usize = model.r.iter().flatten().filter(|&&c| c != NONE).count();
        let s: usize = model.s.iter().flatten().filter(|&&c| c != NONE).count();
        assert_eq!(r, n * (n + 1) / 2);
        assert_eq!(s, n * (n - 1) / 2);
        // FREE: one per edge (i,k) and stage t >= k.
        let free: usize = g.edges().map(|(_, k)| n - k).sum();
        assert_eq!(model.free.len(), free);
        assert_eq!(
            model.num_variables(),
            (r + s + n * (n + 1) / 2 + free) as u64
        );
        // The budget of 5 is below the checkpoint-all peak.
        assert_eq!(checkpoint_all_peak(&g), 6);
    }

    #[test]
    fn start_point_counts_memory_like_the_model() {
        // Checkpoint-all on linear-4 peaks at its checkpoint-all peak in the MILP's U
        // too: a start at that budget, none one byte below.
        let g = linear(4);
        let peak = checkpoint_all_peak(&g);
        let options = SolveOptions::default();
        let at = |budget| {
            let instance = Instance { graph: &g, budget };
            let model = StageModel::build(&instance, &Stop::start(&options)).unwrap();
            let keep_all = best_baseline(
                &Instance {
                    graph: &g,
                    budget: peak,
                },
                &options,
            )
            .unwrap()
            .unwrap();
            assert_eq!(keep_all.cost, g.total_cost());
            let stages = without_spurious(&g, keep_all.stages().clone());
            model.point(&g, &stages)
        };
        let x = at(peak).expect("checkpoint-all is a point at its peak");
        assert!(x.iter().all(|v| (0.0..=peak as f64).contains(v)));
        assert!(at(peak - 1).is_none());
    }

    #[test]
    fn the_build_stops_when_cancelled_or_past_the_deadline() {
        let g = crate::graph::generate::random_layered(300, 1);
        let instance = Instance {
            graph: &g,
            budget: checkpoint_all_peak(&g),
        };
        let options = SolveOptions::default();
        options
            .cancel
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let stop = Stop::start(&options);
        assert_eq!(
            StageModel::build(&instance, &stop).err(),
            Some(Stopped::Cancelled)
        );
        let options = SolveOptions {
            time_limit: Some(std::time::Duration::ZERO),
            ..SolveOptions::default()
        };
        let stop = Stop::start(&options);
        assert_eq!(
            StageModel::build(&instance, &stop).err(),
            Some(Stopped::TimeLimit)
        );
    }

    #[test]
    fn horizons_of_a_fork() {
        // 0 -> 1, 0 -> 2: node 1 is a sink before 2.
        let g = crate::graph::Graph::new(crate::graph::GraphSpec {
            nodes: ["a", "b", "c"]
                .iter()
                .enumerate()
                .map(|(i, id)| crate::graph::NodeSpec {
                    id: id.to_string(),
                    cost: 1.0,
                    memory: 1,
                    inputs: if i == 0 { vec![] } else { vec!["a".into()] },
                    kind: None,
                    op: None,
                })
                .collect(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(horizons(&g), vec![2, 1, 2]);
    }
}
