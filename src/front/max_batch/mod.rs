//! The largest batch that fits (issue 14): `remat max-batch` and `POST /v1/max-batch`.
//!
//! Given a graph with a batch model (`crate::graph::Batch`: sizes affine in the batch
//! `b`, costs proportional), a memory `M` and an overhead cap `ρ`, find the largest `b`
//! whose schedule from the solver `S` at `graph.at_batch(b)` fits in `M` with
//! `cost / Σ_v c_v(b) <= ρ`, the way Checkmate's max-batch MILP asks it (Jain et al., "Checkmate", MLSys
//! 2020), but as a search over ordinary solves.
//!
//! # Closed forms (no solve)
//!
//! Every byte figure of a fixed schedule is linear in the sizes, so at batch `b` it is
//! `α + β·b`, with `α` from the batch-independent part of the graph and `β` from the
//! per-sample part (`Graph::batch_parts`). Hence, for a memory `M`:
//!
//! * `b_ca`, the largest batch **without recomputation**: the checkpoint-all schedule's
//!   memory after each event `t` is `α_t + β_t·b`, so `b_ca = min_t ⌊(M − α_t)/β_t⌋`
//!   ([`largest_batch`]); its overhead is 1, so it fits under every cap;
//! * `b_lb`, the largest batch **any** schedule could fit: the lower bound
//!   `K(b) + max_v (s_v(b) + Σ_{u ∈ in(v)} s_u(b))` on every peak is a maximum of such lines
//!   too; above `b_lb` nothing fits (proven);
//! * both are capped by `b_max`, the largest batch with `K(b) + Σ_v s_v(b) <= 2^53` and
//!   `Σ_v c_v(b) <= 1e290` (`MAX_TOTAL_COST`), the largest `Graph::at_batch` can build.
//!
//! # The search ([`search()`])
//!
//! `fits(b)` holds when `b <= b_ca`, or when `S` returns a schedule at `b` (replayed by the
//! simulator, as always) within `M` whose overhead is at most `ρ`. Starting from
//! `lo = b_ca` (fits) and `hi = b_lb + 1` (fails), the search gallops up from `lo`
//! (`lo + 1, lo + 2, lo + 4, …`) until a probe fails, then bisects: it ends with `lo` fitting
//! and `lo + 1` failing (or `lo = b_lb`). With `S = auto`, the galloping first runs with
//! `sethi-ullman`, one of the constructive solvers `auto` runs as the floor every answer
//! beats (so a batch it fits, `auto` fits): the fast solver brackets, `auto` confirms
//! above it. The result is the largest batch if `fits` is monotone in `b`, which it is for
//! checkpoint-all (every size grows with `b`) and for any solver whose cost does not rise
//! with the budget when sizes are exactly linear (then batch `b` at memory `M` is batch 1
//! at `M/b`). For a solver without that property the answer is still a batch that fits
//! with `b + 1` refused; `monotone_on_probes` says whether the probes contradicted
//! monotonicity.
//!
//! # The cap
//!
//! `--max-overhead ρ` caps `cost / Σ_v c_v(b)` directly (`ρ >= 1`). `--max-extra-forward f`
//! is Checkmate's form, at most `f` extra forward passes: `ρ = 1 + f·Σ_fwd c_v / Σ_v c_v`
//! (forward ops as the graph marks them, `kind: forward`). Costs are proportional to the
//! batch, so `ρ` is the same at every batch. Without either there is no cap.
//!
//! # Time
//!
//! The time limit applies to the whole search. Each probe of `S` gets what is left divided
//! by the probes the search may still need (`⌈log₂(hi − lo)⌉ + 1`), and the probes stop
//! as long before the limit as the closed forms took (the answer's figures at the end
//! replay the graph as often); when the time is up the search stops with the largest batch
//! found so far, as the solver that found it gave it, and `complete: false`.

mod search;

pub use search::search;

use crate::budget::{Budget, BudgetError};
use crate::graph::{BatchError, BatchSource, Graph, NodeKind, MAX_BYTES};
use crate::schedule::{checkpoint_all, simulate};
use crate::solve::{SolveError, SolveResult};
use serde::Serialize;

