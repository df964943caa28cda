//! Unit tests of the chain DP: the slot cap, the option list each policy allows, and
//! small chains against Revolve's closed form, the simulator and the oracle. The oracle
//! sweeps whose exceptions fixtures list are in `tests/it/chain_dp.rs`.

use super::model::{capped_slots, MAX_TABLE_BYTES};
use super::recurrence::Opt;
use super::{DpChain, Policy, Table};
use crate::graph::generate::{chain_graph, linear};
use crate::graph::structure::chain;
use crate::graph::structure::StageSpec;
use crate::graph::Graph;
use crate::schedule::simulate;
use crate::solve::dp::revolve::revolve_steps;
use crate::solve::{solve, Instance, SolveOptions, Status};
use std::ops::ControlFlow;

/// chain-dp's cost through the driver (`None`: infeasible); its plan fits the budget.
fn dp(g: &Graph, budget: u64) -> Option<f64> {
    let r = solve(
        &Instance { graph: g, budget },
        "chain-dp",
        &SolveOptions::default(),
    )
    .unwrap();
    match r.status {
        s if s.is_optimal() => {
            let stats = r.stats.unwrap();
            assert!(stats.peak_memory <= budget);
            Some(stats.total_cost)
        }
        Status::Infeasible => None,
        other => panic!("chain-dp at M = {budget}: {other:?} {:?}", r.message),
    }
}

fn exhaustive(g: &Graph, budget: u64) -> Option<f64> {
    let r = solve(
        &Instance { graph: g, budget },
        "exhaustive",
        &SolveOptions::default(),
    )
    .unwrap();
    r.status.is_optimal().then(|| r.stats.unwrap().total_cost)
}

/// The table of `g`'s chain with unit slots and `m` slots.
fn table(g: &Graph, policy: Policy, m: usize) -> Table {
    let c = chain(g).unwrap();
    Table::fill(DpChain::new(&c, 1), policy, m, |_| true).unwrap()
}

/// The options of `(a, b)` in the order the DP reads them.
fn options(t: &Table, a: usize, b: usize) -> Vec<Opt> {
    let mut out = Vec::new();
    let _: ControlFlow<()> = t.options(a, b, |def| {
        out.push(def.opt);
        ControlFlow::Continue(())
    });
    out
}

#[test]
fn long_chains_get_fewer_slots() {
    assert_eq!(capped_slots(200, 1000, 8), 1000);
    for entry in [4, 8] {
        let s = capped_slots(2000, 500, entry);
        assert!(
            s < 500 && 2002 * 2001 / 2 * entry * (s + 1) <= MAX_TABLE_BYTES,
            "{s}"
        );
    }
    // rotor's benchmark chain of 1000 stages (integer costs) keeps 500 slots.
    assert_eq!(capped_slots(1000, 500, 4), 500);
}

/// Single precision only where every value is provably an integer below 2^24.
#[test]
fn the_table_is_single_precision_only_for_small_integer_costs() {
    let dp_chain = |fw: f64, l: usize| {
        let stages: Vec<StageSpec> = (0..l)
            .map(|_| StageSpec {
                fw,
                bw: 2.0 * fw,
                x: 1 << 20,
                delta: 1 << 20,
                reads_input: true,
                reads_output: false,
            })
            .collect();
        let g = chain_graph(&stages, (fw, 1 << 20), 0);
        DpChain::new(&chain(&g).unwrap(), 1 << 20)
    };
    // 1001·Σfw + Σbw: 1.0e7 for fw = 10, 2.0e7 (above 2^24) for fw = 20.
    assert_eq!(dp_chain(10.0, 1000).entry_bytes(), 4);
    assert_eq!(dp_chain(20.0, 1000).entry_bytes(), 8);
    assert_eq!(dp_chain(2.5, 10).entry_bytes(), 8);
    assert_eq!(dp_chain(1e6, 100).entry_bytes(), 8);
}

