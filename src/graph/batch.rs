//! Batch-dependent memory: how a graph's bytes and costs grow with the batch size, so that
//! `remat max-batch` can ask "how large a batch fits" (issue 14).
//!
//! # The model
//!
//! A graph that declares its `batch_size` `B` describes the step at that batch: `memory`
//! (`s_v`), `fixed_memory` (`K`) and `cost` (`c_v`) are the figures at `B`. Optional
//! per-sample fields say which part of each size grows with the batch:
//!
//! * node `memory_per_sample` `p_v` (default 0): `s_v(b) = (s_v − p_v·B) + p_v·b`, an
//!   affine size whose batch-independent part `s_v − p_v·B` must be `>= 0` (a weight
//!   gradient has `p_v = 0`; an activation is all per-sample);
//! * graph `fixed_memory_per_sample` `k` (default 0): `K(b) = (K − k·B) + k·b`, for the
//!   input batch, the one resident tensor that grows with `b` (parameters, gradients and
//!   optimizer state do not);
//! * costs are proportional: `c_v(b) = c_v·b/B`. Every op of a training step touches each
//!   sample once, so its time is linear in the batch to first order; a per-launch constant
//!   is not modelled. A consequence the max-batch result states: a schedule's overhead
//!   `cost / Σ_v c_v(b)` does not depend on `b`, and so neither do samples per unit cost
//!   at a given overhead.
//!
//! [`Graph::at_batch`] turns a graph with this model into the ordinary [`Graph`] at batch
//! `b`, which every solver and the simulator take unchanged. Sizes are computed with `u128`
//! and checked against `MAX_BYTES` (`K(b) + Σ_v s_v(b) <= 2^53`) and costs against
//! `MAX_TOTAL_COST`, so a batch too large for the model is a [`BatchError`], never an
//! overflow.
//!
//! # Where the model comes from
//!
//! The native format carries the fields above ([`BatchSpec`]). The node-link importer
//! infers it for Checkmate's `*_train.json` graphs, whose `graph.name` states the batch
//! (`VGG16 (MLSys)_256_(224, 224, 3)_train`): it assumes every node's output is an
//! activation, linear in the batch (`p_v = ⌊s_v / B⌋`, the remainder of the division kept
//! as the fixed part, under `B` bytes a node), and the parameters (`param_cost`) fixed.
//! Those files hold no input node, so `k = 0` there. Checkmate's own max-batch MILP makes
//! the same assumption (it multiplies every size by the batch variable).

use super::{Graph, GraphError, Problem, ProblemKind, Problems, MAX_BYTES, MAX_TOTAL_COST};
use serde::Serialize;

/// Where a graph's batch model comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchSource {
    /// The graph's own `batch_size` and per-sample fields.
    Declared,
    /// The node-link importer's inference: the batch from `graph.name`, every output
    /// linear in the batch, parameters fixed.
    InferredLinear,
}

/// The batch fields as a file gives them, before they are checked against the graph.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BatchSpec {
    pub batch_size: Option<u64>,
    pub fixed_memory_per_sample: Option<u64>,
    /// `(node id, p_v)` for the nodes that give `memory_per_sample`.
    pub memory_per_sample: Vec<(String, u64)>,
    pub source: Option<BatchSource>,
}

/// A validated batch model (see the module docs), per-sample sizes in solver order.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    /// `B`: the batch the graph's sizes and costs describe.
    pub size: u64,
    /// `k`: bytes of `fixed_memory` per sample.
    pub fixed_per_sample: u64,
    /// `p_v`, in solver order.
    pub per_sample: Vec<u64>,
    pub source: BatchSource,
}

impl Batch {
    /// Whether any byte grows with the batch.
    pub fn grows(&self) -> bool {
        self.fixed_per_sample > 0 || self.per_sample.iter().any(|&p| p > 0)
    }
}

/// Why a graph cannot be evaluated at a batch.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BatchError {
    #[error(
        "the graph has no `batch_size`: it does not say how its memory grows with the batch \
         (give `batch_size` and each node's `memory_per_sample`, see api/graph.schema.json)"
    )]
    NoBatch,
    #[error("batch {0} is not a batch size: it must be at least 1")]
    Zero(u64),
    #[error(
        "at batch {batch} the graph needs {total} bytes (fixed_memory + every node's memory), \
         more than the 2^53 = {MAX_BYTES} bytes a graph may hold"
    )]
    TooManyBytes { batch: u64, total: u128 },
    #[error(
        "at batch {batch} the sum of every node's cost is {total:e}, more than the \
         {MAX_TOTAL_COST:e} a graph may have"
    )]
    TooCostly { batch: u64, total: f64 },
}

