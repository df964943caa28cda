//! Which exact dynamic program fits a graph's structure (for `auto`).
//!
//! Homogeneous chains go to Revolve (global optimum, verified against the exhaustive
//! oracle); other chains, including those whose backward ops read the next stage's output
//! (Keras-extracted networks, which Revolve's one-state turn cannot express), to the chain
//! DP (optimal among persistent schedules). Graphs of any other class have no exact DP
//! here.

use super::chain_dp::ChainDp;
use super::revolve::{homogeneous, Revolve};
use crate::graph::structure::{detect, Structure};
use crate::graph::Graph;
use crate::solve::{Scope, Solver};

/// The exact DP for `graph` and the scope of its optimality, when its structure allows one.
pub fn exact_solver_for(graph: &Graph) -> Option<(&'static dyn Solver, Scope)> {
    match detect(graph) {
        Structure::Chain(c) if homogeneous(&c) => Some((&Revolve, Scope::GlobalOptimum)),
        Structure::Chain(_) => Some((&ChainDp, Scope::OptimalAmongPersistent)),
        Structure::Join(_) | Structure::General(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::{linear, random_layered};

    #[test]
    fn picks_by_structure() {
        let (s, scope) = exact_solver_for(&linear(5)).unwrap();
        assert_eq!((s.info().name, scope), ("revolve", Scope::GlobalOptimum));
        assert!(exact_solver_for(&random_layered(41, 1)).is_none());
        // A uniform chain whose backward ops read the next stage's output (Keras rule).
        let g = crate::graph::structure::tests::keras_two_stages();
        let (s, scope) = exact_solver_for(&g).unwrap();
        assert_eq!(
            (s.info().name, scope),
            ("chain-dp", Scope::OptimalAmongPersistent)
        );
    }
}
