use super::*;
use crate::graph::generate::linear;
use crate::graph::{GraphSpec, NodeSpec};

/// A graph of unit ops from `(id, inputs)` pairs.
pub(crate) fn spec(nodes: &[(&str, &[&str])]) -> Graph {
    Graph::new(GraphSpec {
        nodes: nodes
            .iter()
            .map(|(id, ins)| NodeSpec {
                id: id.to_string(),
                cost: 1.0,
                memory: 1,
                inputs: ins.iter().map(|s| s.to_string()).collect(),
                kind: None,
                op: None,
            })
            .collect(),
        ..Default::default()
    })
    .unwrap()
}

/// Two unit stages by Checkmate's Keras rule: `g1` reads `f2`, the next output.
pub(crate) fn keras_two_stages() -> Graph {
    spec(&[
        ("f1", &[]),
        ("f2", &["f1"]),
        ("loss", &["f2"]),
        ("g2", &["loss", "f2"]),
        ("g1", &["g2", "f1", "f2"]),
    ])
}

#[test]
fn linear_is_a_chain_reading_outputs() {
    for n in 1..8 {
        let g = linear(n);
        let c = chain(&g).unwrap();
        assert_eq!(c.len(), n);
        assert_eq!(c.loss, n);
        for (j, s) in c.stages.iter().enumerate() {
            assert_eq!(s.forward, j);
            assert_eq!(s.backward, 2 * n - j);
            assert!(s.reads_output && !s.reads_input);
        }
    }
}

#[test]
fn keras_rule_reads_next_outputs() {
    // Checkmate's Keras extraction: for each forward edge u -> i, b(i) -> b(u) and
    // i -> b(u), plus i -> b(i); G_L reads the loss as its gradient.
    let g = spec(&[
        ("f1", &[]),
        ("f2", &["f1"]),
        ("f3", &["f2"]),
        ("loss", &["f3"]),
        ("g3", &["loss", "f3"]),
        ("g2", &["g3", "f2", "f3"]),
        ("g1", &["g2", "f1", "f2"]),
    ]);
    let c = chain(&g).unwrap();
    let flags: Vec<(bool, bool, bool)> = c
        .stages
        .iter()
        .map(|s| (s.reads_input, s.reads_output, s.reads_next_output))
        .collect();
    assert_eq!(
        flags,
        [
            (false, true, true),
            (false, true, true),
            (false, true, false)
        ]
    );
}

#[test]
fn join_of_two_branches() {
    let g = spec(&[
        ("a1", &[]),
        ("a2", &["a1"]),
        ("b1", &[]),
        ("loss", &["a2", "b1"]),
        ("gb1", &["loss", "b1"]),
        ("ga2", &["loss", "a2"]),
        ("ga1", &["ga2", "a1"]),
    ]);
    match detect(&g) {
        Structure::Join(j) => {
            assert_eq!(j.branches.len(), 2);
            assert_eq!(j.branches[0].len(), 2);
            assert_eq!(j.branches[1].len(), 1);
            assert!(j.branches[0][1].reads_output);
        }
        other => panic!("{other:?}"),
    }
}

/// The first node every source reaches, by sets of sources over every node (what
/// `find_loss` did before its linear path).
fn first_reached_by_all(graph: &Graph) -> Option<usize> {
    let sources: Vec<usize> = (0..graph.len())
        .filter(|&v| graph.preds(v).is_empty())
        .collect();
    let mut reached: Vec<FixedBitSet> =
        vec![FixedBitSet::with_capacity(sources.len()); graph.len()];
    for (b, &s) in sources.iter().enumerate() {
        reached[s].insert(b);
    }
    for v in 0..graph.len() {
        let mut set = reached[v].clone();
        for &u in graph.preds(v) {
            set.union_with(&reached[u]);
        }
        if set.count_ones(..) == sources.len() {
            return Some(v);
        }
        reached[v] = set;
    }
    None
}

#[test]
fn the_loss_is_the_first_node_every_source_reaches() {
    use crate::graph::generate::{random_dag, random_join, DagShape};
    let mut checked = 0;
    // More sources: every third node's inputs dropped; joins without their kinds.
    let sources_added = |g: Graph, cut: usize| {
        let mut spec = g.to_spec();
        for (i, node) in spec.nodes.iter_mut().enumerate() {
            node.kind = None;
            if i % cut == 1 {
                node.inputs.clear();
            }
        }
        Graph::new(spec).unwrap()
    };
    for seed in 0..300 {
        for g in [
            sources_added(random_dag(&DagShape::sparse(), seed), 3),
            sources_added(random_join(seed), usize::MAX),
            sources_added(random_dag(&DagShape::dense(8), seed), 4),
        ] {
            let sources = (0..g.len()).filter(|&v| g.preds(v).is_empty()).count();
            if sources >= 2 && !g.has_kinds() {
                assert_eq!(find_loss(&g).ok(), first_reached_by_all(&g), "seed {seed}");
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "{checked}");
}

#[test]
fn many_sources_take_linear_memory() {
    // 320,000 nodes without an edge: n x sources bits would be 12.8 GB.
    let ids: Vec<String> = (0..320_000).map(|i| format!("v{i}")).collect();
    let nodes: Vec<(&str, &[&str])> = ids.iter().map(|id| (id.as_str(), &[][..])).collect();
    let g = spec(&nodes);
    let Structure::General(e) = detect(&g) else {
        panic!("an edgeless graph is no join")
    };
    assert!(e.reason.contains("no node joins all 320000 sources"), "{e}");
}

#[test]
fn names_the_breaking_node() {
    // f2 reads f0 and f1: a skip connection.
    let g = spec(&[
        ("f0", &[]),
        ("f1", &["f0"]),
        ("f2", &["f0", "f1"]),
        ("loss", &["f2"]),
        ("g2", &["loss", "f2"]),
        ("g1", &["g2", "f1"]),
        ("g0", &["g1", "f0"]),
    ]);
    match detect(&g) {
        Structure::General(e) => assert_eq!(e.node.as_deref(), Some("f0")),
        other => panic!("{other:?}"),
    }
    // A backward op reading a forward value two stages ahead.
    let g = spec(&[
        ("f0", &[]),
        ("f1", &["f0"]),
        ("f2", &["f1"]),
        ("loss", &["f2"]),
        ("g2", &["loss", "f2"]),
        ("g1", &["g2", "f1"]),
        ("g0", &["g1", "f2"]),
    ]);
    match detect(&g) {
        Structure::General(e) => assert_eq!(e.node.as_deref(), Some("g0")),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        detect(&crate::graph::generate::random_layered(41, 3)).class(),
        "general"
    );
}

/// `inspect`'s line for a join names each branch length once, with its count, and at
/// most 16 of them: a join of 100,000 branches stays one short line.
#[test]
fn branch_lengths_are_counted_not_listed() {
    assert_eq!(super::lengths([3, 5, 5, 1].into_iter()), "[3, 5 x2, 1]");
    assert_eq!(
        super::lengths(std::iter::repeat_n(1, 100_000)),
        "[1 x100000]"
    );
    let many = super::lengths(1..=20);
    assert!(many.ends_with("16, ... 4 more lengths]"), "{many}");
}
