use super::*;
use crate::graph::generate::{linear, transformer, TransformerShape};
use crate::graph::Graph;
use crate::schedule::checkpoint_all_peak;
use crate::solve::solve;

/// The simulator's (cost, peak) of `solver`'s schedule at `budget`, or `None`.
fn at(graph: &Graph, budget: u64, solver: &str) -> Option<(f64, u64)> {
    let instance = Instance { graph, budget };
    let r = solve(&instance, solver, &SolveOptions::default()).unwrap();
    r.stats.map(|s| (s.total_cost, s.peak_memory))
}

fn small_transformer() -> Graph {
    let shape = TransformerShape {
        layers: 8,
        hidden: 256,
        seq: 128,
        heads: 4,
        batch: 2,
        vocab: 1000,
    };
    transformer(&shape).unwrap()
}

fn between(graph: &Graph, f: f64) -> u64 {
    crate::budget::between_min_and_peak(graph, f)
}

#[test]
fn on_chains_never_below_revolve_and_always_within_budget() {
    for layers in [4, 9, 16] {
        let g = linear(layers);
        let mut found = 0;
        for f in [1.0, 0.6, 0.4, 0.25, 0.1] {
            let budget = between(&g, f);
            let Some((cost, peak)) = at(&g, budget, "block-rotor") else {
                continue;
            };
            found += 1;
            let (best, _) = at(&g, budget, "revolve").expect("revolve fits where we do");
            assert!(peak <= budget, "linear-{layers} at {budget}: peak {peak}");
            assert!(
                cost >= best - 1e-9,
                "linear-{layers} at {budget}: {cost} < {best}"
            );
        }
        assert!(
            found >= 3,
            "linear-{layers}: only {found} budgets got a plan"
        );
    }
}

#[test]
fn at_the_checkpoint_all_peak_nothing_is_recomputed() {
    let g = linear(12);
    let (cost, _) = at(&g, checkpoint_all_peak(&g), "block-rotor").unwrap();
    assert_eq!(cost, g.total_cost());
}

#[test]
fn a_transformer_gets_a_plan_at_a_tenth_of_the_span_within_one_forward() {
    let g = small_transformer();
    let budget = between(&g, 0.1);
    let (cost, peak) = at(&g, budget, "block-rotor").expect("a plan at span 0.1");
    assert!(peak <= budget);
    let forward: f64 = (0..g.len())
        .filter(|&v| g.node(v).kind == Some(crate::graph::NodeKind::Forward))
        .map(|v| g.cost(v))
        .sum();
    assert!(cost <= g.total_cost() + 2.0 * forward, "{cost}");
}

#[test]
fn blocks_are_cut_where_no_forward_edge_jumps() {
    let g = small_transformer();
    let chain = blocks::blocks(&g, MAX_BLOCKS, &|| Ok(())).unwrap();
    // Two residual additions per layer are cuts; each block's options start with the whole
    // tape, and every forward and backward node is in exactly one block.
    assert!(chain.len() >= 8, "{} blocks", chain.len());
    let forward: usize = chain.iter().map(|b| b.forward.len()).sum();
    let backward: usize = chain.iter().map(|b| b.options[0].backward.len()).sum();
    assert_eq!(forward + backward, g.len());
    assert!(chain.iter().all(|b| b.options[0].extra == 0.0));
    // The tape falls along the list; no option is dominated (as small a tape, `e` and
    // peaks as another); so, of two options with the same tape, the dearer peaks lower.
    let key = |o: &options::TapeOption| (o.tape, o.extra, o.forward_peak, o.backward_peak);
    for b in &chain {
        assert!(b.options.windows(2).all(|w| w[1].tape <= w[0].tape));
        for (i, o) in b.options.iter().enumerate() {
            for (k, p) in b.options.iter().enumerate().filter(|&(k, _)| k != i) {
                let (a, c) = (key(p), key(o));
                let dominated = a.0 <= c.0 && a.1 <= c.1 && a.2 <= c.2 && a.3 <= c.3;
                assert!(!dominated, "option {k} dominates option {i}: {a:?} {c:?}");
            }
        }
    }
}

/// Small training graphs within the exhaustive oracle's reach: random heterogeneous
/// chains, joins and random layered graphs (with kinds, so that blocks exist).
fn small_graphs() -> Vec<(String, Graph)> {
    use crate::graph::generate::{random_chain, random_join, random_layered};
    let mut cases = Vec::new();
    for seed in 0..25 {
        cases.push((format!("random_chain({seed})"), random_chain(seed)));
        cases.push((format!("random_join({seed})"), random_join(seed)));
        cases.push((
            format!("random_layered(11, {seed})"),
            random_layered(11, seed),
        ));
    }
    cases
}

/// Budgets per small graph, evenly spaced from the least feasible to the checkpoint-all
/// peak (the random layered graphs' sizes are in MiB).
const BUDGETS: u64 = 12;

