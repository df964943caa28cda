//! Solvers, their registry, and the driver that makes every answer go through the
//! simulator.
//!
//! A [`Solver`] turns an [`Instance`] (graph + budget in bytes) into an [`Outcome`]: a
//! [`Plan`] (a schedule and what the solver claims of it), a statement of infeasibility,
//! or no solution within the time limit. Solvers never report figures of their own:
//! [`solve`] replays every plan in the simulator, checks it against the budget and builds
//! the [`SolveResult`] from the simulator's numbers.
//!
//! This module knows nothing of HTTP or the CLI; HiGHS stays inside the MILP solvers.

mod auto;
mod baseline;
pub mod bptt;
pub mod chain_dp;
mod checkmate;
mod chen;
mod dtr;
mod exhaustive;
mod join_dp;
mod result;
pub mod revolve;
pub mod structured;
pub mod two_level;

pub use baseline::{checkpoint_all, checkpoint_all_peak};
pub use result::{SolveResult, Status};

use crate::graph::Graph;
use crate::schedule::{simulate, Schedule, SimError};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What is solved: a graph and a budget in bytes (`fixed_memory` included).
#[derive(Clone, Copy, Debug)]
pub struct Instance<'a> {
    pub graph: &'a Graph,
    pub budget: u64,
}

/// A progress report from a long solve.
#[derive(Clone, Debug)]
pub struct Progress {
    pub message: String,
    /// Done fraction in [0, 1], when the solver can tell.
    pub fraction: Option<f64>,
}

/// Receives progress reports (the CLI draws a bar, the service logs).
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// Options common to every solver; each uses what applies to it.
#[derive(Clone, Default)]
pub struct SolveOptions {
    /// Wall-clock limit for the solve.
    pub time_limit: Option<Duration>,
    /// Relative MIP gap at which a MILP may stop.
    pub mip_gap: Option<f64>,
    /// Seed for randomised steps.
    pub seed: u64,
    /// Threads a solver may use (HiGHS).
    pub threads: Option<u32>,
    /// Set from another thread to stop the solve.
    pub cancel: Arc<AtomicBool>,
    pub progress: Option<ProgressSink>,
}

impl SolveOptions {
    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
    /// The instant the solve must end by, counted from `start`.
    pub fn deadline(&self, start: Instant) -> Option<Instant> {
        self.time_limit.map(|d| start + d)
    }
    pub fn report(&self, message: impl Into<String>, fraction: Option<f64>) {
        if let Some(p) = &self.progress {
            p(Progress {
                message: message.into(),
                fraction,
            });
        }
    }
}

/// How far a solver's answer can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The cheapest schedule of all (any order, any recomputation).
    GlobalOptimum,
    /// Optimal among Checkmate's frontier-advancing stage schedules in the solver order.
    OptimalForOrder,
    /// Optimal among persistent (divide-and-conquer) checkpointing schedules.
    OptimalAmongPersistent,
    /// No optimality claim.
    Heuristic,
    /// The answer is a lower bound on the optimal cost, not a schedule.
    LowerBound,
}

/// What a solver says of the schedule it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Optimal within the solver's scope.
    Optimal,
    /// Within budget, no optimality proof.
    Feasible,
}

/// A schedule and what its solver claims of it.
#[derive(Clone, Debug)]
pub struct Plan {
    pub schedule: Schedule,
    pub claim: Claim,
    /// The solver that produced it (differs from the one asked for under `auto`).
    pub solver: &'static str,
    pub scope: Scope,
    /// A proven lower bound on the optimal cost within `scope`, when the solver has one.
    pub lower_bound: Option<f64>,
    pub message: Option<String>,
    /// Solver-specific figures (model sizes, thresholds, slot sizes, ...).
    pub details: Option<serde_json::Value>,
}

/// A solver's answer.
#[derive(Clone, Debug)]
pub enum Outcome {
    Plan(Plan),
    /// No schedule within the budget. `proven` is true when no schedule at all fits
    /// (within the solver's scope), false when only this solver's method failed.
    Infeasible {
        solver: &'static str,
        proven: bool,
        reason: String,
    },
    /// The time limit passed before any schedule was found.
    NoSolution {
        solver: &'static str,
        reason: String,
    },
}

/// Why a solve could not run.
#[derive(Debug, thiserror::Error)]
pub enum SolveError {
    #[error("unknown solver '{name}': available solvers are {available}")]
    UnknownSolver { name: String, available: String },
    #[error("solver '{solver}' cannot solve this graph: {reason}")]
    Unsupported {
        solver: &'static str,
        reason: String,
    },
    #[error("the solve was cancelled")]
    Cancelled,
    #[error("solver '{solver}' failed: {reason}")]
    Failed {
        solver: &'static str,
        reason: String,
    },
}