/// On `linear(3)` every backward op reads its own output and no input: each option of
/// `C(0, 4, ·)` appears exactly where its policy allows it, in the fixed order.
#[test]
fn options_follow_the_policy() {
    let g = linear(3);
    let hsm = Policy {
        ck: true,
        keep: false,
    };
    let ism = Policy {
        ck: false,
        keep: true,
    };
    use Opt::*;
    let all = [FAll, Ck(1), Ck(2), CkKeep(2), Ck(3), CkKeep(3)];
    assert_eq!(options(&table(&g, Policy::ALL, 8), 0, 4), all);
    assert_eq!(options(&table(&g, hsm, 8), 0, 4), [Ck(1), Ck(2), Ck(3)]);
    assert_eq!(
        options(&table(&g, ism, 8), 0, 4),
        [FAll, CkKeep(2), CkKeep(3)]
    );
    // One stage: the base case only, whatever the policy.
    for policy in [Policy::ALL, hsm, ism] {
        let t = table(&g, policy, 8);
        for a in 0..4 {
            assert_eq!(options(&t, a, a + 1), [Base], "{policy:?}");
        }
    }
}

/// The plan the table emits has the cost the table predicts, and its peak in the
/// simulator is the emitted peak: the options' needs and costs agree with their events.
#[test]
fn emitted_plans_have_the_predicted_cost_and_peak() {
    let stages = [
        StageSpec {
            fw: 2.0,
            bw: 3.0,
            x: 2,
            delta: 1,
            reads_input: false,
            reads_output: true,
        },
        StageSpec {
            fw: 1.0,
            bw: 1.0,
            x: 1,
            delta: 3,
            reads_input: true,
            reads_output: false,
        },
        StageSpec {
            fw: 4.0,
            bw: 2.0,
            x: 3,
            delta: 2,
            reads_input: true,
            reads_output: true,
        },
    ];
    let g = chain_graph(&stages, (1.0, 2), 0);
    let mut feasible = 0;
    for m in 0..=20 {
        let t = table(&g, Policy::ALL, m);
        if !t.cost().is_finite() {
            assert!(t.min_slots().is_none_or(|s| s > m), "M = {m}");
            continue;
        }
        feasible += 1;
        let (schedule, peak) = t.schedule();
        let stats = simulate(&g, &schedule).unwrap();
        assert_eq!(stats.total_cost, t.cost(), "M = {m}");
        assert_eq!(stats.peak_memory, peak, "M = {m}");
        assert!(peak <= m as u64, "M = {m}");
    }
    assert!(feasible > 10);
}

/// chain-dp against Revolve's closed form on Checkmate's uniform chains;
/// `tests/it/dp_vs_milp.rs` adds the MILP and the oracle through the driver.
#[test]
fn uniform_chains_equal_revolve() {
    for n in 1..=6usize {
        let g = linear(n);
        for budget in 1..=(2 * n as u64 + 3) {
            let revolve = budget
                .checked_sub(2)
                .filter(|&s| s >= 1)
                .and_then(|s| revolve_steps(n as u64 + 1, s))
                .map(|t| (t + n as u64 + 1) as f64);
            assert_eq!(dp(&g, budget), revolve, "linear({n}) at M = {budget}");
        }
    }
}

/// Backward ops reading their input instead, sizes 2, fixed memory 3: chain-dp is the
/// oracle's optimum at every budget.
#[test]
fn input_reading_chains_equal_exhaustive() {
    let stage = StageSpec {
        fw: 1.0,
        bw: 1.0,
        x: 2,
        delta: 2,
        reads_input: true,
        reads_output: false,
    };
    for n in 1..=5usize {
        let g = chain_graph(&vec![stage; n], (1.0, 2), 3);
        for budget in 3..=(3 + 2 * (n as u64 + 3)) {
            assert_eq!(
                dp(&g, budget),
                exhaustive(&g, budget),
                "input-reading n = {n}, M = {budget}"
            );
        }
    }
}

