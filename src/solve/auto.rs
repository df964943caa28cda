//! `auto`, the default solver: the best verified schedule this crate can find in the
//! caller's time.
//!
//! * Graphs of at most [`MAX_NODES`] nodes: the exhaustive oracle (the global optimum).
//! * Larger graphs: Checkmate's two-phase LP rounding (at most a third of the time limit),
//!   then the MILP started from the rounding's schedule for the rest of the time. The
//!   cheaper of the two verified schedules is returned, with the best lower bound either
//!   produced. With no time limit the MILP runs to optimality.

use super::checkmate::{solve_milp, solve_rounding, Candidate};
use super::exhaustive::{Exhaustive, MAX_NODES};
use super::{internal, Instance, Outcome, Scope, SolveError, SolveOptions, Solver, SolverInfo};
use crate::schedule::simulate;
use std::time::Instant;

pub struct Auto;

impl Solver for Auto {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "auto",
            description: "Picks for the graph: exhaustive search up to 12 nodes, else LP rounding \
                          followed by the MILP started from it, within the time limit.",
            scope: Scope::OptimalForOrder,
            accepts: "any graph",
        }
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        if instance.graph.len() <= MAX_NODES {
            return Exhaustive.solve(instance, options);
        }
        let began = Instant::now();
        let mut rounding_options = options.clone();
        rounding_options.time_limit = options.time_limit.map(|d| d / 3);
        let rounding = solve_rounding(instance, &rounding_options, "lp-rounding", true)?;
        let start = match &rounding {
            Outcome::Plan(plan) => Candidate::from_plan(instance.graph, plan),
            Outcome::Infeasible { proven: true, .. } => return Ok(rounding),
            _ => None,
        };
        let mut milp_options = options.clone();
        milp_options.time_limit = options.time_limit.map(|d| d.saturating_sub(began.elapsed()));
        let milp = solve_milp(instance, &milp_options, start.as_ref())?;
        let cost = |outcome: &Outcome| match outcome {
            Outcome::Plan(plan) => simulate(instance.graph, &plan.schedule)
                .map(|s| Some(s.total_cost))
                .map_err(|e| internal(plan.solver, e)),
            _ => Ok(None),
        };
        let bound = |outcome: &Outcome| match outcome {
            Outcome::Plan(plan) => plan.lower_bound,
            _ => None,
        };
        let lower_bound = match (bound(&rounding), bound(&milp)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let (rounding_cost, milp_cost) = (cost(&rounding)?, cost(&milp)?);
        let mut best = match (rounding_cost, milp_cost) {
            (Some(r), Some(m)) if r < m => rounding,
            (_, Some(_)) => milp,
            (Some(_), None) => rounding,
            (None, None) => return Ok(milp),
        };
        if let Outcome::Plan(plan) = &mut best {
            plan.lower_bound = lower_bound;
        }
        Ok(best)
    }
}