/// Describes a solver for `remat solvers` and `GET /v1/solvers`.
#[derive(Clone, Debug, Serialize)]
pub struct SolverInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub scope: Scope,
    /// Which graphs it accepts.
    pub accepts: &'static str,
}

/// A rematerialization algorithm.
pub trait Solver: Sync {
    fn info(&self) -> SolverInfo;
    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError>;
}

/// Every solver, by name.
pub fn registry() -> &'static [&'static dyn Solver] {
    static SOLVERS: &[&dyn Solver] = &[
        &auto::Auto,
        &exhaustive::Exhaustive,
        &baseline::CheckpointAll,
        &baseline::RecomputeAll,
        &chen::ChenSqrt,
        &chen::ChenGreedy,
        &dtr::Dtr,
        &checkmate::Milp,
        &checkmate::LpBound,
        &checkmate::LpRounding,
        &revolve::Revolve,
        &chain_dp::ChainDp,
        &bptt::BpttHsm,
        &bptt::BpttIsm,
        &bptt::BpttMsm,
        &chain_dp::EquivChain,
        &join_dp::JoinDp,
        &two_level::TwoLevel,
    ];
    SOLVERS
}

/// The solver called `name`.
pub fn find(name: &str) -> Result<&'static dyn Solver, SolveError> {
    registry()
        .iter()
        .copied()
        .find(|s| s.info().name == name)
        .ok_or_else(|| SolveError::UnknownSolver {
            name: name.to_string(),
            available: registry()
                .iter()
                .map(|s| s.info().name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Solves `instance` with the solver called `solver_name`, and checks the answer in the
/// simulator. Budgets below the trivial lower bound (`Graph::min_feasible_budget`) are
/// answered `infeasible` without running the solver.
pub fn solve(
    instance: &Instance,
    solver_name: &str,
    options: &SolveOptions,
) -> Result<SolveResult, SolveError> {
    let solver = find(solver_name)?;
    drive(instance, solver_name, solver.info().name, |i| {
        solver.solve(i, options)
    })
}

/// [`solve`] with the exhaustive oracle on graphs of up to 16 nodes, beyond the 12 the
/// `exhaustive` solver accepts (the search grows exponentially; meant for tests).
pub fn solve_exhaustive_unbounded(
    instance: &Instance,
    options: &SolveOptions,
) -> Result<SolveResult, SolveError> {
    drive(instance, "exhaustive", "exhaustive", |i| {
        exhaustive::search(i, options)
    })
}

/// Runs `run` unless the budget is below the trivial lower bound, and judges its outcome
/// in the simulator as the answer of `solver` (asked for as `solver_name`).
fn drive(
    instance: &Instance,
    solver_name: &str,
    solver: &'static str,
    run: impl FnOnce(&Instance) -> Result<Outcome, SolveError>,
) -> Result<SolveResult, SolveError> {
    let start = Instant::now();
    let graph = instance.graph;
    let (min_budget, widest) = graph.min_feasible_budget();
    let outcome = if instance.budget < min_budget {
        Outcome::Infeasible {
            solver,
            proven: true,
            reason: format!(
                "no schedule fits: computing node '{}' alone needs {} bytes (its inputs, its output and \
                 fixed_memory {}), more than the budget {}",
                graph.id(widest),
                min_budget,
                graph.fixed_memory(),
                instance.budget
            ),
        }
    } else {
        run(instance)?
    };
    let elapsed = start.elapsed().as_secs_f64();
    Ok(SolveResult::judge(instance, solver_name, outcome, elapsed))
}

/// Simulates a candidate schedule and returns it as a plan when it fits the budget, else
/// an unproven infeasibility naming the peak. For heuristics that produce one schedule.
pub(crate) fn fit(
    instance: &Instance,
    solver: &'static str,
    schedule: Schedule,
    details: Option<serde_json::Value>,
) -> Result<Outcome, SolveError> {
    let stats = simulate(instance.graph, &schedule).map_err(|e| internal(solver, e))?;
    Ok(if stats.peak_memory <= instance.budget {
        Outcome::Plan(Plan {
            schedule,
            claim: Claim::Feasible,
            solver,
            scope: Scope::Heuristic,
            lower_bound: None,
            message: None,
            details,
        })
    } else {
        Outcome::Infeasible {
            solver,
            proven: false,
            reason: format!(
                "{solver}'s schedule peaks at {} bytes, over the budget of {} bytes",
                stats.peak_memory, instance.budget
            ),
        }
    })
}

/// A schedule the simulator rejected: a bug in the solver, reported as such.
pub(crate) fn internal(solver: &'static str, e: SimError) -> SolveError {
    SolveError::Failed {
        solver,
        reason: format!("it produced an invalid schedule ({e}); please report this"),
    }
}
