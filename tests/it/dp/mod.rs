//! Helpers shared by the integration tests of the dynamic programs (`chain_dp.rs`,
//! `join_dp.rs`): a DP run through the driver with its predictions checked, the
//! exhaustive oracle, and the sweep against the oracle whose cases above the optimum a
//! fixture lists ([`against_exhaustive`]).
#![allow(dead_code)]

use super::common::check_fixture;
use remat::graph::Graph;
use remat::schedule::checkpoint_all_peak;
use remat::solve::{self, Instance, SolveOptions, Status};
use std::fmt::Display;
use std::ops::RangeInclusive;

/// Runs `solver` through the driver: `None` when it reports the budget infeasible, else
/// its cost and details, after checking that its plan fits the budget.
fn solved(solver: &str, g: &Graph, budget: u64) -> Option<(f64, u64, serde_json::Value)> {
    let r = solve::solve(
        &Instance { graph: g, budget },
        solver,
        &SolveOptions::default(),
    )
    .unwrap();
    match r.status {
        Status::Optimal | Status::OptimalInScope | Status::Feasible => {
            let stats = r.stats.unwrap();
            let d = serde_json::to_value(r.details.as_ref().unwrap()).unwrap();
            assert!(stats.peak_memory <= budget, "{solver} at M = {budget}");
            Some((stats.total_cost, stats.peak_memory, d))
        }
        Status::Infeasible => None,
        other => panic!("{solver} at M = {budget}: {other:?} {:?}", r.message),
    }
}

/// The cost of the DP `solver`'s plan ([`solved`]), `None` when it reports the budget
/// infeasible, after checking that the simulator agrees with the predicted cost and peak
/// it reports in its details.
pub fn run_dp(solver: &str, g: &Graph, budget: u64) -> Option<f64> {
    let (cost, peak, d) = solved(solver, g, budget)?;
    assert_eq!(
        d["predicted_cost"].as_f64(),
        Some(cost),
        "{solver} at M = {budget}"
    );
    assert_eq!(
        d["predicted_peak"].as_u64(),
        Some(peak),
        "{solver} at M = {budget}"
    );
    Some(cost)
}

/// The cost of a heuristic's plan ([`solved`]), `None` when it reports the budget
/// infeasible.
pub fn run_heuristic(solver: &str, g: &Graph, budget: u64) -> Option<f64> {
    solved(solver, g, budget).map(|(cost, _, _)| cost)
}

/// The exhaustive oracle's optimum, `None` when no schedule fits.
pub fn exhaustive(g: &Graph, budget: u64) -> Option<f64> {
    let r = solve::solve(
        &Instance { graph: g, budget },
        "exhaustive",
        &SolveOptions::default(),
    )
    .unwrap();
    r.status.is_optimal().then(|| r.stats.unwrap().total_cost)
}

/// Every budget from the least feasible to the checkpoint-all peak.
pub fn feasible_budgets(g: &Graph) -> RangeInclusive<u64> {
    g.min_feasible_budget().0..=checkpoint_all_peak(g)
}

/// A (case, budget) where a DP is above the oracle's optimum (`got = None`: it reports
/// the budget infeasible).
pub struct Above<K> {
    pub case: K,
    pub budget: u64,
    pub got: Option<f64>,
    pub optimum: f64,
}

/// Runs the DP `solver` ([`run_dp`]) on each named graph at each of `budgets(g)`, with
/// the oracle: the DP is infeasible where the oracle is, and never below the optimum.
/// Returns the number of (graph, budget) pairs the oracle finds feasible, and those where
/// the DP is above the optimum.
pub fn above_exhaustive<K: Clone + Display>(
    solver: &str,
    cases: &[(K, Graph)],
    budgets: impl Fn(&Graph) -> RangeInclusive<u64>,
) -> (usize, Vec<Above<K>>) {
    let mut above = Vec::new();
    let mut checked = 0;
    for (case, g) in cases {
        for budget in budgets(g) {
            let got = run_dp(solver, g, budget);
            let Some(optimum) = exhaustive(g, budget) else {
                assert_eq!(got, None, "{case}, M = {budget}: the oracle finds none");
                continue;
            };
            checked += 1;
            assert!(
                got.is_none_or(|c| c >= optimum),
                "{case}, M = {budget}: {got:?} below the optimum {optimum}"
            );
            if got != Some(optimum) {
                above.push(Above {
                    case: case.clone(),
                    budget,
                    got,
                    optimum,
                });
            }
        }
    }
    (checked, above)
}

/// [`above_exhaustive`] with the pairs above the optimum compared, one line each, with
/// the fixture `name` (`check_fixture`); the fast subset compares the lines of the cases
/// it ran.
pub fn against_exhaustive(
    solver: &str,
    cases: &[(String, Graph)],
    budgets: impl Fn(&Graph) -> RangeInclusive<u64>,
    name: &str,
    about: &str,
) {
    let (checked, above) = above_exhaustive(solver, cases, budgets);
    let lines = above
        .iter()
        .map(|a| {
            format!(
                "{} M={}: {solver} {:?} vs optimum {}",
                a.case, a.budget, a.got, a.optimum
            )
        })
        .collect();
    let prefixes: Vec<String> = cases.iter().map(|(c, _)| format!("{c} M=")).collect();
    check_fixture(name, about, checked, lines, |line: &String| {
        prefixes.iter().any(|p| line.starts_with(p))
    });
}
