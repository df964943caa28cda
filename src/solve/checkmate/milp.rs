//! `milp`: the Checkmate MILP of [`super`] solved to optimality (or to the time limit) by
//! HiGHS's branch and bound, started from the cheapest verified schedule we have (the
//! caller's, e.g. `auto`'s LP rounding, else the best baseline that fits).
//!
//! Outcomes: `optimal` when HiGHS closes the gap (to its relative tolerance, 1e-4 unless
//! the caller asks for another); `feasible` with the dual bound as `lower_bound` when the
//! time limit stops it with an incumbent; `infeasible` (proven, within the scope of
//! frontier-advancing stage schedules in solver order) when HiGHS proves it; no solution
//! when the time runs out before any incumbent.

use super::{
    backend, best_baseline, controls, failed, precheck, without_spurious, Candidate, Formulation,
    StageModel,
};
use crate::schedule::stages::Stages;
use crate::schedule::simulate;
use crate::solve::{
    internal, Claim, Instance, Outcome, Plan, Scope, SolveError, SolveOptions, Solver, SolverInfo,
};
use backend::RunStatus;
use serde_json::json;
use std::time::Instant;

pub struct Milp;

const NAME: &str = "milp";

/// HiGHS's default relative gap: below it a solve counts as optimal.
const DEFAULT_GAP: f64 = 1e-4;

impl Solver for Milp {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: NAME,
            description: "Checkmate's MILP over frontier-advancing stage schedules, solved by \
                          HiGHS: the optimal schedule for the solver order, with a proven bound \
                          when stopped early.",
            scope: Scope::OptimalForOrder,
            accepts: "any graph (hundreds of nodes need a time limit)",
        }
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        solve_milp(instance, options, None)
    }
}

/// Solves the MILP, starting from `start` when given, else from the best baseline that
/// fits.
pub(crate) fn solve_milp(
    instance: &Instance,
    options: &SolveOptions,
    start: Option<&Candidate>,
) -> Result<Outcome, SolveError> {
    if let Some(outcome) = precheck(instance, NAME) {
        return Ok(outcome);
    }
    let began = Instant::now();
    let graph = instance.graph;
    let model = StageModel::build(instance, Formulation { free: match std::env::var("T").as_deref() { Ok("t") => super::FreeRows::Tightened, Ok("p") => super::FreeRows::Product, _ => super::FreeRows::BigM } });
    options.report(
        format!(
            "milp: {} variables, {} constraints",
            model.num_variables(),
            model.num_constraints()
        ),
        None,
    );
    let baseline;
    let start = match start {
        Some(c) => Some(c),
        None => {
            baseline = best_baseline(instance, options)?;
            baseline.as_ref()
        }
    };
    let point = start.and_then(|c| {
        let stages = without_spurious(graph, c.stages().clone());
        model.point(graph, &stages).map(|x| (c.source.clone(), x))
    });
    let run = backend::run(
        &model.lp,
        point.as_ref().map(|(_, x)| x.as_slice()),
        &controls(options, false, options.deadline(began)),
    )
    .map_err(|e| failed(NAME, e))?;
    let mut details = model.details();
    details["solve_time_s"] = json!(run.time.as_secs_f64());
    details["mip_start"] = json!(point.as_ref().map(|(source, _)| source));
    let lower_bound = run.bound.map(|b| model.cost(b));
    details["highs_objective"] = json!(run.objective.map(|o| model.cost(o)));
    match (run.status, run.columns) {
        (RunStatus::Cancelled, _) => Err(SolveError::Cancelled),
        (RunStatus::Infeasible, _) => {
            let (min_budget, _) = graph.min_feasible_budget();
            Ok(Outcome::Infeasible {
                solver: NAME,
                proven: true,
                reason: format!(
                    "HiGHS proved that no frontier-advancing stage schedule in solver order fits \
                     in {} bytes (the trivial lower bound on the minimum feasible budget is {} \
                     bytes)",
                    instance.budget, min_budget
                ),
            })
        }
        (RunStatus::TimeLimit, None) => Ok(Outcome::NoSolution {
            solver: NAME,
            reason: format!(
                "the time limit passed after {:.1} s without a schedule within the budget",
                began.elapsed().as_secs_f64()
            ),
        }),
        (status, Some(columns)) => {
            let stages = Stages::from_s(graph, model.s_at(&columns, 0.5));
            let schedule = stages.into_schedule(graph);
            let stats = simulate(graph, &schedule).map_err(|e| internal(NAME, e))?;
            if stats.peak_memory > instance.budget {
                return Err(SolveError::Failed {
                    solver: NAME,
                    reason: format!(
                        "the MILP solution peaks at {} bytes in the simulator, over the budget of \
                         {} bytes; please report this",
                        stats.peak_memory, instance.budget
                    ),
                });
            }
            let gap = lower_bound.map(|lb| {
                if stats.total_cost > 0.0 {
                    ((stats.total_cost - lb) / stats.total_cost).max(0.0)
                } else {
                    0.0
                }
            });
            let closed = status == RunStatus::Optimal
                && gap.is_some_and(|g| g <= options.mip_gap.unwrap_or(DEFAULT_GAP).min(DEFAULT_GAP));
            let message = match (status, closed) {
                (_, true) => None,
                (RunStatus::Optimal, false) => Some(format!(
                    "stopped at the requested relative gap {}",
                    options.mip_gap.unwrap_or(DEFAULT_GAP)
                )),
                _ => Some("the time limit passed before optimality was proved".to_string()),
            };
            Ok(Outcome::Plan(Plan {
                schedule,
                claim: if closed {
                    Claim::Optimal
                } else {
                    Claim::Feasible
                },
                solver: NAME,
                scope: Scope::OptimalForOrder,
                lower_bound,
                message,
                details: Some(details),
            }))
        }
        (RunStatus::Optimal, None) => Err(SolveError::Failed {
            solver: NAME,
            reason: "HiGHS reported optimal without a solution".into(),
        }),
    }
}
