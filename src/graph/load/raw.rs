//! Reading a graph's JSON within limits, before anything in proportion to it is built.
//!
//! The text is first checked and split without being built: the graph object into its
//! fields, each kept as its raw text (`serde_json::value::RawValue`, a slice of the
//! input), and the `nodes` and `links` arrays into their elements' raw texts, counted
//! against [`Limits`] as they are met (a body of sixty million `{}` stops at the
//! `nodes + 1`-th). Each node is then read on its own into a small `serde_json::Value`
//! (so that every bad field of every node is still reported by name), turned into its
//! node and dropped; a node's `inputs` are counted against the edge limit while they are
//! read. Values that nothing reads in full are read small ([`small`]): `meta` not at all,
//! any other value to at most [`SMALL_VALUES`] values (strings whole), which is more than
//! any message shows of it. An object (the graph, a node) may have at most
//! [`MAX_FIELDS`] fields.
//!
//! What this costs: the input text, 16 bytes per node and link (their raw slices), one
//! node's small value at a time, and the graph spec being built (every string of it is a
//! copy of input text, so strings cost at most the input's bytes plus one allocation
//! each).

use crate::graph::GraphError;
use serde::de::{
    self, DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

/// Limits on a graph's JSON, checked while it is read: nodes (`nodes`, or `2L + 1` for a
/// chain of `L` stages), edges (every node's `inputs`, or `links`) and the instant by
/// which it must be read (checked every `TIME_CHECK_EVERY` (4096) nodes or links and before the
/// graph is built: [`GraphError::TimeLimit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub nodes: usize,
    pub edges: usize,
    pub deadline: Option<Instant>,
}

impl Limits {
    /// No limit (files read by the command line without a time limit).
    pub const NONE: Limits = Limits {
        nodes: usize::MAX,
        edges: usize::MAX,
        deadline: None,
    };

    /// `Err(GraphError::TimeLimit)` once the deadline has passed, with `nodes` read.
    pub fn check_time(&self, nodes: usize) -> Result<(), GraphError> {
        match self.deadline {
            Some(d) if Instant::now() >= d => Err(GraphError::TimeLimit { nodes }),
            _ => Ok(()),
        }
    }

    /// [`Limits::check_time`] for the `i`-th node or link read: every
    /// `TIME_CHECK_EVERY`-th (4096th) only.
    pub fn check_time_at(&self, i: usize, nodes: usize) -> Result<(), GraphError> {
        if i % TIME_CHECK_EVERY == 0 {
            self.check_time(nodes)
        } else {
            Ok(())
        }
    }
}

/// Nodes or links read between two looks at the clock (a few milliseconds of reading).
pub const TIME_CHECK_EVERY: usize = 4096;

/// The most fields an object of a graph (the graph, its `graph` attributes, a node) may
/// have; every format reads at most 9.
pub const MAX_FIELDS: usize = 64;

/// The most values read of a value that is read small: a message shows at most 60
/// characters of it, which never take more values than that.
pub const SMALL_VALUES: usize = 128;

/// Deserialisation errors raised here on purpose carry this text, so that the caller
/// reports its own error instead of serde's.
const STOPPED: &str = "remat: stopped reading";
/// The same, for a reading stopped by the deadline.
const TIMED_OUT: &str = "remat: out of time";

/// `e` as the error to report: [`GraphError::TooLarge`] naming `what` when this module
/// stopped the reading past `limit`, [`GraphError::TimeLimit`] past the deadline, else the
/// syntax error.
fn stopped_or_json(e: &serde_json::Error, what: &'static str, limit: usize) -> GraphError {
    let text = e.to_string();
    if text.starts_with(STOPPED) {
        GraphError::TooLarge { what, limit }
    } else if text.starts_with(TIMED_OUT) {
        GraphError::TimeLimit { nodes: 0 }
    } else {
        json_error(e)
    }
}

/// A JSON syntax error as a [`GraphError::Json`].
pub(super) fn json_error(e: &serde_json::Error) -> GraphError {
    GraphError::Json {
        line: e.line(),
        column: e.column(),
        message: super::strip_position(&e.to_string()),
    }
}

/// The fields of a JSON object, each as its raw text; `Err` with the value read small
/// when `text` is not an object, [`GraphError::Json`] when it is not JSON.
pub(crate) fn fields(text: &[u8]) -> Result<Result<RawFields<'_>, Value>, GraphError> {
    if text.trim_ascii_start().first() != Some(&b'{') {
        let raw: &RawValue = serde_json::from_slice(text).map_err(|e| json_error(&e))?;
        return Ok(Err(small(raw)));
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    let read = de
        .deserialize_map(FieldsSeed)
        .and_then(|f| de.end().map(|_| f));
    match read {
        Ok(f) => Ok(Ok(f)),
        Err(e) if e.to_string().starts_with(STOPPED) => Err(GraphError::Format(format!(
            "a graph object has at most {MAX_FIELDS} fields"
        ))),
        Err(e) => Err(json_error(&e)),
    }
}

