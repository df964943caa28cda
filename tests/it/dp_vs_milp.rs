//! The exact chain solvers against each other on Checkmate's uniform chains
//! (`generate::linear(n)`, `2n + 1` nodes): for `n = 1..=6` and every budget from one below
//! the least feasible to the checkpoint-all peak, chain-dp == revolve == MILP == exhaustive,
//! infeasible budgets included (all say infeasible). The oracle runs through
//! `solve_exhaustive_unbounded` so that `linear(6)` (13 nodes, above the `exhaustive`
//! solver's 12) is searched too. Every schedule is replayed by the driver's simulator and
//! fits the budget.

use remat::graph::generate::linear;
use remat::graph::Graph;
use remat::schedule::checkpoint_all_peak;
use remat::solve::{self, Instance, SolveOptions, SolveResult, Status};

fn options() -> SolveOptions {
    SolveOptions {
        threads: Some(1),
        ..SolveOptions::default()
    }
}

/// The optimal cost of an exact solver's answer (`None`: infeasible), checked to fit.
fn optimum(r: SolveResult, what: &str) -> Option<f64> {
    match (r.status, r.stats) {
        (s, Some(stats)) if s.is_optimal() => {
            assert!(stats.peak_memory <= r.budget, "{what}: over budget");
            Some(stats.total_cost)
        }
        (Status::Infeasible, None) => None,
        (status, _) => panic!("{what}: {status:?} {:?}", r.message),
    }
}

fn run(g: &Graph, budget: u64, solver: &str) -> Option<f64> {
    let r = solve::solve(&Instance { graph: g, budget }, solver, &options()).unwrap();
    optimum(r, &format!("{solver} on {:?} at M = {budget}", g.name()))
}

#[test]
fn uniform_chains_agree_across_exact_solvers() {
    let mut pairs = 0;
    for n in 1..=6 {
        let g = linear(n);
        let (lo, _) = g.min_feasible_budget();
        for budget in lo - 1..=checkpoint_all_peak(&g) {
            let what = format!("linear({n}) at M = {budget}");
            let exhaustive = optimum(
                solve::solve_exhaustive_unbounded(&Instance { graph: &g, budget }, &options())
                    .unwrap(),
                &what,
            );
            for solver in ["chain-dp", "revolve", "milp"] {
                assert_eq!(run(&g, budget, solver), exhaustive, "{solver}, {what}");
            }
            pairs += 1;
        }
    }
    assert_eq!(pairs, 27, "budgets per chain: 1 infeasible + 3..=n+2");
}
