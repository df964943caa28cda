//! Error responses as `application/problem+json` (RFC 9457, "Problem Details for HTTP
//! APIs"). Every error the service returns is a [`ApiProblem`]: a `type` URI naming the
//! class, a `title` for people, the HTTP `status`, a `detail` for this occurrence and the
//! same node/field-level list (`problems`) that the CLI prints for a bad graph.

use crate::budget::BudgetError;
use crate::front::{InvalidOption, ScheduleInputError};
use crate::graph::{GraphError, Problem};
use crate::schedule::SimError;
use crate::solve::{SolveError, SolveResult};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The media type of RFC 9457 §3.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The classes of error, each with its status and `type` URI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The body is not JSON (400).
    BadJson,
    /// The body, the graph or a solver's model is over the server's limits
    /// (`--max-body`, `--max-nodes`, `--max-edges`, `--solve-memory`) (413).
    TooLarge,
    /// The body did not arrive within `--client-timeout` once its turn to be read came (408).
    BodyTimeout,
    /// JSON of the wrong shape: a missing or mistyped field (422).
    InvalidRequest,
    /// The graph breaks a rule (422); `problems` lists each.
    InvalidGraph,
    /// The budget cannot be read (422).
    InvalidBudget,
    /// The schedule breaks a simulator rule (422).
    InvalidSchedule,
    /// Unknown solver, or one that does not accept this graph (422).
    InvalidSolver,
    /// No such route or job (404).
    NotFound,
    /// The request target is longer than the service reads (414).
    UriTooLong,
    /// A POST whose body is not declared `application/json` (415).
    UnsupportedMediaType,
    /// A `Host` that is not this server's, or a cross-origin request (403).
    Forbidden,
    /// The route exists, not with this method (405).
    MethodNotAllowed,
    /// The queue is full, or the job table is, or the connection cap closed a connection
    /// whose body stalled while it was read (503, with `Retry-After`).
    Busy,
    /// The server is shutting down (503).
    Draining,
    /// The time limit passed before any schedule was found (504).
    TimeLimit,
    /// A solver failed or panicked (500).
    Internal,
}

impl Kind {
    pub fn status(self) -> StatusCode {
        match self {
            Kind::BadJson => StatusCode::BAD_REQUEST,
            Kind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Kind::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Kind::InvalidRequest
            | Kind::InvalidGraph
            | Kind::InvalidBudget
            | Kind::InvalidSchedule
            | Kind::InvalidSolver => StatusCode::UNPROCESSABLE_ENTITY,
            Kind::NotFound => StatusCode::NOT_FOUND,
            Kind::UriTooLong => StatusCode::URI_TOO_LONG,
            Kind::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Kind::Forbidden => StatusCode::FORBIDDEN,
            Kind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Kind::Busy | Kind::Draining => StatusCode::SERVICE_UNAVAILABLE,
            Kind::TimeLimit => StatusCode::GATEWAY_TIMEOUT,
            Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The short name, also the last segment of the `type` URI.
    pub fn slug(self) -> &'static str {
        match self {
            Kind::BadJson => "bad-json",
            Kind::TooLarge => "too-large",
            Kind::BodyTimeout => "request-timeout",
            Kind::InvalidRequest => "invalid-request",
            Kind::InvalidGraph => "invalid-graph",
            Kind::InvalidBudget => "invalid-budget",
            Kind::InvalidSchedule => "invalid-schedule",
            Kind::InvalidSolver => "invalid-solver",
            Kind::NotFound => "not-found",
            Kind::UriTooLong => "uri-too-long",
            Kind::UnsupportedMediaType => "unsupported-media-type",
            Kind::Forbidden => "forbidden",
            Kind::MethodNotAllowed => "method-not-allowed",
            Kind::Busy => "busy",
            Kind::Draining => "draining",
            Kind::TimeLimit => "time-limit",
            Kind::Internal => "internal",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Kind::BadJson => "The request body is not valid JSON",
            Kind::TooLarge => "The request is too large for this server's limits",
            Kind::BodyTimeout => "The request body did not arrive in time",
            Kind::InvalidRequest => "The request does not have the expected fields",
            Kind::InvalidGraph => "The graph is invalid",
            Kind::InvalidBudget => "The budget is invalid",
            Kind::InvalidSchedule => "The schedule is invalid",
            Kind::InvalidSolver => "The solver cannot be used",
            Kind::NotFound => "Not found",
            Kind::UriTooLong => "The request URI is too long",
            Kind::UnsupportedMediaType => "The request body is not declared as JSON",
            Kind::Forbidden => "The request is not accepted from this client",
            Kind::MethodNotAllowed => "Method not allowed",
            Kind::Busy => "The server is busy",
            Kind::Draining => "The server is shutting down",
            Kind::TimeLimit => "The time limit passed with no schedule",
            Kind::Internal => "Internal error",
        }
    }
}

/// An RFC 9457 problem document.
#[derive(Clone, Debug, Serialize)]
pub struct ApiProblem {
    #[serde(rename = "type")]
    pub type_uri: String,
    pub title: &'static str,
    pub status: u16,
    pub detail: String,
    /// The graph's problems, each naming its node and field.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<Problem>,
    /// The request field at fault (`budget`, `solver`, `graph.nodes[3].cost`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// For an invalid schedule: the event, node and rule it breaks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_error: Option<SimError>,
    /// For a time limit: the solver's result (status `no_solution`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<SolveResult>>,
    /// Seconds a client should wait before retrying (the `Retry-After` header).
    #[serde(skip)]
    retry_after: Option<u32>,
}

impl ApiProblem {
    pub fn new(kind: Kind, detail: impl Into<String>) -> ApiProblem {
        ApiProblem {
            type_uri: format!("urn:remat:problem:{}", kind.slug()),
            title: kind.title(),
            status: kind.status().as_u16(),
            detail: detail.into(),
            problems: Vec::new(),
            field: None,
            schedule_error: None,
            result: None,
            retry_after: None,
        }
    }

