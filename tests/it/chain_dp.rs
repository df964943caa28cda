//! The persistent chain DP against the exhaustive oracle on chains it can search (at most
//! 11 nodes), at every budget from the least feasible to the checkpoint-all peak: its
//! plans fit with the predicted cost and peak, it is infeasible only where the oracle is
//! and never below the optimum, and the pairs where it is above the optimum (the
//! persistent family's limits, see `solve::dp::chain_dp`) are exactly those the fixtures
//! list. Without `REMAT_FULL` each sweep runs a quarter of its chains.

use crate::common;
use crate::dp;

use common::{check_fixture, subset};
use dp::{above_exhaustive, against_exhaustive, feasible_budgets};
use remat::graph::generate::{chain_graph_reading, next_reading_chain, random_chain};
use remat::graph::structure::chain;
use remat::graph::structure::StageSpec;
use serde::{Deserialize, Serialize};

/// A pair where the persistent optimum is above the global optimum, as
/// `chain_dp_above_exhaustive.json` lists it (fields in the order it stores them).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct AboveCase {
    budget: u64,
    chain_dp: Option<f64>,
    optimum: f64,
    seed: u64,
}

/// Random heterogeneous chains ([`random_chain`], seeds 0..60).
#[test]
fn heterogeneous_chains_never_below_exhaustive() {
    let seeds = subset(0..60u64, 4);
    let cases: Vec<(u64, _)> = seeds.iter().map(|&s| (s, random_chain(s))).collect();
    let (checked, above) = above_exhaustive("chain-dp", &cases, feasible_budgets);
    let above = above
        .into_iter()
        .map(|a| AboveCase {
            budget: a.budget,
            chain_dp: a.got,
            optimum: a.optimum,
            seed: a.case,
        })
        .collect();
    check_fixture(
        "chain_dp_above_exhaustive.json",
        "random heterogeneous chains (graph::generate::random_chain(seed)) and budgets where the persistent chain DP is above the exhaustive optimum",
        checked,
        above,
        |c: &AboveCase| seeds.contains(&c.seed),
    );
}

/// Keras-style chains, uniform (`L = 1..=5`, unit costs and sizes) and random
/// ([`next_reading_chain`], seeds 0..40): detected as chains with `reads_next_output`
/// where `G_j` reads `x_{j+1}`.
#[test]
fn next_output_chains_against_exhaustive() {
    let unit = StageSpec {
        fw: 1.0,
        bw: 1.0,
        x: 1,
        delta: 1,
        reads_input: false,
        reads_output: true,
    };
    let uniform = (1..=5usize).map(|l| {
        let next: Vec<usize> = (1..l).collect();
        let g = chain_graph_reading(&vec![unit; l], &next, (1.0, 1), 0);
        (format!("uniform L={l}"), g, next)
    });
    let random = (0..40u64).map(|seed| {
        let (g, next) = next_reading_chain(seed);
        (format!("seed {seed}"), g, next)
    });
    let cases: Vec<_> = subset(uniform.chain(random), 4)
        .into_iter()
        .map(|(name, g, next)| {
            let c = chain(&g).unwrap();
            for (i, st) in c.stages.iter().enumerate() {
                assert_eq!(st.reads_next_output, next.contains(&(i + 1)), "{name}");
            }
            (name, g)
        })
        .collect();
    against_exhaustive(
        "chain-dp",
        &cases,
        feasible_budgets,
        "chain_dp_next_output_above_exhaustive.json",
        "chains whose backward ops read the next stage's output (uniform L = 1..=5 and graph::generate::next_reading_chain(seed)) and budgets where chain-dp is above the exhaustive optimum (None = reported infeasible)",
    );
}
