//! The Checkmate MILP, its LP bound and the LP rounding, checked against the exhaustive
//! oracle and the simulator (through `solve::solve`, which re-simulates every schedule).
//!
//! Random DAGs: where the MILP (frontier-advancing stages in solver order) is strictly
//! worse than the exhaustive optimum (any order), the case is listed in
//! `tests/fixtures/milp_above_exhaustive.json`; the test recomputes that list and compares.
//! Regenerate it with `UPDATE_FIXTURES=1 cargo test --test milp`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use remat::graph::generate::{linear, random_layered};
use remat::graph::{Graph, GraphSpec, NodeSpec};
use remat::solve::{
    self, checkpoint_all_peak, Instance, Scope, SolveError, SolveOptions, SolveResult, Status,
};
use serde::{Deserialize, Serialize};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const EPS: f64 = 1e-6;

fn options() -> SolveOptions {
    SolveOptions {
        threads: Some(1),
        ..SolveOptions::default()
    }
}

fn run(graph: &Graph, budget: u64, solver: &str) -> SolveResult {
    solve::solve(&Instance { graph, budget }, solver, &options()).unwrap()
}

fn cost(r: &SolveResult) -> Option<f64> {
    r.stats.as_ref().map(|s| s.total_cost)
}

/// Every returned schedule fits (the driver turns a schedule over budget into `error`).
fn assert_sound(r: &SolveResult, what: &str) {
    assert_ne!(r.status, Status::Error, "{what}: {:?}", r.message);
    if let Some(stats) = &r.stats {
        assert!(stats.peak_memory <= r.budget, "{what}: over budget");
    }
}

#[test]
fn linear8_at_budget_4_matches_checkmate() {
    let g = linear(8);
    assert_eq!(g.len(), 17);
    let milp = run(&g, 4, "milp");
    assert_eq!(milp.status, Status::Optimal, "{:?}", milp.message);
    assert_eq!(cost(&milp), Some(26.0));
    let lp = run(&g, 4, "lp-bound");
    assert_eq!(lp.scope, Some(Scope::LowerBound));
    let bound = lp.lower_bound.expect("an LP bound");
    assert!((bound - 22.0).abs() < EPS, "LP bound {bound}");
    // The MILP result carries a bound at least as strong as the LP's.
    assert!(milp.lower_bound.unwrap() >= 22.0 - EPS);
}

#[test]
fn linear8_optimum_is_non_increasing_in_the_budget() {
    let g = linear(8);
    let (min_budget, _) = g.min_feasible_budget();
    let peak = checkpoint_all_peak(&g);
    assert_eq!(run(&g, min_budget - 1, "milp").status, Status::Infeasible);
    let mut last = f64::INFINITY;
    let mut optima = Vec::new();
    for budget in min_budget..=peak {
        let r = run(&g, budget, "milp");
        assert_eq!(
            r.status,
            Status::Optimal,
            "budget {budget}: {:?}",
            r.message
        );
        let c = cost(&r).unwrap();
        assert!(c <= last + EPS, "budget {budget}: {c} > {last}");
        last = c;
        optima.push(c);
    }
    assert_eq!(last, 17.0, "{optima:?}");
}

/// MILP, LP bound and rounding at one budget, checked against the oracle's answer.
struct Case {
    exhaustive: Option<f64>,
    milp: Option<f64>,
    /// The MILP found a schedule but neither LP rounding nor any baseline did.
    rounding_missed: bool,
}

fn check_case(g: &Graph, budget: u64, what: &str) -> Case {
    let oracle = run(g, budget, "exhaustive");
    assert!(matches!(
        oracle.status,
        Status::Optimal | Status::Infeasible
    ));
    let milp = run(g, budget, "milp");
    let lp = run(g, budget, "lp-bound");
    let rounding = run(g, budget, "lp-rounding");
    for (r, name) in [
        (&milp, "milp"),
        (&lp, "lp-bound"),
        (&rounding, "lp-rounding"),
    ] {
        assert_sound(r, &format!("{what} budget {budget} {name}"));
    }
    let ex = cost(&oracle);
    let mi = cost(&milp);
    let mut rounding_missed = false;
    if ex.is_none() {
        assert_eq!(milp.status, Status::Infeasible, "{what} budget {budget}");
        assert_eq!(
            rounding.status,
            Status::Infeasible,
            "{what} budget {budget}"
        );
    }
    if let Some(m) = mi {
        assert_eq!(milp.status, Status::Optimal, "{what} budget {budget}");
        let e = ex.expect("a MILP schedule is a schedule");
        assert!(
            m >= e - EPS,
            "{what} budget {budget}: milp {m} < exhaustive {e}"
        );
        match (lp.lower_bound, cost(&rounding)) {
            (Some(lb), Some(rc)) => {
                assert!(lb <= m + EPS, "{what} budget {budget}: LP {lb} > MILP {m}");
                assert!(
                    m <= rc + EPS,
                    "{what} budget {budget}: MILP {m} > rounding {rc}"
                );
            }
            _ => {
                // Never a wrong answer: "not found", not "impossible".
                for r in [&lp, &rounding] {
                    assert_eq!(r.status, Status::Infeasible, "{what} budget {budget}");
                    assert_eq!(r.proven, Some(false), "{what} budget {budget}");
                }
                rounding_missed = true;
            }
        }
    } else {
        assert_eq!(milp.status, Status::Infeasible, "{what} budget {budget}");
    }
    Case {
        exhaustive: ex,
        milp: mi,
        rounding_missed,
    }
}

