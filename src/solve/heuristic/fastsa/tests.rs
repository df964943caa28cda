use super::grouping::Groups;
use super::sequence::{Model, Sequence};
use super::*;
use crate::graph::generate::{linear, random_dag, random_layered, DagShape};
use crate::schedule::checkpoint_all_peak;
use crate::solve::{solve, solve_exhaustive_unbounded, Status};
use proptest::prelude::*;
use rand::Rng;

/// A course of fixed iteration counts: deterministic for a seed.
fn course(grouped: u64, ungrouped: u64) -> Course {
    Course {
        grouped: Some(Span::Iterations(grouped)),
        ungrouped: Span::Iterations(ungrouped),
    }
}

fn options(seed: u64) -> SolveOptions {
    SolveOptions {
        seed,
        ..SolveOptions::default()
    }
}

/// FastSA from checkpoint-all's order over `course`.
fn anneal(graph: &Graph, budget: u64, seed: u64, course: Course) -> Outcome {
    let instance = Instance { graph, budget };
    let start: Vec<usize> = (0..graph.len()).collect();
    let run = search(&instance, &options(seed), course, &start).unwrap();
    finish(&instance, run, None).unwrap()
}

/// The simulated cost of an outcome's schedule, checked valid and within budget.
fn cost_of(graph: &Graph, budget: u64, outcome: &Outcome) -> Option<f64> {
    match outcome {
        Outcome::Plan(plan) => {
            let stats = simulate(graph, &plan.schedule).expect("a valid schedule");
            assert!(
                stats.peak_memory <= budget,
                "{} > {budget}",
                stats.peak_memory
            );
            Some(stats.total_cost)
        }
        Outcome::Infeasible { proven, .. } => {
            assert!(proven.is_none());
            None
        }
        Outcome::NoSolution { .. } => None,
    }
}

fn model(graph: &Graph, groups: &Groups) -> Model {
    groups.model(graph, 1e-3)
}

#[test]
fn the_tree_keeps_the_simulators_peak_and_cost_through_random_mutations() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for seed in 0..12 {
        let graph = if seed % 3 == 0 {
            random_layered(60, seed)
        } else {
            random_dag(&DagShape::dense(14), seed)
        };
        let groups = Groups::singletons(&graph);
        let model = model(&graph, &groups);
        let mut s = Sequence::new(&model, &(0..graph.len()).collect::<Vec<_>>()).unwrap();
        let mut checked = 0;
        for step in 0..6000 {
            if let Some(m) = s.propose(&mut rng) {
                s.apply(m);
                // Undo some, keep the rest: both paths must leave the tree exact.
                if rng.random_range(0..4) == 0 {
                    s.undo(m);
                }
            }
            if step % 97 == 0 {
                let stats = simulate(&graph, &from_computes(&graph, &s.order()))
                    .unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
                assert_eq!(
                    s.peak() as u64,
                    stats.peak_memory,
                    "seed {seed} step {step}"
                );
                assert_eq!(s.cost(), stats.total_cost, "seed {seed} step {step}");
                checked += 1;
            }
        }
        assert!(checked > 40);
        assert!(
            s.order().len() > graph.len(),
            "seed {seed}: no recomputation was tried"
        );
    }
}

#[test]
fn a_grouped_sequence_expands_to_the_same_cost_and_no_higher_peak() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut grouped = 0;
    for seed in 0..24 {
        let graph = random_dag(&DagShape::sparse(), seed);
        let groups = Groups::find(&graph);
        grouped += graph.len() - groups.len();
        let model = model(&graph, &groups);
        let mut s = Sequence::new(&model, &(0..groups.len()).collect::<Vec<_>>()).unwrap();
        for step in 0..3000 {
            if let Some(m) = s.propose(&mut rng) {
                s.apply(m);
            }
            if step % 150 == 0 {
                let order = groups.expand(&s.order());
                let stats = simulate(&graph, &from_computes(&graph, &order)).unwrap();
                assert!(
                    stats.peak_memory <= s.peak() as u64,
                    "seed {seed} step {step}"
                );
                assert!((s.cost() - stats.total_cost).abs() <= 1e-9 * stats.total_cost);
            }
        }
    }
    assert!(grouped > 10, "{grouped} nodes grouped");
}

