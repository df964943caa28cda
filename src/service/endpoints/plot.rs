//! `POST /v1/plot/{timeline|stages|tradeoff}`: the pictures of `crate::plot`, drawn as
//! `remat plot` draws them.
//!
//! A timeline or stage picture answers `image/svg+xml` at once: drawn from `schedule` (a
//! schedule or a solve result) or from a solve at `budget` with `solver`, run in the
//! worker pool through the cache like `POST /v1/solve`. A trade-off sweep is a job (202,
//! then `GET /v1/jobs/{id}` shows its progress and, when done, `result.svg` and
//! `result.sweep`; `DELETE` cancels it), run on one worker, each point within
//! `time_limit_s` (5 s by default, at most the server's time limit).

// An `ApiProblem` is built at most once per request, on the way out: its size does not matter.
#![allow(clippy::result_large_err)]

use super::solve::solve_in_request;
use super::{off_runtime, read_body, start_job, ApiResult, Posted, Shared};
use crate::graph::Graph;
use crate::plot::request::{PlotInput, PlotInputError, PlotRequest};
use crate::plot::{self, input, sweep, tradeoff, PlotError};
use crate::service::jobs::JobResult;
use crate::service::problem::{ApiProblem, Kind};
use crate::service::request::{Body, Options, SolveRequest};
use crate::service::AppState;
use crate::solve::{self, Progress, SolveOptions};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::IntoResponse;
use std::sync::Arc;

/// The media type of the pictures.
pub const SVG: &str = "image/svg+xml";

impl From<PlotError> for ApiProblem {
    fn from(e: PlotError) -> ApiProblem {
        match e {
            PlotError::Schedule(e) => ApiProblem::schedule(e),
            PlotError::Input(e) => e.into(),
            PlotError::UnknownStageNode { .. } | PlotError::StagesDisagree { .. } => {
                ApiProblem::new(Kind::InvalidSchedule, e.to_string()).with_field("schedule")
            }
            PlotError::NoSchedule(_) => {
                ApiProblem::new(Kind::InvalidBudget, e.to_string()).with_field("budget")
            }
            PlotError::TooLarge { .. } => ApiProblem::new(Kind::TooLarge, e.to_string()),
            PlotError::Sweep(_) | PlotError::Solvers(_) => {
                ApiProblem::new(Kind::InvalidRequest, e.to_string())
            }
            PlotError::Solve(e) => e.into(),
        }
    }
}

impl From<PlotInputError> for ApiProblem {
    fn from(e: PlotInputError) -> ApiProblem {
        let field = e.field().field();
        let problem = match e {
            PlotInputError::Budget(_, e) => ApiProblem::from(e),
            PlotInputError::Schedule(e) | PlotInputError::Sweep(e) => ApiProblem::from(e),
            e => ApiProblem::new(
                Kind::InvalidRequest,
                e.message(|f| format!("`{}`", f.field())),
            ),
        };
        problem.with_field(field)
    }
}

/// `POST /v1/plot/{kind}`.
pub async fn plot(
    State(state): Shared,
    kind: Result<Path<String>, PathRejection>,
    body: Posted,
) -> ApiResult {
    let kind: plot::Kind = kind
        .map_err(|e| e.body_text())
        .and_then(|Path(k)| k.parse())
        .map_err(|e| ApiProblem::new(Kind::NotFound, e).with_field("kind"))?;
    // A solve on the spot is made ready (its cache key) in the reader's place.
    let (graph, request, solve) = read_body(&state, body, move |s, b| {
        let (graph, request, options) = read(s, kind, b)?;
        let solve = match (&request, options) {
            (PlotRequest::Solve(budget), Some(options)) => {
                Some(SolveRequest::new(graph.clone(), *budget, options))
            }
            _ => None,
        };
        Ok((graph, request, solve))
    })
    .await?;
    // a schedule too large to draw is the request's `schedule`, or what its `budget` gave
    let drawn_field = match request {
        PlotRequest::Solve(_) => "budget",
        _ => "schedule",
    };
    let drawn = match (request, solve) {
        (PlotRequest::Tradeoff(request), _) => return tradeoff_job(&state, graph, request),
        (PlotRequest::Draw(drawn), _) => drawn,
        (PlotRequest::Solve(_), solve) => {
            let request = solve.expect("a solve's options are read with it");
            let (result, _) = solve_in_request(&state, request, None).await?;
            input::from_result(&graph, &result)?
        }
    };
    off_runtime(&state, move |_| {
        let svg = plot::draw(kind, &graph, &drawn, "the schedule given").map_err(|e| {
            let field = match e {
                PlotError::TooLarge {
                    what: "the graph", ..
                } => Some("graph"),
                PlotError::TooLarge { .. } => Some(drawn_field),
                _ => None,
            };
            let problem = ApiProblem::from(e);
            match field {
                Some(field) => problem.with_field(field),
                None => problem,
            }
        })?;
        Ok(([(header::CONTENT_TYPE, HeaderValue::from_static(SVG))], svg).into_response())
    })
    .await
}