#[test]
fn chains_match_the_exhaustive_oracle() {
    for layers in 1..=5 {
        let g = linear(layers);
        let (min_budget, _) = g.min_feasible_budget();
        for budget in min_budget - 1..=checkpoint_all_peak(&g) {
            let case = check_case(&g, budget, &format!("linear-{layers}"));
            assert_eq!(
                case.milp, case.exhaustive,
                "linear-{layers} budget {budget}"
            );
            assert!(!case.rounding_missed, "linear-{layers} budget {budget}");
        }
    }
}

/// A random DAG of 2..=12 nodes: each node reads 0 to 3 earlier nodes (at least one for
/// all but the first); costs 1..=4, sizes 1..=3, `fixed_memory` 0 or 1.
fn random_dag(seed: u64) -> Graph {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = rng.random_range(2..=12usize);
    let nodes = (0..n)
        .map(|v| {
            let mut inputs: Vec<String> = Vec::new();
            if v > 0 {
                let k = rng.random_range(1..=3usize.min(v));
                for _ in 0..k {
                    let u = rng.random_range(0..v);
                    if !inputs.contains(&u.to_string()) {
                        inputs.push(u.to_string());
                    }
                }
            }
            NodeSpec {
                id: v.to_string(),
                cost: rng.random_range(1..=4u32) as f64,
                memory: rng.random_range(1..=3u64),
                inputs,
                kind: None,
                op: None,
            }
        })
        .collect();
    Graph::new(GraphSpec {
        name: Some(format!("dag-{seed}")),
        fixed_memory: rng.random_range(0..=1u64),
        cost_unit: None,
        nodes,
    })
    .unwrap()
}

/// A case where the MILP is strictly worse than the oracle (`milp: null` = infeasible).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Above {
    seed: u64,
    budget: u64,
    exhaustive: f64,
    milp: Option<f64>,
}

/// A case where the MILP has a schedule but the LP rounding (and every baseline) has none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Missed {
    seed: u64,
    budget: u64,
    milp: f64,
}

const ABOVE: &str = "tests/fixtures/milp_above_exhaustive.json";
const MISSED: &str = "tests/fixtures/rounding_without_schedule.json";

/// Compares `found` with the fixture at `path` (rewriting it under `UPDATE_FIXTURES`).
fn compare_fixture<T>(path: &str, found: &[T], cases: usize)
where
    T: Serialize + for<'de> Deserialize<'de> + PartialEq + std::fmt::Debug,
{
    let text = serde_json::to_string_pretty(found).unwrap() + "\n";
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        std::fs::write(path, &text).unwrap();
    }
    let expected: Vec<T> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(
        found == expected.as_slice(),
        "{path} changed ({cases} cases checked); got:\n{text}"
    );
}

#[test]
fn random_dags_match_or_are_listed() {
    let mut above = Vec::new();
    let mut missed = Vec::new();
    let mut cases = 0;
    for seed in 0..200u64 {
        let g = random_dag(seed);
        let (min_budget, _) = g.min_feasible_budget();
        for budget in min_budget - 1..=checkpoint_all_peak(&g) {
            cases += 1;
            let case = check_case(&g, budget, &format!("dag-{seed}"));
            if let Some(e) = case.exhaustive {
                if case.milp.is_none_or(|m| m > e + EPS) {
                    above.push(Above {
                        seed,
                        budget,
                        exhaustive: e,
                        milp: case.milp,
                    });
                }
            }
            if let (true, Some(m)) = (case.rounding_missed, case.milp) {
                missed.push(Missed {
                    seed,
                    budget,
                    milp: m,
                });
            }
        }
    }
    compare_fixture(ABOVE, &above, cases);
    compare_fixture(MISSED, &missed, cases);
}

#[test]
fn time_limit_and_cancellation_are_respected() {
    let g = random_layered(301, 7);
    let budget = (checkpoint_all_peak(&g) as f64 * 0.8) as u64;
    let mut opts = options();
    opts.time_limit = Some(Duration::from_secs(2));
    let began = Instant::now();
    let r = solve::solve(&Instance { graph: &g, budget }, "milp", &opts).unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
    assert_sound(&r, "random_layered(301) with 2 s");
    assert!(matches!(
        r.status,
        Status::Feasible | Status::Optimal | Status::NoSolution
    ));
    if r.status == Status::Feasible {
        assert!(r.message.is_some(), "{:?}", r.details);
    }
    let cancelled = options();
    cancelled.cancel.store(true, Ordering::Relaxed);
    let e = solve::solve(&Instance { graph: &g, budget }, "milp", &cancelled);
    assert!(matches!(e, Err(SolveError::Cancelled)), "{e:?}");
}