#[test]
fn its_schedules_are_valid_and_within_budget_on_random_dags() {
    let mut found = 0;
    for seed in 0..40 {
        let graph = random_dag(&DagShape::dense(12), seed);
        let (low, _) = graph.min_feasible_budget();
        let peak = checkpoint_all_peak(&graph);
        for budget in [low, (low + peak) / 2, peak] {
            let outcome = anneal(&graph, budget, seed, course(20_000, 20_000));
            found += usize::from(cost_of(&graph, budget, &outcome).is_some());
        }
    }
    // Every checkpoint-all budget fits; most tighter ones too.
    assert!(found >= 80, "{found} of 120");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Never below the exhaustive oracle, and finds a schedule wherever the oracle's
    /// optimum is at most one recomputation above Σ c (not a claim of optimality: the
    /// search is short).
    #[test]
    fn never_cheaper_than_the_oracle(n in 2usize..=10, seed in any::<u64>(), at in 0.0f64..=1.0) {
        let graph = random_dag(&DagShape::dense(n), seed);
        let (low, _) = graph.min_feasible_budget();
        let peak = checkpoint_all_peak(&graph);
        let budget = low + ((peak - low) as f64 * at) as u64;
        let instance = Instance { graph: &graph, budget };
        let oracle = solve_exhaustive_unbounded(&instance, &SolveOptions::default()).unwrap();
        let outcome = anneal(&graph, budget, seed, course(5_000, 5_000));
        if let Some(cost) = cost_of(&graph, budget, &outcome) {
            prop_assert_eq!(oracle.status, Status::Optimal);
            let optimum = oracle.stats.unwrap().total_cost;
            prop_assert!(cost >= optimum - 1e-9, "{} < optimum {}", cost, optimum);
        }
    }
}

#[test]
fn it_reaches_the_chain_optimum_on_a_linear_graph() {
    // linear(8): 17 unit nodes; chain-dp is optimal there (persistent schedules are).
    let graph = linear(8);
    let peak = checkpoint_all_peak(&graph);
    for budget in [peak - 2, peak - 4] {
        let instance = Instance {
            graph: &graph,
            budget,
        };
        let dp = solve(&instance, "chain-dp", &SolveOptions::default()).unwrap();
        let optimum = dp.stats.unwrap().total_cost;
        let outcome = anneal(&graph, budget, 1, course(200_000, 200_000));
        assert_eq!(
            cost_of(&graph, budget, &outcome),
            Some(optimum),
            "budget {budget}"
        );
    }
}

#[test]
fn a_seed_fixes_the_schedule() {
    let graph = random_layered(100, 9);
    let budget = checkpoint_all_peak(&graph) * 85 / 100;
    let schedule = |seed| match anneal(&graph, budget, seed, course(30_000, 30_000)) {
        Outcome::Plan(plan) => Some(plan.schedule),
        _ => None,
    };
    let first = schedule(4);
    assert!(first.is_some());
    assert_eq!(first, schedule(4));
    assert_ne!(first, schedule(5));
}

