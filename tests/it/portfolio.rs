//! `auto`, the portfolio, against the floor it promises (issue 9): on the repository's
//! graphs, and on the MLSys benchmark set where `REMAT_MLSYS` names it, at several budgets
//! its schedule fits, replays in the simulator from the JSON the user gets, and is never
//! costlier than `dtr`'s, `chen-greedy`'s or `checkpoint-all`'s on the same case; it has a
//! schedule whenever one of them has.
//! The default run takes every fourth case; `REMAT_FULL=1` all of them.

use crate::common;

use remat::budget::Budget;
use remat::graph::Graph;
use remat::schedule::{simulate, ScheduleJson};
use remat::solve::SolveResult;
use std::path::PathBuf;

fn run(graph: &Graph, budget: u64, solver: &str) -> SolveResult {
    common::solve_on_one_thread(graph, budget, solver, Some(1))
}

/// The cost of `r`'s schedule, replayed from its JSON and checked against the budget.
fn verified_cost(graph: &Graph, r: &SolveResult, case: &str) -> Option<f64> {
    let json: &ScheduleJson = r.schedule.as_ref()?;
    let stats = simulate(graph, &json.resolve(graph).expect(case)).expect(case);
    assert!(stats.peak_memory <= r.budget, "{case}: over budget");
    assert_eq!(
        Some(stats.total_cost),
        r.stats.as_ref().map(|s| s.total_cost),
        "{case}"
    );
    Some(stats.total_cost)
}

#[test]
fn auto_is_never_worse_than_the_constructive_solvers() {
    auto_is_never_worse_than_the_constructive_solvers_on(common::repo_graph_files());
}

#[test]
#[ignore = "needs the MLSys set: REMAT_MLSYS=DIR"]
fn mlsys_auto_is_never_worse_than_the_constructive_solvers() {
    auto_is_never_worse_than_the_constructive_solvers_on(common::mlsys_graph_files());
}

fn auto_is_never_worse_than_the_constructive_solvers_on(files: Vec<PathBuf>) {
    let mut cases = Vec::new();
    for path in files {
        for fraction in [0.9, 0.8, 0.7] {
            cases.push((path.clone(), fraction));
        }
    }
    let mut compared = 0;
    for (path, fraction) in common::subset(cases, 4) {
        let graph = common::load(&path);
        let budget = Budget::OfPeak(fraction).resolve(&graph).unwrap();
        let case = format!("{} at {fraction}", path.display());
        let auto = run(&graph, budget, "auto");
        let auto_cost = verified_cost(&graph, &auto, &format!("{case} auto"));
        for floor in ["dtr", "chen-greedy", "checkpoint-all"] {
            let r = run(&graph, budget, floor);
            let Some(cost) = verified_cost(&graph, &r, &format!("{case} {floor}")) else {
                continue;
            };
            let auto_cost = auto_cost.unwrap_or_else(|| {
                panic!(
                    "{case}: {floor} has a schedule, auto none: {:?}",
                    auto.message
                )
            });
            assert!(
                auto_cost <= cost * (1.0 + 1e-12),
                "{case}: auto {auto_cost} ({}) is costlier than {floor} {cost}",
                auto.solver
            );
            compared += 1;
        }
    }
    assert!(compared > 0);
}
