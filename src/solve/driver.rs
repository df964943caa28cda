//! The registry that names every solver, and the driver that makes every answer go
//! through the simulator: [`solve`] runs a solver by name and [`SolveResult::judge`]s its
//! outcome; solvers never report figures of their own.

use super::auto;
use super::core::{Claim, Instance, Outcome, Plan, Scope, SolveError, SolveOptions, Solver, Stop};
use super::details::Details;
use super::dp::{block_rotor, bptt, chain_dp, join_dp, revolve, two_level};
use super::exact::{checkmate, exhaustive};
use super::heuristic::{baseline, chen, dtr, dtr_ahead, fastsa, knapsack, sethi_ullman};
use super::least_budget::{self, LeastBudget};
use super::result::SolveResult;
use crate::schedule::{simulate, Schedule, SimError};

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
        &dtr_ahead::DtrAhead,
        &knapsack::Knapsack,
        &block_rotor::BlockRotor,
        &fastsa::FastSa,
        &sethi_ullman::SethiUllman,
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
    drive(instance, solver_name, solver.info().name, options, |i| {
        // No time left (the caller spent it reading the graph): the answer at once,
        // before the solver's own set-up (a class check, a footprint) runs.
        if let Err(stopped) = Stop::start(options).poll() {
            return stopped.outcome(solver.info().name, "before the solve started");
        }
        admitted(solver, i, options)
    })
}

/// Runs `solver` once its footprint is admitted against `options.memory_limit`.
pub(crate) fn admitted(
    solver: &dyn Solver,
    instance: &Instance,
    options: &SolveOptions,
) -> Result<Outcome, SolveError> {
    solver
        .footprint(instance)
        .admit(solver.info().name, options)?;
    solver.solve(instance, options)
}

/// [`solve`] with the exhaustive oracle on graphs of up to 16 nodes, beyond the 12 the
/// `exhaustive` solver accepts (the search grows exponentially; meant for tests).
pub fn solve_exhaustive_unbounded(
    instance: &Instance,
    options: &SolveOptions,
) -> Result<SolveResult, SolveError> {
    drive(instance, "exhaustive", "exhaustive", options, |i| {
        exhaustive::search(i, options)
    })
}

/// Runs `run` unless the budget is below the trivial lower bound, and judges its outcome
/// in the simulator as the answer of `solver` (asked for as `solver_name`), within
/// `options.judge_by` ([`Stop::judging`]).
fn drive(
    instance: &Instance,
    solver_name: &str,
    solver: &'static str,
    options: &SolveOptions,
    run: impl FnOnce(&Instance) -> Result<Outcome, SolveError>,
) -> Result<SolveResult, SolveError> {
    let stop = Stop::start(options);
    let graph = instance.graph;
    let (min_budget, widest) = graph.min_feasible_budget();
    let mut outcome = if instance.budget < min_budget {
        Outcome::Infeasible {
            solver,
            proven: Some(Scope::GlobalOptimum),
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
    let least = least_budget_said(instance, solver_name, &mut outcome, options, &stop);
    let elapsed = stop.elapsed().as_secs_f64();
    let mut result = SolveResult::judge(
        instance,
        solver_name,
        outcome,
        elapsed,
        &Stop::judging(options),
    )?;
    result.least_budget_found = least;
    Ok(result)
}

/// For `auto`'s failure without a proof, the least budget found above it
/// ([`least_budget::search`], within the time limit of the solve `stop` times), said in its
/// reason too; `None` for any other outcome.
fn least_budget_said(
    instance: &Instance,
    solver_name: &str,
    outcome: &mut Outcome,
    options: &SolveOptions,
    stop: &Stop,
) -> Option<LeastBudget> {
    let Outcome::Infeasible { proven, reason, .. } = outcome else {
        return None;
    };
    if solver_name != "auto" || *proven == Some(Scope::GlobalOptimum) {
        return None;
    }
    let least = least_budget::search(instance.graph, instance.budget, options, stop)?;
    reason.push_str(&format!(
        "; {} finds a schedule within {} bytes, {} above the budget{}",
        least.solver,
        least.budget,
        least.budget - instance.budget,
        if least.complete {
            ""
        } else {
            " (the search below it did not finish)"
        }
    ));
    Some(least)
}

/// Simulates a candidate schedule and returns it as a plan when it fits the budget, else
/// an unproven infeasibility naming the peak. For heuristics that produce one schedule.
pub(crate) fn fit(
    instance: &Instance,
    solver: &'static str,
    schedule: Schedule,
    details: Option<Details>,
) -> Result<Outcome, SolveError> {
    let stats = simulate(instance.graph, &schedule).map_err(|e| internal(solver, e))?;
    Ok(if stats.peak_memory <= instance.budget {
        replayed_within_budget(solver, schedule, details)
    } else {
        Outcome::Infeasible {
            solver,
            proven: None,
            reason: format!(
                "{solver}'s schedule peaks at {} bytes, over the budget of {} bytes",
                stats.peak_memory, instance.budget
            ),
        }
    })
}

/// The plan of a heuristic whose schedule its own replay found within the budget: what
/// [`fit`] answers, without replaying it again (on a million nodes that replay is a pass of
/// its own, after the solver's time limit).
pub(crate) fn replayed_within_budget(
    solver: &'static str,
    schedule: Schedule,
    details: Option<Details>,
) -> Outcome {
    Outcome::Plan(Plan {
        schedule,
        claim: Claim::Feasible,
        solver,
        scope: Scope::Heuristic,
        lower_bound: None,
        message: None,
        details,
    })
}

/// A schedule the simulator rejected: a bug in the solver, reported as such.
pub(crate) fn internal(solver: &'static str, e: SimError) -> SolveError {
    SolveError::Failed {
        solver,
        reason: format!("it produced an invalid schedule ({e}); please report this"),
    }
}
