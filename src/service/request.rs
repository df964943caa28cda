//! Reading request bodies. A body is read one field at a time, so that every error names
//! the field at fault, and a field nobody read is an error (a misspelt option must not
//! pass silently). Nothing is built of a body in proportion to its size but what it
//! describes: its fields are raw slices of it, the graph is read node by node within the
//! server's limits, lists are counted before they are read, and `meta` is never read
//! (see [`Body`]). Bodies are read off the async runtime (`super::endpoints`). The solver
//! options go through the front door's validator (`crate::front::OptionsInput`), as the
//! command line's do.

// An `ApiProblem` is built at most once per request, on the way out: its size does not matter.
#![allow(clippy::result_large_err)]

use super::cache::{Key, KeyParts};
use super::problem::{ApiProblem, Kind};
use super::{AppState, Config};
use crate::budget::Budget;
use crate::front::OptionsInput;
use crate::graph::load::raw::{self, RawFields};
use crate::graph::load::{read_graph, strip_position, Format, Limits};
use crate::graph::{Graph, GraphError, Storage};
use crate::solve::{self, SolveOptions, SolveResult};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A JSON object body, read one field at a time from its raw text; `asked` lists the
/// fields the endpoint reads, for the "did you mean" hint of an unknown one. The body is
/// checked as JSON and split into its fields (at most `raw::MAX_FIELDS`) without being
/// built; each field is then read on its own, typed (no `serde_json::Value` of the whole
/// body), and the graph node by node within the server's limits
/// (`crate::graph::load::read_graph`).
pub(super) struct Body<'a> {
    fields: RawFields<'a>,
    asked: Vec<&'static str>,
}

/// The body's bytes, or the problem of a body that could not be read: over `max_body`
/// bytes, a 413 naming the limit.
pub(super) fn body_bytes(
    bytes: Result<Bytes, BytesRejection>,
    max_body: usize,
) -> Result<Bytes, ApiProblem> {
    bytes.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            body_too_large(max_body, &e.body_text())
        } else {
            ApiProblem::new(Kind::BadJson, e.body_text())
        }
    })
}

/// The 413 of a body over `max_body` bytes, `why` saying how it was found.
pub(super) fn body_too_large(max_body: usize, why: &str) -> ApiProblem {
    ApiProblem::new(
        Kind::TooLarge,
        format!("the body is over the server's limit of {max_body} bytes (--max-body): {why}"),
    )
}

/// The JSON size of a graph above which a synchronous solve's reader stops at its
/// deadline ([`Body::graph_by`]): about 12,000 nodes, a few milliseconds of reading.
pub const READ_DEADLINE_BYTES: usize = 1 << 20;

