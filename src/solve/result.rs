//! The result of a solve, as `remat solve --json` prints it and `POST /solve` returns it.
//! Every figure in it comes from the simulator.

use super::{Claim, Details, Instance, Outcome, Scope};
use crate::schedule::{simulate, ScheduleJson, SimStats};
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A schedule within budget, optimal within the solver's scope.
    Optimal,
    /// A schedule within budget, without an optimality proof.
    Feasible,
    /// No schedule within budget (`proven` says whether none exists).
    Infeasible,
    /// The time limit passed before a schedule was found.
    NoSolution,
    /// The solver failed; `message` says how.
    Error,
}

/// The JSON names, written once for tables, summaries and metrics (a test in
/// `crate::front` checks them against serde's).
impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Optimal => "optimal",
            Status::Feasible => "feasible",
            Status::Infeasible => "infeasible",
            Status::NoSolution => "no_solution",
            Status::Error => "error",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct GraphSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub nodes: usize,
    pub edges: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct SolveResult {
    pub status: Status,
    /// The solver that produced the answer.
    pub solver: String,
    /// The solver asked for, when it differs (`auto`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_solver: Option<String>,
    /// How far the answer can be trusted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// The budget in bytes, `fixed_memory` included.
    pub budget: u64,
    pub graph: GraphSummary,
    pub schedule: Option<ScheduleJson>,
    /// The simulator's figures for `schedule`.
    pub stats: Option<SimStats>,
    /// A proven lower bound on the optimal cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<f64>,
    /// `(cost − lower_bound) / cost`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<f64>,
    /// For `infeasible`: whether no schedule at all fits (within the solver's scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proven: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Details>,
    pub solve_time_s: f64,
}

impl SolveResult {
    /// Builds the result from a solver's outcome, replaying any schedule in the simulator.
    /// A schedule the simulator rejects, or one over budget, becomes `error`: the solver
    /// claimed something that is not true.
    pub fn judge(
        instance: &Instance,
        requested: &str,
        outcome: Outcome,
        solve_time_s: f64,
    ) -> SolveResult {
        let graph = instance.graph;
        let mut result = SolveResult {
            status: Status::Error,
            solver: requested.to_string(),
            requested_solver: None,
            scope: None,
            budget: instance.budget,
            graph: GraphSummary {
                name: graph.name().map(str::to_string),
                nodes: graph.len(),
                edges: graph.edge_count(),
            },
            schedule: None,
            stats: None,
            lower_bound: None,
            gap: None,
            proven: None,
            message: None,
            details: None,
            solve_time_s,
        };
        let ran = match &outcome {
            Outcome::Plan(p) => p.solver,
            Outcome::Infeasible { solver, .. } | Outcome::NoSolution { solver, .. } => solver,
        };
        if ran != requested {
            result.solver = ran.to_string();
            result.requested_solver = Some(requested.to_string());
        }
        match outcome {
            Outcome::Plan(plan) => {
                result.scope = Some(plan.scope);
                result.details = plan.details;
                result.lower_bound = plan.lower_bound;
                match simulate(graph, &plan.schedule) {
                    Err(e) => {
                        result.message = Some(format!("{ran} produced an invalid schedule: {e}"));
                    }
                    Ok(stats) if stats.peak_memory > instance.budget => {
                        result.message = Some(format!(
                            "{ran} produced a schedule that peaks at {} bytes, over the budget of {} bytes",
                            stats.peak_memory, instance.budget
                        ));
                    }
                    Ok(stats) => {
                        result.status = match plan.claim {
                            Claim::Optimal => Status::Optimal,
                            Claim::Feasible => Status::Feasible,
                        };
                        if let Some(lb) = plan.lower_bound {
                            result.gap = Some(if stats.total_cost > 0.0 {
                                ((stats.total_cost - lb) / stats.total_cost).max(0.0)
                            } else {
                                0.0
                            });
                        }
                        result.message = plan.message;
                        result.schedule = Some(plan.schedule.to_json(graph));
                        result.stats = Some(stats);
                    }
                }
            }
            Outcome::Infeasible { proven, reason, .. } => {
                result.status = Status::Infeasible;
                result.proven = Some(proven);
                result.message = Some(reason);
            }
            Outcome::NoSolution { reason, .. } => {
                result.status = Status::NoSolution;
                result.message = Some(reason);
            }
        }
        result
    }
}
