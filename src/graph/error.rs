//! Errors of loading and validating a graph. Every problem names where it is: the node
//! (by id, or by its position in the file when it has no usable id), the field and the
//! offending value. All problems of a graph are counted, not only the first; the first
//! [`KEPT`] are kept ([`Problems`]) and what is shown of them is capped ([`SHOWN`] in the
//! message, [`KEPT`] in [`GraphError::problems`]), with the number of the others, so that
//! a large bad graph (a million nodes with ten misspelt fields each) costs neither memory
//! nor a message in proportion to its problems.

use serde::Serialize;
use std::fmt;

/// The class of a problem, stable for programs (`snake_case` in JSON).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    EmptyGraph,
    DuplicateId,
    UnknownInput,
    SelfLoop,
    Cycle,
    InvalidCost,
    InvalidMemory,
    MissingField,
    InvalidField,
    /// A field the format does not have (a misspelling, with a hint).
    UnknownField,
}

/// One thing wrong with a graph.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Problem {
    pub kind: ProblemKind,
    /// The node's id, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The node's position in the file (0-based), when it has no usable id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// The field (e.g. `memory`, `inputs`, `fixed_memory`).
    pub field: String,
    pub message: String,
}

impl Problem {
    pub fn graph(kind: ProblemKind, field: &str, message: impl Into<String>) -> Problem {
        Problem {
            kind,
            node: None,
            index: None,
            field: field.into(),
            message: message.into(),
        }
    }
    /// The problem of node `id`, quoted by its ends past 60 characters.
    pub fn node(kind: ProblemKind, id: &str, field: &str, message: impl Into<String>) -> Problem {
        Problem {
            kind,
            node: Some(super::load::excerpt(id).into_owned()),
            index: None,
            field: field.into(),
            message: message.into(),
        }
    }
    pub fn at_index(
        kind: ProblemKind,
        index: usize,
        field: &str,
        message: impl Into<String>,
    ) -> Problem {
        Problem {
            kind,
            node: None,
            index: Some(index),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.node, self.index) {
            (Some(id), _) => write!(f, "node '{}', field '{}': {}", id, self.field, self.message),
            (None, Some(i)) => write!(
                f,
                "node #{} (0-based), field '{}': {}",
                i, self.field, self.message
            ),
            (None, None) => write!(f, "field '{}': {}", self.field, self.message),
        }
    }
}

/// Problems written out in [`GraphError`]'s message.
pub const SHOWN: usize = 20;
/// Problems kept by [`Problems`] and listed by [`GraphError::problems`] (a last entry
/// counts the others).
pub const KEPT: usize = 100;

/// The problems of a graph as they are found: every one counted, the first `KEPT` kept.
/// Derefs to the kept ones; [`Problems::len`] is the count of all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Problems {
    kept: Vec<Problem>,
    total: usize,
}

impl Problems {
    pub fn push(&mut self, problem: Problem) {
        self.total += 1;
        if self.kept.len() < KEPT {
            self.kept.push(problem);
        }
    }
    /// Appends `more`, found after these.
    pub fn extend(&mut self, more: Problems) {
        let dropped = more.total - more.kept.len();
        more.kept.into_iter().for_each(|p| self.push(p));
        self.total += dropped;
    }
    /// The same problems, each rewritten by `f` (the count of all unchanged).
    pub fn map(self, f: impl FnMut(Problem) -> Problem) -> Problems {
        Problems {
            kept: self.kept.into_iter().map(f).collect(),
            total: self.total,
        }
    }
    /// Every problem found, kept or not.
    pub fn len(&self) -> usize {
        self.total
    }
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

impl std::ops::Deref for Problems {
    type Target = [Problem];
    fn deref(&self) -> &[Problem] {
        &self.kept
    }
}

impl From<Vec<Problem>> for Problems {
    fn from(list: Vec<Problem>) -> Problems {
        let mut problems = Problems::default();
        list.into_iter().for_each(|p| problems.push(p));
        problems
    }
}

/// Why a graph could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("malformed JSON at line {line}, column {column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("unrecognised graph format: {0}")]
    Format(String),
    #[error("{}", render_problems(.0))]
    Invalid(Problems),
    /// Over a limit on what is read (`crate::graph::load::Limits`), found while the JSON
    /// was read and before the graph was built.
    #[error("the graph has more than {limit} {what}")]
    TooLarge { what: &'static str, limit: usize },
    /// The reader's deadline (`crate::graph::load::Limits::deadline`, the caller's time
    /// limit) passed before the graph was read.
    #[error("the time limit passed while reading the graph ({nodes} nodes read)")]
    TimeLimit { nodes: usize },
}

impl GraphError {
    /// The individual problems (one for the error kinds that are not lists), at most
    /// `KEPT` (100) of them and then one that says how many more there are.
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            GraphError::Invalid(p) if p.len() > p.kept.len() => {
                let mut kept = p.kept.clone();
                kept.push(Problem::graph(
                    ProblemKind::InvalidField,
                    "graph",
                    format!("{} more problems are not listed", p.len() - p.kept.len()),
                ));
                kept
            }
            GraphError::Invalid(p) => p.kept.clone(),
            other => vec![Problem::graph(
                ProblemKind::InvalidField,
                "graph",
                other.to_string(),
            )],
        }
    }
}

fn render_problems(problems: &Problems) -> String {
    let mut s = format!(
        "the graph has {} problem{}:",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for p in problems.iter().take(SHOWN) {
        s.push_str("\n  - ");
        s.push_str(&p.to_string());
    }
    if problems.len() > SHOWN {
        s.push_str(&format!("\n  - ... and {} more", problems.len() - SHOWN));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_problems_are_capped_with_their_count() {
        let problems: Vec<Problem> = (0..1000)
            .map(|i| Problem::at_index(ProblemKind::MissingField, i, "id", "the id is missing"))
            .collect();
        let e = GraphError::Invalid(problems.into());
        let text = e.to_string();
        assert!(text.starts_with("the graph has 1000 problems:"), "{text}");
        assert_eq!(text.lines().count(), 1 + SHOWN + 1);
        assert!(text.ends_with("... and 980 more"), "{text}");
        let listed = e.problems();
        assert_eq!(listed.len(), KEPT + 1);
        assert_eq!(listed[KEPT].message, "900 more problems are not listed");
        let few = GraphError::Invalid(listed[..3].to_vec().into());
        assert_eq!(few.problems().len(), 3);
        assert_eq!(few.to_string().lines().count(), 4);
    }
}
