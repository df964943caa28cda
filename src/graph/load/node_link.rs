//! The networkx node-link format of Checkmate's and Moccasin's benchmark graphs, mapped to
//! the native one as the table in [`super`]'s module doc says.

use super::fields::{unknown_fields, NODE_LINK_NODE_FIELDS};
use super::raw::{self, Limits, RawFields};
use super::{batch_of, bytes_of, cost_of, for_each_node, id_of, short, type_name, At};
use crate::aside::Aside;
use crate::graph::{
    BatchSource, BatchSpec, GraphError, GraphSpec, NodeKind, NodeSpec, Problem, ProblemKind,
    Problems, MAX_BYTES,
};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The spec of a node-link graph: `root` its fields read small, `raw` its fields' texts
/// (`nodes` and `links` read one element at a time; the links count as edges).
pub(super) fn node_link_spec(
    root: &Map<String, Value>,
    raw: &RawFields,
    limits: Limits,
    problems: &mut Problems,
) -> Result<GraphSpec, GraphError> {
    // Freed aside if the deadline ends the reading (`crate::aside`).
    let mut spec = Aside::new(GraphSpec::default());
    let graph_attrs = root.get("graph").and_then(Value::as_object);
    if let Some(name) = graph_attrs
        .and_then(|g| g.get("name"))
        .and_then(Value::as_str)
    {
        spec.name = Some(name.to_string());
    }
    let (params, backward_flags) = read_nodes(&mut spec, raw, limits, problems)?;
    match u64::try_from(params) {
        Ok(p) if p <= MAX_BYTES => spec.fixed_memory = p,
        _ => problems.push(Problem::graph(
            ProblemKind::InvalidMemory,
            "param_cost",
            format!(
                "the sum of every node's `param_cost` (the graph's fixed memory) must be at \
                 most 2^53 = {MAX_BYTES} bytes, got {params}"
            ),
        )),
    }
    let position: Aside<HashMap<String, usize>> = Aside::new(
        spec.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.clone(), i))
            .collect(),
    );
    read_links(&mut spec, &position, raw, limits, problems)?;
    assign_kinds(&mut spec, &backward_flags, &position);
    if let Some(order) = graph_attrs
        .and_then(|g| g.get("order"))
        .and_then(Value::as_array)
    {
        apply_order(&mut spec, order, &position);
    }
    Ok(spec.into_inner())
}

/// The nodes, into `spec.nodes` (without inputs); returns `Σ param_cost`, exact
/// (`Graph::new` refuses a `fixed_memory` above `MAX_BYTES`), and each node's
/// `backward` flag.
fn read_nodes(
    spec: &mut GraphSpec,
    raw: &RawFields,
    limits: Limits,
    problems: &mut Problems,
) -> Result<(u128, Vec<Option<bool>>), GraphError> {
    let mut params: u128 = 0;
    let mut backward_flags: Vec<Option<bool>> = Vec::new();
    for_each_node(raw, limits, problems, |index, obj, problems| {
        let (key_field, key) = match obj.get("id") {
            Some(v) => ("id", id_of(v)),
            None => ("name", obj.get("name").and_then(id_of)),
        };
        let Some(key) = key else {
            problems.push(Problem::at_index(
                ProblemKind::MissingField,
                index,
                key_field,
                "a node-link node needs an `id` or a `name` (string or integer)",
            ));
            return;
        };
        let at = At {
            id: Some(&key),
            index,
        };
        unknown_fields(obj.keys(), NODE_LINK_NODE_FIELDS, Some(&at), problems);
        let cost = at.required(
            obj,
            &["cost_cpu", "duration"],
            ProblemKind::InvalidCost,
            cost_of,
            problems,
        );
        let memory = at.required(
            obj,
            &["cost_ram", "out_cost"],
            ProblemKind::InvalidMemory,
            bytes_of,
            problems,
        );
        if let Some(v) = obj.get("param_cost") {
            match bytes_of(v) {
                Ok(b) => params += u128::from(b),
                Err(m) => problems.push(at.problem(ProblemKind::InvalidMemory, "param_cost", m)),
            }
        }
        backward_flags.push(obj.get("backward").and_then(Value::as_bool));
        let op = if key_field == "id" {
            obj.get("name").and_then(id_of)
        } else {
            None
        };
        spec.nodes.push(NodeSpec {
            id: key,
            cost,
            memory,
            inputs: Vec::new(),
            kind: None,
            op,
        });
    })?;
    Ok((params, backward_flags))
}