/// Every plan is valid in the simulator and within budget (the driver replays it: an
/// invalid one would be an error status), and never cheaper than the exhaustive optimum;
/// where the oracle finds no schedule, neither does block-rotor.
#[test]
fn never_below_the_exhaustive_optimum_and_always_valid() {
    use crate::solve::Status;
    let mut planned = 0;
    let mut checked = 0;
    let mut nested = 0;
    for (case, g) in small_graphs() {
        assert!(
            g.len() <= crate::solve::exact::exhaustive::MAX_NODES,
            "{case}"
        );
        let (low, high) = (g.min_feasible_budget().0, checkpoint_all_peak(&g));
        let budgets = (0..=BUDGETS).map(|i| low + (high - low) * i / BUDGETS);
        for budget in budgets {
            let instance = Instance { graph: &g, budget };
            checked += 1;
            let r = match solve(&instance, "block-rotor", &SolveOptions::default()) {
                // Out of its scope (a chain of one or two stages has no two cuts).
                Err(SolveError::Unsupported { .. }) => continue,
                r => r.unwrap(),
            };
            assert!(
                matches!(
                    r.status,
                    Status::Optimal | Status::Feasible | Status::Infeasible
                ),
                "{case} at {budget}: {:?} {:?}",
                r.status,
                r.message
            );
            let optimum = at(&g, budget, "exhaustive").map(|(c, _)| c);
            let Some(stats) = r.stats else { continue };
            planned += 1;
            let nested_plan = r
                .message
                .as_deref()
                .is_some_and(|m| m.contains("rematerialized under a cap"));
            nested += usize::from(nested_plan);
            assert!(stats.peak_memory <= budget, "{case} at {budget}");
            let optimum = optimum.unwrap_or_else(|| panic!("{case} at {budget}: no optimum"));
            assert!(
                stats.total_cost >= optimum - 1e-9,
                "{case} at {budget}: {} below the optimum {optimum}",
                stats.total_cost
            );
        }
    }
    // About a third of the cases get a plan (a chain of one or two stages has no two cuts).
    assert!(planned * 4 >= checked, "{planned} plans in {checked} cases");
    // The nested options are exercised: 41 of 521 plans ran one when they came.
    eprintln!("{planned} plans in {checked} cases, {nested} with a nested option");
    assert!(nested * 25 >= planned, "{nested} nested plans of {planned}");
}

/// A graph out of block-rotor's scope (here: no forward/backward kinds, so no cut) is an
/// error that says why, as a graph that is not a chain is for the chain solvers, not an
/// `infeasible` answer: no schedule was searched for.
#[test]
fn a_graph_out_of_scope_is_an_error_as_for_the_chain_solvers() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dag12.json");
    let g = crate::graph::load::load_graph(
        std::path::Path::new(path),
        crate::graph::load::Format::Auto,
    )
    .unwrap();
    let instance = Instance {
        graph: &g,
        budget: checkpoint_all_peak(&g),
    };
    for solver in ["block-rotor", "revolve", "chain-dp"] {
        match solve(&instance, solver, &SolveOptions::default()) {
            Err(SolveError::Unsupported { solver: s, reason }) => {
                assert_eq!(s, solver);
                if solver == "block-rotor" {
                    assert!(reason.contains("articulation points"), "{reason}");
                }
            }
            other => panic!("{solver}: {other:?}"),
        }
    }
}

/// The transient peak of a sequence counts the block's own values from their computation
/// to their last read: a chain `a → b → c` peaks at `b + c`, or at `a + b` when `a` is
/// larger; a value that stays is never freed; another block's value is not counted.
#[test]
fn the_transient_peak_frees_after_the_last_read() {
    use super::transient::Replay;
    use crate::graph::{GraphSpec, NodeSpec};
    let g = Graph::new(GraphSpec {
        name: None,
        fixed_memory: 0,
        cost_unit: None,
        nodes: vec![
            NodeSpec::plain("x", 1.0, 100, &[]),
            NodeSpec::plain("a", 1.0, 4, &["x"]),
            NodeSpec::plain("b", 1.0, 2, &["a"]),
            NodeSpec::plain("c", 1.0, 3, &["b"]),
        ],
    })
    .unwrap();
    let mut later = vec![false; g.len()];
    let own = |v: usize| v > 0;
    let replay = |stays: &dyn Fn(usize) -> bool, later: &mut [bool]| {
        Replay {
            graph: &g,
            counted: &own,
            stays,
        }
        .local_peak(&[], &[1, 2, 3], later)
    };
    assert_eq!(replay(&|_| false, &mut later), 6);
    assert_eq!(replay(&|v| v == 1, &mut later), 9);
    assert!(later.iter().all(|&l| !l), "the scratch is left clear");
}
