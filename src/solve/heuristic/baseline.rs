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
//!   from the graph's sources; quadratic cost, little memory. Its schedule is quadratic
//!   too (`Σ_t |R[t]|` compute events): its footprint counts a lower bound of that length
//!   (stage `t` recomputes the longest path ending at each input other than `t − 1`,
//!   all of whose nodes precede `t − 1`), and the build stops at the memory limit. A
//!   schedule whose lower bound cannot be built, checked, judged and written in the time
//!   limit at `ANSWER_RATE` is not started: the judge's replay of it is not polled.

use crate::graph::Graph;
use crate::schedule::stages::{Keep, StagePlan};
use crate::schedule::Schedule;
use crate::solve::footprint::{Guard, Halt};
use crate::solve::{
    fit, Footprint, Instance, Outcome, Scope, SolveError, SolveOptions, Solver, SolverInfo, Stop,
};
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
    fn footprint(&self, instance: &Instance) -> Footprint {
        Footprint::one_pass(instance.graph)
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

/// The recompute-all schedule, built while `guard` allows.
pub fn recompute_all(graph: &Graph, guard: &Guard) -> Result<Schedule, Halt> {
    let keeps = (1..graph.len())
        .map(|t| Keep {
            node: t - 1,
            first: t,
            last: t,
        })
        .collect();
    let plan = StagePlan::new(graph, keeps, |computes| guard.check(computes))?;
    plan.into_schedule(graph, |computes| guard.check(computes))
}

/// Compute events per second of a recompute-all answer, from the start of its build to the
/// end of its output (`remat solve`, release): a 10,001-node chain's 12.5 M events took
/// 3.9 s on a shared 2-core machine at a load average of 11. The judge's replay after the
/// solve is not polled, so a longer schedule is not started.
const ANSWER_RATE: f64 = 3.0e6;

/// A lower bound on the compute events of the recompute-all schedule: stage `t` computes
/// `t` and every ancestor of its inputs other than `t − 1` (they all precede `t − 1`, so
/// none is kept), at least the longest path ending at each.
fn recompute_all_computes(graph: &Graph) -> u64 {
    // depth[v]: the nodes of the longest path ending at v.
    let mut depth = vec![0u64; graph.len()];
    let mut total = 0u64;
    for t in 0..graph.len() {
        let preds = graph.preds(t);
        depth[t] = 1 + preds.iter().map(|&u| depth[u]).max().unwrap_or(0);
        let deepest = preds
            .iter()
            .filter(|&&u| u + 1 != t)
            .map(|&u| depth[u])
            .max()
            .unwrap_or(0);
        total = total.saturating_add(1 + deepest);
    }
    total
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
    fn footprint(&self, instance: &Instance) -> Footprint {
        let computes = recompute_all_computes(instance.graph);
        Footprint::linear(
            instance.graph,
            computes,
            format!("a schedule of at least {computes} compute events"),
        )
    }
    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        let computes = recompute_all_computes(instance.graph);
        if let Some(limit) = options.time_limit {
            if computes as f64 > ANSWER_RATE * limit.as_secs_f64() {
                return Ok(Outcome::NoSolution {
                    solver: "recompute-all",
                    reason: format!(
                        "its schedule of at least {computes} compute events cannot be built \
                         and judged within the time limit"
                    ),
                });
            }
        }
        let stop = Stop::start(options);
        let guard = Guard::new("recompute-all", instance.graph, &stop, options);
        match recompute_all(instance.graph, &guard) {
            Ok(schedule) => fit(instance, "recompute-all", schedule, None),
            Err(halt) => halt.outcome("recompute-all", "while building its stages"),
        }
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
            let stop = Stop::start(&SolveOptions::default());
            let guard = Guard::new("recompute-all", &g, &stop, &SolveOptions::default());
            let schedule = recompute_all(&g, &guard).unwrap();
            let last = simulate(&g, &schedule).unwrap();
            let computes = schedule
                .events
                .iter()
                .filter(|e| matches!(e, crate::schedule::Event::Compute(_)))
                .count() as u64;
            assert!(recompute_all_computes(&g) <= computes);
            assert_eq!(last.total_cost, last_cost);
            assert_eq!(last.peak_memory, 3);
        }
    }
}
