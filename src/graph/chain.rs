//! The chain input format (that of rotor, Beaumont et al.'s tool for heterogeneous chains) for users who think in stages, and its
//! conversion to a training graph.
//!
//! ```json
//! {"fw": [2, 3, 1], "bw": [4, 6, 1], "x": [8, 16, 4], "xbar": [16, 4, 4],
//!  "ftmp": [0, 0, 0], "btmp": [0, 0, 0], "budget": 64}
//! ```
//!
//! `L` stages `l = 0..L−1` and the loss at index `L`; every list has length `L + 1`.
//! `fw[l]`, `bw[l]`: forward and backward cost of stage `l` (of the loss at `L`);
//! `x[l]`: size of the input `a_l` of stage `l` (`x[L]` is the loss input, the last
//! stage's output); `xbar[l]`: what stage `l` keeps for its backward when run with F_all
//! (its output `a_{l+1}` and any saved intermediates; `xbar[L]` is the loss's);
//! `ftmp`, `btmp` (optional): transient workspace; `budget` (optional): bytes.
//!
//! # Conversion (what each node is)
//!
//! * `a_0` is the chain input, provided from outside: it is not a node, and `x[0]` is
//!   part of `fixed_memory`.
//! * Stage `l < L` becomes forward op `f{l+1}` (cost `fw[l]`, output size
//!   `max(x[l+1], xbar[l])`, reading `f{l}`) and backward op `g{l+1}` (cost `bw[l]`,
//!   output `δ` of size `x[l]`, the gradient of the stage input) reading the gradient
//!   `g{l+2}` (or the loss) and `f{l+1}`.
//! * The loss becomes one node `loss` (cost `fw[L] + bw[L]`, output size `x[L]`, the
//!   gradient of its input) reading `f{L}`.
//!
//! # Where the conversion is not exact
//!
//! * **F_all memory.** The graph model has one output per op, so what a stage keeps for
//!   its backward (`xbar[l]`) is charged as the size of its output: a checkpoint of
//!   `a_{l+1}` costs `max(x[l+1], xbar[l])` instead of `x[l+1]`. Exact when
//!   `xbar[l] = x[l+1]`; otherwise every schedule is charged at least its true memory, so
//!   a schedule that fits the converted graph fits the real chain.
//! * **Workspace.** The model has no transient workspace; `max(ftmp, btmp)` over all
//!   stages is added to `fixed_memory` (an over-approximation, never an under-one).
//! * **Limits.** Every byte figure is at most 2^53 ([`super::MAX_BYTES`]); the converted
//!   graph's totals are checked by [`Graph::new`], so `x[0] + max(ftmp, btmp)` or a loss
//!   cost `fw[L] + bw[L]` out of range is refused, not saturated.
//! * **Loss.** rotor runs the loss forward and backward as two ops; here they are one op,
//!   so the loss input and the loss gradient are live together.

use super::generate::chain_spec;
use super::structure::StageSpec;
use super::{Graph, GraphError, GraphSpec, Problem, ProblemKind, Problems, MAX_BYTES};
use serde::{Deserialize, Serialize};

/// A chain in rotor's format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub fw: Vec<f64>,
    pub bw: Vec<f64>,
    pub x: Vec<u64>,
    pub xbar: Vec<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ftmp: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub btmp: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<u64>,
}