/// What a caller asks, before it is checked.
#[derive(Clone, Debug, Default)]
pub struct MaxBatchInput {
    pub memory: Option<Budget>,
    pub max_overhead: Option<f64>,
    pub max_extra_forward: Option<f64>,
    pub solver: String,
}

/// The field or flag an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Memory,
    MaxOverhead,
    MaxExtraForward,
    BatchSize,
    MemoryPerSample,
    Solver,
}

impl Field {
    /// The request field (and graph field) name.
    pub fn field(self) -> &'static str {
        match self {
            Field::Memory => "memory",
            Field::MaxOverhead => "max_overhead",
            Field::MaxExtraForward => "max_extra_forward",
            Field::BatchSize => "batch_size",
            Field::MemoryPerSample => "memory_per_sample",
            Field::Solver => "solver",
        }
    }

    /// The command-line flag; graph fields keep their JSON name.
    pub fn flag(self) -> &'static str {
        match self {
            Field::Memory => "--memory",
            Field::MaxOverhead => "--max-overhead",
            Field::MaxExtraForward => "--max-extra-forward",
            Field::Solver => "--solver",
            Field::BatchSize | Field::MemoryPerSample => self.field(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MaxBatchError {
    #[error("{0}")]
    Batch(#[from] BatchError),
    #[error(
        "the graph's memory does not grow with the batch: no node has a memory_per_sample \
         above 0 and fixed_memory_per_sample is 0"
    )]
    NoGrowth,
    #[error("the memory is required")]
    NoMemory,
    #[error(
        "the memory {memory} bytes is below the graph's batch-independent fixed memory \
         {fixed} bytes (fixed_memory − fixed_memory_per_sample × batch_size): no batch can fit"
    )]
    BelowFixed { memory: u64, fixed: u64 },
    #[error("{0}")]
    Budget(#[from] BudgetError),
    #[error("must be a finite number >= 1 (1 is no recomputation at all), got {0}")]
    CapBelowOne(f64),
    #[error("must be a finite number >= 0 (extra forward passes), got {0}")]
    BadExtraForward(f64),
    #[error("give at most one of max_overhead and max_extra_forward")]
    TwoCaps,
    #[error(
        "the graph marks no forward op (`kind: forward`), so an extra forward pass has no cost \
         to count; use max_overhead"
    )]
    NoForward,
    #[error("{0}")]
    Solve(#[from] SolveError),
}

impl MaxBatchError {
    /// The field at fault, when one is.
    pub fn field(&self) -> Option<Field> {
        match self {
            MaxBatchError::Batch(BatchError::NoBatch) => Some(Field::BatchSize),
            MaxBatchError::Batch(_) => None,
            MaxBatchError::NoGrowth => Some(Field::MemoryPerSample),
            MaxBatchError::NoMemory
            | MaxBatchError::BelowFixed { .. }
            | MaxBatchError::Budget(_) => Some(Field::Memory),
            MaxBatchError::CapBelowOne(_) | MaxBatchError::TwoCaps => Some(Field::MaxOverhead),
            MaxBatchError::BadExtraForward(_) | MaxBatchError::NoForward => {
                Some(Field::MaxExtraForward)
            }
            MaxBatchError::Solve(SolveError::UnknownSolver { .. }) => Some(Field::Solver),
            MaxBatchError::Solve(_) => None,
        }
    }

    /// Whether the caller is at fault (exit 2, HTTP 422) rather than the solve.
    pub fn is_bad_input(&self) -> bool {
        !matches!(
            self,
            MaxBatchError::Solve(SolveError::Failed { .. } | SolveError::Cancelled)
        )
    }
}

/// The overhead cap as the caller gave it and as the ratio `ρ` it means.
#[derive(Clone, Debug, Serialize)]
pub struct Cap {
    /// `ρ`: the largest `cost / Σ_v c_v` accepted (`null`: no cap).
    pub max_overhead: Option<f64>,
    /// The extra forward passes it came from, when given that way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_extra_forward: Option<f64>,
    /// `Σ_fwd c_v / Σ_v c_v`, when the cap counts forward passes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forward_share: Option<f64>,
}

impl Cap {
    /// Whether an overhead is within the cap (a relative 1e-9 for float rounding).
    pub fn admits(&self, overhead: f64) -> bool {
        self.max_overhead
            .is_none_or(|rho| overhead <= rho * (1.0 + 1e-9))
    }
}

