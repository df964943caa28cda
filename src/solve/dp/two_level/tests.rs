//! Tests of two-level: the model against the simulator on uniform chains (makespan, stalls,
//! forward steps), the fallback to Revolve, the values of Figure 3, and the paper's claim
//! `T_async <= T_revolve` as a property.

use super::model::{paper_time, recompute_factor, useful_snapshots};
use super::schedule::two_level_schedule;
use super::*;
use crate::graph::generate::linear;
use crate::graph::structure::chain;
use crate::graph::{Graph, Storage};
use crate::graph::{GraphError, GraphSpec, NodeKind};
use crate::schedule::simulate;
use crate::solve::details::{Intervals, StepTimes};
use crate::solve::{find, solve, SolveResult, Status};
use crate::solve::{Instance, SolveError, SolveOptions};
use proptest::prelude::*;

/// Checkmate's linear graph of `layers` stages with forward cost `t_a`, backward cost
/// `t_b`, loss cost 1, unit sizes, and `storage`.
fn chain_graph(layers: usize, t_a: f64, t_b: f64, storage: &str) -> Result<Graph, GraphError> {
    let mut spec: GraphSpec = linear(layers).to_spec();
    for node in &mut spec.nodes {
        node.cost = match node.kind {
            Some(NodeKind::Forward) => t_a,
            Some(NodeKind::Backward) => t_b,
            _ => 1.0,
        };
    }
    Ok(Graph::new(spec)?.with_storage(Some(serde_json::from_str(storage).unwrap())))
}

fn run(graph: &Graph, budget: u64, solver: &str) -> SolveResult {
    solve(
        &Instance { graph, budget },
        solver,
        &SolveOptions::default(),
    )
    .unwrap()
}

fn detail(r: &SolveResult, key: &str) -> serde_json::Value {
    serde_json::to_value(r.details.as_ref().unwrap()).unwrap()[key].clone()
}

