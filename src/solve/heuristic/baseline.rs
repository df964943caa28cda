//! The two extreme baselines.
//!
//! * `checkpoint-all`: compute every node once in solver order and free each output right
//!   after its last consumer (a node nobody reads is freed right after it is computed).
//!   Cost `Σ c_v`; its peak is the *checkpoint-all peak* that percentage budgets refer to
//!   (Checkmate Fig. 5's no-recomputation schedule). The schedule and its peak live in
//!   `crate::schedule::checkpoint_all`, since budgets resolve against them; this solver
//!   returns it.
//! * `recompute-all`: Checkmate's `checkpoint_last_node`: between stages keep only the
//!   output of the previous stage's node (`S[t, t−1] = 1`) and recompute everything else
//!   from the graph's sources; quadratic cost, little memory.

use crate::graph::Graph;
use crate::schedule::stages::{empty_s, Stages};
use crate::schedule::Schedule;
use crate::solve::{fit, Instance, Outcome, Scope, SolveError, SolveOptions, Solver, SolverInfo};
// Re-exported where the solvers and tests have always found them.
use crate::schedule::checkpoint_all;

pub struct CheckpointAll;
pub struct RecomputeAll;

impl Solver for CheckpointAll {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "checkpoint-all",
            description: "Keep every output until its last use: no recomputation, the most memory.",
            scope: Scope::Heuristic,
            accepts: "any graph",
        }
    }
    fn solve(&self, instance: &Instance, _: &SolveOptions) -> Result<Outcome, SolveError> {
        fit(
            instance,
            "checkpoint-all",
            checkpoint_all(instance.graph),
            None,
        )
    }
}

/// The recompute-all schedule.
pub fn recompute_all(graph: &Graph) -> Schedule {
    let mut s = empty_s(graph.len());
    for (t, row) in s.iter_mut().enumerate().skip(1) {
        row.insert(t - 1);
    }
    Stages::from_s(graph, s).into_schedule(graph)
}

impl Solver for RecomputeAll {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "recompute-all",
            description:
                "Keep only the previous op's output between stages and recompute everything else \
                          (Checkmate's checkpoint-last-node): quadratic cost, little memory.",
            scope: Scope::Heuristic,
            accepts: "any graph",
        }
    }
    fn solve(&self, instance: &Instance, _: &SolveOptions) -> Result<Outcome, SolveError> {
        fit(
            instance,
            "recompute-all",
            recompute_all(instance.graph),
            None,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::schedule::simulate;

    #[test]
    fn linear_checkpoint_all_and_recompute_all_match_checkmate() {
        // Checkmate: checkpoint-all on gen_linear_graph costs T; checkpoint_last_node costs
        // 19 and 53 for n = 4, 8, with peak 3 on chains (its ILP-semantics accounting).
        for (n, last_cost) in [(4, 19.0), (8, 53.0)] {
            let g = linear(n);
            let all = simulate(&g, &checkpoint_all(&g)).unwrap();
            assert_eq!(all.total_cost, (2 * n + 1) as f64);
            let last = simulate(&g, &recompute_all(&g)).unwrap();
            assert_eq!(last.total_cost, last_cost);
            assert_eq!(last.peak_memory, 3);
        }
    }
}