/// A checked request: the memory in bytes and the cap as a ratio.
#[derive(Clone, Debug)]
pub struct MaxBatchRequest {
    pub memory: u64,
    pub cap: Cap,
    pub solver: String,
}

impl MaxBatchInput {
    /// Checks the request against `graph`: a batch model that grows, a memory at least the
    /// fixed part, one cap of at least no overhead, a known solver.
    pub fn validate(self, graph: &Graph) -> Result<MaxBatchRequest, MaxBatchError> {
        let batch = graph.batch().ok_or(BatchError::NoBatch)?;
        if !batch.grows() {
            return Err(MaxBatchError::NoGrowth);
        }
        crate::solve::find(&self.solver)?;
        let memory = self.memory.ok_or(MaxBatchError::NoMemory)?.resolve(graph)?;
        let fixed = graph.fixed_memory() - batch.fixed_per_sample * batch.size;
        if memory < fixed {
            return Err(MaxBatchError::BelowFixed { memory, fixed });
        }
        let cap = match (self.max_overhead, self.max_extra_forward) {
            (Some(_), Some(_)) => return Err(MaxBatchError::TwoCaps),
            (Some(rho), None) if !(rho.is_finite() && rho >= 1.0) => {
                return Err(MaxBatchError::CapBelowOne(rho))
            }
            (Some(rho), None) => Cap {
                max_overhead: Some(rho),
                max_extra_forward: None,
                forward_share: None,
            },
            (None, Some(f)) if !(f.is_finite() && f >= 0.0) => {
                return Err(MaxBatchError::BadExtraForward(f))
            }
            (None, Some(f)) => {
                let share = forward_share(graph).ok_or(MaxBatchError::NoForward)?;
                Cap {
                    max_overhead: Some(1.0 + f * share),
                    max_extra_forward: Some(f),
                    forward_share: Some(share),
                }
            }
            (None, None) => Cap {
                max_overhead: None,
                max_extra_forward: None,
                forward_share: None,
            },
        };
        Ok(MaxBatchRequest {
            memory,
            cap,
            solver: self.solver,
        })
    }
}

/// `Σ_fwd c_v / Σ_v c_v`, when the graph marks forward ops (0 when every cost is 0).
fn forward_share(graph: &Graph) -> Option<f64> {
    let forward = graph
        .nodes()
        .iter()
        .filter(|n| n.kind == Some(NodeKind::Forward))
        .map(|n| n.cost);
    let any = graph
        .nodes()
        .iter()
        .any(|n| n.kind == Some(NodeKind::Forward));
    let total = graph.total_cost();
    any.then(|| match total {
        0.0 => 0.0,
        _ => forward.sum::<f64>() / total,
    })
}

/// The largest `b >= 0` with `α + β·b <= limit` for every line `(α, β)`, as exact integers;
/// `None` when no line bounds `b` (every `β` is 0 and every `α` fits).
pub fn largest_batch(lines: impl IntoIterator<Item = (u128, u128)>, limit: u64) -> Option<u64> {
    let limit = u128::from(limit);
    let mut best: Option<u128> = None;
    for (alpha, beta) in lines {
        let b = match (alpha > limit, beta) {
            (true, _) => 0,
            (false, 0) => continue,
            (false, beta) => (limit - alpha) / beta,
        };
        best = Some(best.map_or(b, |x| x.min(b)));
    }
    // Every `β >= 1` and `limit <= u64::MAX`, so the quotient fits.
    best.map(|b| b as u64)
}

/// The batches the closed forms of the module docs give, for one memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Bounds {
    /// `b_ca`: the largest batch without recomputation (checkpoint-all fits).
    pub no_recompute: u64,
    /// `b_lb`: above it no schedule fits (the footprint bound; proven).
    pub upper_bound: u64,
    /// `b_max`: the largest batch the graph model can hold (`K + Σ s_v <= 2^53`,
    /// `Σ c_v <= 1e290`).
    pub model_limit: u64,
}

