//! Tests of Revolve: the table against its closed forms, the schedules against the
//! simulator.

use super::*;
use crate::graph::generate::linear;
use crate::graph::structure::chain;
use std::collections::HashMap;

/// The brute-force recurrence, memoised.
fn t_dp(n: u64, s: u64, memo: &mut HashMap<(u64, u64), u64>) -> u64 {
    if n <= 1 {
        return 0;
    }
    if s == 1 {
        return n * (n - 1) / 2;
    }
    if let Some(&v) = memo.get(&(n, s)) {
        return v;
    }
    // t(n, s) is non-increasing in s; t(n, s) = n - 1 once s >= n - 1.
    let v = if s >= n - 1 {
        n - 1
    } else {
        (1..n)
            .map(|i| i + t_dp(i, s, memo) + t_dp(n - i, s - 1, memo))
            .min()
            .expect("n >= 2")
    };
    memo.insert((n, s), v);
    v
}

#[test]
fn closed_form_equals_the_recurrence() {
    // The recurrence as a table, column by column: T[s][n] for n <= 1000, s <= 50.
    const L: usize = 1000;
    const S: usize = 50;
    let mut prev: Vec<u64> = (0..=L as u64)
        .map(|n| n * n.saturating_sub(1) / 2)
        .collect();
    for s in 1..=S as u64 {
        if s > 1 {
            let mut cur = vec![0u64; L + 1];
            for n in 2..=L {
                if s as usize >= n - 1 {
                    cur[n] = n as u64 - 1;
                    continue;
                }
                cur[n] = (1..n)
                    .map(|i| i as u64 + cur[i] + prev[n - i])
                    .min()
                    .expect("n >= 2");
            }
            prev = cur;
        }
        for (n, &t) in prev.iter().enumerate() {
            assert_eq!(revolve_steps(n as u64, s), Some(t), "t({n}, {s})");
        }
    }
    let mut memo = HashMap::new();
    assert_eq!(t_dp(10, 2, &mut memo), 20);
}

#[test]
fn anchor_values() {
    assert_eq!(revolve_steps(10, 2), Some(20));
    assert_eq!(revolve_steps(100, 4), Some(374));
    assert_eq!(revolve_steps(1000, 6), Some(5284));
    assert_eq!(revolve_steps(1000, 1), Some(499_500));
    assert_eq!(revolve_steps(56, 3), Some(210));
    assert_eq!(revolve_steps(252, 5), Some(1050));
    assert_eq!(revolve_steps(1, 0), Some(0));
    assert_eq!(revolve_steps(0, 0), Some(0));
    assert_eq!(revolve_steps(2, 0), None);
    assert_eq!(revolve_steps(1_000_000, 100).map(|t| t > 0), Some(true));
}

/// Replays a schedule in Revolve's own semantics; returns (forward steps, max snapshots).
fn replay(l: usize, actions: &[RevolveAction]) -> (u64, usize) {
    let mut snaps = std::collections::BTreeSet::new();
    let mut working: Option<usize> = Some(0);
    let mut next_turn = l; // turns run l, l-1, ..., 1
    let (mut steps, mut max_snaps) = (0u64, 0usize);
    for (k, a) in actions.iter().enumerate() {
        match *a {
            RevolveAction::Advance { from, to } => {
                assert_eq!(working, Some(from), "action {k}");
                assert!(
                    to > from && to < next_turn,
                    "advance past the adjoint at {k}"
                );
                steps += (to - from) as u64;
                working = Some(to);
            }
            RevolveAction::Takeshot { state } => {
                assert_eq!(working, Some(state), "action {k}");
                assert!(snaps.insert(state), "snapshot {state} taken twice");
                max_snaps = max_snaps.max(snaps.len());
            }
            RevolveAction::Restore { state } => {
                assert!(
                    snaps.contains(&state),
                    "restore of a missing snapshot {state}"
                );
                working = Some(state);
            }
            RevolveAction::Release { state } => assert!(snaps.remove(&state)),
            RevolveAction::Firsturn { step } | RevolveAction::Youturn { step } => {
                assert_eq!(step, next_turn, "turns out of order at {k}");
                assert_eq!(working, Some(step - 1), "turn without its state at {k}");
                assert_eq!(matches!(a, RevolveAction::Firsturn { .. }), step == l);
                steps += 1;
                next_turn -= 1;
                working = None;
            }
        }
    }
    assert_eq!(next_turn, 0, "not every step reversed");
    assert!(snaps.is_empty());
    (steps, max_snaps)
}

#[test]
fn schedules_attain_the_closed_form() {
    for l in 0..=300usize {
        for s in 0..=12usize {
            let Some(t) = revolve_steps(l as u64, s as u64) else {
                assert!(revolve_actions(l, s).is_none());
                continue;
            };
            let actions = revolve_actions(l, s).unwrap();
            let (steps, snaps) = replay(l, &actions);
            assert_eq!(steps, l as u64 + t, "l = {l}, s = {s}");
            assert!(snaps <= s, "l = {l}, s = {s}: {snaps} snapshots");
        }
    }
    for &(l, s) in &[(1000usize, 6usize), (1000, 50), (5000, 3)] {
        let (steps, snaps) = replay(l, &revolve_actions(l, s).unwrap());
        assert_eq!(
            steps,
            (l as u64) + revolve_steps(l as u64, s as u64).unwrap()
        );
        assert!(snaps <= s);
    }
}

#[test]
fn graph_view_on_linear_graphs() {
    // linear(n) at budget M: the optimum is t(n+1, M-2) + n + 1 (Butt's uniform case,
    // shifted by f_0, which linear graphs do not have).
    for n in 1..=8usize {
        let g = linear(n);
        let c = chain(&g).unwrap();
        for s in 1..=n + 1 {
            let schedule = graph_schedule(&c, s).unwrap();
            let stats = simulate(&g, &schedule).unwrap();
            let t = revolve_steps(n as u64 + 1, s as u64).unwrap();
            assert_eq!(
                stats.total_cost,
                (t + n as u64 + 1) as f64,
                "n = {n}, s = {s}"
            );
            assert!(
                stats.peak_memory <= s as u64 + 2,
                "n = {n}, s = {s}: {}",
                stats.peak_memory
            );
        }
    }
}

#[test]
fn refuses_backward_ops_reading_the_next_output() {
    // Checkmate's Keras rule: g1 reads f2, the next stage's output.
    let g = crate::graph::structure::tests::keras_two_stages();
    let c = chain(&g).unwrap();
    assert!(!homogeneous(&c));
    assert_eq!(
        graph_schedule(&c, 2).err(),
        Some(GraphViewError::NextOutput { stage: 1 })
    );
}

#[test]
fn solver_equals_exhaustive_on_linear_graphs() {
    use crate::solve::{solve, Instance, SolveOptions, Status};
    for n in 1..=5usize {
        let g = linear(n);
        for budget in 1..=(2 * n as u64 + 2) {
            let inst = Instance { graph: &g, budget };
            let ex = solve(&inst, "exhaustive", &SolveOptions::default()).unwrap();
            let rv = solve(&inst, "revolve", &SolveOptions::default()).unwrap();
            match ex.status {
                Status::Optimal => {
                    assert_eq!(rv.status, Status::Optimal, "n = {n}, M = {budget}");
                    assert_eq!(
                        rv.stats.unwrap().total_cost,
                        ex.stats.unwrap().total_cost,
                        "n = {n}, M = {budget}"
                    );
                }
                _ => assert_eq!(rv.status, Status::Infeasible, "n = {n}, M = {budget}"),
            }
        }
    }
}