#[test]
fn improve_never_returns_worse_than_its_start() {
    for seed in 0..16 {
        let graph = random_dag(&DagShape::dense(12), seed);
        let (low, _) = graph.min_feasible_budget();
        let budget = (low + checkpoint_all_peak(&graph)) / 2;
        let instance = Instance {
            graph: &graph,
            budget,
        };
        let Some(start) = solve(&instance, "exhaustive", &SolveOptions::default())
            .unwrap()
            .schedule
        else {
            continue;
        };
        let start = start.resolve(&graph).unwrap();
        let start_cost = simulate(&graph, &start).unwrap().total_cost;
        let short = SolveOptions {
            time_limit: Some(Duration::from_millis(30)),
            seed,
            ..SolveOptions::default()
        };
        let cost = cost_of(&graph, budget, &improve(&instance, &short, &start).unwrap());
        // The optimum as start: nothing is cheaper, so the start comes back.
        assert_eq!(cost, Some(start_cost), "seed {seed}");
    }
    // From a costlier fitting start (the first baseline that fits) it gets cheaper.
    let graph = random_layered(60, 2);
    let budget = checkpoint_all_peak(&graph) * 9 / 10;
    let instance = Instance {
        graph: &graph,
        budget,
    };
    let start = ["chen-sqrt", "chen-greedy", "dtr", "recompute-all"]
        .iter()
        .map(|name| solve(&instance, name, &SolveOptions::default()).unwrap())
        .find(|r| r.schedule.is_some())
        .expect("a baseline fits");
    let start_cost = start.stats.unwrap().total_cost;
    let start = start.schedule.unwrap().resolve(&graph).unwrap();
    let run = search(
        &instance,
        &options(0),
        Course {
            grouped: None,
            ungrouped: Span::Iterations(200_000),
        },
        &start
            .events
            .iter()
            .filter_map(|e| match *e {
                Event::Compute(v) => Some(v),
                _ => None,
            })
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let cost = cost_of(
        &graph,
        budget,
        &finish(&instance, run, Some(&start)).unwrap(),
    )
    .unwrap();
    assert!(cost < start_cost, "{cost} >= {start_cost}");
}

#[test]
fn the_registered_solver_spends_its_time_limit_and_answers_within_budget() {
    let graph = random_layered(120, 1);
    let budget = checkpoint_all_peak(&graph) * 9 / 10;
    let options = SolveOptions {
        time_limit: Some(Duration::from_millis(300)),
        ..SolveOptions::default()
    };
    let r = solve(
        &Instance {
            graph: &graph,
            budget,
        },
        NAME,
        &options,
    )
    .unwrap();
    assert_eq!(r.status, Status::Feasible, "{:?}", r.message);
    assert!(r.stats.unwrap().peak_memory <= budget);
}

#[test]
fn without_a_fitting_sequence_it_names_the_lowest_peak() {
    // a (2 bytes) feeds b and c (1 byte each), d reads b and c. The trivial bound is 3
    // (any one node with its inputs), but b or c is computed beside a while the other is
    // alive (or a is recomputed beside it): no schedule peaks below 4.
    let node = super::grouping::tests::node;
    let graph = Graph::new(crate::graph::GraphSpec {
        nodes: vec![
            node("a", 2, &[]),
            node("b", 1, &["a"]),
            node("c", 1, &["a"]),
            node("d", 1, &["b", "c"]),
        ],
        ..crate::graph::GraphSpec::default()
    })
    .unwrap();
    assert_eq!(graph.min_feasible_budget().0, 3);
    match anneal(&graph, 3, 0, course(2_000, 2_000)) {
        Outcome::Infeasible { proven, reason, .. } => {
            assert!(proven.is_none());
            assert!(
                reason.contains("the lowest peak it reached was 4 bytes"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(cost_of(&graph, 4, &anneal(&graph, 4, 0, course(2_000, 2_000))).is_some());
}

/// A work limit counts iterations: with it the time limit is only a cap, the run does that
/// many iterations (a phase ends at the first poll past its share, every [`POLL_EVERY`]),
/// and the same seed gives the same schedule.
#[test]
fn a_work_limit_counts_iterations_and_repeats() {
    let graph = random_layered(80, 5);
    let budget = checkpoint_all_peak(&graph) * 3 / 4;
    let instance = Instance {
        graph: &graph,
        budget,
    };
    let with = |work: u64| SolveOptions {
        work_limit: Some(work),
        time_limit: Some(Duration::from_secs(600)),
        seed: 11,
        ..SolveOptions::default()
    };
    let iterations = |outcome: &Outcome| match outcome {
        Outcome::Plan(crate::solve::Plan {
            details: Some(Details::FastSa(d)),
            ..
        }) => d.iterations,
        other => panic!("a FastSA plan, got {other:?}"),
    };
    let first = FastSa.solve(&instance, &with(30_000)).unwrap();
    let again = FastSa.solve(&instance, &with(30_000)).unwrap();
    let near = |got: u64, work: u64| got >= work && got <= work + 2 * POLL_EVERY;
    assert!(near(iterations(&first), 30_000), "{}", iterations(&first));
    let (Outcome::Plan(a), Outcome::Plan(b)) = (&first, &again) else {
        unreachable!()
    };
    assert_eq!(a.schedule, b.schedule);
    let more = FastSa.solve(&instance, &with(60_000)).unwrap();
    assert!(near(iterations(&more), 60_000), "{}", iterations(&more));
}

/// A time limit that passes before the first sequence is built is `no_solution`, saying
/// so: no peak was reached (it named i64::MAX bytes as the lowest peak).
#[test]
fn a_time_limit_before_the_first_sequence_names_no_peak() {
    let graph = random_layered(200, 2);
    let instance = Instance {
        graph: &graph,
        budget: checkpoint_all_peak(&graph),
    };
    let options = SolveOptions {
        time_limit: Some(Duration::ZERO),
        ..SolveOptions::default()
    };
    for grouped in [true, false] {
        let start: Vec<usize> = (0..graph.len()).collect();
        let run = search(&instance, &options, Course::of(&options, grouped), &start).unwrap();
        assert_eq!(run.iterations, 0);
        match finish(&instance, run, None).unwrap() {
            Outcome::NoSolution { reason, .. } => {
                assert!(reason.contains("before its first iteration"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}

/// A cancelled solve ends in its set-up, as `SolveError::Cancelled` (on a graph with a group
/// of 20,000 members, whose model was quadratic in them).
#[test]
fn a_cancel_ends_the_set_up() {
    let graph = super::grouping::tests::fan_out(20_000);
    let instance = Instance {
        graph: &graph,
        budget: checkpoint_all_peak(&graph),
    };
    let options = SolveOptions::default();
    options
        .cancel
        .store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(matches!(
        FastSa.solve(&instance, &options),
        Err(SolveError::Cancelled)
    ));
}
