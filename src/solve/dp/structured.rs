//! Which exact dynamic program fits a graph's structure (for `auto`).
//!
//! Homogeneous chains go to Revolve (global optimum, verified against the exhaustive
//! oracle); other chains, including those whose backward ops read the next stage's output
//! (Keras-extracted networks, which Revolve's one-state turn cannot express), to the chain
//! DP (optimal among persistent schedules). Graphs of any other class have no exact DP
//! here. The answer carries the chain it detected, so that the DP runs on it without
//! detecting it again.

use super::chain_dp::{stages_footprint, ChainDp};
use super::revolve::{homogeneous, Revolve};
use crate::graph::structure::{detect, Chain, Structure};
use crate::graph::Graph;
use crate::solve::{Instance, Outcome, Scope, SolveError, SolveOptions, Solver, SolverInfo};

/// The exact DP a graph's structure allows, with the chain detected in the graph.
#[derive(Clone, Debug)]
pub enum ExactDp {
    /// Revolve on a homogeneous chain: the global optimum.
    Revolve(Chain),
    /// The persistent chain DP: optimal among persistent schedules.
    ChainDp(Chain),
}

impl ExactDp {
    /// The solver that runs.
    pub fn info(&self) -> SolverInfo {
        match self {
            ExactDp::Revolve(_) => Revolve.info(),
            ExactDp::ChainDp(_) => ChainDp.info(),
        }
    }

    /// How far its answer can be trusted on this chain.
    pub fn scope(&self) -> Scope {
        match self {
            ExactDp::Revolve(_) => Scope::GlobalOptimum,
            ExactDp::ChainDp(_) => Scope::OptimalAmongPersistent,
        }
    }

    /// Runs the DP on the detected chain, once its footprint is admitted;
    /// `instance.graph` is the graph it was detected in.
    pub fn solve(
        &self,
        instance: &Instance,
        options: &SolveOptions,
    ) -> Result<Outcome, SolveError> {
        let footprint = match self {
            ExactDp::Revolve(_) => Revolve.footprint(instance),
            ExactDp::ChainDp(chain) => stages_footprint(instance.graph, chain.len()),
        };
        footprint.admit(self.info().name, options)?;
        match self {
            ExactDp::Revolve(chain) => Revolve::on_chain(chain, instance, options),
            ExactDp::ChainDp(chain) => ChainDp::on_chain(chain, instance, options),
        }
    }
}

/// The exact DP for `graph`, when its structure allows one.
pub fn exact_solver_for(graph: &Graph) -> Option<ExactDp> {
    match detect(graph) {
        Structure::Chain(c) if homogeneous(&c) => Some(ExactDp::Revolve(c)),
        Structure::Chain(c) => Some(ExactDp::ChainDp(c)),
        Structure::Join(_) | Structure::General(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::{linear, random_layered};
    use crate::schedule::simulate;
    use crate::solve::{solve, Status};

    #[test]
    fn picks_by_structure() {
        let dp = exact_solver_for(&linear(5)).unwrap();
        assert_eq!(
            (dp.info().name, dp.scope()),
            ("revolve", Scope::GlobalOptimum)
        );
        assert!(exact_solver_for(&random_layered(41, 1)).is_none());
        // A uniform chain whose backward ops read the next stage's output (Keras rule).
        let g = crate::graph::structure::tests::keras_two_stages();
        let dp = exact_solver_for(&g).unwrap();
        assert_eq!(
            (dp.info().name, dp.scope()),
            ("chain-dp", Scope::OptimalAmongPersistent)
        );
    }

    /// On the detected chain the DP answers as the solver of the same name does.
    #[test]
    fn runs_the_dp_on_the_detected_chain() {
        let keras = crate::graph::structure::tests::keras_two_stages();
        for g in [linear(5), keras] {
            let dp = exact_solver_for(&g).unwrap();
            for budget in 1..=g.len() as u64 {
                let instance = Instance { graph: &g, budget };
                let options = SolveOptions::default();
                let by_name = solve(&instance, dp.info().name, &options).unwrap();
                match dp.solve(&instance, &options).unwrap() {
                    Outcome::Plan(plan) => {
                        let stats = simulate(&g, &plan.schedule).unwrap();
                        assert!(by_name.status.is_optimal(), "M = {budget}");
                        assert_eq!(Some(stats), by_name.stats, "M = {budget}");
                    }
                    _ => assert_eq!(by_name.status, Status::Infeasible, "M = {budget}"),
                }
            }
        }
    }
}
