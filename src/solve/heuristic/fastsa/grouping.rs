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

/// Members and edges of the model's groups between two polls of [`Groups::model_polled`].
const POLL_EVERY: usize = 1 << 16;

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
    #[cfg(test)]
    pub(super) fn model(&self, graph: &Graph, epsilon: f64) -> Model {
        let Ok(model) =
            self.model_polled(graph, epsilon, || Ok::<(), std::convert::Infallible>(()));
        model
    }

    /// `Groups::model` (the tests'), calling `poll` first, after every [`POLL_EVERY`] members and
    /// edges or so (between groups: one group's work is linear in its members and their
    /// inputs) and last; its error ends the build.
    pub(super) fn model_polled<E>(
        &self,
        graph: &Graph,
        epsilon: f64,
        mut poll: impl FnMut() -> Result<(), E>,
    ) -> Result<Model, E> {
        poll()?;
        let n = graph.len();
        let mut group_of = vec![0u32; n];
        for (g, members) in self.members.iter().enumerate() {
            for &v in members {
                group_of[v] = g as u32;
            }
        }
        let mut model = Model::empty(graph.fixed_memory());
        let mut work = 0;
        for (g, members) in self.members.iter().enumerate() {
            let root = *members.last().expect("a group has a member");
            let cost: f64 = members.iter().map(|&v| graph.cost(v)).sum();
            let mut preds: Vec<u32> = members
                .iter()
                .flat_map(|&v| graph.preds(v).iter().map(|&u| group_of[u]))
                .filter(|&h| h as usize != g)
                .collect();
            work += members.len() + preds.len();
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
            if work >= POLL_EVERY {
                work = 0;
                poll()?;
            }
        }
        poll()?;
        Ok(model)
    }
}

/// The most bytes of members alive together while a group computes them in order:
/// `max_j (s_{m_j} + Σ_{i<j, m_i read by a member at or after j} s_{m_i})`, in one pass:
/// member `i` is alive from its computation to its reader's, so the sum at `j + 1` is the
/// sum at `j`, less the members `m_j` reads, plus `m_j` unless it is the root. (A direct
/// sum over `i < j` is quadratic in the group: 54 s on a group of 200,000 members.)
fn alive_together(graph: &Graph, members: &[usize]) -> u128 {
    let position = |v: usize| members.binary_search(&v).ok();
    // The bytes of the members each member reads.
    let mut read_at = vec![0u128; members.len()];
    // Whether each member is read by a later member (all but the root).
    let mut read = vec![false; members.len()];
    for (i, &v) in members.iter().enumerate() {
        if let &[w] = graph.succs(v) {
            if let Some(r) = position(w) {
                read_at[r] += u128::from(graph.memory(v));
                read[i] = true;
            }
        }
    }
    let mut most = 0u128;
    let mut alive = 0u128;
    for (j, &v) in members.iter().enumerate() {
        let size = u128::from(graph.memory(v));
        most = most.max(alive + size);
        alive -= read_at[j];
        if read[j] {
            alive += size;
        }
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

    /// `alive_together` as its formula reads: a direct sum over the earlier members.
    fn alive_together_directly(graph: &Graph, members: &[usize]) -> u128 {
        let reader = |i: usize| match graph.succs(members[i]) {
            &[w] => members.binary_search(&w).ok(),
            _ => None,
        };
        (0..members.len())
            .map(|j| {
                let earlier: u128 = (0..j)
                    .filter(|&i| reader(i).is_some_and(|r| r >= j))
                    .map(|i| u128::from(graph.memory(members[i])))
                    .sum();
                earlier + u128::from(graph.memory(members[j]))
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn the_bytes_alive_together_are_the_direct_sum_on_random_in_trees() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for case in 0..200 {
            // Node v < k - 1 is read by one later node: an in-tree rooted at k - 1.
            let k = rng.random_range(1..40);
            let mut inputs = vec![Vec::new(); k];
            for v in 0..k.saturating_sub(1) {
                inputs[rng.random_range(v + 1..k)].push(format!("n{v}"));
            }
            let nodes = (0..k)
                .map(|v| {
                    let names: Vec<&str> = inputs[v].iter().map(String::as_str).collect();
                    node(&format!("n{v}"), rng.random_range(0..100), &names)
                })
                .collect();
            let graph = Graph::new(GraphSpec {
                nodes,
                ..GraphSpec::default()
            })
            .unwrap();
            let members: Vec<usize> = (0..k).collect();
            assert_eq!(
                alive_together(&graph, &members),
                alive_together_directly(&graph, &members),
                "case {case}"
            );
        }
    }

    /// One node read by `n` others, which one loss reads (the audit's fan-out, forward
    /// half): the `n` readers join the loss's group.
    pub(in crate::solve::heuristic::fastsa) fn fan_out(n: usize) -> Graph {
        let mut nodes = vec![node("r", 1, &[])];
        let readers: Vec<String> = (0..n).map(|i| format!("y{i}")).collect();
        nodes.extend(readers.iter().map(|y| node(y, 1, &["r"])));
        let names: Vec<&str> = readers.iter().map(String::as_str).collect();
        nodes.push(node("loss", 1, &names));
        Graph::new(GraphSpec {
            nodes,
            ..GraphSpec::default()
        })
        .unwrap()
    }

    /// The model of a group of `n` members is linear in `n` (it was quadratic: 54 s for
    /// 200,000), and its build polls the stop, whose error ends it.
    #[test]
    fn the_model_of_a_wide_fan_out_is_built_polled() {
        let n = 3 * POLL_EVERY;
        let graph = fan_out(n);
        let groups = Groups::find(&graph);
        assert_eq!(groups.len(), 2);
        let model = groups.model(&graph, 0.5);
        // Inside the group {y_i, loss}: at the loss, every y_i and the loss's own byte.
        assert_eq!(model.extra(1), n as u128 as i64);
        let mut polls = 0;
        let built = groups.model_polled(&graph, 0.5, || {
            polls += 1;
            Ok::<(), ()>(())
        });
        assert!(built.is_ok());
        assert!(polls >= 2, "{polls} polls");
        let mut left = 1;
        let stopped = groups.model_polled(&graph, 0.5, || {
            if left == 0 {
                return Err("stopped");
            }
            left -= 1;
            Ok(())
        });
        assert_eq!(stopped.err(), Some("stopped"));
    }
}
