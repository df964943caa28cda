//! The training graph: one DAG holding the forward ops, the loss and the backward ops
//! (one instance for every solver).
//!
//! Every node `v` has a compute cost `c_v` (a finite number `>= 0`, in the graph's
//! `cost_unit`) and the size `s_v` in bytes of its output. `fixed_memory` is the constant
//! `K`: parameters, gradients, optimizer state and inputs, resident for the whole
//! step and counted inside every budget.
//!
//! A [`Graph`] is always valid: it is only built by [`Graph::new`], which checks the
//! specification and reports every problem at once. Nodes are stored in the *solver
//! order*, a deterministic topological order: the file's order when it already is one,
//! else Kahn's algorithm breaking ties by file position. Solvers that need an order
//! (Checkmate's stages, the chain DPs) use node indices `0..n` as that order.
//!
//! # Limits: sums that cannot overflow
//!
//! [`Graph::new`] refuses a graph whose totals are out of range, naming the field:
//!
//! * **Bytes.** `K + Σ_v s_v <= MAX_BYTES` (2^53 = 9,007,199,254,740,992 bytes, 8 PiB): every
//!   `s_v`, `K`, and any sum of them (a footprint `s_v + Σ_{u ∈ inputs(v)} s_u`, the memory in
//!   use at any event of any schedule, which counts each resident output once) fits in a
//!   `u64` with room to spare and is exact as an `f64`. The graph model, the simulator and
//!   the budgets add bytes with plain `+` on this invariant.
//! * **Costs.** Every `c_v` is finite and `>= 0`, and `Σ_v c_v <= MAX_TOTAL_COST` (10^290):
//!   a schedule pays at most `Σ_v c_v` per compute event, so any schedule of fewer than
//!   10^18 compute events (far more than memory can hold) has a finite total cost, and so
//!   do the sums the solvers form (recomputation costs, bounds, gaps).
//!
//! A graph may describe a second, slower storage tier ([`Storage`], the JSON field
//! `storage`): data only, for the solvers and the simulator that move values to it. It may
//! also say how its sizes and costs grow with the batch ([`Batch`], the fields
//! `batch_size`, `memory_per_sample`, `fixed_memory_per_sample`); [`Graph::at_batch`] gives
//! the ordinary graph at another batch.
//!
//! This module knows nothing of schedules or solvers.

mod batch;
pub mod chain;
mod error;
pub mod generate;
pub mod load;
mod storage;
pub mod structure;
mod validate;

pub use batch::{Batch, BatchError, BatchSource, BatchSpec};
pub use error::{GraphError, Problem, ProblemKind, Problems};
pub use storage::{Storage, StorageError, StorageSpec, TransferRate};

use crate::aside::Aside;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Instant;
use validate::{edges, positions, solver_order, totals, unprintable, Clock};

/// The largest `K + Σ_v s_v` (and the largest budget): 2^53 bytes, so that every byte
/// figure is exact as an `f64` and no sum of them overflows a `u64`.
pub const MAX_BYTES: u64 = 1 << 53;

/// The largest `Σ_v c_v`: leaves a factor of 10^18 for recomputation below `f64::MAX`.
pub const MAX_TOTAL_COST: f64 = 1e290;

/// The most nodes a cycle's problem names (a cycle can run through every node).
const CYCLE_NODES_NAMED: usize = 20;

/// The role of an op in the training step. Optional: graphs that do not say are
/// treated as plain DAGs by the solvers that care (e.g. every node is a checkpoint
/// candidate for Chen's heuristics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    Forward,
    Loss,
    Backward,
}

/// One op of the graph, as the user described it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeSpec {
    pub id: String,
    pub cost: f64,
    pub memory: u64,
    #[serde(default)]
    pub inputs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<NodeKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
}

impl NodeSpec {
    /// A node without `kind` or `op`.
    pub fn plain(id: &str, cost: f64, memory: u64, inputs: &[&str]) -> NodeSpec {
        NodeSpec {
            id: id.into(),
            cost,
            memory,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            kind: None,
            op: None,
        }
    }
}