#[test]
fn without_stalls_the_simulated_makespan_is_the_model() {
    // T_A = 2, T_B = 3, T_T = 7: I = 4; 300 stages + the loss = 301 steps make 76
    // intervals, 73 bases stored. Budget 9 states: s = 5 capped to I − 1 = 3.
    let g = chain_graph(300, 2.0, 3.0, r#"{"transfer_time": 7}"#).unwrap();
    let r = run(&g, 9, "two-level");
    assert_eq!(r.status, Status::Feasible);
    assert_eq!(detail(&r, "mode"), "two-level");
    let stats = r.stats.as_ref().unwrap();
    let tiers = stats.tiers.as_ref().unwrap();
    assert!(tiers.stalls.is_empty());
    assert!(stats.peak_memory <= 9);
    assert_eq!((tiers.stores, tiers.loads), (73, 73));
    let intervals = Intervals::new(301, 4);
    // Forward steps: the sweep 75·4, the last interval t(1, 3) = 0, 75 intervals of
    // t(4, 3) = 3: 525 forward ops at 2, 300 backward at 3, the loss at 1.
    assert_eq!(intervals.advances(3), Some(525));
    let model = 525.0 * 2.0 + 300.0 * 3.0 + 1.0;
    assert_eq!(detail(&r, "t_async"), model);
    assert_eq!(tiers.makespan, model);
    assert_eq!(stats.total_cost, model);
    // The paper's figure leaves out the sweep: n·R(4, 3)·T_A + n·T_B, R = 1.
    assert_eq!(detail(&r, "t_async_paper"), 301.0 * 2.0 + 301.0 * 3.0);
}

#[test]
fn slow_reads_stall_and_the_makespan_exceeds_the_model() {
    // Same chain, reads take 25 > one interval's reversal 3·2 + 4·3 = 18: each of the
    // 73 loads, issued as the interval after its own starts, arrives 7 late. Still
    // faster than plain Revolve: 1951 + 73·7 = 2462 < 1039·2 + 901 = 2979.
    let g = chain_graph(300, 2.0, 3.0, r#"{"write_time": 7, "read_time": 25}"#).unwrap();
    let r = run(&g, 9, "two-level");
    assert_eq!(detail(&r, "mode"), "two-level");
    let stats = r.stats.as_ref().unwrap();
    let tiers = stats.tiers.as_ref().unwrap();
    let model = detail(&r, "t_async").as_f64().unwrap();
    assert!(tiers.makespan > model);
    assert_eq!(tiers.compute_time, model);
    assert_eq!(tiers.makespan, model + tiers.stall_time);
    assert_eq!(tiers.stalls.len(), 73);
    assert!(tiers.stalls.iter().all(|s| s.time == 7.0));
    assert_eq!(tiers.makespan, 2462.0);
    assert!(r
        .message
        .as_ref()
        .unwrap()
        .contains("73 load(s) arrived late"));
    let a = assess(&g, 9).unwrap();
    assert!(!a.loads_hidden);
    assert_eq!(a.predicted_stall, tiers.stall_time);
    // Reads of 40 stall 22 per interval: 1951 + 73·22 = 3557, slower than plain
    // Revolve, which the solver then runs.
    let g = chain_graph(300, 2.0, 3.0, r#"{"write_time": 7, "read_time": 40}"#).unwrap();
    let r = run(&g, 9, "two-level");
    assert_eq!(detail(&r, "mode"), "revolve");
    assert_eq!(r.stats.unwrap().total_cost, 2979.0);
}

#[test]
fn short_chains_fall_back_to_revolve() {
    // 10 stages, I = 4: 3 intervals, nothing to store (the paper's fallback).
    let g = chain_graph(10, 1.0, 1.0, r#"{"transfer_time": 4}"#).unwrap();
    let a = assess(&g, 8).unwrap();
    assert_eq!(a.intervals.stored(), 0);
    assert!(
        !a.helps && a.verdict.contains("too few to store"),
        "{}",
        a.verdict
    );
    let r = run(&g, 8, "two-level");
    assert_eq!(detail(&r, "mode"), "revolve");
    let revolve = run(&g, 8, "revolve");
    assert_eq!(
        r.stats.unwrap().total_cost,
        revolve.stats.unwrap().total_cost
    );
}

#[test]
fn the_schedule_makes_the_forward_steps_the_closed_form_counts() {
    // Independent of the solver: build the schedule for n = 200 steps, s = 100 and
    // count its forward computes in the simulator against Intervals::advances (the
    // figure-3 "scheme" column), for the table's three intervals.
    let g = chain_graph(199, 1.0, 1.0, r#"{"transfer_time": 1}"#).unwrap();
    let chain = chain(&g).unwrap();
    for i in [8, 64, 30] {
        let intervals = Intervals::new(200, i);
        let s = 100.min(useful_snapshots(i));
        let schedule = two_level_schedule(&chain, &intervals, s as usize, || Ok(())).unwrap();
        let stats = simulate(&g, &schedule).unwrap();
        let forward: u32 = chain
            .stages
            .iter()
            .map(|st| stats.computes[st.forward])
            .sum();
        assert_eq!(Some(forward as u64), intervals.advances(s), "I = {i}");
    }
}

#[test]
fn backward_ops_that_read_their_input_work_too() {
    // Rewire linear(120) so that G_j reads x_{j−1} (its stage's input) instead of x_j:
    // the turn of step j then computes G_j, from the same base states.
    let mut spec = linear(120).to_spec();
    // Forward ops are nodes 0..120 (x_j is node j − 1), the loss 120, then G_120..G_1.
    for node in spec
        .nodes
        .iter_mut()
        .filter(|n| n.kind == Some(NodeKind::Backward))
    {
        let (forward, grad): (Vec<String>, Vec<String>) = node
            .inputs
            .drain(..)
            .partition(|u| u.parse::<usize>().unwrap() < 120);
        let i: usize = forward[0].parse().unwrap();
        node.inputs = grad;
        if i >= 1 {
            node.inputs.push((i - 1).to_string());
        }
    }
    let g = Graph::new(spec)
        .unwrap()
        .with_storage(Some(Storage::per_copy(3.0).unwrap()));
    assert!(chain(&g).unwrap().stages[5].reads_input);
    let r = run(&g, 8, "two-level");
    assert_eq!(detail(&r, "mode"), "two-level");
    let stats = r.stats.as_ref().unwrap();
    assert!(stats.peak_memory <= 8);
    assert_eq!(
        stats.tiers.as_ref().unwrap().makespan,
        detail(&r, "t_async")
    );
}

#[test]
fn figure_3_anchor_values() {
    // Kukreja et al.'s Figure 3: R(1024, 100) = 1947/1024, R(I, 100) = 1 for I <= 101.
    assert_eq!(recompute_factor(1024, 100), Some(1947.0 / 1024.0));
    assert_eq!(recompute_factor(8, 100), Some(1.0));
    assert_eq!(recompute_factor(101, 100), Some(1.0));
    let rows = figure3(100, &[8, 64, 1024], &[10, 1_000, 10_000]).unwrap();
    // Revolve grows with n; the paper's two-level factor does not.
    assert_eq!(rows[0].revolve, 1.0);
    assert_eq!(rows[2].revolve, 24_748.0 / 10_000.0);
    assert_eq!(rows[2].paper, vec![1.0, 1.0, 1947.0 / 1024.0]);
    assert_eq!(rows[1].paper[..2], [1.0, 1.0]);
    // The scheme with its sweep: I = 8 at n = 10^4 makes 9992 + 7 + 1249·7 = 18742.
    assert_eq!(rows[2].scheme[0], Some(18_743.0 / 10_000.0));
    assert_eq!(rows[0].scheme, vec![None, None, None]);
}

#[test]
fn unsupported_graphs_say_why() {
    let no_tier = linear(20);
    let e = assess(&no_tier, 10).unwrap_err().to_string();
    assert!(e.contains("storage"), "{e}");
    let mut spec = linear(3).to_spec();
    spec.nodes[2].inputs.push("0".into());
    let branched = Graph::new(spec)
        .unwrap()
        .with_storage(Some(Storage::per_copy(1.0).unwrap()));
    let e = find("two-level")
        .unwrap()
        .solve(
            &Instance {
                graph: &branched,
                budget: 100,
            },
            &SolveOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(e, SolveError::Unsupported { .. }), "{e}");
    // Backward ops reading both their input and their output: no Revolve turn.
    let mut spec = linear(6).to_spec();
    for node in spec.nodes.iter_mut().skip(8) {
        let i: usize = node
            .inputs
            .iter()
            .map(|u| u.parse::<usize>().unwrap())
            .min()
            .unwrap();
        if (1..6).contains(&i) {
            node.inputs.push((i - 1).to_string());
        }
    }
    let g = Graph::new(spec)
        .unwrap()
        .with_storage(Some(Storage::per_copy(1.0).unwrap()));
    let e = assess(&g, 10).unwrap_err();
    assert!(
        matches!(e, SolveError::Unsupported { .. }) && e.to_string().contains("reads both"),
        "{e}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The paper's claim: R(I, s) <= R(n, s) for every n >= I, so
    /// T_async <= T_revolve in its model.
    #[test]
    fn paper_t_async_never_exceeds_t_revolve(
        s in 1u64..200, i in 1u64..3000, extra in 0u64..1_000_000,
        t_a in 0.1f64..10.0, t_b in 0.1f64..10.0,
    ) {
        let n = i + extra;
        let times = StepTimes { forward: t_a, backward: t_b, loss: 0.0 };
        let (ri, rn) = (recompute_factor(i, s).unwrap(), recompute_factor(n, s).unwrap());
        prop_assert!(ri <= rn);
        prop_assert!(paper_time(&times, n, ri) <= paper_time(&times, n, rn));
    }

    /// On uniform chains: the peak fits the fast budget, the solver is never slower
    /// than plain Revolve, and when it runs two-level the simulated makespan is the
    /// model's T_async plus the stalls, which happen exactly when a load outlasts an
    /// interval's reversal.
    #[test]
    fn two_level_fits_and_matches_its_model(
        layers in 30usize..400, t_a in 1u32..4, t_b in 1u32..6,
        t_t in 1u32..60, budget in 5u64..24,
    ) {
        let storage = format!(r#"{{"transfer_time": {t_t}}}"#);
        let g = chain_graph(layers, t_a as f64, t_b as f64, &storage).unwrap();
        let r = run(&g, budget, "two-level");
        let revolve = run(&g, budget, "revolve");
        prop_assert_eq!(r.status == Status::Feasible, revolve.status == Status::Optimal);
        let Some(stats) = r.stats.as_ref() else { return Ok(()) };
        prop_assert!(stats.peak_memory <= budget);
        let makespan = detail(&r, "simulated_makespan").as_f64().unwrap();
        prop_assert_eq!(detail(&r, "mode") == "two-level", assess(&g, budget).unwrap().helps);
        prop_assert!(makespan <= revolve.stats.as_ref().unwrap().total_cost);
        if detail(&r, "mode") == "two-level" {
            let tiers = stats.tiers.as_ref().unwrap();
            let a = assess(&g, budget).unwrap();
            prop_assert_eq!(tiers.stalls.is_empty(), a.loads_hidden);
            prop_assert_eq!(tiers.stall_time, a.predicted_stall);
            let model = detail(&r, "t_async").as_f64().unwrap();
            prop_assert_eq!(makespan, model + tiers.stall_time);
        }
    }
}
