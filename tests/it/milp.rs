//! The Checkmate MILP, its LP bound and the LP rounding, checked against the exhaustive
//! oracle and the simulator (through `solve::solve`, which re-simulates every schedule).
//!
//! Random DAGs: where the MILP (frontier-advancing stages in solver order) is strictly
//! worse than the exhaustive optimum (any order), the case is listed in
//! `tests/fixtures/milp_above_exhaustive.json`, and where the LP rounding finds no schedule
//! but the MILP does, in `tests/fixtures/rounding_without_schedule.json`; the test
//! recomputes both lists (on a fast subset of the seeds unless `REMAT_FULL=1`) and compares.
//! `REMAT_BLESS=1 cargo test --test it milp::` rewrites them.

use crate::common;

use remat::graph::generate::{linear, random_dag, random_layered, DagShape};
use remat::graph::Graph;
use remat::schedule::checkpoint_all_peak;
use remat::solve::{self, Instance, Scope, SolveError, SolveOptions, SolveResult, Status};
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
    assert!(milp.status.is_optimal(), "{:?}", milp.message);
    assert_eq!(cost(&milp), Some(26.0));
    let lp = run(&g, 4, "lp-bound");
    assert_eq!(lp.scope, Some(Scope::LowerBound));
    let bound = lp.lower_bound.expect("an LP bound");
    // Checkmate's relaxation gives 22; remat's FREE rows (one per factor of the product,
    // `checkmate/mod.rs`) cut it to 23.
    assert!((bound - 23.0).abs() < EPS, "LP bound {bound}");
    // The MILP result carries a bound at least as strong as the LP's, and, being optimal,
    // within the default relative gap (1e-4) of its cost.
    let milp_bound = milp.lower_bound.expect("the MILP's bound");
    assert!(
        (23.0 - EPS..=26.0 + EPS).contains(&milp_bound),
        "MILP bound {milp_bound}"
    );
    assert!(milp.gap.is_some_and(|gap| gap <= 1e-4), "{:?}", milp.gap);
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
        assert!(r.status.is_optimal(), "budget {budget}: {:?}", r.message);
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
    // lp-bound's schedule is the rounding's (the same rounding of the same LP).
    assert_eq!(cost(&lp), cost(&rounding), "{what} budget {budget}");
    if ex.is_none() {
        for r in [&milp, &lp, &rounding] {
            assert_eq!(r.status, Status::Infeasible, "{what} budget {budget}");
        }
    }
    if let Some(m) = mi {
        assert!(milp.status.is_optimal(), "{what} budget {budget}");
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
        // HiGHS proved that no stage schedule in solver order fits.
        assert_eq!(milp.status, Status::Infeasible, "{what} budget {budget}");
        // Proven for every schedule only below the trivial bound; above it, for the
        // frontier-advancing schedules in solver order only.
        let below = budget < g.min_feasible_budget().0;
        assert_eq!(milp.proven, Some(below), "{what} budget {budget}");
        if !below {
            assert_eq!(milp.proven_in_scope, Some(true), "{what} budget {budget}");
            assert_eq!(
                milp.scope,
                Some(Scope::OptimalForOrder),
                "{what} budget {budget}"
            );
        }
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

/// Seeds of the random-DAG sweep ([`DagShape::sparse`]); the fast subset keeps one seed in
/// `KEEP_ONE_IN`, enough to meet every kind of listed case (asserted below).
const SEEDS: u64 = 200;
const KEEP_ONE_IN: usize = 4;

const ABOVE_ABOUT: &str = "Random DAGs (DagShape::sparse, seeds 0..200) at every budget from one below \
    the trivial bound to the checkpoint-all peak where the MILP (frontier-advancing stages in solver \
    order) is strictly above the exhaustive optimum (any order); milp null: no stage schedule fits.";
const MISSED_ABOUT: &str =
    "The cases of the same sweep where the MILP has a schedule but LP rounding \
    (after its retries at lower budgets) and every baseline have none.";

#[test]
fn random_dags_match_or_are_listed() {
    let seeds = common::subset(0..SEEDS, KEEP_ONE_IN);
    let mut above = Vec::new();
    let mut missed = Vec::new();
    let mut cases = 0;
    let mut equal = 0;
    for &seed in &seeds {
        let g = random_dag(&DagShape::sparse(), seed);
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
                } else {
                    equal += 1;
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
    // Every path of `check_case` is taken, in the fast subset too.
    assert!(equal > 0, "no case where the MILP meets the optimum");
    assert!(
        above.iter().any(|a| a.milp.is_some()) && above.iter().any(|a| a.milp.is_none()),
        "the sweep lacks a MILP above the optimum or a MILP without a schedule: {above:?}"
    );
    assert!(!missed.is_empty(), "no case where the rounding misses");
    let in_subset = |seed: &u64| seeds.contains(seed);
    common::check_fixture(
        "milp_above_exhaustive.json",
        ABOVE_ABOUT,
        cases,
        above,
        |c: &Above| in_subset(&c.seed),
    );
    common::check_fixture(
        "rounding_without_schedule.json",
        MISSED_ABOUT,
        cases,
        missed,
        |c: &Missed| in_subset(&c.seed),
    );
}

#[test]
fn time_limit_and_cancellation_are_respected() {
    let g = random_layered(301, 7);
    let budget = (checkpoint_all_peak(&g) as f64 * 0.8) as u64;
    let mut opts = options();
    let limit = Duration::from_secs(2);
    opts.time_limit = Some(limit);
    let began = Instant::now();
    let r = solve::solve(&Instance { graph: &g, budget }, "milp", &opts).unwrap();
    // HiGHS runs are abandoned one second past the deadline (README); the rest is the
    // slack a loaded debug build may need to simulate and write the answer, as in
    // tests/it/solve_limits.rs.
    let promised = limit + Duration::from_secs(1);
    let margin = Duration::from_secs(3);
    assert!(
        began.elapsed() <= promised + margin,
        "{:?} with a {limit:?} limit",
        began.elapsed()
    );
    assert_sound(&r, "random_layered(301) with 2 s");
    assert!(matches!(
        r.status,
        Status::Feasible | Status::Optimal | Status::OptimalInScope | Status::NoSolution
    ));
    if r.status == Status::Feasible {
        assert!(r.message.is_some(), "{:?}", r.details);
    }
    let cancelled = options();
    cancelled.cancel.store(true, Ordering::Relaxed);
    let e = solve::solve(&Instance { graph: &g, budget }, "milp", &cancelled);
    assert!(matches!(e, Err(SolveError::Cancelled)), "{e:?}");
}

/// Issue 15, item 5: on these graphs (sizes in bytes, a memory unit of 4) HiGHS's
/// solution met the memory rows only within its tolerance, and its schedule peaked
/// 2 bytes over the budget (an `error` result). The MILP now solves again with the budget
/// rows tightened by the tolerance's reach (`details.repair` says so) and returns a
/// schedule within the budget. About 3 minutes each in a debug build, so ignored; CI runs
/// it (`cargo test -- --ignored full_`).
#[test]
#[ignore = "about 10 minutes in a debug build: cargo test -- --ignored full_ (CI runs it)"]
fn full_milp_schedules_fit_although_highs_meets_memory_rows_within_tolerance() {
    for (seed, share) in [(15, "60%"), (4, "50%"), (8, "60%")] {
        let g = random_layered(40, seed);
        let budget = share
            .parse::<remat::budget::Budget>()
            .unwrap()
            .resolve(&g)
            .unwrap();
        let r = run(&g, budget, "milp");
        let what = format!("random-layered 40 seed {seed} at {share}");
        assert_sound(&r, &what);
        assert!(
            matches!(
                r.status,
                Status::Optimal | Status::OptimalInScope | Status::Feasible
            ),
            "{what}: {:?} {:?}",
            r.status,
            r.message
        );
    }
}

/// The admission check: a model over `memory_limit` is refused before it is built, with
/// the figures, by every solver of the Checkmate family; within the limit it is solved.
#[test]
fn models_over_the_memory_limit_are_refused_before_they_are_built() {
    let g = random_layered(1500, 1);
    let size = solve::model_size(&g);
    assert!(size.columns > 1_000_000, "{size:?}");
    for solver in ["milp", "lp-bound", "lp-rounding"] {
        let options = SolveOptions {
            memory_limit: Some(size.bytes - 1),
            ..options()
        };
        let began = Instant::now();
        let budget = checkpoint_all_peak(&g) * 7 / 10;
        let err = solve::solve(&Instance { graph: &g, budget }, solver, &options).unwrap_err();
        let SolveError::TooLarge {
            needed,
            limit,
            what,
            ..
        } = &err
        else {
            panic!("{solver}: {err}");
        };
        assert_eq!((*needed, *limit), (size.bytes, size.bytes - 1));
        assert!(what.contains("columns"), "{what}");
        assert!(err.to_string().contains(&limit.to_string()), "{err}");
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{solver} refused late"
        );
    }
    let small = linear(8);
    let options = SolveOptions {
        memory_limit: Some(solve::model_size(&small).bytes),
        ..options()
    };
    let r = solve::solve(
        &Instance {
            graph: &small,
            budget: 4,
        },
        "milp",
        &options,
    )
    .unwrap();
    assert_eq!(r.status, Status::OptimalInScope);
}

/// Sizes near 1e14 and 1e15 bytes (gcd 1) beside sizes of a few bytes: HiGHS's presolve died
/// of an integer division (SIGFPE, the whole process) on the first, and refused the second
/// ("HiGHS rejected the model"). The MILP's memory rows are now divided by a power of two
/// that keeps them within 2^31 units: both solve, and the schedules fit.
#[test]
fn sizes_near_the_byte_limit_neither_crash_nor_break_the_milp() {
    for (file, budget) in [
        ("milp_sizes_near_1e14.json", 1_254_566_831_649_382),
        ("milp_sizes_near_1e15.json", 6_192_449_487_634_432),
    ] {
        let g = common::load(&common::root().join("tests/fixtures").join(file));
        let oracle = remat::solve::solve(
            &Instance { graph: &g, budget },
            "exhaustive",
            &SolveOptions::default(),
        )
        .unwrap();
        let optimum = oracle.stats.unwrap().total_cost;
        for solver in ["milp", "auto"] {
            let r = common::solve_on_one_thread(&g, budget, solver, Some(20));
            let stats = r
                .stats
                .unwrap_or_else(|| panic!("{file} {solver}: {:?}", r.message));
            assert!(stats.peak_memory <= budget, "{file} {solver}");
            assert!(stats.total_cost >= optimum - 1e-9, "{file} {solver}");
        }
    }
}
