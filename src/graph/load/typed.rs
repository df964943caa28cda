//! The fast path of the native reader: a node that is well formed (only the fields the
//! native format reads, each of its type and within its range) is read straight into its
//! [`NodeSpec`], with no intermediate `serde_json::Value` and one allocation per string it
//! keeps. Anything else (a missing, misspelt, repeated or ill-typed field, a byte count
//! written as an integral float, an integer id, a node whose text is longer than
//! [`MAX_TEXT`]) is left to the checked path of [`super`], which reads the node again and
//! reports every problem by node and field. The two paths give the same node for every
//! node this one accepts (a test below compares them); this one only skips the work of
//! naming problems where there are none.

use super::MAX_BYTES;
use crate::graph::{NodeKind, NodeSpec};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The longest node text read here: longer nodes (tens of thousands of inputs) take the
/// checked path, which counts their inputs against the edge limit one at a time instead of
/// holding them all first.
pub(super) const MAX_TEXT: usize = 64 << 10;

/// A native node as the format defines it; `deny_unknown_fields` sends any other field to
/// the checked path.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Native {
    id: String,
    cost: f64,
    memory: u64,
    inputs: Option<Vec<String>>,
    kind: Option<NodeKind>,
    op: Option<String>,
    memory_per_sample: Option<u64>,
    #[allow(dead_code)] // read only to be skipped, as the checked path does
    meta: Option<IgnoredAny>,
}

/// A node read by the fast path, with its `memory_per_sample` when it gives one.
pub(super) struct TypedNode {
    pub node: NodeSpec,
    pub memory_per_sample: Option<u64>,
}

/// `raw` as a well-formed native node whose inputs fit in `edges_left` (which it then
/// counts down), else `None`, with `edges_left` untouched: the caller reads the node the
/// checked way.
pub(super) fn native_node(raw: &RawValue, edges_left: &mut usize) -> Option<TypedNode> {
    let text = raw.get();
    if text.len() > MAX_TEXT || !text.starts_with('{') {
        return None;
    }
    let n: Native = serde_json::from_str(text).ok()?;
    let inputs = n.inputs.unwrap_or_default();
    let bytes_ok = |b: u64| b <= MAX_BYTES;
    let ok = n.cost.is_finite()
        && n.cost >= 0.0
        && bytes_ok(n.memory)
        && n.memory_per_sample.is_none_or(bytes_ok)
        && inputs.len() <= *edges_left;
    if !ok {
        return None;
    }
    *edges_left -= inputs.len();
    Some(TypedNode {
        node: NodeSpec {
            id: n.id,
            cost: n.cost,
            memory: n.memory,
            inputs,
            kind: n.kind,
            op: n.op,
        },
        memory_per_sample: n.memory_per_sample,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::load::native::checked_native;
    use crate::graph::load::raw;
    use crate::graph::Problems;

    fn raw_value(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    /// The node the checked path reads from `text`, and its problems.
    fn checked(text: &str) -> (Option<TypedNode>, Problems) {
        let mut left = usize::MAX;
        let read = raw::node(&raw_value(text), &mut left, usize::MAX).unwrap();
        let mut problems = Problems::default();
        let node = checked_native(0, read.value.as_object().unwrap(), &mut problems);
        (node, problems)
    }

    #[test]
    fn a_well_formed_node_reads_the_same_both_ways() {
        for text in [
            r#"{"id": "a", "cost": 1, "memory": 5}"#,
            r#"{"id": "b\u00e9\n", "cost": 2.5, "memory": 9007199254740992, "inputs": ["a", "a"],
                "kind": "backward", "op": "mm", "memory_per_sample": 3, "meta": {"x": [1]}}"#,
            r#"{"id": "c", "cost": 0, "memory": 0, "inputs": null, "kind": null, "op": null,
                "memory_per_sample": null, "meta": null}"#,
            r#"{"memory": 1, "inputs": [], "cost": 1e3, "id": "d", "kind": "loss"}"#,
        ] {
            let mut left = 10;
            let fast = native_node(&raw_value(text), &mut left).expect(text);
            let (slow, problems) = checked(text);
            let slow = slow.unwrap();
            assert!(problems.is_empty(), "{text}");
            assert_eq!(fast.node, slow.node, "{text}");
            assert_eq!(fast.memory_per_sample, slow.memory_per_sample, "{text}");
            assert_eq!(left, 10 - fast.node.inputs.len());
        }
    }

    #[test]
    fn anything_else_is_left_to_the_checked_path_with_the_edges_uncounted() {
        for text in [
            r#"{"id": "a", "cost": 1, "memory": 5.0}"#,
            r#"{"id": 7, "cost": 1, "memory": 5}"#,
            r#"{"id": "a", "cost": -1, "memory": 5}"#,
            r#"{"id": "a", "cost": 1, "memory": 9007199254740993}"#,
            r#"{"id": "a", "cost": 1, "memory": 5, "deps": ["b"]}"#,
            r#"{"id": "a", "id": "b", "cost": 1, "memory": 5}"#,
            r#"{"id": "a", "cost": 1}"#,
            r#"{"id": "a", "cost": 1, "memory": 5, "kind": "sideways"}"#,
            r#"{"id": "a", "cost": 1, "memory": 5, "inputs": ["x", "y", "z"]}"#,
            r#"[1, 2]"#,
        ] {
            let mut left = 2;
            assert!(native_node(&raw_value(text), &mut left).is_none(), "{text}");
            assert_eq!(left, 2, "{text}");
        }
        let long = format!(
            r#"{{"id": "a", "cost": 1, "memory": 5, "op": "{}"}}"#,
            "x".repeat(MAX_TEXT)
        );
        assert!(native_node(&raw_value(&long), &mut 0).is_none());
    }
}
