//! What `remat inspect` and `POST /v1/inspect` report of a graph: its size and costs, and
//! the two memory figures every useful budget lies between: the trivial lower bound
//! `K + max_v (s_v + Σ_{u ∈ inputs(v)} s_u)` (`Graph::min_feasible_budget`) and the peak
//! of checkpoint-all (no recomputation), the 100% of percentage budgets. For a graph
//! with a slow storage tier it adds whether offloading helps (`solve::assess`, the two-level model).

use crate::graph::{Graph, NodeKind};
use crate::schedule::checkpoint_all_peak;
use crate::solve::details::Assessment;
use crate::solve::{assess, least_budget};
use serde::Serialize;

/// Nodes per kind (0 each for graphs that do not say).
#[derive(Clone, Debug, Serialize)]
pub struct KindCounts {
    pub forward: usize,
    pub loss: usize,
    pub backward: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct GraphReport {
    pub name: Option<String>,
    pub nodes: usize,
    pub edges: usize,
    pub kinds: KindCounts,
    pub total_cost: f64,
    pub cost_unit: Option<String>,
    pub fixed_memory: u64,
    pub checkpoint_all_peak: u64,
    pub min_feasible_budget: u64,
    /// The node whose computation needs `min_feasible_budget`.
    pub min_feasible_budget_node: String,
    /// The graph's shape class (`crate::graph::structure`), which picks the exact solvers.
    pub structure: &'static str,
    pub structure_detail: String,
    /// For graphs with a storage tier: whether offloading helps at the budget
    /// (`solve::assess`, the two-level model), or why it cannot be assessed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_tier: Option<StorageTier>,
}

/// The storage-tier part of the report: the assessment, or (as `{"verdict": ...}`) why
/// the graph cannot be assessed.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum StorageTier {
    Assessed(Box<Assessment>),
    Unassessed { verdict: String },
}

impl StorageTier {
    /// One sentence: whether the tier helps, or why that cannot be said.
    pub fn verdict(&self) -> &str {
        match self {
            StorageTier::Assessed(a) => &a.verdict,
            StorageTier::Unassessed { verdict } => verdict,
        }
    }
}

/// The report; `budget` (bytes) is the one the storage-tier verdict is given for (the
/// least budget two-level can run in when absent).
pub fn report(g: &Graph, budget: Option<u64>) -> GraphReport {
    let (min_budget, widest) = g.min_feasible_budget();
    let count = |k: NodeKind| g.nodes().iter().filter(|n| n.kind == Some(k)).count();
    let structure = crate::graph::structure::detect(g);
    GraphReport {
        name: g.name().map(str::to_string),
        nodes: g.len(),
        edges: g.edge_count(),
        kinds: KindCounts {
            forward: count(NodeKind::Forward),
            loss: count(NodeKind::Loss),
            backward: count(NodeKind::Backward),
        },
        total_cost: g.total_cost(),
        cost_unit: g.cost_unit().map(str::to_string),
        fixed_memory: g.fixed_memory(),
        checkpoint_all_peak: checkpoint_all_peak(g),
        min_feasible_budget: min_budget,
        min_feasible_budget_node: g.id(widest).to_string(),
        structure: structure.class(),
        structure_detail: structure.describe(g),
        storage_tier: g.storage().map(|_| {
            match assess(g, budget.unwrap_or_else(|| least_budget(g))) {
                Ok(a) => StorageTier::Assessed(Box::new(a)),
                Err(e) => StorageTier::Unassessed {
                    verdict: e.to_string(),
                },
            }
        }),
    }
}
