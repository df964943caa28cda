//! The result of a solve, as `remat solve --json` prints it and `POST /solve` returns it.
//! Every figure in it comes from the simulator.

use super::core::{SolveError, Stop, Stopped};
use super::{
    Bound, BoundMethod, Claim, Details, EndedBy, Instance, LeastBudget, Outcome, Plan, Scope,
};
use crate::schedule::{simulate_polled, ScheduleJson, SimStats};
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A schedule within budget, and no schedule at all is cheaper (`scope` is
    /// `global_optimum`).
    Optimal,
    /// A schedule within budget, optimal among the schedules of `scope` only (Checkmate's
    /// frontier-advancing schedules in the solver order, persistent chain schedules):
    /// schedules outside that set may be cheaper.
    OptimalInScope,
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
            Status::OptimalInScope => "optimal_in_scope",
            Status::Feasible => "feasible",
            Status::Infeasible => "infeasible",
            Status::NoSolution => "no_solution",
            Status::Error => "error",
        }
    }
}

impl Status {
    /// `optimal` or `optimal_in_scope`: a schedule proven optimal within the result's
    /// `scope`.
    pub fn is_optimal(self) -> bool {
        matches!(self, Status::Optimal | Status::OptimalInScope)
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
    /// The set of schedules the answer's claim covers: for a schedule, the set it is
    /// optimal in (`heuristic`: no claim); for `infeasible`, the set proven to hold no
    /// schedule within budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// The budget in bytes, `fixed_memory` included.
    pub budget: u64,
    pub graph: GraphSummary,
    pub schedule: Option<ScheduleJson>,
    /// The simulator's figures for `schedule`.
    pub stats: Option<SimStats>,
    /// A proven lower bound on the cost of every schedule of `lower_bound_scope`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<f64>,
    /// The set of schedules `lower_bound` bounds (`global_optimum`: all of them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower_bound_scope: Option<Scope>,
    /// How `lower_bound` was proven.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower_bound_method: Option<BoundMethod>,
    /// `(cost − lower_bound) / cost`, within `lower_bound_scope`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<f64>,
    /// For `infeasible`: whether it is proven that no schedule at all fits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proven: Option<bool>,
    /// For `infeasible`: proven only for the schedules of `scope`; others may fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proven_in_scope: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Details>,
    /// What ended the search, for `auto` (its `details.ended_by`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<EndedBy>,
    /// For `auto`'s `infeasible` without a proof: a budget at which it finds a schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub least_budget_found: Option<LeastBudget>,
    pub solve_time_s: f64,
}

impl SolveResult {
    /// Builds the result from a solver's outcome, replaying any schedule in the simulator.
    /// A schedule the simulator rejects, or one over budget, becomes `error`: the solver
    /// claimed something that is not true. The replay polls `stop` (every
    /// `crate::schedule::POLL_EVERY` events): past its deadline the answer is `no_solution`
    /// ("the time limit passed while the simulator judged ..."), with no schedule and no
    /// figure, since nothing unjudged is answered; cancelled, [`SolveError::Cancelled`].
    pub fn judge(
        instance: &Instance,
        requested: &str,
        outcome: Outcome,
        solve_time_s: f64,
        stop: &Stop,
    ) -> Result<SolveResult, SolveError> {
        let mut result = SolveResult::unjudged(instance, requested, solve_time_s);
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
                let events = plan.schedule.events.len();
                if let Err(stopped) = result.judge_plan(instance, ran, plan, stop) {
                    let during = format!(
                        "while the simulator judged {ran}'s schedule ({events} events); it is \
                         not answered unjudged"
                    );
                    // The plan's details, moved into `result`, are freed off the answer's path.
                    crate::aside::free_aside(result);
                    let outcome = stopped.outcome(ran, &during)?;
                    return SolveResult::judge(instance, requested, outcome, solve_time_s, stop);
                }
            }
            Outcome::Infeasible { proven, reason, .. } => {
                result.status = Status::Infeasible;
                result.proven = Some(proven == Some(Scope::GlobalOptimum));
                if let Some(scope) = proven.filter(|&s| s != Scope::GlobalOptimum) {
                    result.scope = Some(scope);
                    result.proven_in_scope = Some(true);
                }
                result.message = Some(reason);
            }
            Outcome::NoSolution { reason, .. } => {
                result.status = Status::NoSolution;
                result.message = Some(reason);
            }
        }
        Ok(result)
    }

    /// A result of status `error` with nothing judged yet: the graph's summary, the budget,
    /// the solver asked for and the time.
    fn unjudged(instance: &Instance, requested: &str, solve_time_s: f64) -> SolveResult {
        let graph = instance.graph;
        SolveResult {
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
            lower_bound_scope: None,
            lower_bound_method: None,
            gap: None,
            proven: None,
            proven_in_scope: None,
            message: None,
            details: None,
            ended_by: None,
            least_budget_found: None,
            solve_time_s,
        }
    }

    /// The plan of solver `ran`, replayed in the simulator: its status, bound, gap,
    /// schedule and figures, or `error` when the simulator rejects it or finds it over
    /// the budget; the reason to stop when `stop` ends the replay.
    fn judge_plan(
        &mut self,
        instance: &Instance,
        ran: &str,
        plan: Plan,
        stop: &Stop,
    ) -> Result<(), Stopped> {
        let graph = instance.graph;
        self.scope = Some(plan.scope);
        if let Some(Details::Auto(auto)) = &plan.details {
            self.ended_by = Some(auto.ended_by);
        }
        self.details = plan.details;
        if let Some(bound) = plan.lower_bound {
            self.lower_bound = Some(bound.cost);
            self.lower_bound_scope = Some(bound.scope);
            self.lower_bound_method = Some(bound.method);
        }
        match simulate_polled(graph, &plan.schedule, || stop.poll())? {
            Err(e) => {
                self.message = Some(format!("{ran} produced an invalid schedule: {e}"));
            }
            Ok(stats) if stats.peak_memory > instance.budget => {
                self.message = Some(format!(
                    "{ran} produced a schedule that peaks at {} bytes, over the budget of {} bytes",
                    stats.peak_memory, instance.budget
                ));
            }
            Ok(stats) => {
                let cost = stats.total_cost;
                // A schedule that meets a bound on every schedule (its own solver's, or
                // Σ_v c_v: every node is computed at least once) is a global optimum,
                // whatever its solver claimed.
                // Not with copies between tiers: their schedules are judged by time.
                let meets_global_bound = stats.tiers.is_none()
                    && [Some(Bound::sum_of_costs(graph)), plan.lower_bound]
                        .into_iter()
                        .flatten()
                        .any(|b| {
                            b.scope == Scope::GlobalOptimum
                                && b.met_by(stats.recompute_cost, graph.total_cost())
                        });
                self.status = match plan.claim {
                    _ if meets_global_bound => {
                        self.scope = Some(Scope::GlobalOptimum);
                        Status::Optimal
                    }
                    Claim::Optimal if plan.scope == Scope::GlobalOptimum => Status::Optimal,
                    Claim::Optimal => Status::OptimalInScope,
                    Claim::Feasible => Status::Feasible,
                };
                if let Some(lb) = self.lower_bound {
                    self.gap = Some(if cost > 0.0 {
                        ((cost - lb) / cost).max(0.0)
                    } else {
                        0.0
                    });
                }
                self.message = plan.message;
                self.schedule = Some(plan.schedule.to_json(graph));
                self.stats = Some(stats);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::schedule::checkpoint_all;
    use crate::solve::SolveOptions;
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    /// Checkpoint-all's plan of `graph`, as a solver would hand it over.
    fn plan(graph: &crate::graph::Graph) -> Outcome {
        Outcome::Plan(Plan {
            schedule: checkpoint_all(graph),
            claim: Claim::Feasible,
            solver: "checkpoint-all",
            scope: Scope::Heuristic,
            lower_bound: None,
            message: None,
            details: None,
        })
    }

    #[test]
    fn a_judge_stopped_answers_no_solution_or_cancelled_never_the_schedule() {
        let graph = linear(20);
        let instance = Instance {
            graph: &graph,
            budget: u64::MAX,
        };
        let judge = |options: &SolveOptions| {
            SolveResult::judge(&instance, "x", plan(&graph), 0.0, &Stop::judging(options))
        };
        let free = judge(&SolveOptions::default()).unwrap();
        assert_eq!(free.status, Status::Optimal);
        let late = SolveOptions {
            judge_by: Some(Instant::now()),
            ..SolveOptions::default()
        };
        let r = judge(&late).unwrap();
        assert_eq!(
            (r.status, r.solver.as_str()),
            (Status::NoSolution, "checkpoint-all")
        );
        assert_eq!(r.requested_solver.as_deref(), Some("x"));
        assert!(r.schedule.is_none() && r.stats.is_none() && r.details.is_none());
        assert!(
            late.timed_out.load(Ordering::Relaxed),
            "the time limit is recorded"
        );
        let cancelled = SolveOptions::default();
        cancelled.cancel.store(true, Ordering::Relaxed);
        assert!(matches!(judge(&cancelled), Err(SolveError::Cancelled)));
    }
}
