//! The Checkmate MILP, its LP bound and LP rounding, checked against the exhaustive oracle
//! and the simulator.

use remat::graph::generate::linear;
use remat::graph::Graph;
use remat::solve::{self, checkpoint_all_peak, Instance, SolveOptions, SolveResult, Status};

fn run(graph: &Graph, budget: u64, solver: &str) -> SolveResult {
    let options = SolveOptions {
        threads: Some(1),
        ..SolveOptions::default()
    };
    solve::solve(&Instance { graph, budget }, solver, &options).unwrap()
}

fn cost(r: &SolveResult) -> f64 {
    r.stats.as_ref().expect("a schedule").total_cost
}

#[test]
fn linear8_at_budget_4_matches_checkmate() {
    let g = linear(8);
    assert_eq!(g.len(), 17);
    let milp = run(&g, 4, "milp");
    assert_eq!(milp.status, Status::Optimal, "{:?}", milp.message);
    assert_eq!(cost(&milp), 26.0);
    let lp = run(&g, 4, "lp-bound");
    let bound = lp.lower_bound.expect("an LP bound");
    assert!((bound - 22.0).abs() < 1e-6, "LP bound {bound}");
    println!("{:?} {:?}", milp.details, lp.details);
}
