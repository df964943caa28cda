//! FastSA's grouping pre-pass (paper App. C.1; issue 9, graph reduction): node `n_i` is
//! fused into its successor when that successor consumes all of `n_i`'s outputs — here,
//! one output per node, when `n_i` has exactly one consumer — and
//! `Σ s(inputs of n_i) ≤ Σ s(outputs of n_i)`: computing `n_i` just before its consumer
//! keeps its inputs alive instead of its output, which is no larger.
//!
//! A group is an in-tree: its root (its highest node) is the only member read outside
//! it, every other member is read by exactly one member. Computing a group computes its
//! members in solver order, so a sequence of groups [`Groups::expand`]s to a sequence of
//! the original nodes with the same cost. Its memory in the [`Model`] is a bound from
//! above: at the group's slot, every external input stays resident throughout and
//! `extra` covers the largest set of members alive together
//! (`max_j (s_{m_j} + Σ_{i<j, read at or after j} s_{m_i})`), beyond the root's output;
//! the expanded schedule frees inputs earlier inside the group, never later. So a grouped
//! sequence that fits the budget expands to one that fits.

use super::sequence::Model;
use crate::graph::Graph;

/// A partition of the graph's nodes into groups, ordered by their roots (a topological
/// order of the grouped graph: every edge between groups leaves a root, which is below
/// the reader's root).
pub(super) struct Groups {
    /// The members of each group, ascending: the root last.
    members: Vec<Vec<usize>>,
}

impl Groups {
    /// The grouping rule applied to every node of `graph`.
    pub(super) fn find(graph: &Graph) -> Groups {
        let n = graph.len();
        // From the sinks up: the root of `v`'s consumer is final before `v` is reached.
        let mut root: Vec<usize> = (0..n).collect();
        for v in (0..n).rev() {
            if let &[w] = graph.succs(v) {
                let inputs: u128 = graph
                    .preds(v)
                    .iter()
                    .map(|&u| u128::from(graph.memory(u)))
                    .sum();
                if inputs <= u128::from(graph.memory(v)) {
                    root[v] = root[w];
                }
            }
        }
        let mut group_of_root = vec![usize::MAX; n];
        let mut members: Vec<Vec<usize>> = Vec::new();
        for r in (0..n).filter(|&v| root[v] == v) {
            group_of_root[r] = members.len();
            members.push(Vec::new());
        }
        for v in 0..n {
            members[group_of_root[root[v]]].push(v);
        }
        Groups { members }
    }

    /// Every node in a group of its own (the ungrouped graph).
    pub(super) fn singletons(graph: &Graph) -> Groups {
        Groups {
            members: (0..graph.len()).map(|v| vec![v]).collect(),
        }
    }

    /// The number of groups.
    pub(super) fn len(&self) -> usize {
        self.members.len()
    }

    /// The sequence of original nodes that `groups` computes.
    pub(super) fn expand(&self, groups: &[usize]) -> Vec<usize> {
        groups
            .iter()
            .flat_map(|&g| self.members[g].iter().copied())
            .collect()
    }

    /// The annealer's model of the grouped graph: per group the cost and weight of its
    /// members, its root's output bytes, the bytes of members alive together beyond it,
    /// and the groups it reads. `epsilon` is added to the weight per member.
    pub(super) fn model(&self, graph: &Graph, epsilon: f64) -> Model {
        let n = graph.len();
        let mut group_of = vec![0u32; n];
        for (g, members) in self.members.iter().enumerate() {
            for &v in members {
                group_of[v] = g as u32;
            }
        }
        let mut model = Model::empty(graph.fixed_memory());
        for (g, members) in self.members.iter().enumerate() {
            let root = *members.last().expect("a group has a member");
            let cost: f64 = members.iter().map(|&v| graph.cost(v)).sum();
            let mut preds: Vec<u32> = members
                .iter()
                .flat_map(|&v| graph.preds(v).iter().map(|&u| group_of[u]))
                .filter(|&h| h as usize != g)
                .collect();
            preds.sort_unstable();
            preds.dedup();
            let together = alive_together(graph, members);
            model.push(
                cost,
                cost + epsilon * members.len() as f64,
                graph.memory(root),
                together - u128::from(graph.memory(root)),
                preds,
            );
        }
        model
    }
}

/// The most bytes of members alive together while a group computes them in order:
/// `max_j (s_{m_j} + Σ_{i<j, m_i read by a member at or after j} s_{m_i})`.
fn alive_together(graph: &Graph, members: &[usize]) -> u128 {
    let position = |v: usize| members.binary_search(&v).ok();
    // The position of the member that reads member `i` (none for the root).
    let reader: Vec<Option<usize>> = members
        .iter()
        .map(|&v| match graph.succs(v) {
            &[w] => position(w),
            _ => None,
        })
        .collect();
    let mut most = 0u128;
    for (j, &v) in members.iter().enumerate() {
        let alive: u128 = (0..j)
            .filter(|&i| reader[i].is_some_and(|r| r >= j))
            .map(|i| u128::from(graph.memory(members[i])))
            .sum();
        most = most.max(alive + u128::from(graph.memory(v)));
    }
    most
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::graph::{GraphSpec, NodeSpec};

    /// A node of unit cost for hand-written test graphs.
    pub(in crate::solve::heuristic::fastsa) fn node(
        id: &str,
        memory: u64,
        inputs: &[&str],
    ) -> NodeSpec {
        NodeSpec {
            id: id.into(),
            cost: 1.0,
            memory,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            kind: None,
            op: None,
        }
    }

    #[test]
    fn a_single_consumer_node_no_smaller_than_its_inputs_joins_its_consumer() {
        // a (source, read by b only) joins b; b (reads 4 bytes, outputs 2) stays; c
        // (reads b: 2 bytes, outputs 3, read by d only) joins d; d is a sink.
        let graph = Graph::new(GraphSpec {
            nodes: vec![
                node("a", 4, &[]),
                node("b", 2, &["a"]),
                node("c", 3, &["b"]),
                node("d", 1, &["c", "b"]),
            ],
            ..GraphSpec::default()
        })
        .unwrap();
        let groups = Groups::find(&graph);
        assert_eq!(groups.members, vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(groups.expand(&[0, 1, 0]), vec![0, 1, 2, 3, 0, 1]);
        let model = groups.model(&graph, 0.5);
        // Group {a, b}: a alone 4, then b with a: 6; beyond b's 2 bytes: 4.
        // Group {c, d}: c 3, then d with c: 4; beyond d's 1 byte: 3. It reads {a, b}.
        assert_eq!(model.size(0), 2);
        assert_eq!(model.extra(0), 4);
        assert_eq!(model.size(1), 1);
        assert_eq!(model.extra(1), 3);
        assert_eq!(model.preds(1), &[0]);
        assert_eq!(model.weight(1), 3.0);
    }
}
