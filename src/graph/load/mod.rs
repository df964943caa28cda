//! Loading graphs from JSON: the native format (`api/graph.schema.json`) and the networkx
//! node-link format used by Checkmate's and Moccasin's benchmark graphs.
//!
//! The text is read within [`Limits`] on nodes and edges, node by node (`raw`): a graph
//! over them is refused before anything in proportion to it is built. Each node is read
//! into a small `serde_json::Value` rather than by typed deserialisation so that every bad
//! field of every node is reported at once, by node and field, and a bad field does not
//! hide the structural problems (unknown inputs, cycles) of the rest. `meta` is never
//! read beyond checking that it is JSON.
//!
//! Node-link mapping (Checkmate `*_train.json`, Moccasin `random_layered_*.json`):
//!
//! | node-link                          | native                                   |
//! |------------------------------------|------------------------------------------|
//! | `id` (else `name`)                 | `id` (as a string)                       |
//! | `name` when `id` is present        | `op`                                     |
//! | `cost_cpu` or `duration`           | `cost`                                   |
//! | `cost_ram` or `out_cost`           | `memory`                                 |
//! | `backward: false / true`           | `kind: forward / backward`; the one backward node whose inputs are all forward is the `loss` |
//! | Σ `param_cost`                     | `fixed_memory` (parameters stay resident) |
//! | `links: [{source, target}]` or `[{"0": s, "1": t}]` | `inputs` of the target     |
//! | `graph.name`                       | `name`                                   |
//! | `graph.order` (a topological order of the keys) | the file order               |
//! | `graph.batch_size`, else the batch in a Checkmate `graph.name` | `batch_size`, every output linear in the batch (`crate::graph::Batch`) |
//!
//! Both formats take an optional top-level `storage` object: the slow tier
//! ([`super::Storage`]).
//!
//! # Strict fields
//!
//! Every format accepts only the fields it reads, at the graph level and on each node: a
//! misspelt field (`deps` or `input` for `inputs`, `fixed_mem` for `fixed_memory`) is a
//! problem with a "did you mean" hint, never a silently dropped edge or size. Extra
//! metadata goes in a `meta` value (any JSON) at the graph or node level, which is read by
//! nothing. Node-link files also keep networkx's `directed`, `multigraph` and `graph`; the
//! objects of `links` are not checked beyond their ends.
//!
//! # Numbers
//!
//! A byte count is a non-negative integer of at most `MAX_BYTES` (2^53): an integral float
//! (`12.0`, `1e9`) is accepted, `1.5` or `1.8e19` is not. A cost is a finite number `>= 0`.
//! The totals (`K + Σ s_v`, `Σ c_v`, node-link's `Σ param_cost`) are checked by
//! [`Graph::new`] (see [`super`]'s limits); no sum saturates.

use super::chain::ChainSpec;
use super::{
    BatchSpec, Graph, GraphError, GraphSpec, Problem, ProblemKind, Problems, Storage, MAX_BYTES,
};
use crate::aside::Aside;
use serde_json::{Map, Value};
use std::path::Path;
use std::str::FromStr;
use std::time::Instant;

mod fields;
mod native;
mod node_link;
pub(crate) mod raw;
mod typed;

pub(crate) use fields::{compact, elide, excerpt, suggest, unknown_field_message};
use fields::{unknown_fields, CHAIN_FIELDS, NATIVE_GRAPH_FIELDS, NODE_LINK_GRAPH_FIELDS};
use native::native_spec;
use node_link::{infer_batch, node_link_spec};
pub use raw::Limits;
use raw::RawFields;
use serde_json::value::RawValue;

/// The input formats for a training graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Decide from the content: `links`/`edges` means node-link, else native.
    Auto,
    Native,
    NodeLink,
    /// rotor's chain format (`fw`, `bw`, `x`, `xbar`; see [`super::chain`]).
    Chain,
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "auto" => Ok(Format::Auto),
            "native" => Ok(Format::Native),
            "node-link" => Ok(Format::NodeLink),
            "chain" => Ok(Format::Chain),
            other => Err(format!(
                "unknown graph format '{other}': expected auto, native, node-link or chain"
            )),
        }
    }
}