/// The links (`links`, or networkx's `edges`), each as an input of its target; a link
/// naming an unknown node, or of another shape, is a problem.
fn read_links(
    spec: &mut GraphSpec,
    position: &HashMap<String, usize>,
    raw: &RawFields,
    limits: Limits,
    problems: &mut Problems,
) -> Result<(), GraphError> {
    let links = match raw.get("links").or_else(|| raw.get("edges")) {
        Some(v) => match raw::items(v, limits.edges, "edges", limits.deadline)? {
            Ok(items) => items,
            Err(other) => {
                problems.push(Problem::graph(
                    ProblemKind::InvalidField,
                    "links",
                    format!("`links` must be an array, got {}", type_name(&other)),
                ));
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    for (k, link) in links.into_iter().map(raw::small).enumerate() {
        limits.check_time_at(k, spec.nodes.len())?;
        let ends = link.as_object().map(|o| {
            let s = o.get("source").or_else(|| o.get("0")).and_then(id_of);
            let t = o.get("target").or_else(|| o.get("1")).and_then(id_of);
            (s, t)
        });
        match ends {
            Some((Some(s), Some(t))) => match (position.get(&s), position.get(&t)) {
                (Some(_), Some(&ti)) => spec.nodes[ti].inputs.push(s),
                _ => {
                    let missing = if position.contains_key(&s) { t } else { s };
                    problems.push(Problem::graph(
                        ProblemKind::UnknownInput,
                        "links",
                        format!("link #{k} names node '{missing}', which is not in `nodes`"),
                    ));
                }
            },
            _ => problems.push(Problem::graph(
                ProblemKind::InvalidField,
                "links",
                format!("link #{k} must be {{\"source\": s, \"target\": t}} or {{\"0\": s, \"1\": t}}, got {}", short(&link)),
            )),
        }
    }
    Ok(())
}

/// Checkmate marks forward ops `backward: false` and the loss and gradient ops `true`;
/// the loss is the one backward op that reads only forward outputs.
fn assign_kinds(spec: &mut GraphSpec, flags: &[Option<bool>], position: &HashMap<String, usize>) {
    if flags.len() != spec.nodes.len() || flags.iter().any(Option::is_none) {
        return;
    }
    let is_bwd = |i: usize| flags[i] == Some(true);
    let loss_candidates: Vec<usize> = (0..spec.nodes.len())
        .filter(|&i| {
            is_bwd(i)
                && !spec.nodes[i].inputs.is_empty()
                && spec.nodes[i].inputs.iter().all(|s| !is_bwd(position[s]))
        })
        .collect();
    for i in 0..spec.nodes.len() {
        spec.nodes[i].kind = Some(if !is_bwd(i) {
            NodeKind::Forward
        } else if loss_candidates == [i] {
            NodeKind::Loss
        } else {
            NodeKind::Backward
        });
    }
}

/// Moccasin's files carry a topological order in `graph.order`: use it as the file order
/// when it is a permutation of the node keys.
fn apply_order(spec: &mut GraphSpec, order: &[Value], position: &HashMap<String, usize>) {
    let keys: Option<Vec<usize>> = order
        .iter()
        .map(|v| id_of(v).and_then(|k| position.get(&k).copied()))
        .collect();
    let Some(keys) = keys else { return };
    let mut seen = vec![false; spec.nodes.len()];
    if keys.len() != spec.nodes.len() || keys.iter().any(|&k| std::mem::replace(&mut seen[k], true))
    {
        return;
    }
    let mut nodes: Vec<Option<NodeSpec>> = std::mem::take(&mut spec.nodes)
        .into_iter()
        .map(Some)
        .collect();
    spec.nodes = keys
        .iter()
        .map(|&k| nodes[k].take().expect("a permutation"))
        .collect();
}

/// The batch model of a node-link graph (see `crate::graph::batch`): the batch `B` from
/// `graph.batch_size`, else from a Checkmate `graph.name` (`{model}_{B}_({input shape})_train`),
/// with every node's output linear in the batch (`p_v = ⌊s_v / B⌋`) and the parameters
/// fixed. A graph that states no batch has no model.
pub(super) fn infer_batch(
    root: &Map<String, Value>,
    spec: &GraphSpec,
    problems: &mut Problems,
) -> BatchSpec {
    let attrs = root.get("graph").and_then(Value::as_object);
    let batch_size = match attrs.and_then(|g| g.get("batch_size")) {
        Some(v) => batch_of(v)
            .map_err(|m| {
                problems.push(Problem::graph(
                    ProblemKind::InvalidField,
                    "graph.batch_size",
                    m,
                ))
            })
            .ok(),
        None => spec.name.as_deref().and_then(checkmate_batch),
    };
    let Some(b) = batch_size else {
        return BatchSpec::default();
    };
    BatchSpec {
        batch_size: Some(b),
        fixed_memory_per_sample: None,
        memory_per_sample: spec
            .nodes
            .iter()
            .map(|n| (n.id.clone(), n.memory / b))
            .collect(),
        source: Some(BatchSource::InferredLinear),
    }
}

/// The batch a Checkmate graph name states: the number just before `_(` of the input
/// shape (`VGG16 (MLSys)_256_(224, 224, 3)_train` is 256).
fn checkmate_batch(name: &str) -> Option<u64> {
    let head = &name[..name.rfind("_(")?];
    let digits = &head[head.rfind('_')? + 1..];
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|b| (1..=MAX_BYTES).contains(b))
}

#[cfg(test)]
mod tests {
    use super::checkmate_batch;

    #[test]
    fn checkmate_names_state_their_batch() {
        assert_eq!(
            checkmate_batch("VGG16 (MLSys)_256_(224, 224, 3)_train"),
            Some(256)
        );
        assert_eq!(
            checkmate_batch("fcn_8_vgg (MLSys)_32_(416, 608, 3)_train"),
            Some(32)
        );
        assert_eq!(checkmate_batch("random_layered_n100_w0.27"), None);
        assert_eq!(checkmate_batch("x_0_(1)_train"), None);
        assert_eq!(checkmate_batch("x__(1)"), None);
    }
}
