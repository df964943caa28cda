//! Generated training graphs: Checkmate's linear graph, chains with chosen costs, sizes and
//! backward reads, join graphs of chains meeting at the loss, random layered training
//! graphs, decoder-only transformers ([`transformer()`]), small random DAGs for the oracle
//! sweeps, and the seeded random chains and joins the dynamic programs are tested on (unit
//! tests, integration tests and benchmarks share them).

use super::structure::StageSpec;
use super::{Graph, GraphSpec, NodeKind, NodeSpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::ops::RangeInclusive;

mod transformer;

pub use transformer::{
    transformer, ShapeError, TransformerShape, TRANSFORMER_NODES_OUTSIDE,
    TRANSFORMER_NODES_PER_LAYER,
};

/// Checkmate's `gen_linear_graph(n)`: nodes `0..=2n` in order, unit costs and sizes,
/// edges `i-1 -> i` for every `i >= 1` and `i -> 2n-i` for every `i < n`. Node `n` is the
/// loss; `0..n` are forward ops and `n+1..=2n` their gradients in reverse.
pub fn linear(layers: usize) -> Graph {
    let n = layers;
    let nodes = (0..=2 * n)
        .map(|i| {
            let mut inputs = Vec::new();
            if i >= 1 {
                inputs.push((i - 1).to_string());
            }
            if i > n {
                inputs.push((2 * n - i).to_string());
            }
            NodeSpec {
                id: i.to_string(),
                cost: 1.0,
                memory: 1,
                inputs,
                kind: Some(match i.cmp(&n) {
                    std::cmp::Ordering::Less => NodeKind::Forward,
                    std::cmp::Ordering::Equal => NodeKind::Loss,
                    std::cmp::Ordering::Greater => NodeKind::Backward,
                }),
                op: None,
            }
        })
        .collect();
    Graph::new(GraphSpec {
        name: Some(format!("linear-{layers}")),
        fixed_memory: 0,
        cost_unit: Some("op".into()),
        nodes,
    })
    .expect("the linear graph is valid")
}

/// A chain training graph: `f1..fL`, `loss` (cost and size `loss`), `gL..g1`, with
/// `fixed_memory` `fixed`. `f{j}` reads `f{j−1}`; `g{j}` reads `g{j+1}` (the loss for
/// `j = L`) and the forward values its [`StageSpec`] names.
pub fn chain_graph(stages: &[StageSpec], loss: (f64, u64), fixed: u64) -> Graph {
    chain_graph_reading(stages, &[], loss, fixed)
}

/// [`chain_graph`] where `g{j}` also reads `f{j+1}`, the next stage's output, for each `j`
/// in `next` (Checkmate's Keras rule reads it for every `j < L`).
pub fn chain_graph_reading(
    stages: &[StageSpec],
    next: &[usize],
    loss: (f64, u64),
    fixed: u64,
) -> Graph {
    Graph::new(chain_spec(stages, next, loss, fixed)).expect("the chain graph is valid")
}

/// The graph [`chain_graph_reading`] builds, before it is checked: `f{j}` has cost `fw` and
/// size `x`, `g{j}` cost `bw` and size `delta`, the loss cost and size `loss`. Also the
/// conversion of rotor's chain format (`crate::graph::chain`), which checks it.
pub fn chain_spec(stages: &[StageSpec], next: &[usize], loss: (f64, u64), fixed: u64) -> GraphSpec {
    let l = stages.len();
    let mut nodes = Vec::new();
    for (i, st) in stages.iter().enumerate() {
        nodes.push(NodeSpec {
            id: format!("f{}", i + 1),
            cost: st.fw,
            memory: st.x,
            inputs: if i == 0 {
                vec![]
            } else {
                vec![format!("f{i}")]
            },
            kind: Some(NodeKind::Forward),
            op: None,
        });
    }
    nodes.push(NodeSpec {
        id: "loss".into(),
        cost: loss.0,
        memory: loss.1,
        inputs: vec![format!("f{l}")],
        kind: Some(NodeKind::Loss),
        op: None,
    });
    for j in (1..=l).rev() {
        let st = stages[j - 1];
        let mut inputs = vec![if j == l {
            "loss".to_string()
        } else {
            format!("g{}", j + 1)
        }];
        if st.reads_input && j > 1 {
            inputs.push(format!("f{}", j - 1));
        }
        if st.reads_output {
            inputs.push(format!("f{j}"));
        }
        if next.contains(&j) {
            inputs.push(format!("f{}", j + 1));
        }
        nodes.push(NodeSpec {
            id: format!("g{j}"),
            cost: st.bw,
            memory: st.delta,
            inputs,
            kind: Some(NodeKind::Backward),
            op: None,
        });
    }
    GraphSpec {
        name: None,
        fixed_memory: fixed,
        cost_unit: None,
        nodes,
    }
}

/// A random heterogeneous chain from a seed: 1 to 5 stages with costs 1..=5, sizes 1..=4
/// and random backward reads (its input, its output, both or neither), a loss of cost
/// 1..=3 and size 1..=4; at most 11 nodes, within the exhaustive oracle's reach.
pub fn random_chain(seed: u64) -> Graph {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let l = rng.random_range(1..=5usize);
    let stages: Vec<StageSpec> = (0..l)
        .map(|i| {
            let pattern = rng.random_range(0..4u8);
            let reads_output = pattern & 2 == 2 || (i == 0 && pattern == 1);
            random_stage(&mut rng, i > 0 && pattern & 1 == 1, reads_output)
        })
        .collect();
    chain_graph(
        &stages,
        (
            rng.random_range(1..=3u32) as f64,
            rng.random_range(1..=4u64),
        ),
        0,
    )
}

/// A stage of [`random_chain`] and [`next_reading_chain`]: costs 1..=5 and sizes 1..=4
/// drawn from `rng` (in the order fw, bw, x, δ), with the given backward reads.
fn random_stage(rng: &mut ChaCha8Rng, reads_input: bool, reads_output: bool) -> StageSpec {
    StageSpec {
        fw: rng.random_range(1..=5u32) as f64,
        bw: rng.random_range(1..=5u32) as f64,
        x: rng.random_range(1..=4u64),
        delta: rng.random_range(1..=4u64),
        reads_input,
        reads_output,
    }
}

/// A random chain whose backward ops read the next stage's output, and the `j` whose
/// `g{j}` reads `f{j+1}`: on even seeds Checkmate's Keras rule (Jain et al., MLSys 2020: every
/// `g{j}` reads `f{j}` and, for `j < L`, `f{j+1}`), on odd seeds random read patterns with
/// `f{j+1}` read for a random subset of `j`. Costs and sizes as [`random_chain`]'s, at most
/// 5 stages (11 nodes).
pub fn next_reading_chain(seed: u64) -> (Graph, Vec<usize>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let l = rng.random_range(1..=5usize);
    let mixed = seed % 2 == 1;
    let stages: Vec<StageSpec> = (0..l)
        .map(|i| {
            let pattern = if mixed { rng.random_range(0..4u8) } else { 2 };
            random_stage(&mut rng, i > 0 && pattern & 1 == 1, pattern & 2 == 2)
        })
        .collect();
    let next: Vec<usize> = (1..l).filter(|_| !mixed || rng.random_bool(0.5)).collect();
    let loss = (
        rng.random_range(1..=3u32) as f64,
        rng.random_range(1..=4u64),
    );
    (chain_graph_reading(&stages, &next, loss, 0), next)
}

/// A random join from a seed ([`join_with`]): 2 or 3 branches of 1 to 3 stages, 5 stages in
/// all at most (11 nodes), op costs 1..=3 and sizes 1..=3; on a third of the seeds the
/// backward ops also read the next stage's output.
pub fn random_join(seed: u64) -> Graph {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let lengths = loop {
        let k = rng.random_range(2..=3usize);
        let l: Vec<usize> = (0..k).map(|_| rng.random_range(1..=3usize)).collect();
        if l.iter().sum::<usize>() <= 5 {
            break l;
        }
    };
    join_with(&lengths, seed % 3 == 0, |_| {
        (
            rng.random_range(1..=3u32) as f64,
            rng.random_range(1..=3u64),
        )
    })
}

/// A join graph of unit chains (Beaumont et al. 2020): branch `b` has `lengths[b]` stages,
/// forward ops `f{b}_{j}` (`f{b}_1` a source), one loss reading every branch end, and
/// backward ops `g{b}_{j}` reading the gradient (`g{b}_{j+1}`, or the loss for `j = L_b`)
/// and `f{b}_{j}` (the Checkmate-style rule). Unit costs and sizes. See [`join_with`].
///
/// Panics when a length is 0.
pub fn join(lengths: &[usize]) -> Graph {
    join_with(lengths, false, |_| (1.0, 1))
}

/// [`join`] with `g{b}_{j}` also reading `f{b}_{j+1}` for `j < L_b` when `reads_next`
/// (Checkmate's Keras rule) and `weight(id)` giving each op's (cost, size). The file
/// (solver) order is the nested order of the join DP with branch 0 outermost: the forward
/// ops branch by branch, the loss, then the backward ops of the last branch first.
pub fn join_with(
    lengths: &[usize],
    reads_next: bool,
    mut weight: impl FnMut(&str) -> (f64, u64),
) -> Graph {
    let mut nodes = Vec::new();
    let mut node = |id: String, inputs: Vec<String>, kind| {
        let (cost, memory) = weight(&id);
        nodes.push(NodeSpec {
            id,
            cost,
            memory,
            inputs,
            kind: Some(kind),
            op: None,
        });
    };
    for (b, &l) in lengths.iter().enumerate() {
        for j in 1..=l {
            let inputs = (j > 1).then(|| format!("f{b}_{}", j - 1));
            node(
                format!("f{b}_{j}"),
                inputs.into_iter().collect(),
                NodeKind::Forward,
            );
        }
    }
    let ends = lengths
        .iter()
        .enumerate()
        .map(|(b, &l)| format!("f{b}_{l}"))
        .collect();
    node("loss".into(), ends, NodeKind::Loss);
    for (b, &l) in lengths.iter().enumerate().rev() {
        for j in (1..=l).rev() {
            let grad = if j == l {
                "loss".to_string()
            } else {
                format!("g{b}_{}", j + 1)
            };
            let mut inputs = vec![grad, format!("f{b}_{j}")];
            if reads_next && j < l {
                inputs.push(format!("f{b}_{}", j + 1));
            }
            node(format!("g{b}_{j}"), inputs, NodeKind::Backward);
        }
    }
    let name = lengths.iter().map(usize::to_string).collect::<Vec<_>>();
    Graph::new(GraphSpec {
        name: Some(format!("join-{}", name.join("-"))),
        fixed_memory: 0,
        cost_unit: Some("op".into()),
        nodes,
    })
    .expect("the join graph is valid")
}

/// A random layered training graph of `nodes` ops (at least 3): `L = (nodes-1)/2` forward
/// ops, the loss and `L` backward ops, and for an even `nodes` a data input `x` that the
/// first layer reads (its size drawn last, so the odd graphs are unchanged): forward ops in
/// layers of 1 to 4, each reading one op of the previous layer
/// and, with probability 0.3, one earlier op (a skip connection); a loss reading every
/// forward op nobody else reads; and the backward ops by Checkmate's Keras rule: for each
/// forward edge `u -> i`, gradient edges `b(i) -> b(u)` and `i -> b(u)`, and `i -> b(i)`.
/// Forward costs are 1..=10, backward twice that; sizes are 1..=64 MiB.
pub fn random_layered(nodes: usize, seed: u64) -> Graph {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let l = (nodes.saturating_sub(1) / 2).max(1);
    let fwd_inputs = random_forward_inputs(&mut rng, l);
    let costs: Vec<f64> = (0..l).map(|_| rng.random_range(1..=10u32) as f64).collect();
    let sizes: Vec<u64> = (0..l).map(|_| rng.random_range(1..=64u64) << 20).collect();
    let mut consumed = vec![false; l];
    for ins in &fwd_inputs {
        for &u in ins {
            consumed[u] = true;
        }
    }
    let f = |i: usize| format!("f{i}");
    let input = (nodes % 2 == 0).then(|| rng.random_range(1..=64u64) << 20);
    let mut specs: Vec<NodeSpec> = (0..l)
        .map(|i| NodeSpec {
            id: f(i),
            cost: costs[i],
            memory: sizes[i],
            inputs: match (fwd_inputs[i].is_empty(), input) {
                (true, Some(_)) => vec!["x".into()],
                _ => fwd_inputs[i].iter().map(|&u| f(u)).collect(),
            },
            kind: Some(NodeKind::Forward),
            op: None,
        })
        .collect();
    if let Some(memory) = input {
        specs.insert(
            0,
            NodeSpec {
                id: "x".into(),
                cost: 1.0,
                memory,
                inputs: vec![],
                kind: Some(NodeKind::Forward),
                op: None,
            },
        );
    }
    specs.push(NodeSpec {
        id: "loss".into(),
        cost: 1.0,
        memory: 4,
        inputs: (0..l).filter(|&i| !consumed[i]).map(f).collect(),
        kind: Some(NodeKind::Loss),
        op: None,
    });
    push_keras_backward(&mut specs, &fwd_inputs, &costs, &sizes, &consumed);
    Graph::new(GraphSpec {
        name: Some(format!("random-layered-n{}-s{seed}", specs.len())),
        fixed_memory: 0,
        cost_unit: Some("op".into()),
        nodes: specs,
    })
    .expect("the random layered graph is valid")
}

/// The inputs of the `l` forward ops of [`random_layered`]: layers of 1 to 4 ops, each op
/// reading one op of the previous layer and, with probability 0.3, one earlier op.
fn random_forward_inputs(rng: &mut ChaCha8Rng, l: usize) -> Vec<Vec<usize>> {
    let mut layer_of = Vec::with_capacity(l);
    let mut layer_start = vec![0usize];
    let mut layer = 0;
    let mut width = rng.random_range(1..=4usize);
    for i in 0..l {
        if i - layer_start[layer] == width {
            layer += 1;
            layer_start.push(i);
            width = rng.random_range(1..=4usize);
        }
        layer_of.push(layer);
    }
    let mut fwd_inputs: Vec<Vec<usize>> = vec![Vec::new(); l];
    for i in 0..l {
        let li = layer_of[i];
        if li == 0 {
            continue;
        }
        let prev = layer_start[li - 1]..layer_start[li];
        let first = rng.random_range(prev);
        fwd_inputs[i].push(first);
        if li >= 2 && rng.random_bool(0.3) {
            let skip = rng.random_range(0..layer_start[li - 1]);
            fwd_inputs[i].push(skip);
        }
        fwd_inputs[i].sort_unstable();
    }
    fwd_inputs
}

/// The backward ops `b{u}` of [`random_layered`], last forward op first, by Checkmate's
/// Keras rule: `b(u)` reads, for every forward consumer `i` of `u`, `b(i)` and `i`; `u`
/// itself; the loss if `u` is a sink. Costs twice the forward op's, sizes the same.
fn push_keras_backward(
    specs: &mut Vec<NodeSpec>,
    fwd_inputs: &[Vec<usize>],
    costs: &[f64],
    sizes: &[u64],
    consumed: &[bool],
) {
    let l = fwd_inputs.len();
    let f = |i: usize| format!("f{i}");
    let b = |i: usize| format!("b{i}");
    let mut bwd_inputs: Vec<Vec<String>> = vec![Vec::new(); l];
    for (i, ins) in fwd_inputs.iter().enumerate() {
        for &u in ins {
            bwd_inputs[u].push(b(i));
            bwd_inputs[u].push(f(i));
        }
    }
    for u in (0..l).rev() {
        let mut inputs = std::mem::take(&mut bwd_inputs[u]);
        inputs.push(f(u));
        if !consumed[u] {
            inputs.push("loss".into());
        }
        specs.push(NodeSpec {
            id: b(u),
            cost: 2.0 * costs[u],
            memory: sizes[u],
            inputs,
            kind: Some(NodeKind::Backward),
            op: None,
        });
    }
}

// Random DAGs: the small graphs the exhaustive oracle checks other solvers against.

/// The shape of a [`random_dag`]: how many nodes, how many inputs each reads, and the
/// ranges its costs, sizes and `fixed_memory` are drawn from (uniformly, bounds included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DagShape {
    /// The node count.
    pub nodes: RangeInclusive<usize>,
    /// Node `v > 0` reads `k` distinct earlier nodes, `k` uniform in `1..=min(max_inputs, v)`.
    pub max_inputs: usize,
    /// Each node's cost (whole numbers).
    pub costs: RangeInclusive<u32>,
    /// Each node's output size in bytes.
    pub sizes: RangeInclusive<u64>,
    /// The graph's `fixed_memory`.
    pub fixed_memory: RangeInclusive<u64>,
}

