use super::*;
use crate::budget::between_min_and_peak;
use crate::graph::generate::{self, DagShape};
use crate::schedule::{checkpoint_all_peak, simulate};
use crate::solve::solve_exhaustive_unbounded;
use proptest::prelude::*;

/// The schedule of a construction, checked by the simulator: valid and within budget.
fn schedule_cost(graph: &Graph, budget: u64) -> Option<(f64, Constructed)> {
    let built = construct(
        &Instance { graph, budget },
        &SolveOptions::default(),
        |_| {},
    )
    .ok()?;
    let stats = simulate(graph, &from_computes(graph, &built.computes))
        .unwrap_or_else(|e| panic!("{budget}: {e}"));
    assert!(
        stats.peak_memory <= budget,
        "{budget}: {}",
        stats.peak_memory
    );
    Some((stats.total_cost, built))
}

/// On the Fibonacci-like chain (each node reads the two before it) the needs are those
/// worked out by hand: inputs by need − size descending.
#[test]
fn needs_follow_the_sethi_ullman_order() {
    let g = generate::random_dag(&DagShape::dense(1), 0);
    assert_eq!(Needs::of(&g).need, [g.memory(0)]);
    let g = generate::linear(2); // 0 1 | 2 | 3 (2, 1) 4 (3, 0), unit sizes
    let needs = Needs::of(&g);
    assert_eq!(needs.need, [1, 2, 2, 3, 3]);
    // 4 reads 3 (need 3, size 1) and 0 (need 1): 3 first, then 0 beside it.
    assert_eq!(needs.inputs(4), [3, 0]);
    assert_eq!(needs.budget(&g), Some(3));
}

/// On small random DAGs, at every budget from the lower bound to the checkpoint-all
/// peak: each schedule found is valid, fits and costs at least the exhaustive optimum;
/// from the need budget on, one is always found; at the peak it is checkpoint-all.
#[test]
fn small_dags_fit_never_beat_the_oracle_and_keep_the_guarantee() {
    for seed in 0..40 {
        let g = generate::random_dag(&DagShape::sparse(), seed);
        let (lower, _) = g.min_feasible_budget();
        let peak = checkpoint_all_peak(&g);
        let need_budget = Needs::of(&g).budget(&g).unwrap();
        for budget in lower..=peak.max(need_budget) {
            let found = schedule_cost(&g, budget);
            if budget >= need_budget {
                assert!(found.is_some(), "seed {seed} @ {budget} >= {need_budget}");
            }
            let Some((cost, built)) = found else { continue };
            let instance = Instance { graph: &g, budget };
            let optimum = solve_exhaustive_unbounded(&instance, &SolveOptions::default())
                .unwrap()
                .stats
                .expect("a schedule exists where one was constructed")
                .total_cost;
            assert!(cost >= optimum - 1e-9, "seed {seed} @ {budget}");
            if budget == peak {
                assert_eq!(built.computes.len(), g.len(), "seed {seed} at the peak");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Every budget from `K + max need` gets a schedule, on denser DAGs too.
    #[test]
    fn every_budget_from_the_need_bound_gets_a_schedule(
        seed in 0u64..10_000,
        n in 2usize..40,
        slack in 0u64..8,
    ) {
        let g = generate::random_dag(&DagShape::dense(n), seed);
        let need_budget = Needs::of(&g).budget(&g).unwrap();
        prop_assert!(schedule_cost(&g, need_budget + slack).is_some());
    }
}

/// 2,000-node generated graphs at 10%, 25% and 50% of the way from the lower bound to
/// the checkpoint-all peak: a schedule at each, through the solver and the simulator.
#[test]
fn large_graphs_get_a_schedule_at_tight_budgets() {
    let transformer = generate::transformer(&generate::TransformerShape {
        layers: 64,
        ..Default::default()
    })
    .unwrap();
    for g in [generate::random_layered(2_000, 1), transformer] {
        for percent in [10, 25, 50] {
            let budget = between_min_and_peak(&g, f64::from(percent) / 100.0);
            let result =
                crate::solve::solve(&Instance { graph: &g, budget }, NAME, &Default::default())
                    .unwrap();
            let stats = result
                .stats
                .unwrap_or_else(|| panic!("{:?} {percent}%: {:?}", g.name(), result.message));
            assert!(stats.peak_memory <= budget);
        }
    }
}

/// A failure names the need budget and the proven minimum.
#[test]
fn a_failure_says_how_far_the_budget_is() {
    let g = generate::linear(3);
    let (lower, _) = g.min_feasible_budget();
    let instance = Instance {
        graph: &g,
        budget: lower - 1,
    };
    let failure = construct(&instance, &SolveOptions::default(), |_| {}).unwrap_err();
    let reason = failure.reason(&instance);
    assert!(
        reason.contains("from 3 bytes") && reason.contains("never runs out of memory"),
        "{reason}"
    );
    assert!(reason.contains(&format!("below {lower} bytes")), "{reason}");
}

/// Until a construction succeeds, those that pass the work cap share
/// [`UNFOLDED_WORK_SHARE`] caps: on a graph whose unfolding passes the cap, the others are
/// not tried (on a 1,000-node random layered graph, 7 constructions of a million computes
/// each took 50 s of a 60 s solve to say what the first had said).
#[test]
fn constructions_that_unfold_share_one_cap() {
    let g = generate::random_layered(300, 1);
    let budget = between_min_and_peak(&g, 0.05);
    let instance = Instance { graph: &g, budget };
    let failure =
        construct_within(&instance, &SolveOptions::default(), g.len() + 1, |_| {}).unwrap_err();
    let NotFound::Unfolding { tried, .. } = failure else {
        panic!("{failure:?}");
    };
    assert_eq!((tried, VARIANTS.len()), (2, 7));
    assert!(
        failure
            .reason(&instance)
            .contains("2 of its 7 eviction rules tried"),
        "{}",
        failure.reason(&instance)
    );
}

/// The answer is emitted when a construction becomes the best, not after the deadline (a
/// 15x recomputing chain's answer took 0.2 s to emit and replay once the constructions had
/// used the time limit), and the constructions after it stop [`ANSWER_TIMES`] that time
/// before the deadline: where the answer takes longer than that to emit, none runs after
/// the first, and the time limit is recorded as having ended part of the solve. Without a
/// time limit every construction runs, and the answer is the last one emitted.
#[test]
fn the_constructions_leave_time_for_the_answer() {
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    let g = generate::random_layered(300, 1);
    let budget = between_min_and_peak(&g, 0.5);
    let instance = Instance { graph: &g, budget };
    let limited = SolveOptions {
        time_limit: Some(Duration::from_secs(2)),
        ..SolveOptions::default()
    };
    let mut emitted = Vec::new();
    let built = construct(&instance, &limited, |b| {
        std::thread::sleep(Duration::from_millis(400));
        emitted.push(b.computes.clone());
    })
    .unwrap();
    assert_eq!(emitted, [built.computes]);
    assert!(limited.timed_out.load(Ordering::Relaxed));
    let unlimited = SolveOptions::default();
    let mut emitted = Vec::new();
    let built = construct(&instance, &unlimited, |b| emitted.push(b.computes.clone())).unwrap();
    assert!(emitted.len() > 1, "{} emitted", emitted.len());
    assert_eq!(emitted.last(), Some(&built.computes));
    assert!(!unlimited.timed_out.load(Ordering::Relaxed));
}
