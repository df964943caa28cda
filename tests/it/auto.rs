//! `auto`'s choice of solver, checked against the solver it should pick and against an
//! independent one: exhaustive search on tiny graphs, the exact chain DP on chains (compared
//! with the MILP), the portfolio elsewhere (never worse than any candidate or baseline).

use remat::graph::generate::{chain_graph, linear, random_layered};
use remat::graph::structure::StageSpec;
use remat::solve::{solve, Effort, Instance, SolveOptions, SolveResult, Status};

use crate::common;

use common::solve_on_one_thread as run;

fn cost(r: &SolveResult) -> f64 {
    r.stats.as_ref().expect("a schedule").total_cost
}

#[test]
fn tiny_graphs_go_to_the_exhaustive_oracle() {
    let g = linear(4);
    assert!(g.len() <= 12);
    let auto = run(&g, 3, "auto", None);
    assert_eq!(auto.solver, "exhaustive");
    assert_eq!(auto.requested_solver.as_deref(), Some("auto"));
    assert_eq!(auto.status, Status::Optimal);
    // Checkmate's recompute-all figure on linear-4 at 3 slots is 19; the optimum is 15.
    assert_eq!(cost(&auto), 15.0);
}

#[test]
fn chains_go_to_the_exact_dp_which_the_milp_does_not_beat() {
    let g = linear(8);
    assert_eq!(g.len(), 17);
    for budget in [4, 5, 6] {
        let auto = run(&g, budget, "auto", None);
        assert!(
            ["revolve", "chain-dp"].contains(&auto.solver.as_str()),
            "budget {budget}: auto picked {}",
            auto.solver
        );
        assert!(auto.status.is_optimal(), "budget {budget}");
        let milp = run(&g, budget, "milp", None);
        assert!(milp.status.is_optimal(), "budget {budget}");
        // Both are optimal on a chain: the DP over all schedules, the MILP over stage
        // schedules in solver order, which include an optimal one here.
        assert_eq!(cost(&auto), cost(&milp), "budget {budget}");
    }
}

/// The solvers `auto`'s `details` say it tried, in order.
fn tried(details: &serde_json::Value) -> Vec<String> {
    details["tried"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["solver"].as_str().unwrap().to_string())
        .collect()
}

/// On a homogeneous chain Revolve runs first and its global optimum is the answer, with
/// nothing else run: on a long chain at a tight budget the constructive floor, which ran
/// first, used the whole time limit (a 1,000,000-node chain at 1,000 bytes: infeasible after
/// 60 s, where Revolve's optimum takes 7 s).
#[test]
fn on_a_homogeneous_chain_revolve_runs_first_and_alone() {
    let g = linear(500);
    let auto = run(&g, 8, "auto", None);
    assert_eq!(auto.solver, "revolve");
    assert_eq!(auto.status, Status::Optimal);
    let details = serde_json::to_value(auto.details.as_ref().unwrap()).unwrap();
    let tried = tried(&details);
    assert_eq!(tried, ["revolve"]);
    assert_eq!(details["ended_by"], "converged");
    let revolve = run(&g, 8, "revolve", None);
    assert_eq!(cost(&auto), cost(&revolve));
}

/// On a chain that is not homogeneous the floor runs before the chain DP: the DP's table
/// can take the whole time limit (a 1,000-stage chain at a tenth of its peak, 5 s: the
/// table ran out of time and `auto` answered infeasible, where the floor's knapsack fits).
#[test]
fn on_a_heterogeneous_chain_the_floor_runs_before_the_chain_dp() {
    let stages: Vec<StageSpec> = (0..20u64)
        .map(|j| StageSpec {
            fw: 1.0 + (j % 3) as f64,
            bw: 2.0 + (j % 5) as f64,
            x: 10 + j % 7,
            delta: 10 + j % 4,
            reads_input: true,
            reads_output: false,
        })
        .collect();
    let g = chain_graph(&stages, (1.0, 10), 0);
    let budget = remat::schedule::checkpoint_all_peak(&g) / 2;
    let auto = run(&g, budget, "auto", None);
    let details = serde_json::to_value(auto.details.as_ref().unwrap()).unwrap();
    let tried = tried(&details);
    let dp = tried
        .iter()
        .position(|s| s == "chain-dp")
        .expect("chain-dp ran");
    assert!(dp > 0 && tried[0] == "sethi-ullman", "{tried:?}");
}