impl DagShape {
    /// Sparse DAGs of 2 to 12 nodes (all within the oracle's reach): up to 3 inputs per
    /// node, costs 1..=4, sizes 1..=3, `fixed_memory` 0 or 1.
    pub fn sparse() -> DagShape {
        DagShape {
            nodes: 2..=12,
            max_inputs: 3,
            costs: 1..=4,
            sizes: 1..=3,
            fixed_memory: 0..=1,
        }
    }

    /// Exactly `n` nodes, each reading any number of earlier ones; costs 0..=4 (free ops
    /// included), sizes 1..=4, `fixed_memory` 0..=2.
    pub fn dense(n: usize) -> DagShape {
        DagShape {
            nodes: n..=n,
            max_inputs: usize::MAX,
            costs: 0..=4,
            sizes: 1..=4,
            fixed_memory: 0..=2,
        }
    }
}

/// A random DAG of the given shape, the same for the same `(shape, seed)`: nodes `"0"`,
/// `"1"`, ... in solver order, node `v > 0` reading earlier nodes (listed ascending), so
/// that every node but the first has an input. Named `random-dag-n{n}-s{seed}`.
///
/// Panics when a range of `shape` is empty or allows 0 nodes.
pub fn random_dag(shape: &DagShape, seed: u64) -> Graph {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = rng.random_range(shape.nodes.clone());
    let nodes = (0..n)
        .map(|v| {
            let mut inputs = Vec::new();
            if v > 0 {
                let k = rng.random_range(1..=shape.max_inputs.clamp(1, v));
                inputs = rand::seq::index::sample(&mut rng, v, k).into_vec();
                inputs.sort_unstable();
            }
            NodeSpec {
                id: v.to_string(),
                cost: f64::from(rng.random_range(shape.costs.clone())),
                memory: rng.random_range(shape.sizes.clone()),
                inputs: inputs.iter().map(usize::to_string).collect(),
                kind: None,
                op: None,
            }
        })
        .collect();
    Graph::new(GraphSpec {
        name: Some(format!("random-dag-n{n}-s{seed}")),
        fixed_memory: rng.random_range(shape.fixed_memory.clone()),
        cost_unit: None,
        nodes,
    })
    .expect("random DAGs are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_dags_are_deterministic_and_keep_their_shape() {
        for seed in 0..50 {
            let g = random_dag(&DagShape::sparse(), seed);
            assert_eq!(g.to_spec(), random_dag(&DagShape::sparse(), seed).to_spec());
            assert!((2..=12).contains(&g.len()), "seed {seed}");
            assert!(g.fixed_memory() <= 1);
            for v in 0..g.len() {
                let inputs = g.preds(v).len();
                assert!(if v == 0 {
                    inputs == 0
                } else {
                    (1..=3).contains(&inputs)
                });
                assert!((1.0..=4.0).contains(&g.cost(v)) && (1..=3).contains(&g.memory(v)));
            }
            let dense = random_dag(&DagShape::dense(7), seed);
            assert_eq!(dense.len(), 7);
            assert_eq!(
                dense.name(),
                Some(format!("random-dag-n7-s{seed}").as_str())
            );
        }
        assert_ne!(
            random_dag(&DagShape::sparse(), 1).to_spec(),
            random_dag(&DagShape::sparse(), 2).to_spec()
        );
    }

    #[test]
    fn linear_matches_checkmate() {
        let g = linear(4);
        assert_eq!(g.len(), 9);
        let mut edges: Vec<_> = g.edges().collect();
        edges.sort_unstable();
        assert_eq!(
            edges,
            [
                (0, 1),
                (0, 8),
                (1, 2),
                (1, 7),
                (2, 3),
                (2, 6),
                (3, 4),
                (3, 5),
                (4, 5),
                (5, 6),
                (6, 7),
                (7, 8)
            ]
        );
    }

    #[test]
    fn random_layered_has_the_nodes_asked_for() {
        for nodes in [3, 4, 31, 500, 501, 1000] {
            let g = random_layered(nodes, 5);
            assert_eq!(g.len(), nodes);
            assert_eq!(
                g.name(),
                Some(format!("random-layered-n{nodes}-s5").as_str())
            );
        }
        // An even count adds the data input to the odd graph below it, which is unchanged.
        let (odd, even) = (random_layered(499, 5), random_layered(500, 5));
        for v in 0..odd.len() {
            let w = even.index_of(odd.id(v)).unwrap();
            assert_eq!((odd.cost(v), odd.memory(v)), (even.cost(w), even.memory(w)));
        }
    }

    #[test]
    fn random_layered_is_deterministic_and_sized() {
        let a = random_layered(41, 7);
        let b = random_layered(41, 7);
        assert_eq!(a.len(), 41);
        assert_eq!(a.to_spec(), b.to_spec());
        assert_ne!(a.to_spec(), random_layered(41, 8).to_spec());
    }
}
