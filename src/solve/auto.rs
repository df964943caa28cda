//! `auto`, the default solver: the exact oracle for graphs it can search, else the
//! cheapest baseline schedule that fits, verified by the simulator.

use super::baseline::{CheckpointAll, RecomputeAll};
use super::chen::{ChenGreedy, ChenSqrt};
use super::exhaustive::{Exhaustive, MAX_NODES};
use super::{Instance, Outcome, Scope, SolveError, SolveOptions, Solver, SolverInfo};
use crate::schedule::simulate;

pub struct Auto;

impl Solver for Auto {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "auto",
            description:
                "Picks for the graph: exhaustive search up to 12 nodes, else the cheapest baseline \
                          schedule within the budget.",
            scope: Scope::Heuristic,
            accepts: "any graph",
        }
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        if instance.graph.len() <= MAX_NODES {
            return Exhaustive.solve(instance, options);
        }
        best_of(
            instance,
            options,
            &[&CheckpointAll, &ChenGreedy, &ChenSqrt, &RecomputeAll],
        )
    }
}

/// The cheapest plan (by simulated cost) among `solvers`; if none has one, the first
/// proven infeasibility, else the last answer.
fn best_of(
    instance: &Instance,
    options: &SolveOptions,
    solvers: &[&dyn Solver],
) -> Result<Outcome, SolveError> {
    let mut best: Option<(f64, Outcome)> = None;
    let mut fallback = None;
    for solver in solvers {
        let outcome = solver.solve(instance, options)?;
        match &outcome {
            Outcome::Plan(plan) => {
                let cost = simulate(instance.graph, &plan.schedule)
                    .map_err(|e| super::internal(solver.info().name, e))?
                    .total_cost;
                if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                    best = Some((cost, outcome));
                }
            }
            Outcome::Infeasible { proven: true, .. } => return Ok(outcome),
            _ => fallback = Some(outcome),
        }
    }
    Ok(best
        .map(|(_, o)| o)
        .or(fallback)
        .expect("at least one solver ran"))
}