impl Bounds {
    /// The closed forms for `graph` (which has a growing batch model) at `memory`.
    pub fn new(graph: &Graph, memory: u64) -> Bounds {
        let (fixed, per) = graph.batch_parts().expect("validated: a batch model");
        let all = |g: &Graph| (0..g.len()).map(|v| u128::from(g.memory(v))).sum::<u128>();
        let total = (
            u128::from(fixed.fixed_memory()) + all(&fixed),
            u128::from(per.fixed_memory()) + all(&per),
        );
        let bytes_limit = largest_batch([total], MAX_BYTES).expect("a growing model");
        let model_limit = graph
            .cost_limited_batch()
            .map_or(bytes_limit, |b| b.min(bytes_limit));
        let footprints = (0..graph.len()).map(|v| {
            (
                u128::from(fixed.fixed_memory() + fixed.footprint(v)),
                u128::from(per.fixed_memory() + per.footprint(v)),
            )
        });
        let schedule = checkpoint_all(graph);
        let replay = |g: &Graph| {
            simulate(g, &schedule)
                .expect("checkpoint-all is a valid schedule")
                .memory_after
        };
        let (alpha, beta) = (replay(&fixed), replay(&per));
        let events = alpha
            .iter()
            .zip(&beta)
            .map(|(&a, &b)| (u128::from(a), u128::from(b)));
        let capped = |b: Option<u64>| b.map_or(model_limit, |b| b.min(model_limit));
        Bounds {
            no_recompute: capped(largest_batch(events, memory)),
            upper_bound: capped(largest_batch(footprints, memory)),
            model_limit,
        }
    }
}

/// One solve of the search.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    pub batch: u64,
    /// The solver asked (`sethi-ullman` while bracketing for `auto`).
    pub solver: String,
    pub fits: bool,
    /// The schedule's overhead, when the solver returned one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<f64>,
    pub solve_time_s: f64,
}

/// The batch model the answer rests on.
#[derive(Clone, Debug, Serialize)]
pub struct BatchModel {
    /// The batch the file's figures describe.
    pub batch_size: u64,
    pub source: BatchSource,
    pub assumption: &'static str,
}

/// A batch and what training at it costs.
#[derive(Clone, Debug, Serialize)]
pub struct AtBatch {
    pub batch: u64,
    /// The simulator's peak at that batch (`fixed_memory` included).
    pub peak_memory: u64,
    /// `cost / Σ_v c_v(batch)`.
    pub overhead: f64,
    /// `batch / cost`: samples per unit of cost (the graph's `cost_unit`); `None` when the
    /// cost is 0 (a graph whose every node is free).
    pub samples_per_cost: Option<f64>,
}

impl AtBatch {
    /// The figures of a schedule at `batch` from the simulator's `stats`.
    pub(crate) fn new(batch: u64, stats: &crate::schedule::SimStats) -> AtBatch {
        AtBatch {
            batch,
            peak_memory: stats.peak_memory,
            overhead: stats.overhead,
            samples_per_cost: (stats.total_cost > 0.0).then(|| batch as f64 / stats.total_cost),
        }
    }
}

/// The answer of `remat max-batch` and `POST /v1/max-batch`.
#[derive(Clone, Debug, Serialize)]
pub struct MaxBatchResult {
    /// The largest batch found (0: none fits).
    pub batch: u64,
    /// The memory in bytes.
    pub memory: u64,
    pub solver: String,
    pub cap: Cap,
    pub batch_model: BatchModel,
    /// The figures at `batch` (absent when none fits).
    pub with_remat: Option<AtBatch>,
    /// The largest batch without recomputation, from the checkpoint-all peak (closed form).
    pub no_recompute: Option<AtBatch>,
    /// `batch / no_recompute.batch`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gain: Option<f64>,
    /// No schedule at all fits above this batch (the footprint bound; proven).
    pub upper_bound: u64,
    /// The largest batch the graph model can hold (2^53 bytes and 1e290 of cost in all).
    pub model_limit: u64,
    /// Whether the search ended (`false`: the time limit or a cancel stopped it).
    pub complete: bool,
    /// Whether every probe that fitted lies below every probe that did not.
    pub monotone_on_probes: bool,
    pub probes: Vec<Probe>,
    /// The solve at `batch`: its schedule and the simulator's figures.
    pub result: Option<SolveResult>,
    pub search_time_s: f64,
}

#[cfg(test)]
mod tests;
