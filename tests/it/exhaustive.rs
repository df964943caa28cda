//! Property tests of the exhaustive oracle on random DAGs of up to 10 nodes: its optimum is
//! <= every baseline that fits the same budget, non-increasing in the budget, equal to
//! Σ c_v from the checkpoint-all peak on, and every schedule it returns passes the
//! simulator within the budget.

use proptest::prelude::*;
use remat::graph::generate::{random_dag, DagShape};
use remat::schedule::checkpoint_all_peak;
use remat::schedule::simulate;
use remat::solve::{self, Instance, SolveOptions, Status};

const BASELINES: [&str; 4] = [
    "checkpoint-all",
    "chen-sqrt",
    "chen-greedy",
    "recompute-all",
];

fn optimum(graph: &remat::graph::Graph, budget: u64) -> Option<f64> {
    let r = solve::solve(
        &Instance { graph, budget },
        "exhaustive",
        &SolveOptions::default(),
    )
    .unwrap();
    match r.status {
        Status::Optimal => {
            let schedule = r.schedule.unwrap().resolve(graph).unwrap();
            let stats = simulate(graph, &schedule).unwrap();
            assert!(stats.peak_memory <= budget);
            assert_eq!(
                Some(stats.total_cost),
                r.lower_bound,
                "the optimum is its own bound"
            );
            Some(stats.total_cost)
        }
        Status::Infeasible => {
            assert_eq!(r.proven, Some(true));
            None
        }
        other => panic!("exhaustive returned {other:?}"),
    }
}

proptest! {
    // Not subset: the 256 cases take a fraction of a second.
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn exhaustive_is_the_optimum(n in 1usize..=10, seed in any::<u64>()) {
        let graph = random_dag(&DagShape::dense(n), seed);
        let peak = checkpoint_all_peak(&graph);
        let (min_budget, _) = graph.min_feasible_budget();
        let mut previous: Option<f64> = None;
        for budget in min_budget.saturating_sub(1)..=peak + 1 {
            let best = optimum(&graph, budget);
            if budget < min_budget {
                prop_assert!(best.is_none());
            }
            if let (Some(prev), Some(now)) = (previous, best) {
                prop_assert!(now <= prev + 1e-9, "budget {budget}: {now} > {prev}");
            }
            if previous.is_some() {
                prop_assert!(best.is_some(), "budget {budget} infeasible after a feasible smaller one");
            }
            if budget >= peak {
                prop_assert_eq!(best, Some(graph.total_cost()));
            }
            for solver in BASELINES {
                let r = solve::solve(&Instance { graph: &graph, budget }, solver, &SolveOptions::default()).unwrap();
                if let Some(stats) = r.stats {
                    let best = best.expect("a baseline fits, so the oracle must find a schedule");
                    prop_assert!(best <= stats.total_cost + 1e-9, "{solver} at {budget}: {} < optimum {best}", stats.total_cost);
                }
            }
            previous = best.or(previous);
        }
    }
}

#[test]
fn refuses_graphs_over_twelve_nodes_by_name() {
    let graph = random_dag(&DagShape::dense(13), 1);
    let err = solve::solve(
        &Instance {
            graph: &graph,
            budget: u64::MAX,
        },
        "exhaustive",
        &SolveOptions::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("13 nodes") && err.to_string().contains("12"),
        "{err}"
    );
}

#[test]
fn twelve_nodes_are_searched() {
    let graph = random_dag(&DagShape::dense(12), 42);
    let budget = (graph.min_feasible_budget().0 + checkpoint_all_peak(&graph)) / 2;
    let r = solve::solve(
        &Instance {
            graph: &graph,
            budget,
        },
        "exhaustive",
        &SolveOptions::default(),
    )
    .unwrap();
    // Halfway between the trivial bound and the checkpoint-all peak, one recomputation.
    assert_eq!(r.status, Status::Optimal, "{:?}", r.message);
    let stats = r.stats.expect("a schedule");
    assert!(stats.peak_memory <= budget);
    assert_eq!((stats.total_cost, graph.total_cost()), (23.0, 22.0));
    assert_eq!(r.lower_bound, Some(23.0));
}