impl ChainSpec {
    /// Checks the lengths and values, naming every bad field.
    pub fn validate(&self) -> Result<(), GraphError> {
        let len = self.fw.len();
        let mut problems = Problems::default();
        if len < 2 {
            problems.push(Problem::graph(
                ProblemKind::InvalidField,
                "fw",
                format!(
                    "a chain needs at least one stage and the loss (length >= 2), got length {len}"
                ),
            ));
        }
        let mut check_len = |field: &str, n: Option<usize>| {
            if let Some(n) = n.filter(|&n| n != len) {
                problems.push(Problem::graph(
                    ProblemKind::InvalidField,
                    field,
                    format!("`{field}` has length {n}, but `fw` has length {len}"),
                ));
            }
        };
        check_len("bw", Some(self.bw.len()));
        check_len("x", Some(self.x.len()));
        check_len("xbar", Some(self.xbar.len()));
        check_len("ftmp", self.ftmp.as_ref().map(Vec::len));
        check_len("btmp", self.btmp.as_ref().map(Vec::len));
        let no_tmp = Vec::new();
        for (field, list) in [
            ("x", &self.x),
            ("xbar", &self.xbar),
            ("ftmp", self.ftmp.as_ref().unwrap_or(&no_tmp)),
            ("btmp", self.btmp.as_ref().unwrap_or(&no_tmp)),
            ("budget", &self.budget.into_iter().collect()),
        ] {
            if let Some((i, b)) = list.iter().enumerate().find(|(_, b)| **b > MAX_BYTES) {
                problems.push(Problem::graph(
                    ProblemKind::InvalidMemory,
                    field,
                    format!("{field}[{i}] must be at most 2^53 = {MAX_BYTES} bytes, got {b}"),
                ));
            }
        }
        for (field, list) in [("fw", &self.fw), ("bw", &self.bw)] {
            if let Some((i, c)) = list
                .iter()
                .enumerate()
                .find(|(_, c)| !c.is_finite() || **c < 0.0)
            {
                problems.push(Problem::graph(
                    ProblemKind::InvalidCost,
                    field,
                    format!("{field}[{i}] must be a finite number >= 0, got {c}"),
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(GraphError::Invalid(problems))
        }
    }

    /// The training graph of this chain (see the module docs for the mapping), built as
    /// every chain is (`generate::chain_spec`).
    pub fn to_graph(&self) -> Result<Graph, GraphError> {
        self.validate()?;
        let l = self.fw.len() - 1;
        let tmp = |t: &Option<Vec<u64>>| {
            t.as_ref()
                .and_then(|t| t.iter().copied().max())
                .unwrap_or(0)
        };
        let stages: Vec<StageSpec> = (0..l)
            .map(|s| StageSpec {
                fw: self.fw[s],
                bw: self.bw[s],
                x: self.x[s + 1].max(self.xbar[s]),
                delta: self.x[s],
                reads_input: false,
                reads_output: true,
            })
            .collect();
        let loss = (self.fw[l] + self.bw[l], self.x[l]);
        let fixed = self.x[0] + tmp(&self.ftmp).max(tmp(&self.btmp));
        Graph::new(GraphSpec {
            name: self.name.clone(),
            ..chain_spec(&stages, &[], loss, fixed)
        })
        .map_err(in_chain_terms)
    }
}

/// A problem of the converted graph's totals named by the chain's fields they come from:
/// the file has no `cost`, `memory` or `fixed_memory` (costs come from `fw` and `bw`, sizes
/// from `x`, `xbar`, `ftmp` and `btmp`).
fn in_chain_terms(e: GraphError) -> GraphError {
    let GraphError::Invalid(problems) = e else {
        return e;
    };
    GraphError::Invalid(problems.map(|mut p| {
        let (field, from) = match p.field.as_str() {
            "cost" => ("fw", "`fw` and `bw`"),
            "memory" | "fixed_memory" => ("x", "`x`, `xbar`, `ftmp` and `btmp`"),
            _ => return p,
        };
        p.message = format!("the training graph of {from}: {}", p.message);
        p.field = field.to_string();
        p
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::structure::chain;

    #[test]
    fn totals_over_the_limits_name_the_chain_fields() {
        for (json, field, says) in [
            (
                r#"{"fw": [1e300, 1e300], "bw": [1e300, 1e300], "x": [1, 1], "xbar": [1, 1]}"#,
                "fw",
                "`fw` and `bw`",
            ),
            (
                r#"{"fw": [1, 1], "bw": [1, 1], "x": [9007199254740992, 1], "xbar": [9007199254740992, 1]}"#,
                "x",
                "`x`, `xbar`, `ftmp` and `btmp`",
            ),
        ] {
            let spec: ChainSpec = serde_json::from_str(json).unwrap();
            let Err(GraphError::Invalid(problems)) = spec.to_graph() else {
                panic!("{json}: not refused");
            };
            assert_eq!(problems[0].field, field, "{json}");
            assert!(problems[0].message.contains(says), "{json}: {problems:?}");
        }
    }

    #[test]
    fn converts_to_a_chain() {
        let spec: ChainSpec = serde_json::from_str(
            r#"{"fw": [2, 3, 1], "bw": [4, 6, 1], "x": [8, 16, 4], "xbar": [16, 20, 4], "btmp": [0, 5, 0]}"#,
        )
        .unwrap();
        let g = spec.to_graph().unwrap();
        assert_eq!(g.fixed_memory(), 8 + 5);
        let c = chain(&g).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c.stages[1].x, 20);
        assert_eq!(c.stages[0].delta, 8);
        assert_eq!(c.loss_cost, 2.0);
    }

    #[test]
    fn names_bad_fields() {
        let spec: ChainSpec =
            serde_json::from_str(r#"{"fw": [2, -1], "bw": [4], "x": [8, 4], "xbar": [8, 4]}"#)
                .unwrap();
        let err = spec.to_graph().unwrap_err().to_string();
        assert!(err.contains("bw") && err.contains("fw[1]"), "{err}");
    }
}