/// The most bytes a graph or schedule file may hold: 1 GiB, five times the JSON of a
/// graph of a million nodes.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// How much of a file [`read_text`] reads before it looks at what it is reading.
const FIRST_CHUNK: u64 = 1 << 16;

/// The text of the file at `path`, read within [`MAX_FILE_BYTES`]: a larger file is refused
/// by its size before it is read, a stream (a pipe, `/dev/zero`) when it goes past the limit,
/// and anything whose first byte (after white space and a byte-order mark) cannot start a
/// JSON object or array once its first 64 KiB are read. A UTF-8 byte-order mark (which some
/// Windows editors write) is dropped: JSON has none. Its memory is bounded whatever the path
/// names.
pub fn read_text(path: &Path) -> std::io::Result<String> {
    read_text_by(path, None)
}

/// [`read_text`] that stops at `deadline` (`ErrorKind::TimedOut`) where the path is a pipe:
/// one that no process writes to, or that stalls, is not waited on past it.
pub fn read_text_by(path: &Path, deadline: Option<Instant>) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind, Read};
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let too_large = || {
        Error::new(
            ErrorKind::InvalidData,
            format!("more than {MAX_FILE_BYTES} bytes (1 GiB), larger than remat reads"),
        )
    };
    let pipe = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(if pipe { libc::O_NONBLOCK } else { 0 })
        .open(path)?;
    let size = file.metadata()?.len();
    if size > MAX_FILE_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(size as usize);
    let mut reader = Timed { file, deadline }.take(MAX_FILE_BYTES + 1);
    reader.by_ref().take(FIRST_CHUNK).read_to_end(&mut bytes)?;
    let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    if let Some(&first) = text.iter().find(|b| !b.is_ascii_whitespace()) {
        if first != b'{' && first != b'[' {
            return Err(Error::new(
                ErrorKind::InvalidData,
                format!("not a JSON object or array: it starts with the byte 0x{first:02x}, not '{{' or '['"),
            ));
        }
    }
    reader.read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large());
    }
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    String::from_utf8(bytes).map_err(|e| Error::new(ErrorKind::InvalidData, e))
}

/// A file read within a deadline: where it is opened without waiting (a pipe), a read
/// that would wait polls for data until the deadline at most.
struct Timed {
    file: std::fs::File,
    deadline: Option<Instant>,
}

impl std::io::Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::io::{Error, ErrorKind};
        use std::os::fd::AsRawFd;
        let late = || {
            Error::new(
                ErrorKind::TimedOut,
                "the time limit passed while it was read",
            )
        };
        loop {
            match self.file.read(buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                done => return done,
            }
            let wait_ms = match self.deadline {
                None => -1,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(late());
                    }
                    i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX)
                }
            };
            let mut wanted = libc::pollfd {
                fd: self.file.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd, of the descriptor `self.file` owns.
            match unsafe { libc::poll(&mut wanted, 1, wait_ms) } {
                0 => return Err(late()),
                n if n < 0 && Error::last_os_error().kind() != ErrorKind::Interrupted => {
                    return Err(Error::last_os_error())
                }
                _ => {}
            }
        }
    }
}

/// Reads and validates a graph file.
pub fn load_graph(path: &Path, format: Format) -> Result<Graph, GraphError> {
    load_graph_within(path, format, Limits::NONE)
}

/// Reads and validates a graph file within `limits` (see [`read_graph`]). The file's text
/// is freed aside (`crate::aside`): returning the pages of a large file is not on the
/// path of the answer.
pub fn load_graph_within(path: &Path, format: Format, limits: Limits) -> Result<Graph, GraphError> {
    let text =
        Aside::new(
            read_text_by(path, limits.deadline).map_err(|source| GraphError::Io {
                path: path.display().to_string(),
                source,
            })?,
        );
    limits.check_time(0)?;
    read_graph(text.as_bytes(), format, limits)
}

