//! The budget sweep behind the trade-off curve: each chosen solver at each budget, every
//! figure from the simulator (`solve::solve` judges each answer); and [`solve_each`], one
//! solver at many budgets within one time limit overall, the plain sweep of
//! `POST /v1/sweep`.
//!
//! Budgets default to [`DEFAULT_POINTS`] evenly spaced from the minimum feasible budget
//! (`Graph::min_feasible_budget`) to the checkpoint-all peak (`budget::between_min_and_peak`),
//! equal budgets of tiny graphs merged. Each point has its own time limit.
//!
//! **Monotone curves.** A schedule that fits a budget fits every larger one, so the best
//! cost at budget `b` is never above the best at any `b' < b`. A solver's own answers need
//! not be monotone (a heuristic can do worse with more room). For `auto`, the portfolio
//! whose answer a user takes as "what remat gives at this budget", the point at `b` is the
//! cheapest schedule found at any budget `≤ b` (its `carried_from` names the budget it was
//! found at; the schedule is the one found there and fits `b`). Any other solver's points
//! are its own answers, and a point costlier than one at a smaller budget is flagged
//! (`rises_over`), so the picture and the tests name it.
//!
//! **Lower bound.** A bound proven for all schedules (`lower_bound_scope:
//! global_optimum`) at budget `b'` holds at every `b ≤ b'` (a smaller budget admits fewer
//! schedules), so the bound drawn at `b` is the largest such bound found at any budget
//! `≥ b`, by any solver.

use super::PlotError;
use crate::budget::between_min_and_peak;
use crate::front::Clock;
use crate::graph::Graph;
use crate::schedule::EventJson;
use crate::solve::footprint::bytes_per_compute;
use crate::solve::{self, Instance, Scope, SolveError, SolveOptions, SolveResult, Status};
use serde::Serialize;
use std::time::{Duration, Instant};

/// The number of budgets of a default sweep.
pub const DEFAULT_POINTS: usize = 20;
/// The most budgets and solvers of one sweep.
pub const MAX_POINTS: usize = 200;
pub const MAX_SOLVERS: usize = 8;
/// The solvers of a sweep when none are named.
pub const DEFAULT_SOLVERS: [&str; 3] = ["auto", "dtr", "chen-greedy"];

/// `points` budgets from the minimum feasible budget to the checkpoint-all peak, ascending,
/// without repeats.
pub fn default_budgets(graph: &Graph, points: usize) -> Vec<u64> {
    let steps = points.max(2) - 1;
    let mut budgets: Vec<u64> = (0..=steps)
        .map(|k| between_min_and_peak(graph, k as f64 / steps as f64))
        .collect();
    budgets.dedup();
    budgets
}

/// What to sweep.
#[derive(Clone)]
pub struct Request {
    pub solvers: Vec<String>,
    /// Budgets in bytes (sorted and deduplicated by [`run`]).
    pub budgets: Vec<u64>,
    /// The options of every solve; `time_limit` is per point.
    pub options: SolveOptions,
    /// The whole sweep's time, when bounded: each solve's limit is cut to what is left of
    /// it (a point solved after it is over gets no time: no schedule, or a constructive
    /// solver's).
    pub total: Option<Duration>,
}

/// One solve of the sweep, as drawn.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub solver: String,
    pub budget: u64,
    /// The solve's status at this budget.
    pub status: Status,
    /// The solver that answered (for `auto`, the candidate it chose).
    pub answered_by: String,
    /// The cost drawn: the solve's own, or for `auto` the cheapest at a budget `≤ budget`.
    pub cost: Option<f64>,
    /// `cost / Σ c_v`.
    pub overhead: Option<f64>,
    /// The simulator's peak of the schedule drawn.
    pub peak_memory: Option<u64>,
    /// For `auto`: the smaller budget whose schedule is drawn here, when it is cheaper than
    /// the one found at this budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub carried_from: Option<u64>,
    /// For other solvers: the smaller budget at which this solver found a cheaper schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rises_over: Option<u64>,
    pub time_s: f64,
}

