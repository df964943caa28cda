//! `auto`, the default solver: the best verified schedule this crate can find in the
//! caller's time.
//!
//! * Graphs of at most [`MAX_NODES`] nodes: the exhaustive oracle (the global optimum).
//! * Chains (`graph::structure`): the exact dynamic program their structure allows
//!   (`structured::exact_solver_for`): Revolve on homogeneous chains (global optimum), the
//!   persistent chain DP on the others. When the DP finds no schedule within the budget
//!   (its slot rounding or its persistent family can miss one), the MILP decides.
//! * Larger graphs: the Checkmate MILP (`milp`), which first solves the LP relaxation and
//!   rounds it (at most half of the time limit), then runs branch and bound from the
//!   best verified schedule for the rest. It returns the cheapest verified schedule with
//!   the best proven lower bound. Without a caller's time limit it stops after
//!   [`DEFAULT_TIME_LIMIT`] (use `milp` to run to optimality). When it finds no schedule
//!   in time (large random graphs), DTR's greedy schedule is returned if it fits.

use super::checkmate::solve_milp;
use super::dp::structured::exact_solver_for;
use super::dtr::Dtr;
use super::exhaustive::{Exhaustive, MAX_NODES};
use super::{Instance, Outcome, Scope, SolveError, SolveOptions, Solver, SolverInfo};
use std::time::Duration;

/// The time `auto` gives the MILP when the caller sets no limit.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(60);

pub struct Auto;

impl Solver for Auto {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "auto",
            description: "Picks for the graph: exhaustive search up to 12 nodes, the exact chain DP \
                          (Revolve or the persistent chain DP) on chains, else the MILP started from \
                          the LP rounding, within the time limit (60 s by default), and DTR's \
                          schedule when the MILP finds none.",
            scope: Scope::OptimalForOrder,
            accepts: "any graph",
        }
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        if instance.graph.len() <= MAX_NODES {
            return Exhaustive.solve(instance, options);
        }
        if let Some(dp) = exact_solver_for(instance.graph) {
            if let plan @ Outcome::Plan(_) = dp.solve(instance, options)? {
                return Ok(plan);
            }
        }
        let outcome = if options.time_limit.is_none() {
            let mut limited = options.clone();
            limited.time_limit = Some(DEFAULT_TIME_LIMIT);
            solve_milp(instance, &limited)?
        } else {
            solve_milp(instance, options)?
        };
        let why = match &outcome {
            Outcome::NoSolution { reason, .. }
            | Outcome::Infeasible {
                proven: None,
                reason,
                ..
            } => reason.clone(),
            _ => return Ok(outcome),
        };
        match Dtr.solve(instance, options)? {
            Outcome::Plan(mut plan) => {
                plan.message = Some(format!(
                    "the MILP found no schedule within the budget ({why}); this is DTR's greedy \
                     schedule"
                ));
                Ok(Outcome::Plan(plan))
            }
            _ => Ok(outcome),
        }
    }
}