/// Parses and validates a graph from JSON text.
pub fn parse_graph(text: &str, format: Format) -> Result<Graph, GraphError> {
    read_graph(text.as_bytes(), format, Limits::NONE)
}

pub(crate) fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// Builds a graph from an already parsed JSON value.
pub fn graph_from_value(value: &Value, format: Format) -> Result<Graph, GraphError> {
    read_graph(value.to_string().as_bytes(), format, Limits::NONE)
}

/// Reads and validates a graph from JSON text within `limits`: a graph over them is
/// [`GraphError::TooLarge`] before it is built (see `raw`).
pub fn read_graph(text: &[u8], format: Format, limits: Limits) -> Result<Graph, GraphError> {
    let raw = raw::fields(text)?.map_err(|value| {
        GraphError::Format(format!(
            "a graph is a JSON object, got {}",
            type_name(&value)
        ))
    })?;
    limits.check_time(0)?;
    let has = |k: &str| raw.contains_key(k);
    let format = match format {
        Format::Auto if has("links") || has("edges") => Format::NodeLink,
        Format::Auto if has("nodes") => Format::Native,
        Format::Auto if has("fw") && has("bw") => Format::Chain,
        Format::Auto => return Err(GraphError::Format(
            "expected a native graph (`nodes` with `cost`, `memory`, `inputs`), a node-link graph \
                 (`nodes` and `links`) or a chain (`fw`, `bw`, `x`, `xbar`)"
                .into(),
        )),
        f => f,
    };
    if format == Format::Chain {
        let spec = chain_spec(&raw, limits)?;
        limits.check_time(0)?;
        return spec.to_graph();
    }
    let root = small_fields(&raw, limits);
    let mut problems = Problems::default();
    let mut batch = BatchSpec::default();
    let spec = match format {
        Format::NodeLink => {
            unknown_fields(raw.keys(), NODE_LINK_GRAPH_FIELDS, None, &mut problems);
            let spec = node_link_spec(&root, &raw, limits, &mut problems)?;
            batch = infer_batch(&root, &spec, &mut problems);
            spec
        }
        _ => {
            unknown_fields(raw.keys(), NATIVE_GRAPH_FIELDS, None, &mut problems);
            native_spec(&root, &raw, limits, &mut batch, &mut problems)?
        }
    };
    if spec.nodes.is_empty() && !problems.is_empty() {
        return Err(GraphError::Invalid(problems));
    }
    let storage = storage_field(&root, &mut problems);
    // `new_by` looks at the deadline before its first pass (and frees the spec aside).
    match Graph::new_by(spec, limits.deadline) {
        Ok(g) if problems.is_empty() => g.with_storage(storage).with_batch(batch),
        Ok(_) => Err(GraphError::Invalid(problems)),
        Err(GraphError::Invalid(more)) => {
            problems.extend(more);
            Err(GraphError::Invalid(problems))
        }
        Err(e) => Err(e),
    }
}

/// The graph's fields read small, without the arrays read node by node (`nodes`,
/// `links`, `edges`) and without `meta`; node-link's `graph` attributes with the `order`
/// whole when it lists at most `limits.nodes` keys (a longer one is no permutation of the
/// nodes and is dropped).
fn small_fields(raw: &RawFields, limits: Limits) -> Map<String, Value> {
    raw.iter()
        .filter(|(k, _)| !matches!(k.as_str(), "nodes" | "links" | "edges" | "meta"))
        .map(|(k, v)| {
            let value = match k.as_str() {
                "graph" => graph_attributes(v, limits),
                _ => raw::small(v),
            };
            (k.clone(), value)
        })
        .collect()
}