/// An object's fields as raw texts, in key order.
pub(crate) type RawFields<'a> = BTreeMap<String, &'a RawValue>;

struct FieldsSeed;

/// A field given twice in one object: which value counts would be a guess (serde_json
/// keeps the last), so it is an error naming the field.
fn duplicate<E: de::Error>(key: &str) -> E {
    E::custom(format!("the field `{key}` is given twice"))
}

impl<'de> Visitor<'de> for FieldsSeed {
    type Value = RawFields<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            if fields.contains_key(&key) {
                return Err(duplicate(&key));
            }
            if fields.len() == MAX_FIELDS {
                return Err(de::Error::custom(STOPPED));
            }
            fields.insert(key, map.next_value::<&RawValue>()?);
        }
        Ok(fields)
    }
}

/// `raw` read small: at most [`SMALL_VALUES`] values, in document order (the rest of an
/// array or object skipped), strings whole. `raw` is valid JSON (it was checked when it
/// was split off); nested past serde_json's recursion limit (128), it is read as an empty
/// array or object, so that a message still names its type.
pub(crate) fn small(raw: &RawValue) -> Value {
    let mut left = SMALL_VALUES;
    let mut de = serde_json::Deserializer::from_str(raw.get());
    Small::new(&mut left)
        .deserialize(&mut de)
        .unwrap_or_else(|_| match raw.get().trim_start().as_bytes().first() {
            Some(b'[') => Value::Array(Vec::new()),
            Some(b'{') => Value::Object(Map::new()),
            _ => Value::Null,
        })
}

/// The elements of the array `raw` as raw texts, at most `limit` of them: `Ok(Err(v))`
/// with `raw` read small when it is not an array, [`GraphError::TooLarge`] naming `what`
/// past the limit, [`GraphError::TimeLimit`] past `deadline` (checked every
/// [`TIME_CHECK_EVERY`] elements).
pub(super) fn items<'a>(
    raw: &'a RawValue,
    limit: usize,
    what: &'static str,
    deadline: Option<Instant>,
) -> Result<Result<Vec<&'a RawValue>, Value>, GraphError> {
    if !raw.get().starts_with('[') {
        return Ok(Err(small(raw)));
    }
    let mut de = serde_json::Deserializer::from_str(raw.get());
    de.deserialize_seq(ItemsSeed { limit, deadline })
        .map(Ok)
        .map_err(|e| stopped_or_json(&e, what, limit))
}

struct ItemsSeed {
    limit: usize,
    deadline: Option<Instant>,
}

impl<'de> Visitor<'de> for ItemsSeed {
    type Value = Vec<&'de RawValue>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<&RawValue>()? {
            if items.len() == self.limit {
                return Err(de::Error::custom(STOPPED));
            }
            if items.len() % TIME_CHECK_EVERY == 0
                && self.deadline.is_some_and(|d| Instant::now() >= d)
            {
                return Err(de::Error::custom(TIMED_OUT));
            }
            items.push(item);
        }
        Ok(items)
    }
}

/// Counts the elements of the array `raw` (0 when it is not one), refusing past `limit`
/// with [`GraphError::TooLarge`] naming `what`.
pub(crate) fn count(raw: &RawValue, limit: usize, what: &'static str) -> Result<usize, GraphError> {
    if !raw.get().starts_with('[') {
        return Ok(0);
    }
    struct Count(usize);
    impl<'de> Visitor<'de> for Count {
        type Value = usize;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
            let mut n = 0;
            while seq.next_element::<IgnoredAny>()?.is_some() {
                if n == self.0 {
                    return Err(de::Error::custom(STOPPED));
                }
                n += 1;
            }
            Ok(n)
        }
    }
    let mut de = serde_json::Deserializer::from_str(raw.get());
    de.deserialize_seq(Count(limit))
        .map_err(|e| stopped_or_json(&e, what, limit))
}

/// One node read: its fields (`meta` as null, `inputs` whole, the others small), or the
/// value read small when it is not an object; `too_many_fields` when fields past
/// [`MAX_FIELDS`] were skipped.
pub(super) struct NodeRead {
    pub value: Value,
    pub too_many_fields: bool,
}

/// Reads one node, counting its `inputs` against `edges_left` ([`GraphError::TooLarge`]
/// of `edge_limit` once they run out).
pub(super) fn node(
    raw: &RawValue,
    edges_left: &mut usize,
    edge_limit: usize,
) -> Result<NodeRead, GraphError> {
    if !raw.get().starts_with('{') {
        return Ok(NodeRead {
            value: small(raw),
            too_many_fields: false,
        });
    }
    let mut de = serde_json::Deserializer::from_str(raw.get());
    let mut too_many_fields = false;
    de.deserialize_map(NodeSeed {
        edges_left,
        too_many_fields: &mut too_many_fields,
    })
    .map(|map| NodeRead {
        value: Value::Object(map),
        too_many_fields,
    })
    .map_err(|e| stopped_or_json(&e, "edges", edge_limit))
}

