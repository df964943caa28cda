//! Strict fields: the fields each format reads, and the problem, with a "did you mean"
//! hint, for any other (see the module doc of [`super`]).

use super::At;
use crate::graph::{Problem, ProblemKind, Problems};
use std::borrow::Cow;

/// The graph-level fields of each format (`meta` is free-form metadata, read by nothing).
pub(super) const NATIVE_GRAPH_FIELDS: &[&str] = &[
    "name",
    "fixed_memory",
    "cost_unit",
    "nodes",
    "storage",
    "batch_size",
    "fixed_memory_per_sample",
    "meta",
];
pub(super) const NATIVE_NODE_FIELDS: &[&str] = &[
    "id",
    "cost",
    "memory",
    "inputs",
    "kind",
    "op",
    "memory_per_sample",
    "meta",
];
pub(super) const NODE_LINK_GRAPH_FIELDS: &[&str] = &[
    "directed",
    "multigraph",
    "graph",
    "nodes",
    "links",
    "edges",
    "storage",
    "meta",
];
pub(super) const NODE_LINK_NODE_FIELDS: &[&str] = &[
    "id",
    "name",
    "cost_cpu",
    "duration",
    "cost_ram",
    "out_cost",
    "param_cost",
    "backward",
    "meta",
];
pub(super) const CHAIN_FIELDS: &[&str] = &[
    "name", "fw", "bw", "x", "xbar", "ftmp", "btmp", "budget", "meta",
];

/// Names users reach for that are not a field's edit-distance neighbours.
const ALIASES: &[(&str, &str)] = &[
    ("deps", "inputs"),
    ("dependencies", "inputs"),
    ("parents", "inputs"),
    ("predecessors", "inputs"),
    ("args", "inputs"),
    ("mem", "memory"),
    ("size", "memory"),
    ("bytes", "memory"),
    ("time", "cost"),
    ("flops", "cost"),
    ("edges", "inputs"),
    ("type", "kind"),
];

/// The known field an unknown `field` most likely means: an alias, else of the fields it is
/// a prefix of (or that are a prefix of it) and those within two edits, the fewest edits
/// away (`memory_per_sampel` means `memory_per_sample`, not `memory`), the first listed of
/// equals.
pub(crate) fn suggest(field: &str, known: &[&'static str]) -> Option<&'static str> {
    let lower = field.to_ascii_lowercase();
    if let Some(&(_, to)) = ALIASES
        .iter()
        .find(|(from, to)| *from == lower && known.contains(to))
    {
        return Some(to);
    }
    let near = |k: &&str| {
        (lower.len() >= 3 && (k.starts_with(lower.as_str()) || lower.starts_with(*k)))
            || edit_distance(&lower, k) <= 2
    };
    known
        .iter()
        .copied()
        .filter(|&k| k != "meta")
        .filter(near)
        .min_by_key(|k| edit_distance(&lower, k))
}

/// Levenshtein distance (bytes; field names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let here = (prev + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            prev = row[j + 1];
            row[j + 1] = here;
        }
    }
    row[b.len()]
}

/// The message for an unknown field: the hint and the accepted fields (a document that
/// takes a `meta` value for extra metadata says so in `known`'s caller).
pub(crate) fn unknown_field_message(field: &str, known: &[&'static str]) -> String {
    let hint = suggest(field, known)
        .map(|k| format!("did you mean `{k}`? "))
        .unwrap_or_default();
    format!(
        "unknown field `{}`; {hint}accepted: {}",
        excerpt(field),
        known.join(", ")
    )
}

/// The characters at each end of a text from the input that a message quotes: a message
/// names what it is about, it does not echo megabytes of it.
const EXCERPT_ENDS: usize = 30;

/// `text` (an id, a field's name or value from the input) for a message: [`elide`]d to
/// its first and last [`EXCERPT_ENDS`] characters.
pub(crate) fn excerpt(text: &str) -> Cow<'_, str> {
    elide(text, EXCERPT_ENDS)
}

/// A number from the input for a message: in exponent notation from 1e15 on (`1e300`, not
/// its 301 digits).
pub(crate) fn compact(value: f64) -> String {
    if value.abs() >= 1e15 {
        format!("{value:e}")
    } else {
        value.to_string()
    }
}

/// `text` whole when it has at most `2 * ends` characters, else its first and last `ends`
/// characters around the count of bytes left out.
pub(crate) fn elide(text: &str, ends: usize) -> Cow<'_, str> {
    let chars = text.chars().count();
    if chars <= 2 * ends {
        return Cow::Borrowed(text);
    }
    let head = text.char_indices().nth(ends).map_or(text.len(), |(i, _)| i);
    let tail = text
        .char_indices()
        .nth(chars - ends)
        .map_or(text.len(), |(i, _)| i);
    Cow::Owned(format!(
        "{}...[{} bytes]...{}",
        &text[..head],
        tail - head,
        &text[tail..]
    ))
}

/// Records every field among `fields` outside `known`, at the graph level (`at` is
/// `None`) or at a node.
pub(super) fn unknown_fields<'k>(
    fields: impl IntoIterator<Item = &'k String>,
    known: &[&'static str],
    at: Option<&At>,
    problems: &mut Problems,
) {
    for field in fields.into_iter().filter(|k| !known.contains(&k.as_str())) {
        let message = format!(
            "{} (put extra metadata in `meta`)",
            unknown_field_message(field, known)
        );
        problems.push(match at {
            Some(at) => at.problem(ProblemKind::UnknownField, &excerpt(field), message),
            None => Problem::graph(ProblemKind::UnknownField, &excerpt(field), message),
        });
    }
}