impl Graph {
    /// The batch model, when the graph has one.
    pub fn batch(&self) -> Option<&Batch> {
        self.batch.as_ref()
    }

    /// Checks `spec` against this graph and attaches it; every problem names its node and
    /// field. A spec without `batch_size` and without per-sample fields leaves the graph
    /// without a batch model.
    pub fn with_batch(mut self, spec: BatchSpec) -> Result<Graph, GraphError> {
        let mut problems = Problems::default();
        let Some(size) = spec.batch_size else {
            if spec.fixed_memory_per_sample.is_some() || !spec.memory_per_sample.is_empty() {
                problems.push(Problem::graph(
                    ProblemKind::MissingField,
                    "batch_size",
                    "per-sample sizes need the graph's `batch_size`: the batch its `memory`, \
                     `fixed_memory` and `cost` describe",
                ));
                return Err(GraphError::Invalid(problems));
            }
            return Ok(self);
        };
        if size == 0 || size > MAX_BYTES {
            problems.push(Problem::graph(
                ProblemKind::InvalidField,
                "batch_size",
                format!("must be an integer from 1 to 2^53 = {MAX_BYTES}, got {size}"),
            ));
            return Err(GraphError::Invalid(problems));
        }
        let grown = |p: u64| u128::from(p) * u128::from(size);
        let k = spec.fixed_memory_per_sample.unwrap_or(0);
        if grown(k) > u128::from(self.fixed_memory) {
            problems.push(Problem::graph(
                ProblemKind::InvalidMemory,
                "fixed_memory_per_sample",
                format!(
                    "fixed_memory_per_sample × batch_size = {} exceeds fixed_memory = {}: \
                     fixed_memory is the size at batch_size and includes the per-sample part",
                    grown(k),
                    self.fixed_memory
                ),
            ));
        }
        let mut per_sample = vec![0; self.len()];
        for (id, p) in &spec.memory_per_sample {
            let Some(v) = self.index_of(id) else { continue };
            if grown(*p) > u128::from(self.memory(v)) {
                problems.push(Problem::node(
                    ProblemKind::InvalidMemory,
                    id,
                    "memory_per_sample",
                    format!(
                        "memory_per_sample × batch_size = {} exceeds memory = {}: memory is \
                         the node's size at batch_size and includes the per-sample part",
                        grown(*p),
                        self.memory(v)
                    ),
                ));
            }
            per_sample[v] = *p;
        }
        if !problems.is_empty() {
            return Err(GraphError::Invalid(problems));
        }
        self.batch = Some(Batch {
            size,
            fixed_per_sample: k,
            per_sample,
            source: spec.source.unwrap_or(BatchSource::Declared),
        });
        Ok(self)
    }

    /// The ordinary graph at batch `b` (sizes and costs as the module docs say), checked
    /// against the byte and cost limits. Its batch model is this one, rebased at `b`.
    pub fn at_batch(&self, b: u64) -> Result<Graph, BatchError> {
        let batch = self.batch.as_ref().ok_or(BatchError::NoBatch)?;
        if b == 0 {
            return Err(BatchError::Zero(b));
        }
        let (big_b, b128) = (u128::from(batch.size), u128::from(b));
        // Validated: p·B <= size, so the fixed part never underflows.
        let at =
            |size: u64, p: u64| u128::from(size) - u128::from(p) * big_b + u128::from(p) * b128;
        let fixed = at(self.fixed_memory, batch.fixed_per_sample);
        let sizes: Vec<u128> = self
            .nodes
            .iter()
            .zip(&batch.per_sample)
            .map(|(n, &p)| at(n.memory, p))
            .collect();
        let total = fixed + sizes.iter().sum::<u128>();
        if total > u128::from(MAX_BYTES) {
            return Err(BatchError::TooManyBytes { batch: b, total });
        }
        let scale = b as f64 / batch.size as f64;
        let total_cost = self.total_cost() * scale;
        if !(total_cost.is_finite() && total_cost <= MAX_TOTAL_COST) {
            return Err(BatchError::TooCostly {
                batch: b,
                total: total_cost,
            });
        }
        let mut g = self.clone();
        // Exact: every figure is at most `total <= MAX_BYTES`.
        g.fixed_memory = fixed as u64;
        for (node, size) in g.nodes.iter_mut().zip(sizes) {
            node.memory = size as u64;
            node.cost *= scale;
        }
        if let Some(rebased) = g.batch.as_mut() {
            rebased.size = b;
        }
        Ok(g)
    }