struct NodeSeed<'b> {
    edges_left: &'b mut usize,
    too_many_fields: &'b mut bool,
}

impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = Map<String, Value>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a node object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut node = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if node.contains_key(&key) {
                return Err(duplicate(&key));
            }
            if node.len() == MAX_FIELDS {
                *self.too_many_fields = true;
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value = match key.as_str() {
                "meta" => {
                    map.next_value::<IgnoredAny>()?;
                    Value::Null
                }
                "inputs" => {
                    let mut left = SMALL_VALUES;
                    map.next_value_seed(Small {
                        left: &mut left,
                        edges: Some(&mut *self.edges_left),
                    })?
                }
                _ => {
                    let mut left = SMALL_VALUES;
                    map.next_value_seed(Small::new(&mut left))?
                }
            };
            node.insert(key, value);
        }
        Ok(node)
    }
}

/// Builds a `Value` of at most `*left` values (document order), skipping the rest; with
/// `edges`, a node's `inputs`: an array is read whole, each element small and counted as
/// an edge.
struct Small<'b> {
    left: &'b mut usize,
    edges: Option<&'b mut usize>,
}

impl<'b> Small<'b> {
    fn new(left: &'b mut usize) -> Small<'b> {
        Small { left, edges: None }
    }
}

impl<'de> DeserializeSeed<'de> for Small<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Small<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        if let Some(edges) = self.edges {
            return inputs(seq, edges);
        }
        let left = self.left;
        let mut items = Vec::new();
        while *left > 0 {
            *left -= 1;
            match seq.next_element_seed(Small::new(&mut *left))? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let left = self.left;
        let mut object = Map::new();
        while *left > 0 {
            *left -= 1;
            let Some(key) = map.next_key::<String>()? else {
                return Ok(Value::Object(object));
            };
            let value = map.next_value_seed(Small::new(&mut *left))?;
            object.insert(key, value);
        }
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Value::Object(object))
    }
}

/// A node's `inputs`: every element read small, each counted against `edges_left`.
fn inputs<'de, A: SeqAccess<'de>>(mut seq: A, edges_left: &mut usize) -> Result<Value, A::Error> {
    let mut items = Vec::new();
    loop {
        let mut left = SMALL_VALUES;
        let Some(input) = seq.next_element_seed(Small::new(&mut left))? else {
            return Ok(Value::Array(items));
        };
        if *edges_left == 0 {
            return Err(de::Error::custom(STOPPED));
        }
        *edges_left -= 1;
        items.push(input);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    #[test]
    fn small_values_keep_what_a_message_shows() {
        let long = format!("[{}]", vec!["7"; 10_000].join(","));
        let v = small(&raw(&long));
        assert_eq!(v.as_array().unwrap().len(), SMALL_VALUES);
        let nested = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(small(&raw(&nested)).to_string(), nested);
        // Past the recursion limit: still an array, not null.
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(small(&raw(&deep)), Value::Array(Vec::new()));
        let object = r#"{"a": [1, 2, {"b": "c"}], "d": null}"#;
        assert_eq!(
            small(&raw(object)),
            serde_json::from_str::<Value>(object).unwrap()
        );
    }

    #[test]
    fn arrays_are_split_and_counted_within_their_limit() {
        let three = raw("[{}, {\"id\": 1}, []]");
        let split = items(&three, 3, "nodes", None).unwrap().unwrap();
        assert_eq!(
            split.iter().map(|r| r.get()).collect::<Vec<_>>(),
            ["{}", "{\"id\": 1}", "[]"]
        );
        assert!(matches!(
            items(&three, 2, "nodes", None),
            Err(GraphError::TooLarge {
                what: "nodes",
                limit: 2
            })
        ));
        assert_eq!(
            items(&raw("7"), 2, "nodes", None).unwrap().unwrap_err(),
            Value::from(7)
        );
        assert_eq!(count(&three, 3, "nodes").unwrap(), 3);
        assert!(count(&three, 2, "nodes").is_err());
    }

    #[test]
    fn a_node_skips_meta_and_counts_its_inputs() {
        let text = r#"{"id": "a", "meta": [1, 2, 3], "inputs": ["x", "y"], "cost": 1}"#;
        let mut left = 3;
        let read = node(&raw(text), &mut left, 3).unwrap();
        assert_eq!(
            read.value,
            serde_json::json!({"id": "a", "meta": null, "inputs": ["x", "y"], "cost": 1})
        );
        assert_eq!(left, 1);
        assert!(matches!(
            node(&raw(text), &mut left, 3),
            Err(GraphError::TooLarge {
                what: "edges",
                limit: 3
            })
        ));
        let wide = format!(
            "{{{}}}",
            (0..100)
                .map(|i| format!("\"f{i}\": 0"))
                .collect::<Vec<_>>()
                .join(",")
        );
        let read = node(&raw(&wide), &mut 0, 0).unwrap();
        assert!(read.too_many_fields);
        assert_eq!(read.value.as_object().unwrap().len(), MAX_FIELDS);
    }
}
