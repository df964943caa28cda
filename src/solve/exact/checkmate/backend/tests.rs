//! Tests of the HiGHS backend.

use super::*;
use crate::solve::SolveOptions;

fn controls(relax: bool) -> Controls {
    Controls {
        relax,
        stop: Stop::start(&SolveOptions::default()),
        mip_rel_gap: None,
        max_nodes: None,
        threads: Some(1),
        seed: 0,
        first_order: false,
    }
}

#[test]
fn merges_duplicates_and_solves_mip_and_relaxation() {
    // min -x - y  s.t.  x + y + x <= 3 (i.e. 2x + y <= 3), x, y in {0,1,2}.
    let mut lp = Lp::new();
    let x = lp.add_col(-1.0, 0.0, 2.0, true);
    let y = lp.add_col(-1.0, 0.0, 2.0, true);
    lp.add_row(
        f64::NEG_INFINITY,
        3.0,
        &mut vec![(x, 1.0), (y, 1.0), (x, 1.0)],
    );
    let mip = run(lp.clone(), None, &controls(false)).unwrap();
    assert_eq!(mip.status, RunStatus::Optimal);
    let v = mip.columns.unwrap();
    assert_eq!(-v[x] - v[y], -2.0);
    // Relaxation: x = 0.5, y = 2; its bound is L(y) of its duals, at most the optimum.
    let rel = run(lp, None, &controls(true)).unwrap();
    let v = rel.columns.unwrap();
    assert!((-v[x] - v[y] + 2.5).abs() < 1e-9);
    let bound = rel.bound.unwrap();
    assert!(bound <= -2.5 && bound > -2.5 - 1e-9, "{bound}");
}

#[test]
fn a_run_without_a_verdict_is_unresolved_and_a_failure_is_an_error() {
    use HighsModelStatus as M;
    for status in [M::Unknown, M::ReachedIterationLimit, M::ObjectiveBound] {
        assert_eq!(
            run_status(status, false).unwrap(),
            RunStatus::Unresolved(status)
        );
    }
    assert_eq!(run_status(M::Optimal, true).unwrap(), RunStatus::Optimal);
    assert_eq!(
        run_status(M::ReachedTimeLimit, false).unwrap(),
        RunStatus::TimeLimit
    );
    assert_eq!(
        run_status(M::ReachedInterrupt, true).unwrap(),
        RunStatus::Cancelled
    );
    for status in [M::SolveError, M::PostsolveError, M::ModelError] {
        assert!(matches!(
            run_status(status, false),
            Err(HighsError::Status(s)) if s == status
        ));
    }
}

/// A covering LP: `min Σ c_j x_j` with `Σ_{j ∈ row} x_j >= 1`, `x` in `[0, 1]`.
fn covering(seed: u64) -> Lp {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut lp = Lp::new();
    let cols: Vec<usize> = (0..60)
        .map(|_| lp.add_col(rng.random_range(1.0..10.0), 0.0, 1.0, true))
        .collect();
    for _ in 0..80 {
        let mut terms: Vec<(usize, f64)> = (0..4)
            .map(|_| (cols[rng.random_range(0..cols.len())], 1.0))
            .collect();
        lp.add_row(1.0, f64::INFINITY, &mut terms);
    }
    lp
}

#[test]
fn the_first_order_bound_is_proven_below_the_simplex_optimum() {
    for seed in 0..4 {
        let lp = covering(seed);
        let exact = run(lp.clone(), None, &controls(true)).unwrap();
        assert_eq!(exact.status, RunStatus::Optimal);
        let x = exact.columns.unwrap();
        let optimum: f64 = lp.cost.iter().zip(&x).map(|(c, x)| c * x).sum();
        let (problem, lagrangian) = lp.into_highs(true);
        let pdlp = solve_here(Job {
            problem,
            lagrangian,
            integral: false,
            first_order: true,
            start: None,
            controls: controls(true),
        })
        .unwrap();
        let bound = pdlp.bound.unwrap();
        assert!(bound <= optimum, "seed {seed}: {bound} > {optimum}");
        assert!(
            bound >= optimum * (1.0 - 1e-3),
            "seed {seed}: {bound} far below {optimum}"
        );
    }
}

#[test]
fn waiting_ends_a_grace_after_cancellation_and_returns_an_answer_at_once() {
    let options = SolveOptions::default();
    let stop = Stop::start(&options);
    let (sender, receiver) = std::sync::mpsc::channel::<u8>();
    sender.send(7).unwrap();
    assert_eq!(wait(&receiver, &stop), Ok(7));
    options.cancel.store(true, Ordering::Relaxed);
    let began = Instant::now();
    assert_eq!(
        wait(&receiver, &stop),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout)
    );
    let waited = began.elapsed();
    assert!(waited >= GRACE && waited < GRACE + 10 * POLL, "{waited:?}");
    drop(sender);
}

#[test]
fn infeasible_is_reported_and_threads_may_change() {
    let mut lp = Lp::new();
    let x = lp.add_col(1.0, 0.0, 1.0, true);
    lp.add_row(2.0, f64::INFINITY, &mut vec![(x, 1.0)]);
    for threads in [1, 2, 1] {
        let mut c = controls(false);
        c.threads = Some(threads);
        assert_eq!(
            run(lp.clone(), None, &c).unwrap().status,
            RunStatus::Infeasible
        );
    }
}