/// Reads a plot request of `kind` and checks it (`crate::plot::request`); the options of a
/// solve on the spot beside it.
fn read(
    state: &AppState,
    kind: plot::Kind,
    bytes: &[u8],
) -> Result<(Graph, PlotRequest, Option<Options>), ApiProblem> {
    let mut body = Body::parse(bytes)?;
    let graph = body.graph(&state.config)?;
    if kind == plot::Kind::Tradeoff {
        let input = PlotInput {
            kind,
            schedule: None,
            budget: None,
            solvers: body.list("solvers", Kind::InvalidSolver, solve::registry().len())?,
            budgets: body.list("budgets", Kind::InvalidBudget, sweep::MAX_POINTS)?,
            points: body.optional("points", Kind::InvalidRequest)?,
        };
        let (options, _) = Options::limits(&mut body, &state.config, sweep::DEFAULT_TIME_LIMIT)?;
        body.finish()?;
        let request = input.validate(&graph, options)?;
        return Ok((graph, request, None));
    }
    let schedule = body.optional_raw("schedule");
    let input = PlotInput {
        kind,
        schedule: schedule.map(|s| s.get()),
        budget: body.optional("budget", Kind::InvalidBudget)?,
        solvers: None,
        budgets: None,
        points: None,
    };
    let options = match schedule {
        Some(_) => {
            if let Some(field) = body.first_of(&Options::FIELDS) {
                return Err(ApiProblem::new(
                    Kind::InvalidRequest,
                    format!(
                        "`{field}` is an option of a solve on the spot (no `schedule`): \
                         with a `schedule` given, leave it out"
                    ),
                )
                .with_field(field));
            }
            None
        }
        None => Some(Options::read(&mut body, &state.config)?),
    };
    body.finish()?;
    let request = input.validate(&graph, SolveOptions::default())?;
    Ok((graph, request, options))
}

/// How many times the server's `--time-limit` a trade-off sweep may take overall.
const TRADEOFF_TIME_LIMITS: u32 = 10;

/// Starts a trade-off sweep as a job: 202 with its id. The whole sweep runs within
/// [`TRADEOFF_TIME_LIMITS`] times the server's time limit, so that one request cannot
/// hold a worker for hours (8 solvers at 200 budgets).
fn tradeoff_job(state: &Arc<AppState>, graph: Graph, mut request: sweep::Request) -> ApiResult {
    request.total = Some(state.config.time_limit() * TRADEOFF_TIME_LIMITS);
    start_job(state, move |job| {
        request.options.cancel = job.cancel.clone();
        async move {
            let progress = job.progress();
            let outcome = job
                .on_worker("tradeoff", move || {
                    let sweep = sweep::run(&graph, &request, &|done, total, p| {
                        progress(Progress {
                            message: format!(
                                "{done} of {total} solves: {} at {} bytes, {}",
                                p.solver, p.budget, p.status
                            ),
                            fraction: Some(done as f64 / total as f64),
                        })
                    })?;
                    let svg = tradeoff::render(&graph, &sweep);
                    Ok::<_, PlotError>(JobResult::Tradeoff(tradeoff::Picture { svg, sweep }))
                })
                .await?;
            outcome.map_err(ApiProblem::from)
        }
    })
}