/// Node-link's `graph` object: `name`, `batch_size` and `order`, the only attributes read.
fn graph_attributes(raw: &RawValue, limits: Limits) -> Value {
    let Ok(Ok(fields)) = raw::fields(raw.get().as_bytes()) else {
        return raw::small(raw);
    };
    let mut attrs = Map::new();
    for name in ["name", "batch_size"] {
        if let Some(v) = fields.get(name) {
            attrs.insert(name.into(), raw::small(v));
        }
    }
    if let Some(Ok(Ok(order))) = fields
        .get("order")
        .map(|v| raw::items(v, limits.nodes, "nodes", limits.deadline))
    {
        let order = order.into_iter().map(raw::small).collect();
        attrs.insert("order".into(), Value::Array(order));
    }
    Value::Object(attrs)
}

/// The optional `storage` object (either format), checked by [`super::Storage`]'s rules.
fn storage_field(root: &Map<String, Value>, problems: &mut Problems) -> Option<Storage> {
    let value = root.get("storage").filter(|v| !v.is_null())?;
    serde_json::from_value::<Storage>(value.clone())
        .map_err(|e| {
            problems.push(Problem::graph(
                ProblemKind::InvalidField,
                "storage",
                strip_position(&e.to_string()),
            ))
        })
        .ok()
}

/// A chain (rotor's format), read field by field so that each bad field is named; its
/// lists hold at most `(limits.nodes - 1) / 2` stages (the training graph of `L` stages
/// has `2L + 1` nodes).
fn chain_spec(root: &RawFields, limits: Limits) -> Result<ChainSpec, GraphError> {
    let mut problems = Problems::default();
    unknown_fields(root.keys(), CHAIN_FIELDS, None, &mut problems);
    let stages = limits.nodes.saturating_sub(1) / 2;
    for name in ["fw", "bw", "x", "xbar", "ftmp", "btmp"] {
        if let Some(v) = root.get(name) {
            raw::count(v, stages, "stages").map_err(|_| GraphError::TooLarge {
                what: "nodes",
                limit: limits.nodes,
            })?;
        }
    }
    fn field<T: serde::de::DeserializeOwned + Default>(
        root: &RawFields,
        name: &str,
        required: bool,
        what: &str,
        problems: &mut Problems,
    ) -> Option<T> {
        match root.get(name).filter(|v| v.get() != "null") {
            None if required => {
                problems.push(Problem::graph(
                    ProblemKind::MissingField,
                    name,
                    format!("a chain needs `{name}`: {what}"),
                ));
                None
            }
            None => None,
            Some(v) => match serde_json::from_str::<T>(v.get()) {
                Ok(t) => Some(t),
                Err(_) => {
                    problems.push(Problem::graph(
                        ProblemKind::InvalidField,
                        name,
                        format!("`{name}` must be {what}, got {}", short(&raw::small(v))),
                    ));
                    None
                }
            },
        }
    }
    let costs = "a list of finite numbers >= 0";
    let bytes = "a list of non-negative integers (bytes)";
    let spec = ChainSpec {
        name: field(root, "name", false, "a string", &mut problems),
        fw: field(root, "fw", true, costs, &mut problems).unwrap_or_default(),
        bw: field(root, "bw", true, costs, &mut problems).unwrap_or_default(),
        x: field(root, "x", true, bytes, &mut problems).unwrap_or_default(),
        xbar: field(root, "xbar", true, bytes, &mut problems).unwrap_or_default(),
        ftmp: field(root, "ftmp", false, bytes, &mut problems),
        btmp: field(root, "btmp", false, bytes, &mut problems),
        budget: field(
            root,
            "budget",
            false,
            "a non-negative integer (bytes)",
            &mut problems,
        ),
    };
    if problems.is_empty() {
        Ok(spec)
    } else {
        Err(GraphError::Invalid(problems))
    }
}

/// A value for a message, its [`excerpt`].
fn short(v: &Value) -> String {
    excerpt(&v.to_string()).into_owned()
}