/// The filled table is the fixed point of the recurrence, evaluated plainly: on random
/// chains of 8 to 24 stages (every backward read pattern, next-output reads, costs with
/// fractions), every `C(a, b, m)` equals the least `value(m)` over the options of `(a, b)`
/// read from the table itself. By induction on `b − a` it is then the textbook DP, so the
/// kernel's shortcuts (compressed rows, dominated options skipped, constant tails written
/// over the prefix they lower) change no value.
#[test]
fn the_table_is_the_plain_recurrence() {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    // The last two seeds are long enough for the two-thread fill (`PARALLEL_WORK`).
    for seed in 0..14u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (lengths, budgets) = if seed < 12 {
            (8..=24usize, 20..=70usize)
        } else {
            (50..=60, 250..=300)
        };
        let l = rng.random_range(lengths);
        let stages: Vec<StageSpec> = (0..l)
            .map(|i| StageSpec {
                fw: rng.random_range(1..=40u32) as f64 / 4.0,
                bw: rng.random_range(1..=40u32) as f64 / 4.0,
                x: rng.random_range(1..=8u64),
                delta: rng.random_range(1..=8u64),
                reads_input: i > 0 && rng.random_bool(0.5),
                reads_output: rng.random_bool(0.6),
            })
            .collect();
        let next: Vec<usize> = (1..l).filter(|_| rng.random_bool(0.3)).collect();
        let g = crate::graph::generate::chain_graph_reading(&stages, &next, (2.0, 3), 0);
        let m = rng.random_range(budgets);
        if seed >= 12 {
            let work = super::table::fill_work(l + 1, m);
            assert!(work >= super::table::PARALLEL_WORK, "{work}");
        }
        for policy in [
            Policy::ALL,
            Policy {
                ck: true,
                keep: false,
            },
        ] {
            let t = table(&g, policy, m);
            let n = l + 1;
            let mut finite = 0;
            for len in 1..=n {
                for a in 0..=n - len {
                    let b = a + len;
                    for mm in 0..=m {
                        let mut plain = f64::INFINITY;
                        let _: ControlFlow<()> = t.options(a, b, |def| {
                            plain = plain.min(def.value(mm));
                            ControlFlow::Continue(())
                        });
                        assert_eq!(t.c(a, b, mm), plain, "seed {seed}: C({a}, {b}, {mm})");
                        finite += plain.is_finite() as usize;
                    }
                }
            }
            assert!(
                finite > n * m,
                "seed {seed}: too few feasible entries ({finite})"
            );
        }
    }
}

/// A filler that panics in the middle of an end releases the other filler, which waits for
/// that end's rows: the fill ends with the panic instead of leaving the other thread
/// spinning forever (issue 26, item 8). Scaled down (L = 40, 60 slots, both fillers forced
/// on); whichever thread takes end 20 fails at `C(5, 20, ·)`, and the other one reaches
/// the rows `C(a, 20, ·)`, `a <= 5`, through the options of end 21.
#[test]
fn a_filler_that_panics_releases_the_other() {
    let c = DpChain::new(&chain(&linear(40)).unwrap(), 1);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let fill = std::panic::AssertUnwindSafe(|| {
            Table::fill_failing_at(c, Policy::ALL, 60, (5, 20)).map(|_| ())
        });
        let _ = tx.send(std::panic::catch_unwind(fill).map_err(|p| p.downcast::<String>()));
    });
    match rx.recv_timeout(std::time::Duration::from_secs(30)) {
        Ok(Err(Ok(message))) => assert_eq!(*message, "injected fault at C(5, 20, ·)"),
        Ok(Err(Err(_))) => panic!("the fill panicked with something other than its fault"),
        Ok(Ok(filled)) => panic!("the fill went on past its fault: {filled:?}"),
        Err(_) => panic!("the fill still runs after 30 s: the other filler waits forever"),
    }
}