    pub fn with_field(mut self, field: impl Into<String>) -> ApiProblem {
        self.field = Some(field.into());
        self
    }

    pub fn retry_after(mut self, seconds: u32) -> ApiProblem {
        self.retry_after = Some(seconds);
        self
    }

    /// The solve queue is full (503, retry in a second): new work is refused.
    pub fn queue_full() -> ApiProblem {
        ApiProblem::new(Kind::Busy, "the solve queue is full").retry_after(1)
    }

    /// A graph that failed to load: its problems, listed.
    pub fn graph(e: &GraphError) -> ApiProblem {
        let mut p = ApiProblem::new(Kind::InvalidGraph, e.to_string()).with_field("graph");
        p.problems = e.problems();
        p
    }

    pub fn schedule(e: SimError) -> ApiProblem {
        let mut p = ApiProblem::new(Kind::InvalidSchedule, e.to_string()).with_field("schedule");
        p.schedule_error = Some(e);
        p
    }

    /// A result with no schedule because the time limit passed.
    pub fn time_limit(result: SolveResult) -> ApiProblem {
        let detail = result
            .message
            .clone()
            .unwrap_or_else(|| "the time limit passed before a schedule was found".into());
        let mut p = ApiProblem::new(Kind::TimeLimit, detail);
        p.result = Some(Box::new(result));
        p
    }
}

impl From<SolveError> for ApiProblem {
    fn from(e: SolveError) -> ApiProblem {
        match e {
            SolveError::UnknownSolver { .. } | SolveError::Unsupported { .. } => {
                ApiProblem::new(Kind::InvalidSolver, e.to_string()).with_field("solver")
            }
            SolveError::Cancelled => ApiProblem::new(Kind::Draining, e.to_string()),
            SolveError::TooLarge { .. } => ApiProblem::new(Kind::TooLarge, e.to_string()),
            SolveError::Failed { .. } => ApiProblem::new(Kind::Internal, e.to_string()),
        }
    }
}

/// An option out of range, named by its request field.
impl From<InvalidOption> for ApiProblem {
    fn from(e: InvalidOption) -> ApiProblem {
        let field = e.option.field();
        ApiProblem::new(Kind::InvalidRequest, e.message(field)).with_field(field)
    }
}

/// A budget that resolves out of range for this graph.
impl From<BudgetError> for ApiProblem {
    fn from(e: BudgetError) -> ApiProblem {
        ApiProblem::new(Kind::InvalidBudget, e.to_string()).with_field("budget")
    }
}

/// A `schedule` field that holds no schedule.
impl From<ScheduleInputError> for ApiProblem {
    fn from(e: ScheduleInputError) -> ApiProblem {
        ApiProblem::new(Kind::InvalidSchedule, e.to_string()).with_field("schedule")
    }
}

impl IntoResponse for ApiProblem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).expect("problems serialise");
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(s) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        response
    }
}
