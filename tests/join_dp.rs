//! join-dp against the Checkmate MILP on every join too large for the exhaustive oracle:
//! 2 or 3 unit branches ([`generate::join`]) of lengths 1 to 4 with more than 12 nodes, at
//! every budget from one below the least feasible to the checkpoint-all peak.
//!
//! The MILP is optimal among frontier-advancing schedules in the graph's node order, and
//! join-dp's schedules run the branches nested (forward phase outermost branch first,
//! backward phase innermost first), so the reference is the best MILP optimum over the
//! distinct nesting orders: the join built with its branches in each permutation
//! (`generate::join` emits the backward ops last branch first).
//!
//! The MILP optima take minutes, so they are stored in `tests/fixtures/join_dp_vs_milp.json`
//! (regenerate with `UPDATE_FIXTURES=1 cargo test --test join_dp`); the test recomputes
//! join-dp on every pair, re-runs the MILP on a deterministic subset so that the fixture
//! cannot go stale silently, and compares. Every pair where join-dp differs from the MILP
//! is listed in the fixture's `differ`, never hidden.

use remat::graph::generate::join;
use remat::graph::Graph;
use remat::solve::{self, checkpoint_all_peak, Instance, SolveOptions, Status};
use serde::{Deserialize, Serialize};
use std::time::Duration;

const FIXTURE: &str = "tests/fixtures/join_dp_vs_milp.json";

/// Every multiset of 2 or 3 lengths in 1..=4 whose join has more than 12 nodes.
fn joins() -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for a in 1..=4 {
        for b in a..=4 {
            out.push(vec![a, b]);
            for c in b..=4 {
                out.push(vec![a, b, c]);
            }
        }
    }
    out.retain(|l| 2 * l.iter().sum::<usize>() + 1 > 12);
    out
}

/// The distinct permutations of `lengths`.
fn permutations(lengths: &[usize]) -> Vec<Vec<usize>> {
    if lengths.len() <= 1 {
        return vec![lengths.to_vec()];
    }
    let mut out: Vec<Vec<usize>> = Vec::new();
    for i in 0..lengths.len() {
        let mut rest = lengths.to_vec();
        let first = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first);
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// The cost of `solver`'s schedule (replayed by the driver's simulator, within the budget),
/// `None` when infeasible; panics on any other status.
fn run(g: &Graph, budget: u64, solver: &str) -> Option<f64> {
    let options = SolveOptions {
        threads: Some(1),
        time_limit: Some(Duration::from_secs(120)),
        ..SolveOptions::default()
    };
    let r = solve::solve(&Instance { graph: g, budget }, solver, &options).unwrap();
    let expected = if solver == "milp" {
        Status::Optimal
    } else {
        Status::Feasible
    };
    match &r.stats {
        Some(stats) if r.status == expected => {
            assert!(stats.peak_memory <= budget, "{solver} over budget");
            if solver == "join-dp" {
                let d = serde_json::to_value(r.details.as_ref().unwrap()).unwrap();
                assert_eq!(d["predicted_cost"].as_f64(), Some(stats.total_cost));
                assert_eq!(d["predicted_peak"].as_u64(), Some(stats.peak_memory));
            }
            Some(stats.total_cost)
        }
        None if r.status == Status::Infeasible => None,
        _ => panic!("{solver} at M = {budget}: {:?} {:?}", r.status, r.message),
    }
}

/// The best MILP optimum over the nesting orders of `lengths`.
fn milp(lengths: &[usize], budget: u64) -> Option<f64> {
    permutations(lengths)
        .iter()
        .filter_map(|order| run(&join(order), budget, "milp"))
        .min_by(f64::total_cmp)
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Pair {
    lengths: Vec<usize>,
    budget: u64,
    /// The best MILP optimum over the nesting orders; `None`: infeasible in every order.
    milp: Option<f64>,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Fixture {
    about: String,
    pairs: Vec<Pair>,
    /// The pairs where join-dp's cost differs from the MILP's.
    differ: Vec<String>,
}

/// The (join, budget) pairs, each join's budgets from one below the least feasible to its
/// checkpoint-all peak.
fn pairs() -> Vec<(Vec<usize>, u64)> {
    joins()
        .into_iter()
        .flat_map(|lengths| {
            let g = join(&lengths);
            let (lo, _) = g.min_feasible_budget();
            (lo - 1..=checkpoint_all_peak(&g)).map(move |b| (lengths.clone(), b))
        })
        .collect()
}

#[test]
fn join_dp_equals_the_best_milp_over_nesting_orders() {
    let update = std::env::var_os("UPDATE_FIXTURES").is_some();
    let stored: Option<Fixture> = std::fs::read_to_string(FIXTURE)
        .ok()
        .map(|t| serde_json::from_str(&t).unwrap());
    let mut pairs_out = Vec::new();
    let mut differ = Vec::new();
    for (i, (lengths, budget)) in pairs().into_iter().enumerate() {
        let milp = if update {
            milp(&lengths, budget)
        } else {
            let fixture = stored.as_ref().expect("the fixture");
            let pair = &fixture.pairs[i];
            assert_eq!(
                (&pair.lengths, pair.budget),
                (&lengths, budget),
                "{FIXTURE}"
            );
            // Re-run the MILP on every 4th pair.
            if i % 4 == 0 {
                assert_eq!(milp(&lengths, budget), pair.milp, "{lengths:?} M={budget}");
            }
            pair.milp
        };
        let got = run(&join(&lengths), budget, "join-dp");
        if got != milp {
            differ.push(format!(
                "{lengths:?} M={budget}: join-dp {got:?} vs MILP {milp:?}"
            ));
        }
        pairs_out.push(Pair {
            lengths,
            budget,
            milp,
        });
    }
    let found = Fixture {
        about: "every join of 2-3 unit branches of lengths <= 4 with more than 12 nodes \
                (graph::generate::join), budgets from one below the least feasible to the \
                checkpoint-all peak: the best MILP optimum over the nesting orders, and the \
                pairs where join-dp differs from it"
            .into(),
        pairs: pairs_out,
        differ,
    };
    let text = serde_json::to_string_pretty(&found).unwrap() + "\n";
    if update {
        std::fs::write(FIXTURE, &text).unwrap();
    }
    assert!(
        stored.as_ref().is_some_and(|s| *s == found) || update,
        "{FIXTURE} changed; got:\n{text}"
    );
}