/// A training graph as the user described it: not yet validated or ordered. This is the
/// native JSON format (`api/graph.schema.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GraphSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub fixed_memory: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_unit: Option<String>,
    pub nodes: Vec<NodeSpec>,
}

/// One node of a validated graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub id: String,
    pub cost: f64,
    pub memory: u64,
    pub kind: Option<NodeKind>,
    pub op: Option<String>,
}

/// A validated training graph in solver order. Node `i` is the `i`-th op of the order;
/// every edge goes from a lower to a higher index.
#[derive(Clone, Debug)]
pub struct Graph {
    name: Option<String>,
    fixed_memory: u64,
    cost_unit: Option<String>,
    nodes: Vec<Node>,
    /// Predecessors (inputs) of each node, ascending, without duplicates.
    preds: Vec<Vec<usize>>,
    /// Successors (consumers) of each node, ascending.
    succs: Vec<Vec<usize>>,
    index: HashMap<String, usize>,
    /// The slow tier, when the graph (or the solve request) describes one.
    storage: Option<Storage>,
    /// How sizes and costs grow with the batch, when the graph says (`batch.rs`).
    batch: Option<Batch>,
}

impl Graph {
    /// Validates `spec` and puts its nodes in solver order. Every problem found is
    /// reported, each naming its node and field.
    pub fn new(spec: GraphSpec) -> Result<Graph, GraphError> {
        Graph::new_by(spec, None)
    }

    /// [`Graph::new`] that stops at `deadline` ([`GraphError::TimeLimit`]), looking at the
    /// clock every 4096 nodes (`TIME_CHECK_EVERY`) of its passes over the ids and the
    /// inputs (the graph reader's deadline, which a large graph may reach while it is
    /// built: on a million nodes the passes are about a CPU second of hash lookups).
    /// On every error path the spec and what was built of the graph are freed aside
    /// (`crate::aside`): the answer does not wait for a million nodes to be freed.
    pub fn new_by(spec: GraphSpec, deadline: Option<Instant>) -> Result<Graph, GraphError> {
        let spec = Aside::new(spec);
        let clock = Clock {
            deadline,
            nodes: spec.nodes.len(),
        };
        let mut problems = Problems::default();
        if spec.nodes.is_empty() {
            problems.push(Problem::graph(
                ProblemKind::EmptyGraph,
                "nodes",
                "the graph has no nodes",
            ));
            return Err(GraphError::Invalid(problems));
        }
        let position = positions(&spec, &clock, &mut problems)?;
        if let Some(message) = spec.name.as_deref().and_then(|n| unprintable("name", n)) {
            problems.push(Problem::graph(ProblemKind::InvalidField, "name", message));
        }
        totals(&spec, &mut problems);
        let preds = edges(&spec, &position, &clock, &mut problems)?;
        let order = solver_order(&preds).map_err(|cycles| {
            for cycle in cycles {
                let ids: Vec<&str> = cycle
                    .iter()
                    .take(CYCLE_NODES_NAMED)
                    .map(|&i| spec.nodes[i].id.as_str())
                    .collect();
                let more = match cycle.len() - ids.len() {
                    0 => String::new(),
                    k => format!(" and {k} more"),
                };
                problems.push(Problem::node(
                    ProblemKind::Cycle,
                    ids[0],
                    "inputs",
                    format!(
                        "the inputs form a cycle through nodes {}{more}",
                        ids.join(" -> ")
                    ),
                ));
            }
        });
        match order {
            Ok(order) if problems.is_empty() => Ok(Graph::from_order(
                spec.into_inner(),
                preds.into_inner(),
                &order,
                position.into_inner(),
            )),
            _ => Err(GraphError::Invalid(problems)),
        }
    }