#[test]
fn the_portfolio_returns_its_cheapest_verified_candidate_and_names_it() {
    let g = random_layered(30, 7);
    let budget = remat::schedule::checkpoint_all_peak(&g) * 9 / 10;
    let auto = run(&g, budget, "auto", Some(20));
    assert!(matches!(
        auto.status,
        Status::Optimal | Status::OptimalInScope | Status::Feasible
    ));
    assert!(auto.stats.as_ref().unwrap().peak_memory <= budget);
    // `details.tried` lists every candidate; the answer is the cheapest schedule among
    // them, and `solver` names the one that produced it.
    let details = serde_json::to_value(auto.details.as_ref().unwrap()).unwrap();
    let tried = details["tried"].as_array().unwrap();
    let ran: Vec<&str> = tried
        .iter()
        .map(|t| t["solver"].as_str().unwrap())
        .collect();
    assert!(ran.contains(&"dtr") && ran.contains(&"milp"), "{ran:?}");
    let cheapest = tried
        .iter()
        .filter(|t| t["verdict"] == "schedule")
        .min_by(|a, b| {
            a["cost"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["cost"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(cheapest["cost"].as_f64().unwrap(), cost(&auto));
    assert_eq!(cheapest["solver"].as_str().unwrap(), auto.solver);
    for other in [
        "checkpoint-all",
        "chen-sqrt",
        "chen-greedy",
        "recompute-all",
        "dtr",
        "dtr-ahead",
    ] {
        let b = run(&g, budget, other, None);
        if let Some(stats) = &b.stats {
            assert!(
                cost(&auto) <= stats.total_cost + 1e-9,
                "{other} {} beats auto {}",
                stats.total_cost,
                cost(&auto)
            );
        }
    }
    let bound = auto.lower_bound.expect("a bound");
    assert!(bound <= cost(&auto) + 1e-9);
}

/// Where FastSA's first search from the solver order beats every constructive candidate
/// (random layered graphs at tight budgets, where DTR, DTR-ahead and the others find
/// nothing), the search runs again with other seeds before polishing, and the answer is
/// cheaper than the first search's schedule: one search's outcome depends on its seed.
#[test]
fn the_search_runs_again_where_it_is_what_works() {
    let g = random_layered(40, 0);
    let budget = remat::budget::between_min_and_peak(&g, 0.25);
    let auto = run(&g, budget, "auto", None);
    let details = serde_json::to_value(auto.details.as_ref().unwrap()).unwrap();
    let tried = details["tried"].as_array().unwrap();
    let first = tried
        .iter()
        .position(|t| t["solver"] == "fastsa")
        .expect("FastSA ran");
    let schedule_cost =
        |t: &serde_json::Value| t["cost"].as_f64().filter(|_| t["verdict"] == "schedule");
    let first_search = schedule_cost(&tried[first]).expect("the first search found a schedule");
    assert!(
        tried[..first]
            .iter()
            .filter_map(schedule_cost)
            .all(|c| c > first_search),
        "a constructive candidate beat the first search: {tried:?}"
    );
    // Four searches, then at least one polishing round.
    let fastsa = tried[first..]
        .iter()
        .filter(|t| t["solver"] == "fastsa")
        .count();
    assert!(fastsa >= 5, "{fastsa} FastSA runs: {tried:?}");
    assert!(
        cost(&auto) < first_search,
        "{} not below the first search's {first_search}",
        cost(&auto)
    );
    assert!(auto.stats.as_ref().unwrap().peak_memory <= budget);
}

/// On the bundled ResNet-18 a quarter of the way from its least budget to its peak, the
/// stage-cut bound (one moment) stays 1 point below the best schedule; the sequence of cuts
/// through it, a window of the backward pass's last moments, proves the schedule within
/// the MIP gap of the optimum over every schedule, and the answer says so. (At three times
/// the default effort, so that the bound's own time share, 15 s, is far above the 0.5 s its
/// windows take.)
#[test]
fn the_sequence_of_cuts_proves_what_one_cut_cannot() {
    let g = common::load(&common::root().join("graphs/resnet18.json"));
    let budget = remat::budget::between_min_and_peak(&g, 0.25);
    let options = SolveOptions {
        threads: Some(1),
        effort: Effort::Work(3.0),
        ..SolveOptions::default()
    };
    let auto = solve(&Instance { graph: &g, budget }, "auto", &options).unwrap();
    let details = serde_json::to_value(auto.details.as_ref().unwrap()).unwrap();
    let stage_cut = details["stage_cut"]["bound"].as_f64().expect("a stage cut");
    let sequence = &details["sequence"];
    assert_eq!(sequence["complete"], true, "{sequence}");
    let bound = auto.lower_bound.expect("a bound");
    assert_eq!(
        auto.lower_bound_method.map(|m| m.as_str()),
        Some("sequence_of_cuts")
    );
    assert_eq!(Some(bound), sequence["bound"].as_f64());
    assert!(bound > stage_cut * 1.005, "{bound} vs {stage_cut}");
    assert!(bound <= cost(&auto) + 1e-9);
    assert_eq!(auto.ended_by.map(|e| e.as_str()), Some("converged"));
}
