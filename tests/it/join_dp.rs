//! join-dp (and equiv-chain) on join graphs: against the exhaustive oracle on every join
//! it can search, and against the Checkmate MILP on the unit joins too large for it.
//!
//! **Against the oracle.** Joins of 2-3 unit branches (`generate::join`) and random
//! joins (`generate::random_join`), at every budget: join-dp's plans fit with the
//! predicted cost and peak, are infeasible only where the oracle is, never below the
//! optimum, and the pairs above it are those the fixtures list. Equiv-Chain's plans fit
//! and are never below the optimum.
//!
//! **Against the MILP.** Every join of 2 or 3 unit branches of lengths 1 to 4 with more
//! than 12 nodes, at every budget from one below the least feasible to the checkpoint-all
//! peak. The MILP is optimal among frontier-advancing schedules in the graph's node order,
//! and join-dp's schedules run the branches nested (forward phase outermost branch first,
//! backward phase innermost first), so the reference is the best MILP optimum over the
//! distinct nesting orders: the join built with its branches in each permutation
//! (`generate::join` emits the backward ops last branch first). The MILP optima take
//! minutes, so they are stored in `tests/fixtures/join_dp_vs_milp.json` (one case per
//! pair; `REMAT_BLESS=1` recomputes them all); the test recomputes join-dp on every pair
//! and requires it to equal the stored optimum, and re-runs the MILP on every 4th pair
//! under `REMAT_FULL` (every 16th without) so that the fixture cannot go stale silently.
//!
//! Without `REMAT_FULL` each oracle sweep runs a quarter of its joins.

use crate::common;
use crate::dp;

use common::{bless, check_fixture, full, subset, Fixture};
use dp::{against_exhaustive, exhaustive, feasible_budgets, run_dp, run_heuristic};
use remat::graph::generate::{join, join_with, random_join};
use remat::graph::Graph;
use remat::schedule::checkpoint_all_peak;
use remat::solve::{self, Instance, SolveOptions, Status};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Joins of unit branches, every budget up to one slot per node.
#[test]
fn join_dp_against_exhaustive() {
    let shapes = [
        vec![1, 1],
        vec![2, 1],
        vec![2, 2],
        vec![3, 1],
        vec![3, 2],
        vec![4, 1],
        vec![1, 1, 1],
        vec![2, 1, 1],
        vec![2, 2, 1],
        vec![3, 1, 1],
    ];
    let cases: Vec<(String, Graph)> = subset(shapes, 4)
        .into_iter()
        .map(|l| (format!("{l:?}"), join(&l)))
        .collect();
    against_exhaustive(
        "join-dp",
        &cases,
        |g| 1..=g.len() as u64,
        "join_dp_above_exhaustive.json",
        "joins of unit branches (graph::generate::join) and budgets where join-dp is above the exhaustive optimum (None = reported infeasible)",
    );
}

/// Random joins ([`random_join`], seeds 0..40).
#[test]
fn random_joins_never_below_exhaustive() {
    let cases: Vec<(String, Graph)> = subset(0..40u64, 4)
        .into_iter()
        .map(|seed| (format!("seed {seed}"), random_join(seed)))
        .collect();
    against_exhaustive(
        "join-dp",
        &cases,
        feasible_budgets,
        "join_dp_random_above_exhaustive.json",
        "random joins (graph::generate::random_join(seed)) and budgets where join-dp is above the exhaustive optimum (None = reported infeasible)",
    );
}

/// Equiv-Chain on small joins: where it finds a schedule the oracle finds one no
/// costlier; with memory for every node it recomputes nothing.
#[test]
fn equiv_chain_on_small_joins_is_valid_and_never_below_the_optimum() {
    for lengths in [
        vec![1, 1],
        vec![2, 1],
        vec![2, 2],
        vec![3, 2],
        vec![1, 1, 1],
        vec![2, 1, 1],
        vec![1, 1, 3],
    ] {
        let g = join(&lengths);
        assert_eq!(remat::graph::structure::detect(&g).class(), "join");
        for budget in 1..=(g.len() as u64) {
            if let Some(cost) = run_heuristic("equiv-chain", &g, budget) {
                let opt = exhaustive(&g, budget)
                    .unwrap_or_else(|| panic!("{lengths:?} at M = {budget}: no optimum"));
                assert!(cost >= opt, "{lengths:?} at M = {budget}: {cost} < {opt}");
            }
        }
        let all = g.len() as u64;
        assert_eq!(
            run_heuristic("equiv-chain", &g, all),
            Some(g.total_cost()),
            "{lengths:?}"
        );
    }
}