    /// The largest batch whose costs stay within `MAX_TOTAL_COST` (`c_v(b) = c_v·b/B`, as
    /// [`Graph::at_batch`] sums them), when it is below 2^53 (a larger batch is never held:
    /// its bytes are over `MAX_BYTES` first, every batch model growing by a byte a sample
    /// at least); `None` without a batch model, or when the costs bound nothing below 2^53.
    pub fn cost_limited_batch(&self) -> Option<u64> {
        let batch = self.batch.as_ref()?;
        let total = self.total_cost();
        let size = batch.size as f64;
        let fits = |b: u64| total * (b as f64 / size) <= MAX_TOTAL_COST;
        let guess = (MAX_TOTAL_COST / total * size).floor();
        if total <= 0.0 || guess >= MAX_BYTES as f64 {
            return None;
        }
        // Below 2^53 every batch is exact in f64: the guess is off by rounding only.
        let mut b = guess as u64;
        while b > 0 && !fits(b) {
            b -= 1;
        }
        while b < MAX_BYTES && fits(b + 1) {
            b += 1;
        }
        Some(b)
    }

    /// The two parts of every byte figure, as graphs of their own: the batch-independent
    /// part (`s_v − p_v·B`, `K − k·B`) and the per-sample part (`p_v`, `k`). A schedule's
    /// memory after each event is linear in the sizes, so at batch `b` it is the first
    /// graph's plus `b` times the second's (what `remat max-batch` uses for the
    /// no-recomputation batch in closed form). `None` without a batch model.
    pub fn batch_parts(&self) -> Option<(Graph, Graph)> {
        let batch = self.batch.as_ref()?;
        let (mut fixed, mut per) = (self.clone(), self.clone());
        fixed.fixed_memory = self.fixed_memory - batch.fixed_per_sample * batch.size;
        per.fixed_memory = batch.fixed_per_sample;
        for (v, &p) in batch.per_sample.iter().enumerate() {
            fixed.nodes[v].memory = self.nodes[v].memory - p * batch.size;
            per.nodes[v].memory = p;
        }
        Some((fixed, per))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;

    fn spec(batch: u64, k: u64, per: &[(&str, u64)]) -> BatchSpec {
        BatchSpec {
            batch_size: Some(batch),
            fixed_memory_per_sample: Some(k),
            memory_per_sample: per.iter().map(|(id, p)| (id.to_string(), *p)).collect(),
            source: None,
        }
    }

    fn with_fixed(k: u64) -> Graph {
        let mut s = linear(2).to_spec();
        s.fixed_memory = k;
        for n in &mut s.nodes {
            n.memory = 8;
        }
        Graph::new(s).unwrap()
    }

    #[test]
    fn sizes_are_affine_and_costs_proportional_in_the_batch() {
        let g = with_fixed(10);
        let id = g.id(0).to_string();
        let g = g.with_batch(spec(4, 2, &[(&id, 2)])).unwrap();
        let at8 = g.at_batch(8).unwrap();
        assert_eq!(at8.fixed_memory(), 18, "10 − 2·4 + 2·8");
        assert_eq!(at8.memory(0), 16, "8 − 2·4 + 2·8");
        assert_eq!(at8.memory(1), 8, "no per-sample part: constant");
        assert_eq!(at8.total_cost(), 2.0 * g.total_cost());
        assert_eq!(at8.at_batch(4).unwrap().memory(0), 8, "rebased at 8");
        let (fixed, per) = g.batch_parts().unwrap();
        assert_eq!(
            (fixed.memory(0), per.memory(0), fixed.fixed_memory()),
            (0, 2, 2)
        );
    }

    #[test]
    fn per_sample_parts_above_the_size_are_refused_naming_the_field() {
        let g = with_fixed(10);
        let id = g.id(1).to_string();
        let err = g.with_batch(spec(4, 3, &[(&id, 3)])).unwrap_err();
        let problems = err.problems();
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["fixed_memory_per_sample", "memory_per_sample"]);
        let err = with_fixed(0)
            .with_batch(BatchSpec {
                memory_per_sample: vec![(id, 1)],
                ..BatchSpec::default()
            })
            .unwrap_err();
        assert_eq!(err.problems()[0].field, "batch_size");
    }

    #[test]
    fn a_batch_beyond_the_byte_limit_is_an_error_not_an_overflow() {
        let g = with_fixed(8);
        let g = g.with_batch(spec(1, 8, &[])).unwrap();
        assert!(matches!(
            g.at_batch(u64::MAX),
            Err(BatchError::TooManyBytes { .. })
        ));
        assert_eq!(g.at_batch(0).unwrap_err(), BatchError::Zero(0));
        assert_eq!(with_fixed(8).at_batch(2).unwrap_err(), BatchError::NoBatch);
    }
}
