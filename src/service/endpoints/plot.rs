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

use super::super::jobs::JobResult;
use super::super::pool::CancelOnDrop;
use super::super::problem::{ApiProblem, Kind};
use super::super::request::{Body, Options, SolveRequest};
use super::super::AppState;
use super::solve::{pool_problem, run_solve};
use super::{off_runtime, read_body, ApiResult, Shared};
use crate::budget::Budget;
use crate::graph::Graph;
use crate::plot::input::Drawn;
use crate::plot::{self, input, sweep, tradeoff, PlotError};
use crate::solve::{self, Progress, SolveResult, Status};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::IntoResponse;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The media type of the pictures.
pub const SVG: &str = "image/svg+xml";

impl From<PlotError> for ApiProblem {
    fn from(e: PlotError) -> ApiProblem {
        match e {
            PlotError::Schedule(e) => ApiProblem::schedule(e),
            PlotError::Input(e) => e.into(),
            PlotError::UnknownStageNode { .. } => {
                ApiProblem::new(Kind::InvalidSchedule, e.to_string()).with_field("schedule")
            }
            PlotError::NoSchedule(_) => {
                ApiProblem::new(Kind::InvalidBudget, e.to_string()).with_field("budget")
            }
            PlotError::TooLarge { .. } => ApiProblem::new(Kind::TooLarge, e.to_string()),
            PlotError::Sweep(_) => ApiProblem::new(Kind::InvalidRequest, e.to_string()),
            PlotError::Solve(e) => e.into(),
        }
    }
}

/// A plot request as read from its body (off the async runtime).
enum Read {
    /// A trade-off sweep to start as a job.
    Tradeoff(Graph, sweep::Request),
    /// A schedule given, to draw.
    Drawn(Graph, Drawn),
    /// A solve to run at this budget, then draw.
    Solve(Graph, u64, Options),
}

/// `POST /v1/plot/{kind}`.
pub async fn plot(
    State(state): Shared,
    kind: Result<Path<String>, PathRejection>,
    bytes: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let kind: plot::Kind = kind
        .map_err(|e| e.body_text())
        .and_then(|Path(k)| k.parse())
        .map_err(|e| ApiProblem::new(Kind::NotFound, e).with_field("kind"))?;
    let read = read_body(&state, bytes, move |s, b| read(s, kind, b)).await?;
    let (graph, drawn) = match read {
        Read::Tradeoff(graph, request) => return tradeoff_job(&state, graph, request),
        Read::Drawn(graph, drawn) => (graph, drawn),
        Read::Solve(graph, budget, options) => {
            let result = solved(&state, graph.clone(), budget, options).await?;
            let drawn = input::from_result(&graph, &result)?;
            (graph, drawn)
        }
    };
    off_runtime(&state, move |_| {
        let svg = plot::draw(kind, &graph, &drawn, "the schedule given")?;
        Ok(([(header::CONTENT_TYPE, HeaderValue::from_static(SVG))], svg).into_response())
    })
    .await
}

/// Reads a plot request of `kind`.
fn read(state: &AppState, kind: plot::Kind, bytes: &[u8]) -> Result<Read, ApiProblem> {
    let mut body = Body::parse(bytes)?;
    let graph = body.graph(&state.config)?;
    if kind == plot::Kind::Tradeoff {
        let request = read_tradeoff(state, body, &graph)?;
        return Ok(Read::Tradeoff(graph, request));
    }
    let schedule = body.optional_raw("schedule");
    let budget: Option<Budget> = body.optional("budget", Kind::InvalidBudget)?;
    let budget = budget.map(|b| b.resolve(&graph)).transpose()?;
    match schedule {
        Some(text) => {
            body.finish()?;
            let mut drawn = input::read(&graph, text.get())?;
            drawn.budget = budget.or(drawn.budget);
            Ok(Read::Drawn(graph, drawn))
        }
        None => {
            let budget = budget.ok_or_else(|| {
                ApiProblem::new(
                    Kind::InvalidRequest,
                    "give `schedule` to draw, or `budget` to solve at",
                )
                .with_field("budget")
            })?;
            let options = Options::read(&mut body, &state.config)?;
            body.finish()?;
            Ok(Read::Solve(graph, budget, options))
        }
    }
}