/// Joins whose branches read the next stage's output: join-dp's plans fit the budget
/// with the predicted cost and peak and equiv-chain's fit it, both never below the
/// exhaustive optimum, and both find a schedule when every node fits.
#[test]
fn joins_reading_next_outputs_are_valid() {
    for lengths in [
        vec![2, 1],
        vec![2, 2],
        vec![3, 1],
        vec![3, 2],
        vec![2, 1, 1],
    ] {
        let g = join_with(&lengths, true, |_| (1.0, 1));
        let join = remat::graph::structure::join(&g).unwrap();
        assert!(join.branches.iter().any(|b| b[0].reads_next_output));
        for budget in 1..=(g.len() as u64) {
            let opt = exhaustive(&g, budget);
            let case = format!("{lengths:?} at M = {budget}");
            for (solver, got) in [
                ("join-dp", run_dp("join-dp", &g, budget)),
                ("equiv-chain", run_heuristic("equiv-chain", &g, budget)),
            ] {
                match (got, opt) {
                    (Some(c), Some(o)) => assert!(c >= o, "{solver} {case}: {c} < {o}"),
                    (Some(c), None) => panic!("{solver} {case}: {c} where the oracle finds none"),
                    (None, _) => assert!(
                        budget < g.len() as u64,
                        "{solver} {case}: room for every node"
                    ),
                }
            }
        }
    }
}

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

/// The MILP's optimum on `g` (within the budget, checked by the driver's simulator),
/// `None` when infeasible; panics on any other status.
fn milp_optimum(g: &Graph, budget: u64) -> Option<f64> {
    let options = SolveOptions {
        threads: Some(1),
        time_limit: Some(Duration::from_secs(120)),
        ..SolveOptions::default()
    };
    let r = solve::solve(&Instance { graph: g, budget }, "milp", &options).unwrap();
    match (r.status, r.stats) {
        (s, Some(stats)) if s.is_optimal() => {
            assert!(stats.peak_memory <= budget, "milp over budget");
            Some(stats.total_cost)
        }
        (Status::Infeasible, None) => None,
        (status, _) => panic!("milp at M = {budget}: {status:?} {:?}", r.message),
    }
}

/// The best MILP optimum over the nesting orders of `lengths`.
fn milp(lengths: &[usize], budget: u64) -> Option<f64> {
    permutations(lengths)
        .iter()
        .filter_map(|order| milp_optimum(&join(order), budget))
        .min_by(f64::total_cmp)
}

/// One (join, budget) pair of `join_dp_vs_milp.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Pair {
    lengths: Vec<usize>,
    budget: u64,
    /// The best MILP optimum over the nesting orders; `None`: infeasible in every order.
    milp: Option<f64>,
}

const VS_MILP: &str = "join_dp_vs_milp.json";

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
    let stored: Option<Fixture<Pair>> = (!bless()).then(|| {
        let path = common::root().join("tests/fixtures").join(VS_MILP);
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    });
    let rerun = |i: usize| bless() || i % if full() { 4 } else { 16 } == 0;
    let mut cases = Vec::new();
    for (i, (lengths, budget)) in pairs().into_iter().enumerate() {
        let milp = match &stored {
            Some(fixture) => {
                let pair = &fixture.cases[i];
                assert_eq!(
                    (&pair.lengths, pair.budget),
                    (&lengths, budget),
                    "{VS_MILP}"
                );
                if rerun(i) {
                    assert_eq!(milp(&lengths, budget), pair.milp, "{lengths:?} M={budget}");
                }
                pair.milp
            }
            None => milp(&lengths, budget),
        };
        let got = run_dp("join-dp", &join(&lengths), budget);
        assert_eq!(
            got, milp,
            "{lengths:?} M={budget}: join-dp differs from the MILP"
        );
        cases.push(Pair {
            lengths,
            budget,
            milp,
        });
    }
    check_fixture(
        VS_MILP,
        "every join of 2-3 unit branches of lengths <= 4 with more than 12 nodes (graph::generate::join), budgets from one below the least feasible to the checkpoint-all peak: the best MILP optimum over the nesting orders, which join-dp equals on every pair",
        cases.len(),
        cases,
        |_| true,
    );
}

/// join-dp nests a table a branch by recursion: 600 one-stage branches overflowed a 2 MiB
/// thread stack (the server's) and aborted the process. It takes at most 64; more is a
/// refusal naming the count, and equiv-chain still solves the join.
#[test]
fn join_dp_refuses_more_branches_than_it_can_nest() {
    let g = join(&[1; 65]);
    let instance = Instance {
        graph: &g,
        budget: checkpoint_all_peak(&g),
    };
    match solve::solve(&instance, "join-dp", &SolveOptions::default()) {
        Err(e @ solve::SolveError::Unsupported { .. }) => {
            assert!(e.to_string().contains("a join of 65 branches"), "{e}")
        }
        other => panic!("{:?}", other.map(|r| r.status)),
    }
    let r = solve::solve(&instance, "equiv-chain", &SolveOptions::default()).unwrap();
    assert!(r.stats.is_some(), "{:?}", r.status);
}