/// A table whose fill would outlast the time limit is not started, and the answer says so
/// rather than that the limit passed while filling it.
#[test]
fn a_fill_that_would_outlast_the_limit_is_not_started() {
    let g = linear(5000);
    let options = SolveOptions {
        time_limit: Some(std::time::Duration::from_millis(1)),
        ..SolveOptions::default()
    };
    let r = solve(
        &Instance {
            graph: &g,
            budget: 100,
        },
        "chain-dp",
        &options,
    )
    .unwrap();
    assert_eq!(r.status, Status::NoSolution);
    let said = r.message.unwrap_or_default();
    assert!(
        said.contains("5001 stages") && said.contains("not started"),
        "{said}"
    );
}

/// A chain of `L = 20` stages whose sizes are `unit` times small odd factors, plus `i`
/// bytes at stage `i` when `jitter` (so that they have no common divisor).
fn chain_in_units(unit: u64, jitter: bool) -> Graph {
    let stages: Vec<StageSpec> = (0..20u64)
        .map(|i| StageSpec {
            fw: 1.0 + (i % 3) as f64,
            bw: 2.0,
            x: unit * (3 + 2 * (i % 5)) + if jitter { i } else { 0 },
            delta: unit * (1 + 2 * (i % 7)),
            reads_input: true,
            reads_output: false,
        })
        .collect();
    chain_graph(&stages, (1.0, unit), 0)
}

/// What chain-dp claims: optimal among persistent schedules only where its slots round no
/// size; with rounded sizes it says so and claims a feasible plan; the checkpoint-all
/// schedule, whenever it fits, whatever the rounding (at 100% the rounded table has room
/// for no plan at all).
#[test]
fn chain_dp_claims_optimality_only_for_the_sizes_it_did_not_round() {
    let run = |g: &Graph, budget| {
        solve(
            &Instance { graph: g, budget },
            "chain-dp",
            &SolveOptions::default(),
        )
        .unwrap()
    };
    // Sizes in MiB, some a few bytes more: 500 slots round them.
    let rounded = chain_in_units(1 << 20, true);
    let peak = crate::schedule::checkpoint_all_peak(&rounded);
    let at_peak = run(&rounded, peak);
    assert_eq!(at_peak.status, Status::Optimal, "{:?}", at_peak.message);
    assert_eq!(at_peak.stats.unwrap().recompute_cost, 0.0);
    let below = run(&rounded, peak - peak / 100);
    assert_eq!(below.status, Status::Feasible);
    assert!(below.message.unwrap().contains("rounded up to slots of"));
    // Sizes in whole MiB: slots of the sizes' gcd (1 MiB) are fewer than 500 and round
    // nothing, so the claim stands.
    let whole = chain_in_units(1 << 20, false);
    let peak = crate::schedule::checkpoint_all_peak(&whole);
    let below = run(&whole, peak - peak / 100);
    assert_eq!(below.status, Status::OptimalInScope, "{:?}", below.message);
    assert_eq!(below.message, None);
    assert!(below.stats.unwrap().recompute_cost > 0.0);
}

/// The plan is emitted with a stack of its own: at a budget of a few slots it is a tree of
/// sub-problems about as deep as the chain is long, which the recursive emitter walked
/// down at 0.9 KB of stack a level (a 2,300-stage chain would overflow a 2 MiB thread,
/// the server's). A 400-stage chain's plan at 3 slots, on a thread of 64 KiB.
#[test]
fn a_deep_plan_is_emitted_on_a_small_stack() {
    let g = linear(400);
    let t = table(&g, Policy::ALL, 3);
    assert!(t.cost().is_finite());
    let (schedule, peak) = std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn_scoped(s, || t.schedule())
            .unwrap()
            .join()
            .unwrap()
    });
    let stats = simulate(&g, &schedule).unwrap();
    assert_eq!(stats.total_cost, t.cost());
    assert_eq!(stats.peak_memory, peak);
}