/// What kind of JSON value `v` is, for messages (`a string`, `an array`).
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Where a node sits, for messages: its id when it has one, else its position.
struct At<'a> {
    id: Option<&'a str>,
    index: usize,
}

impl At<'_> {
    fn problem(&self, kind: ProblemKind, field: &str, message: String) -> Problem {
        match self.id {
            Some(id) => Problem::node(kind, id, field, message),
            None => Problem::at_index(kind, self.index, field, message),
        }
    }

    /// The first of the field `names` present in `obj`, parsed; a missing or bad field
    /// is recorded (as `kind` when bad) and read as the default.
    fn required<T: Default>(
        &self,
        obj: &Map<String, Value>,
        names: &[&'static str],
        kind: ProblemKind,
        parse: fn(&Value) -> Result<T, String>,
        problems: &mut Problems,
    ) -> T {
        match names.iter().find_map(|&n| obj.get(n).map(|v| (n, v))) {
            Some((name, v)) => parse(v).unwrap_or_else(|m| {
                problems.push(self.problem(kind, name, m));
                T::default()
            }),
            None => {
                let listed: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                problems.push(self.problem(
                    ProblemKind::MissingField,
                    names[0],
                    format!("the node has no {}", listed.join(" or ")),
                ));
                T::default()
            }
        }
    }
}

/// The elements of `nodes` as raw texts, at most `limits.nodes` of them; a missing, empty
/// or non-array `nodes` is a problem.
fn node_items<'a>(
    raw: &RawFields<'a>,
    limits: Limits,
    problems: &mut Problems,
) -> Result<Vec<&'a RawValue>, GraphError> {
    let Some(nodes) = raw.get("nodes") else {
        problems.push(Problem::graph(
            ProblemKind::MissingField,
            "nodes",
            "the graph has no `nodes` field",
        ));
        return Ok(Vec::new());
    };
    match raw::items(nodes, limits.nodes, "nodes", limits.deadline)? {
        Ok(items) => {
            if items.is_empty() {
                problems.push(Problem::graph(
                    ProblemKind::EmptyGraph,
                    "nodes",
                    "the graph has no nodes",
                ));
            }
            Ok(items)
        }
        Err(other) => {
            problems.push(Problem::graph(
                ProblemKind::InvalidField,
                "nodes",
                format!("`nodes` must be an array, got {}", type_name(&other)),
            ));
            Ok(Vec::new())
        }
    }
}

/// Reads the nodes one at a time and hands each node object to `each` with its position;
/// a node that is not an object, or has too many fields, is a problem. The nodes' `inputs`
/// are counted against `limits.edges`.
fn for_each_node(
    raw: &RawFields,
    limits: Limits,
    problems: &mut Problems,
    mut each: impl FnMut(usize, &Map<String, Value>, &mut Problems),
) -> Result<(), GraphError> {
    let mut edges_left = limits.edges;
    for (index, item) in node_items(raw, limits, problems)?.into_iter().enumerate() {
        limits.check_time_at(index, index)?;
        checked_node(item, index, &mut edges_left, limits, problems, &mut each)?;
    }
    Ok(())
}

/// Reads the node `item` at `index` into a small value (the checked path: every bad field
/// is a problem) and hands it to `each`, counting its `inputs` against `edges_left`.
fn checked_node(
    item: &RawValue,
    index: usize,
    edges_left: &mut usize,
    limits: Limits,
    problems: &mut Problems,
    each: &mut impl FnMut(usize, &Map<String, Value>, &mut Problems),
) -> Result<(), GraphError> {
    let read = raw::node(item, edges_left, limits.edges)?;
    if read.too_many_fields {
        problems.push(Problem::at_index(
            ProblemKind::InvalidField,
            index,
            "nodes",
            format!("a node has at most {} fields", raw::MAX_FIELDS),
        ));
    }
    match &read.value {
        Value::Object(obj) => each(index, obj, problems),
        other => problems.push(Problem::at_index(
            ProblemKind::InvalidField,
            index,
            "nodes",
            format!("a node must be an object, got {}", type_name(other)),
        )),
    }
    Ok(())
}