impl<'a> Body<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Body<'a>, ApiProblem> {
        match raw::fields(bytes) {
            Ok(Ok(fields)) => Ok(Body {
                fields,
                asked: Vec::new(),
            }),
            Err(GraphError::Json {
                line,
                column,
                message,
            }) => Err(ApiProblem::new(
                Kind::BadJson,
                format!("malformed JSON at line {line}, column {column}: {message}"),
            )),
            Ok(Err(_)) | Err(_) => Err(ApiProblem::new(
                Kind::InvalidRequest,
                format!(
                    "the body must be a JSON object with a `graph` field (and at most {} fields)",
                    raw::MAX_FIELDS
                ),
            )),
        }
    }

    /// The problem of a required `field` that is missing, naming a field not yet read that
    /// looks like a misspelling of it.
    pub fn missing(&self, field: &'static str) -> ApiProblem {
        let misspelt = self
            .fields
            .keys()
            .find(|k| crate::graph::load::suggest(k, &[field]).is_some());
        let hint = misspelt
            .map(|k| format!(" (did you mean `{field}` for `{k}`?)"))
            .unwrap_or_default();
        ApiProblem::new(
            Kind::InvalidRequest,
            format!("the field '{field}' is required{hint}"),
        )
        .with_field(field)
    }

    /// The raw text of `field`, marked as read; `None` when absent or null.
    fn take(&mut self, field: &'static str) -> Option<&'a RawValue> {
        self.asked.push(field);
        self.fields.remove(field).filter(|v| v.get() != "null")
    }

    pub fn optional<T: DeserializeOwned>(
        &mut self,
        field: &'static str,
        kind: Kind,
    ) -> Result<Option<T>, ApiProblem> {
        match self.take(field) {
            None => Ok(None),
            Some(v) => serde_json::from_str(v.get()).map(Some).map_err(|e| {
                let message = strip_position(&e.to_string());
                ApiProblem::new(kind, format!("field '{field}': {message}")).with_field(field)
            }),
        }
    }

    pub fn required<T: DeserializeOwned>(
        &mut self,
        field: &'static str,
        kind: Kind,
    ) -> Result<T, ApiProblem> {
        self.optional(field, kind)?
            .ok_or_else(|| self.missing(field))
    }

    /// A list `field` of at most `most` elements, counted before it is read.
    pub fn list<T: DeserializeOwned>(
        &mut self,
        field: &'static str,
        kind: Kind,
        most: usize,
    ) -> Result<Option<Vec<T>>, ApiProblem> {
        if let Some(v) = self.fields.get(field) {
            if raw::count(v, most, field).is_err() {
                return Err(ApiProblem::new(
                    kind,
                    format!("{field} must list at most {most} entries, got more"),
                )
                .with_field(field));
            }
        }
        self.optional(field, kind)
    }

    /// The raw text of a required `field`, for readers of their own (schedules).
    pub fn required_raw(&mut self, field: &'static str) -> Result<&'a RawValue, ApiProblem> {
        self.take(field).ok_or_else(|| self.missing(field))
    }

    /// The raw text of an optional `field`.
    pub fn optional_raw(&mut self, field: &'static str) -> Option<&'a RawValue> {
        self.take(field)
    }

    /// The `graph` field, in the `format` given, with a request-level `storage`, within
    /// the server's limits on nodes and edges: counted while it is read, before the graph
    /// is built.
    pub fn graph(&mut self, config: &Config) -> Result<Graph, ApiProblem> {
        self.graph_by(config, None)
    }

    /// [`Body::graph`], read and built by `deadline` (a synchronous solve's time limit,
    /// counted from the request's receipt) when its JSON is over [`READ_DEADLINE_BYTES`]:
    /// past it, a 504 problem naming the nodes read, without a result. A smaller graph is
    /// read whole (milliseconds), so that a time limit that passes before its solve gets
    /// the solve's `no_solution` result in its 504, as the contract says.
    pub fn graph_by(
        &mut self,
        config: &Config,
        deadline: Option<Instant>,
    ) -> Result<Graph, ApiProblem> {
        let raw = self.take("graph").ok_or_else(|| self.missing("graph"))?;
        let format = match self.optional::<String>("format", Kind::InvalidRequest)? {
            None => Format::Auto,
            Some(f) => f.parse().map_err(|e: String| {
                ApiProblem::new(Kind::InvalidRequest, e).with_field("format")
            })?,
        };
        let limits = Limits {
            nodes: config.max_nodes,
            edges: config.max_edges,
            deadline: deadline.filter(|_| raw.get().len() > READ_DEADLINE_BYTES),
        };
        let graph = read_graph(raw.get().as_bytes(), format, limits).map_err(|e| match e {
            GraphError::TooLarge { what, limit } => super::limits::refuse_more(what, limit),
            GraphError::TimeLimit { .. } => {
                ApiProblem::new(Kind::TimeLimit, e.to_string()).with_field("graph")
            }
            e => ApiProblem::graph(&e),
        })?;
        super::limits::check_graph(&graph, config)?;
        // A request-level `storage` replaces the graph's own (as `--storage` does).
        Ok(
            match self.optional::<Storage>("storage", Kind::InvalidGraph)? {
                Some(storage) => graph.with_storage(Some(storage)),
                None => graph,
            },
        )
    }

    /// The first of `fields` the body has and no one has read yet.
    pub fn first_of(&self, fields: &[&'static str]) -> Option<&'static str> {
        fields
            .iter()
            .copied()
            .find(|f| self.fields.contains_key(*f))
    }

    /// Rejects the fields nobody read: a misspelt option must not pass silently. The
    /// message suggests the field it most likely means and lists the accepted ones.
    pub fn finish(self) -> Result<(), ApiProblem> {
        match self.fields.keys().next() {
            None => Ok(()),
            Some(k) => Err(ApiProblem::new(
                Kind::InvalidRequest,
                crate::graph::load::unknown_field_message(k, &self.asked),
            )
            .with_field(crate::graph::load::excerpt(k))),
        }
    }

    /// The `events_only` flag: answer with the schedule's events, without its stage
    /// matrices.
    pub fn events_only(&mut self) -> Result<bool, ApiProblem> {
        Ok(self
            .optional::<bool>("events_only", Kind::InvalidRequest)?
            .unwrap_or(false))
    }
}

/// `auto`'s `effort` as a request writes it: a number (a multiple of the default work) or
/// the word `time`.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum EffortField {
    Multiple(f64),
    Word(String),
}

impl EffortField {
    fn effort(self) -> Result<solve::Effort, ApiProblem> {
        match self {
            EffortField::Multiple(m) => Ok(solve::Effort::Work(m)),
            EffortField::Word(w) => crate::front::parse_effort(&w).map_err(|e| {
                ApiProblem::new(Kind::InvalidRequest, format!("field 'effort': {e}"))
                    .with_field("effort")
            }),
        }
    }
}

/// The solver and its options, shared by solve, jobs and sweep.
pub(super) struct Options {
    pub solver: String,
    /// Answer with events only: no stage matrices (`schedule.stages`).
    pub events_only: bool,
    /// The request's time limit capped by the server's (the server's when none is given).
    pub time_limit: Duration,
    /// Validated; its time limit is `time_limit`, its threads the server's.
    options: SolveOptions,
}

impl Options {
    /// The fields [`Options::read`] reads.
    pub const FIELDS: [&'static str; 6] = [
        "solver",
        "time_limit_s",
        "mip_gap",
        "seed",
        "effort",
        "events_only",
    ];

    pub fn read(body: &mut Body<'_>, config: &Config) -> Result<Options, ApiProblem> {
        let solver = body
            .optional::<String>("solver", Kind::InvalidSolver)?
            .unwrap_or_else(|| "auto".into());
        solve::find(&solver)?;
        let (options, time_limit) = Options::limits(body, config, config.time_limit())?;
        Ok(Options {
            events_only: body.events_only()?,
            solver,
            time_limit,
            options,
        })
    }

    /// The options every solve takes (`time_limit_s`, `mip_gap`, `seed`, `effort`) with the server's
    /// threads and memory; the time limit is `default` when none is given, and never above
    /// the server's.
    pub fn limits(
        body: &mut Body<'_>,
        config: &Config,
        default: Duration,
    ) -> Result<(SolveOptions, Duration), ApiProblem> {
        let mut options = OptionsInput {
            time_limit_s: body.optional("time_limit_s", Kind::InvalidRequest)?,
            mip_gap: body.optional("mip_gap", Kind::InvalidRequest)?,
            seed: body.optional("seed", Kind::InvalidRequest)?.unwrap_or(0),
            threads: config.solver_threads,
            memory_limit: Some(config.solve_memory_limit()),
            effort: body
                .optional::<EffortField>("effort", Kind::InvalidRequest)?
                .map(EffortField::effort)
                .transpose()?,
        }
        .validate()?;
        let time_limit = options
            .time_limit
            .unwrap_or(default)
            .min(config.time_limit());
        options.time_limit = Some(time_limit);
        Ok((options, time_limit))
    }

    /// The cache key of a solve of `graph` at `budget` with these options.
    pub fn key(&self, graph: &Graph, budget: u64) -> Key {
        KeyParts {
            graph,
            budget,
            solver: &self.solver,
            time_limit_s: self.time_limit.as_secs_f64(),
            mip_gap: self.options.mip_gap,
            seed: self.options.seed,
            effort: self.options.effort,
        }
        .key()
    }

    /// The result as the request asked for it: without stage matrices for `events_only`.
    pub fn shape(events_only: bool, result: Arc<SolveResult>) -> Arc<SolveResult> {
        match &result.schedule {
            Some(s) if events_only && s.stages.is_some() => {
                let mut r = (*result).clone();
                Options::drop_stages(&mut r);
                Arc::new(r)
            }
            _ => result,
        }
    }

    /// Removes the schedule's stage matrices, keeping its events.
    pub fn drop_stages(result: &mut SolveResult) {
        if let Some(s) = result.schedule.as_mut() {
            s.stages = None;
        }
    }

    /// The options of one solve, stopped by `cancel`.
    pub fn solve_options(&self, cancel: Arc<AtomicBool>) -> SolveOptions {
        SolveOptions {
            cancel,
            ..self.options.clone()
        }
    }
}

/// A parsed solve request (`/v1/solve`, `/v1/jobs`): the budget resolved to bytes, and
/// its cache key, computed where it is read: a hash of the whole graph (a second of work at
/// a million nodes) in the reader's place (`--readers`) that read it, so that a graph read
/// goes on to the cache or the solve queue (bounded by `--queue`, else 503) without waiting
/// for a second place, which held every graph read in memory meanwhile.
pub(super) struct SolveRequest {
    pub graph: Graph,
    pub budget: u64,
    pub options: Options,
    pub key: Key,
}

impl SolveRequest {
    /// The request of a solve of `graph` at `budget`, with its cache key.
    pub fn new(graph: Graph, budget: u64, options: Options) -> SolveRequest {
        SolveRequest {
            key: options.key(&graph, budget),
            graph,
            budget,
            options,
        }
    }

    /// The request in `bytes`; its graph is read within the request's time limit counted
    /// from `received` when given (a synchronous solve, whose limit covers the reading).
    pub fn read(
        state: &AppState,
        bytes: &[u8],
        received: Option<Instant>,
    ) -> Result<SolveRequest, ApiProblem> {
        let mut body = Body::parse(bytes)?;
        let options = Options::read(&mut body, &state.config)?;
        let deadline = received.and_then(|r| r.checked_add(options.time_limit));
        let graph = body.graph_by(&state.config, deadline)?;
        let budget: Budget = body.required("budget", Kind::InvalidBudget)?;
        body.finish()?;
        let budget = budget.resolve(&graph)?;
        Ok(SolveRequest::new(graph, budget, options))
    }
}
