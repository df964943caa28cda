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
    let chain = blocks::blocks(&g, MAX_BLOCKS).unwrap();
    // Two residual additions per layer are cuts; each block's options start with the whole
    // tape, and every forward and backward node is in exactly one block.
    assert!(chain.len() >= 8, "{} blocks", chain.len());
    let forward: usize = chain.iter().map(|b| b.forward.len()).sum();
    let backward: usize = chain.iter().map(|b| b.options[0].backward.len()).sum();
    assert_eq!(forward + backward, g.len());
    assert!(chain.iter().all(|b| b.options[0].extra == 0.0));
    assert!(chain.iter().all(|b| b
        .options
        .windows(2)
        .all(|w| w[1].tape <= w[0].tape && w[1].extra >= w[0].extra)));
}