    /// The graph of `spec` in `order` (file positions), with `file_preds` in file
    /// positions; `index` maps each id to its file position, and then to its place in
    /// `order`.
    fn from_order(
        spec: GraphSpec,
        mut file_preds: Vec<Vec<usize>>,
        order: &[usize],
        mut index: HashMap<String, usize>,
    ) -> Graph {
        let n = order.len();
        let node = |s: NodeSpec| Node {
            id: s.id,
            cost: s.cost,
            memory: s.memory,
            kind: s.kind,
            op: s.op,
        };
        let (nodes, mut preds): (Vec<Node>, Vec<Vec<usize>>) =
            if order.iter().enumerate().all(|(r, &p)| r == p) {
                (spec.nodes.into_iter().map(node).collect(), file_preds)
            } else {
                let mut rank = vec![0usize; n];
                for (r, &file_pos) in order.iter().enumerate() {
                    rank[file_pos] = r;
                }
                for v in index.values_mut() {
                    *v = rank[*v];
                }
                let mut file_nodes: Vec<Option<NodeSpec>> =
                    spec.nodes.into_iter().map(Some).collect();
                order
                    .iter()
                    .map(|&file_pos| {
                        let s = file_nodes[file_pos]
                            .take()
                            .expect("each position appears once");
                        let p = std::mem::take(&mut file_preds[file_pos]);
                        (node(s), p.into_iter().map(|u| rank[u]).collect())
                    })
                    .unzip()
            };
        for p in &mut preds {
            p.sort_unstable();
        }
        let mut succs = vec![Vec::new(); n];
        for (v, ps) in preds.iter().enumerate() {
            for &u in ps {
                succs[u].push(v);
            }
        }
        Graph {
            name: spec.name,
            fixed_memory: spec.fixed_memory,
            cost_unit: spec.cost_unit,
            nodes,
            preds,
            succs,
            index,
            storage: None,
            batch: None,
        }
    }

    /// The same graph with this slow tier (or none).
    pub fn with_storage(mut self, storage: Option<Storage>) -> Graph {
        self.storage = storage;
        self
    }
    /// The slow storage tier, when there is one.
    pub fn storage(&self) -> Option<&Storage> {
        self.storage.as_ref()
    }

    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    pub fn fixed_memory(&self) -> u64 {
        self.fixed_memory
    }
    pub fn cost_unit(&self) -> Option<&str> {
        self.cost_unit.as_deref()
    }
    /// Number of nodes `n`.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    /// Always false: a graph has at least one node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
    pub fn edge_count(&self) -> usize {
        self.preds.iter().map(Vec::len).sum()
    }
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    pub fn node(&self, v: usize) -> &Node {
        &self.nodes[v]
    }
    pub fn id(&self, v: usize) -> &str {
        &self.nodes[v].id
    }
    pub fn cost(&self, v: usize) -> f64 {
        self.nodes[v].cost
    }
    pub fn memory(&self, v: usize) -> u64 {
        self.nodes[v].memory
    }
    /// Inputs of `v`, ascending in solver order.
    pub fn preds(&self, v: usize) -> &[usize] {
        &self.preds[v]
    }
    /// Consumers of `v`, ascending in solver order.
    pub fn succs(&self, v: usize) -> &[usize] {
        &self.succs[v]
    }
    /// Index of the node with this id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }
    /// Every edge `(u, v)`: `v` reads the output of `u`; sorted by `(v, u)`.
    pub fn edges(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.preds
            .iter()
            .enumerate()
            .flat_map(|(v, ps)| ps.iter().map(move |&u| (u, v)))
    }
    /// Σ_v c_v: the cost of a step without recomputation (at most `MAX_TOTAL_COST`).
    pub fn total_cost(&self) -> f64 {
        self.nodes.iter().map(|n| n.cost).sum()
    }
    /// Whether any node carries a `kind` (a pass over the nodes when none does: ask once,
    /// not once a node).
    pub fn has_kinds(&self) -> bool {
        self.nodes.iter().any(|n| n.kind.is_some())
    }
    /// The bytes needed to run `v` at all: its inputs and its output, resident together
    /// (at most `MAX_BYTES`, by the load invariant).
    pub fn footprint(&self, v: usize) -> u64 {
        self.nodes[v].memory
            + self.preds[v]
                .iter()
                .map(|&u| self.nodes[u].memory)
                .sum::<u64>()
    }
    /// A lower bound on every schedule's peak: `K + max_v (s_v + Σ_{u ∈ inputs(v)} s_u)`,
    /// with the node that attains it.
    pub fn min_feasible_budget(&self) -> (u64, usize) {
        let (v, fp) = (0..self.len())
            .map(|v| (v, self.footprint(v)))
            .max_by_key(|&(v, fp)| (fp, std::cmp::Reverse(v)))
            .expect("a graph has nodes");
        (self.fixed_memory + fp, v)
    }