/// A finished sweep.
#[derive(Clone, Debug, Serialize)]
pub struct Sweep {
    pub budgets: Vec<u64>,
    /// `Σ c_v`: the cost without recomputation.
    pub base_cost: f64,
    /// Solver by solver, budget by budget.
    pub points: Vec<Point>,
    /// The best global lower bound at each budget (see the module docs), when one is known.
    pub lower_bounds: Vec<Option<f64>>,
}

/// Checks a request before it runs: 1 to [`MAX_SOLVERS`] known solvers, 1 to
/// [`MAX_POINTS`] budgets.
pub fn check(request: &Request) -> Result<(), PlotError> {
    if request.solvers.is_empty() || request.solvers.len() > MAX_SOLVERS {
        return Err(PlotError::Solvers(format!(
            "a sweep takes 1 to {MAX_SOLVERS} solvers, got {}",
            request.solvers.len()
        )));
    }
    if request.budgets.is_empty() || request.budgets.len() > MAX_POINTS {
        return Err(PlotError::Sweep(format!(
            "a sweep takes 1 to {MAX_POINTS} budgets, got {}",
            request.budgets.len()
        )));
    }
    for s in &request.solvers {
        solve::find(s)?;
    }
    Ok(())
}

/// Runs the sweep; `progress(done, total, point)` after each solve. A cancelled solve
/// (the options' cancel flag) ends the sweep with `SolveError::Cancelled`.
pub fn run(
    graph: &Graph,
    request: &Request,
    progress: &dyn Fn(usize, usize, &Point),
) -> Result<Sweep, PlotError> {
    check(request)?;
    let mut budgets = request.budgets.clone();
    budgets.sort_unstable();
    budgets.dedup();
    let total = budgets.len() * request.solvers.len();
    let end = request.total.map(|t| Instant::now() + t);
    let mut points = Vec::with_capacity(total);
    let mut bounds: Vec<Option<f64>> = vec![None; budgets.len()];
    for solver in &request.solvers {
        let mut best: Option<(f64, u64, u64)> = None; // cost, budget, peak
        for (k, &budget) in budgets.iter().enumerate() {
            let options = match end {
                Some(end) => until(&request.options, end),
                None => request.options.clone(),
            };
            let result = solve::solve(&Instance { graph, budget }, solver, &options)?;
            if result.lower_bound_scope == Some(Scope::GlobalOptimum) {
                if let Some(lb) = result.lower_bound {
                    bounds[k] = Some(bounds[k].map_or(lb, |b| b.max(lb)));
                }
            }
            let own = result
                .stats
                .as_ref()
                .map(|s| (s.total_cost, budget, s.peak_memory));
            let cheaper = |a: f64, b: f64| a < b * (1.0 - 1e-12);
            let mut point = Point {
                solver: solver.clone(),
                budget,
                status: result.status,
                answered_by: result.solver.clone(),
                cost: own.map(|o| o.0),
                overhead: None,
                peak_memory: own.map(|o| o.2),
                carried_from: None,
                rises_over: None,
                time_s: result.solve_time_s,
            };
            match (own, best) {
                (_, Some((c, b, peak)))
                    if solver == "auto" && own.is_none_or(|o| cheaper(c, o.0)) =>
                {
                    (point.cost, point.peak_memory, point.carried_from) =
                        (Some(c), Some(peak), Some(b));
                }
                (Some(o), Some((c, b, _))) if cheaper(c, o.0) => point.rises_over = Some(b),
                _ => {}
            }
            if let Some(o) = own {
                if best.is_none_or(|(c, _, _)| cheaper(o.0, c)) {
                    best = Some(o);
                }
            }
            point.overhead = point.cost.map(|c| overhead(c, graph.total_cost()));
            points.push(point);
            progress(points.len(), total, points.last().expect("pushed"));
        }
    }
    for k in (0..bounds.len().saturating_sub(1)).rev() {
        if let Some(later) = bounds[k + 1] {
            bounds[k] = Some(bounds[k].map_or(later, |b| b.max(later)));
        }
    }
    Ok(Sweep {
        budgets,
        base_cost: graph.total_cost(),
        points,
        lower_bounds: bounds,
    })
}

