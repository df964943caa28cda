//! The native format's nodes (`api/graph.schema.json`): each read straight into a
//! [`NodeSpec`] when it is well formed (`typed`), else the checked way, into a small value
//! whose every bad field is a problem (see [`super`]'s module doc).

use super::fields::{unknown_fields, NATIVE_NODE_FIELDS};
use super::raw::{Limits, RawFields};
use super::typed::{self, TypedNode};
use super::{
    batch_of, bytes_of, checked_node, cost_of, graph_fields, id_of, node_items, optional_field,
    optional_string, short, type_name, At,
};
use crate::aside::Aside;
use crate::graph::{BatchSpec, GraphError, GraphSpec, NodeKind, NodeSpec, ProblemKind, Problems};
use serde_json::{Map, Value};

/// The native graph: its graph-level fields and batch fields, then its nodes.
pub(super) fn native_spec(
    root: &Map<String, Value>,
    raw: &RawFields,
    limits: Limits,
    batch: &mut BatchSpec,
    problems: &mut Problems,
) -> Result<GraphSpec, GraphError> {
    // Freed aside if the deadline ends the reading (`crate::aside`).
    let mut spec = Aside::new(graph_fields(root, problems));
    batch.batch_size = optional_field(
        root,
        "batch_size",
        None,
        ProblemKind::InvalidField,
        batch_of,
        problems,
    );
    batch.fixed_memory_per_sample = optional_field(
        root,
        "fixed_memory_per_sample",
        None,
        ProblemKind::InvalidMemory,
        bytes_of,
        problems,
    );
    let mut edges_left = limits.edges;
    for (index, item) in node_items(raw, limits, problems)?.into_iter().enumerate() {
        limits.check_time_at(index, index)?;
        let read = match typed::native_node(item, &mut edges_left) {
            Some(typed) => Some(typed),
            None => {
                let mut read = None;
                let mut each = |i, obj: &Map<String, Value>, p: &mut Problems| {
                    read = checked_native(i, obj, p)
                };
                checked_node(item, index, &mut edges_left, limits, problems, &mut each)?;
                read
            }
        };
        if let Some(TypedNode {
            node,
            memory_per_sample,
        }) = read
        {
            if let Some(p) = memory_per_sample {
                batch.memory_per_sample.push((node.id.clone(), p));
            }
            spec.nodes.push(node);
        }
    }
    Ok(spec.into_inner())
}

/// A native node read the checked way (`obj` is its small value): every bad field is a
/// problem; the node when it has an id.
pub(super) fn checked_native(
    index: usize,
    obj: &Map<String, Value>,
    problems: &mut Problems,
) -> Option<TypedNode> {
    let id = obj.get("id").and_then(id_of);
    let at = At {
        id: id.as_deref(),
        index,
    };
    if id.is_none() {
        let (kind, msg) = match obj.get("id") {
            None => (
                ProblemKind::MissingField,
                "the node has no `id`".to_string(),
            ),
            Some(v) => (
                ProblemKind::InvalidField,
                format!("must be a string, got {}", type_name(v)),
            ),
        };
        problems.push(at.problem(kind, "id", msg));
    }
    unknown_fields(obj.keys(), NATIVE_NODE_FIELDS, Some(&at), problems);
    let cost = at.required(obj, &["cost"], ProblemKind::InvalidCost, cost_of, problems);
    let memory = at.required(
        obj,
        &["memory"],
        ProblemKind::InvalidMemory,
        bytes_of,
        problems,
    );
    let inputs = native_inputs(obj, &at, problems);
    let kind = native_kind(obj, &at, problems);
    let op = optional_string(obj, "op", &at, problems);
    let per_sample = optional_field(
        obj,
        "memory_per_sample",
        Some(&at),
        ProblemKind::InvalidMemory,
        bytes_of,
        problems,
    );
    id.map(|id| TypedNode {
        node: NodeSpec {
            id,
            cost,
            memory,
            inputs,
            kind,
            op,
        },
        memory_per_sample: per_sample,
    })
}

/// A native node's `inputs`: node ids; anything else is a problem.
fn native_inputs(obj: &Map<String, Value>, at: &At, problems: &mut Problems) -> Vec<String> {
    let mut inputs = Vec::new();
    match obj.get("inputs") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) => {
            for (k, input) in a.iter().enumerate() {
                match id_of(input) {
                    Some(s) => inputs.push(s),
                    None => problems.push(at.problem(
                        ProblemKind::InvalidField,
                        "inputs",
                        format!(
                            "input #{k} must be a node id (string), got {}",
                            type_name(input)
                        ),
                    )),
                }
            }
        }
        Some(other) => problems.push(at.problem(
            ProblemKind::InvalidField,
            "inputs",
            format!("must be an array of node ids, got {}", type_name(other)),
        )),
    }
    inputs
}

/// A native node's optional `kind`: "forward", "loss" or "backward".
fn native_kind(obj: &Map<String, Value>, at: &At, problems: &mut Problems) -> Option<NodeKind> {
    match obj.get("kind") {
        None | Some(Value::Null) => None,
        Some(v) => match serde_json::from_value::<NodeKind>(v.clone()) {
            Ok(k) => Some(k),
            Err(_) => {
                problems.push(at.problem(
                    ProblemKind::InvalidField,
                    "kind",
                    format!(
                        "must be \"forward\", \"loss\" or \"backward\", got {}",
                        short(v)
                    ),
                ));
                None
            }
        },
    }
}