    /// The graph in the native JSON format, nodes in solver order.
    pub fn to_spec(&self) -> GraphSpec {
        GraphSpec {
            name: self.name.clone(),
            fixed_memory: self.fixed_memory,
            cost_unit: self.cost_unit.clone(),
            nodes: self
                .nodes
                .iter()
                .enumerate()
                .map(|(v, n)| NodeSpec {
                    id: n.id.clone(),
                    cost: n.cost,
                    memory: n.memory,
                    inputs: self.preds[v]
                        .iter()
                        .map(|&u| self.nodes[u].id.clone())
                        .collect(),
                    kind: n.kind,
                    op: n.op.clone(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, inputs: &[&str]) -> NodeSpec {
        NodeSpec {
            id: id.into(),
            cost: 1.0,
            memory: 1,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            kind: None,
            op: None,
        }
    }

    #[test]
    fn file_order_kept_when_topological() {
        let g = Graph::new(GraphSpec {
            nodes: vec![node("a", &[]), node("b", &["a"]), node("c", &["a", "b"])],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(g.id(2), "c");
        assert_eq!(g.preds(2), &[0, 1]);
        assert_eq!(g.succs(0), &[1, 2]);
    }

    #[test]
    fn control_characters_in_ids_and_names_are_problems() {
        let e = Graph::new(GraphSpec {
            name: Some("bell\u{7}".into()),
            nodes: vec![node("\u{1b}[2J", &[])],
            ..Default::default()
        })
        .unwrap_err();
        let problems = e.problems();
        assert_eq!(problems.len(), 2, "{e}");
        assert!(problems
            .iter()
            .any(|p| p.field == "id" && p.message.contains("control character '\\u{1b}'")));
        assert!(problems.iter().any(|p| p.field == "name"));
    }

    #[test]
    fn the_build_stops_at_its_deadline() {
        let spec = GraphSpec {
            nodes: vec![node("a", &[]), node("b", &["a"])],
            ..Default::default()
        };
        let late = Graph::new_by(spec.clone(), Some(Instant::now()));
        assert!(
            matches!(late, Err(GraphError::TimeLimit { nodes: 2 })),
            "{late:?}"
        );
        assert!(Graph::new_by(spec, None).is_ok());
    }

    #[test]
    fn repeated_inputs_count_once_however_many_a_node_has() {
        let many: Vec<String> = (0..40).map(|i| format!("s{}", i % 20)).collect();
        let mut nodes: Vec<NodeSpec> = (0..20).map(|i| node(&format!("s{i}"), &[])).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        nodes.push(node("wide", &refs));
        nodes.push(node("narrow", &["s1", "s0", "s1"]));
        let g = Graph::new(GraphSpec {
            nodes,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(g.preds(20), (0..20).collect::<Vec<_>>());
        assert_eq!(g.preds(21), &[0, 1]);
        assert_eq!(g.index_of("narrow"), Some(21));
    }

    #[test]
    fn kahn_breaks_ties_by_file_position() {
        // file: c(a), b, a  -> b and a are sources; b comes first in the file.
        let g = Graph::new(GraphSpec {
            nodes: vec![node("c", &["a"]), node("b", &[]), node("a", &[])],
            ..Default::default()
        })
        .unwrap();
        let ids: Vec<&str> = (0..3).map(|v| g.id(v)).collect();
        assert_eq!(ids, ["b", "a", "c"]);
        let index = ["a", "b", "c"].map(|id| g.index_of(id));
        assert_eq!(index, [Some(1), Some(0), Some(2)]);
        assert_eq!(g.preds(2), &[1]);
    }
}