/// An id given as a string or an integer.
fn id_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) if n.is_u64() || n.is_i64() => Some(n.to_string()),
        _ => None,
    }
}

/// A byte count: an integer from 0 to `MAX_BYTES` (an integral float such as `12.0` or
/// `1e9` is accepted).
fn bytes_of(v: &Value) -> Result<u64, String> {
    let range = || format!("an integer number of bytes from 0 to 2^53 = {MAX_BYTES}");
    match v {
        Value::Number(n) => {
            let bytes = match (n.as_u64(), n.as_f64()) {
                (Some(u), _) => Some(u),
                // Exact: below 2^53 every integral float is an integer of the same value.
                (None, Some(f)) if (0.0..=MAX_BYTES as f64).contains(&f) && f.fract() == 0.0 => {
                    Some(f as u64)
                }
                _ => None,
            };
            match bytes {
                Some(b) if b <= MAX_BYTES => Ok(b),
                _ => Err(format!("must be {}, got {n}", range())),
            }
        }
        other => Err(format!("must be {}, got {}", range(), type_name(other))),
    }
}

/// A batch size: an integer from 1 to `MAX_BYTES`.
fn batch_of(v: &Value) -> Result<u64, String> {
    match v.as_u64() {
        Some(b) if (1..=MAX_BYTES).contains(&b) => Ok(b),
        _ => Err(format!(
            "must be an integer from 1 to 2^53 = {MAX_BYTES} (samples), got {}",
            short(v)
        )),
    }
}

fn cost_of(v: &Value) -> Result<f64, String> {
    match v.as_f64() {
        // `-0.0` is 0 (it would print as -0)
        Some(c) if c.is_finite() && c >= 0.0 => Ok(c + 0.0),
        Some(c) => Err(format!("must be a finite number >= 0, got {c}")),
        None => Err(format!(
            "must be a finite number >= 0, got {}",
            type_name(v)
        )),
    }
}

fn optional_string(
    obj: &Map<String, Value>,
    key: &str,
    at: &At,
    problems: &mut Problems,
) -> Option<String> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            problems.push(at.problem(
                ProblemKind::InvalidField,
                key,
                format!("must be a string, got {}", type_name(other)),
            ));
            None
        }
    }
}

/// The optional field `key` of `obj` (a node at `at`, else the graph) read by `parse`; a
/// bad value is recorded as `kind`.
fn optional_field<T>(
    obj: &Map<String, Value>,
    key: &str,
    at: Option<&At>,
    kind: ProblemKind,
    parse: fn(&Value) -> Result<T, String>,
    problems: &mut Problems,
) -> Option<T> {
    let v = obj.get(key).filter(|v| !v.is_null())?;
    parse(v)
        .map_err(|m| {
            problems.push(match at {
                Some(at) => at.problem(kind, key, m),
                None => Problem::graph(kind, key, m),
            })
        })
        .ok()
}

fn graph_fields(root: &Map<String, Value>, problems: &mut Problems) -> GraphSpec {
    let top = At { id: None, index: 0 };
    let mut spec = GraphSpec::default();
    let mut graph_problem = |field: &str, message: String| {
        problems.push(Problem::graph(ProblemKind::InvalidField, field, message));
    };
    match root.get("name") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => spec.name = Some(s.clone()),
        Some(other) => graph_problem(
            "name",
            format!("must be a string, got {}", type_name(other)),
        ),
    }
    match root.get("fixed_memory") {
        None | Some(Value::Null) => {}
        Some(v) => match bytes_of(v) {
            Ok(b) => spec.fixed_memory = b,
            Err(m) => problems.push(Problem::graph(
                ProblemKind::InvalidMemory,
                "fixed_memory",
                m,
            )),
        },
    }
    spec.cost_unit = optional_string(root, "cost_unit", &top, problems);
    spec
}

#[cfg(test)]
mod tests;