/// One solver at each of `budgets` (bytes), in the order given, one solve after the other
/// within `clock` (the caller's time limit, counted from its start: `POST /v1/sweep`'s
/// admission): each solve's time limit is its options' own, cut to what is left of the
/// clock less the time the answer takes, `reserve` (the caller's [`answer_reserve`] of
/// this graph) for the solve's own judging and once more for writing each result kept
/// before it; the judge stops at `clock.judge_by()`. A solve that finds no time left
/// answers `no_solution` at once, so the run ends by the deadline whatever the number of
/// budgets. `each` sees every solve's outcome as it ends (the service counts it). The
/// first solve that fails ends the run with its error. The results kept count against the
/// memory limit: each solve may use what they leave of it (a sweep of 64 budgets whose
/// schedules each fit the limit alone would otherwise hold 64 of them), and one refused for
/// lack of it says so. (`POST /v1/sweep`: plain results, no curve; [`run`] is the
/// trade-off's sweep.)
///
/// [`answer_reserve`]: crate::front::answer_reserve
pub fn solve_each(
    graph: &Graph,
    solver: &str,
    budgets: &[u64],
    options: &SolveOptions,
    clock: &Clock,
    reserve: Duration,
    each: &dyn Fn(&Result<SolveResult, SolveError>),
) -> Result<Vec<SolveResult>, SolveError> {
    let mut results = Vec::with_capacity(budgets.len());
    let mut kept: u32 = 0;
    // The bytes the results kept hold, as the footprint counts an answer's.
    let mut held: u64 = 0;
    let per_compute = bytes_per_compute(graph);
    let full = options.memory_limit;
    for &budget in budgets {
        let left = clock.solve_limit(reserve.saturating_mul(kept.saturating_add(1)));
        let options = SolveOptions {
            time_limit: match (options.time_limit, left) {
                (Some(own), Some(left)) => Some(own.min(left)),
                (own, left) => own.or(left),
            },
            judge_by: clock.judge_by(),
            memory_limit: full.map(|limit| limit.saturating_sub(held)),
            ..options.clone()
        };
        let result = solve::solve(&Instance { graph, budget }, solver, &options)
            .map_err(|e| beside_kept(e, kept, held, full));
        each(&result);
        let result = result?;
        if let Some(schedule) = &result.schedule {
            kept += 1;
            let computes = schedule
                .events
                .iter()
                .filter(|e| matches!(e, EventJson::Compute { .. }))
                .count() as u64;
            held = held.saturating_add(computes.saturating_mul(per_compute));
        }
        results.push(result);
    }
    Ok(results)
}

/// A refusal for lack of memory, with the `kept` results of `held` bytes before it counted
/// in what it needs, against the whole limit `full`.
fn beside_kept(e: SolveError, kept: u32, held: u64, full: Option<u64>) -> SolveError {
    match (e, full) {
        (
            SolveError::TooLarge {
                solver,
                what,
                needed,
                ..
            },
            Some(limit),
        ) if kept > 0 => SolveError::TooLarge {
            solver,
            what: format!(
                "{what}, beside the {kept} results of this sweep it keeps (about {held} bytes)"
            ),
            needed: needed.saturating_add(held),
            limit,
        },
        (e, _) => e,
    }
}

/// `options` with the time limit cut to what is left before `end`.
fn until(options: &SolveOptions, end: Instant) -> SolveOptions {
    let left = end.saturating_duration_since(Instant::now());
    SolveOptions {
        time_limit: Some(options.time_limit.map_or(left, |t| t.min(left))),
        ..options.clone()
    }
}

fn overhead(cost: f64, base: f64) -> f64 {
    if base > 0.0 {
        cost / base
    } else {
        1.0
    }
}

/// The per-point time limit of a sweep when none is given: 5 seconds.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(5);