/// A solve for a picture, as `POST /v1/solve` runs it; a time limit with no schedule is 504.
async fn solved(
    state: &Arc<AppState>,
    graph: Graph,
    budget: u64,
    options: Options,
) -> Result<Arc<SolveResult>, ApiProblem> {
    let cancel = Arc::new(AtomicBool::new(false));
    let guard = CancelOnDrop::new(cancel.clone());
    let request = SolveRequest {
        graph,
        budget,
        options,
    };
    let (result, _) = run_solve(state, request, None, cancel, None, || ()).await?;
    guard.disarm();
    if result.status == Status::NoSolution {
        return Err(ApiProblem::time_limit((*result).clone()));
    }
    Ok(result)
}

/// Reads a trade-off request, checked.
fn read_tradeoff(
    state: &AppState,
    mut body: Body<'_>,
    graph: &Graph,
) -> Result<sweep::Request, ApiProblem> {
    let solvers: Vec<String> = body
        .list("solvers", Kind::InvalidSolver, solve::registry().len())?
        .unwrap_or_else(|| sweep::DEFAULT_SOLVERS.map(String::from).to_vec());
    let budgets: Option<Vec<Budget>> =
        body.list("budgets", Kind::InvalidBudget, sweep::MAX_POINTS)?;
    let points: Option<usize> = body.optional("points", Kind::InvalidRequest)?;
    let (options, _) = Options::limits(&mut body, &state.config, sweep::DEFAULT_TIME_LIMIT)?;
    body.finish()?;
    let budgets = match (budgets, points) {
        (Some(_), Some(_)) => {
            return Err(ApiProblem::new(
                Kind::InvalidRequest,
                "give `budgets` or `points`, not both",
            )
            .with_field("points"))
        }
        (Some(list), None) => list
            .iter()
            .map(|b| b.resolve(graph))
            .collect::<Result<Vec<u64>, _>>()
            .map_err(|e| ApiProblem::from(e).with_field("budgets"))?,
        (None, points) => {
            let points = points.unwrap_or(sweep::DEFAULT_POINTS);
            if !(2..=sweep::MAX_POINTS).contains(&points) {
                return Err(ApiProblem::new(
                    Kind::InvalidRequest,
                    format!("points must be 2 to {}, got {points}", sweep::MAX_POINTS),
                )
                .with_field("points"));
            }
            sweep::default_budgets(graph, points)
        }
    };
    let request = sweep::Request {
        solvers,
        budgets,
        options,
    };
    // Refuse a bad request now rather than as a failed job.
    sweep::check(&request).map_err(|e| {
        let field = if matches!(e, PlotError::Solve(_)) {
            "solvers"
        } else {
            "budgets"
        };
        ApiProblem::from(e).with_field(field)
    })?;
    Ok(request)
}

/// Starts a trade-off sweep as a job: 202 with its id.
fn tradeoff_job(state: &Arc<AppState>, graph: Graph, mut request: sweep::Request) -> ApiResult {
    if state.pool.is_full() {
        state.metrics.rejected();
        return Err(ApiProblem::new(Kind::Busy, "the solve queue is full").retry_after(1));
    }
    let (id, cancel) = state.jobs.create()?;
    request.options.cancel = cancel.clone();
    let job_state = state.clone();
    let job_id = id.clone();
    tokio::spawn(async move {
        let (work_state, work_id) = (job_state.clone(), job_id.clone());
        let outcome = job_state
            .pool
            .run(cancel, move || {
                work_state.jobs.started(&work_id);
                let sweep = sweep::run(&graph, &request, &|done, total, p| {
                    work_state.jobs.progress(
                        &work_id,
                        Progress {
                            message: format!(
                                "{done} of {total} solves: {} at {} bytes, {}",
                                p.solver, p.budget, p.status
                            ),
                            fraction: Some(done as f64 / total as f64),
                        },
                    )
                })?;
                let svg = tradeoff::render(&graph, &sweep);
                Ok::<_, PlotError>(JobResult::Tradeoff(tradeoff::Picture { svg, sweep }))
            })
            .await;
        let outcome = match outcome {
            Err(e) => Err(pool_problem(&job_state, "tradeoff", e)),
            Ok(r) => r.map_err(ApiProblem::from),
        };
        job_state.jobs.finish(&job_id, outcome);
    });
    Ok(super::accepted(&id))
}
