//! The endpoints that run solvers in the worker pool: `POST /v1/solve` (and `/solve`),
//! the asynchronous jobs (`/v1/jobs`), and `POST /v1/sweep` (one graph, many budgets).
//! Every solve goes through `run_solve`: the cache, then the pool, then metrics.
//!
//! A solve is counted in `remat_solves_total` by the worker that ran it, when it ends,
//! whether or not its client is still there: a solve whose cancel flag was raised by then
//! (client gone, job deleted, shutdown) counts as `cancelled`, whatever it returned, so
//! that `remat_cancelled_total` (their sum) and `status="cancelled"` agree.

// An `ApiProblem` is built at most once per request, on the way out: its size does not matter.
#![allow(clippy::result_large_err)]

use super::super::jobs::{Cancelled, JobResult, JobView};
use super::super::pool::{CancelOnDrop, PoolError};
use super::super::problem::{ApiProblem, Kind};
use super::super::request::{Body, Options, SolveRequest};
use super::super::AppState;
use super::{json_response, read_body, ApiResult, Shared};
use crate::budget::Budget;
use crate::front::{answer_reserve, timed_peak, Clock};
use crate::graph::Graph;
use crate::solve::{self, Instance, SolveError, SolveResult, Status};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Runs one solve in the pool (or answers it from the cache). `progress` receives the
/// solver's reports. The time limit counts from `admitted` (a synchronous solve: reading
/// the body and waiting for a worker count), else from the moment a worker starts it (a
/// job), and the solve gets it less the reserve for the answer, timed on its graph by the
/// worker (`crate::front::clock`). Returns the result and whether it came from the cache.
pub(super) async fn run_solve(
    state: &Arc<AppState>,
    request: SolveRequest,
    admitted: Option<Instant>,
    cancel: Arc<AtomicBool>,
    progress: Option<solve::ProgressSink>,
    on_start: impl FnOnce() + Send + 'static,
) -> Result<(Arc<SolveResult>, bool), ApiProblem> {
    let key = request.options.key(&request.graph, request.budget);
    if let Some(hit) = state.cache.get(&key) {
        state.metrics.cache(true);
        return Ok((hit, true));
    }
    state.metrics.cache(false);
    let mut options = request.options.solve_options(cancel);
    options.progress = progress;
    let solver = request.options.solver.clone();
    let limit = request.options.time_limit;
    let SolveRequest { graph, budget, .. } = request;
    let worker_state = state.clone();
    let outcome = state
        .pool
        .run(options.cancel.clone(), move || {
            on_start();
            let clock = Clock::since(admitted.unwrap_or_else(Instant::now), Some(limit));
            let (_, replay) = timed_peak(&graph);
            options.time_limit = clock.solve_limit(answer_reserve(replay));
            let result = solve::solve(
                &Instance {
                    graph: &graph,
                    budget,
                },
                &solver,
                &options,
            );
            count_solve(&worker_state, &solver, &options.cancel, &result);
            result
        })
        .await;
    let solver = &request.options.solver;
    let result = match outcome {
        Err(e) => return Err(pool_problem(state, solver, e)),
        Ok(Err(e)) => return Err(e.into()),
        Ok(Ok(r)) => Arc::new(r),
    };
    state.cache.put(key, result.clone());
    Ok((result, false))
}

/// Counts one finished solve in `remat_solves_total` (see the module docs).
fn count_solve(
    state: &AppState,
    solver: &str,
    cancel: &AtomicBool,
    result: &Result<SolveResult, SolveError>,
) {
    let (solver, status) = match result {
        _ if cancel.load(Ordering::Relaxed) => (solver, "cancelled"),
        Err(SolveError::Cancelled) => (solver, "cancelled"),
        Err(_) => (solver, "error"),
        Ok(r) => (r.solver.as_str(), r.status.as_str()),
    };
    state.metrics.solve(solver, status);
}

pub(super) fn pool_problem(state: &AppState, solver: &str, e: PoolError) -> ApiProblem {
    match e {
        PoolError::Busy { .. } => {
            state.metrics.rejected();
            ApiProblem::new(Kind::Busy, e.to_string()).retry_after(1)
        }
        PoolError::Panicked(_) => {
            state.metrics.solve(solver, "panic");
            tracing::error!(solver, error = %e, "a solve panicked");
            ApiProblem::new(Kind::Internal, e.to_string())
        }
        PoolError::Closed => ApiProblem::new(Kind::Draining, e.to_string()).retry_after(1),
    }
}

/// Reads a solve request off the async runtime.
pub(super) async fn read_solve(
    state: &Arc<AppState>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<SolveRequest, ApiProblem> {
    read_body(state, bytes, SolveRequest::read).await
}

/// `POST /solve`, `POST /v1/solve`. The request's future holds the cancel flag's guard
/// from before the solve is queued until its answer is ready: a client that disconnects
/// drops the future, which raises the flag (the solver's `Stop`) and frees the worker.
pub async fn solve(State(state): Shared, bytes: Result<Bytes, BytesRejection>) -> ApiResult {
    let admitted = Instant::now();
    let request = read_solve(&state, bytes).await?;
    let cancel = Arc::new(AtomicBool::new(false));
    let guard = CancelOnDrop::new(cancel.clone());
    let events_only = request.options.events_only;
    let (result, hit) = run_solve(&state, request, Some(admitted), cancel, None, || ()).await?;
    let result = Options::shape(events_only, result);
    guard.disarm();
    if result.status == Status::NoSolution {
        return Err(ApiProblem::time_limit((*result).clone()));
    }
    if result.status == Status::Error {
        return Err(ApiProblem::new(
            Kind::Internal,
            result.message.clone().unwrap_or_default(),
        ));
    }
    let mut response = json_response(StatusCode::OK, &*result);
    response.headers_mut().insert(
        "x-cache",
        HeaderValue::from_static(if hit { "hit" } else { "miss" }),
    );
    Ok(response)
}

/// `POST /v1/jobs`: 202 with the job's id and `Location`.
pub async fn create_job(State(state): Shared, bytes: Result<Bytes, BytesRejection>) -> ApiResult {
    let request = read_solve(&state, bytes).await?;
    if state.pool.is_full() {
        state.metrics.rejected();
        return Err(ApiProblem::new(Kind::Busy, "the solve queue is full").retry_after(1));
    }
    let (id, cancel) = state.jobs.create()?;
    let (job_state, job_id) = (state.clone(), id.clone());
    let sink_state = state.clone();
    let sink_id = id.clone();
    let progress: solve::ProgressSink = Arc::new(move |p| sink_state.jobs.progress(&sink_id, p));
    let start_state = state.clone();
    let start_id = id.clone();
    let events_only = request.options.events_only;
    tokio::spawn(async move {
        let outcome = run_solve(
            &job_state,
            request,
            None,
            cancel,
            Some(progress),
            move || start_state.jobs.started(&start_id),
        )
        .await
        .map(|(result, _)| {
            JobResult::Solve(Box::new((*Options::shape(events_only, result)).clone()))
        });
        job_state.jobs.finish(&job_id, outcome);
    });
    Ok(super::accepted(&id))
}

fn no_job(id: &str) -> ApiProblem {
    ApiProblem::new(
        Kind::NotFound,
        format!("no job '{id}' (it may have expired)"),
    )
    .with_field("id")
}

/// The `{id}` of a job route; an id that is not UTF-8 names no job (404 problem).
fn job_id(path: Result<Path<String>, PathRejection>) -> Result<String, ApiProblem> {
    path.map(|Path(id)| id).map_err(|e| {
        ApiProblem::new(Kind::NotFound, format!("no such job: {}", e.body_text())).with_field("id")
    })
}

/// `GET /v1/jobs/{id}`.
pub async fn get_job(
    State(state): Shared,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<JobView>, ApiProblem> {
    let id = job_id(path)?;
    state.jobs.get(&id).map(Json).ok_or_else(|| no_job(&id))
}

/// `DELETE /v1/jobs/{id}`: cancels an active job (200 with the job), removes a finished
/// one (204).
pub async fn delete_job(
    State(state): Shared,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let id = job_id(path)?;
    match state.jobs.cancel(&id) {
        None => Err(no_job(&id)),
        Some(Cancelled::Stopped(view)) => Ok(json_response(StatusCode::OK, &*view)),
        Some(Cancelled::Removed) => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// `POST /v1/sweep`: one result per budget, in the order given, solved one after the
/// other on one worker within the server's time limit overall.
pub async fn sweep(State(state): Shared, bytes: Result<Bytes, BytesRejection>) -> ApiResult {
    let (graph, bytes, options) = read_body(&state, bytes, read_sweep).await?;
    let cap = state.config.time_limit();
    let cancel = Arc::new(AtomicBool::new(false));
    let guard = CancelOnDrop::new(cancel.clone());
    let work_cancel = cancel.clone();
    let worker_state = state.clone();
    let outcome = state
        .pool
        .run(cancel, move || {
            let end = Instant::now() + cap;
            bytes
                .iter()
                .map(|&budget| {
                    let left = end.saturating_duration_since(Instant::now());
                    let mut o = options.solve_options(work_cancel.clone());
                    o.time_limit = Some(options.time_limit.min(left));
                    let result = solve::solve(
                        &Instance {
                            graph: &graph,
                            budget,
                        },
                        &options.solver,
                        &o,
                    );
                    count_solve(&worker_state, &options.solver, &work_cancel, &result);
                    result.map(|mut r| {
                        if options.events_only {
                            Options::drop_stages(&mut r);
                        }
                        r
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .await;
    guard.disarm();
    let results = outcome.map_err(|e| pool_problem(&state, "sweep", e))??;
    Ok(json_response(
        StatusCode::OK,
        &json!({ "results": results }),
    ))
}

/// A sweep request: the graph, its budgets in bytes (1 to `--max-sweep`, counted before
/// they are read), the options.
fn read_sweep(state: &AppState, bytes: &[u8]) -> Result<(Graph, Vec<u64>, Options), ApiProblem> {
    let mut body = Body::parse(bytes)?;
    let graph = body.graph(&state.config)?;
    let most = state.config.max_sweep;
    let budgets: Vec<Budget> = body
        .list("budgets", Kind::InvalidBudget, most)?
        .ok_or_else(|| {
            ApiProblem::new(Kind::InvalidRequest, "the field 'budgets' is required")
                .with_field("budgets")
        })?;
    if budgets.is_empty() {
        return Err(ApiProblem::new(
            Kind::InvalidBudget,
            format!("budgets must list 1 to {most} budgets, got 0"),
        )
        .with_field("budgets"));
    }
    let options = Options::read(&mut body, &state.config)?;
    body.finish()?;
    let bytes = budgets
        .iter()
        .map(|b| b.resolve(&graph))
        .collect::<Result<Vec<u64>, _>>()
        .map_err(|e| ApiProblem::from(e).with_field("budgets"))?;
    Ok((graph, bytes, options))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{metrics::Gauges, Config, PROBLEM_JSON};

    #[tokio::test]
    async fn a_panicking_solve_is_a_500_for_that_request_and_the_pool_goes_on() {
        let state = AppState::new(Config {
            workers: 1,
            queue: 0,
            ..Config::default()
        });
        let flag = Arc::new(AtomicBool::new(false));
        let err = state
            .pool
            .run(flag.clone(), || -> u32 { panic!("solver bug") })
            .await
            .unwrap_err();
        let response = pool_problem(&state, "auto", err).into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            response.headers()[axum::http::header::CONTENT_TYPE],
            PROBLEM_JSON
        );
        assert_eq!(state.pool.run(flag, || 1).await, Ok(1));
        let text = state.metrics.render(&Gauges {
            queue_depth: 0,
            workers_busy: 0,
            workers: 1,
            jobs: 0,
            cache_entries: 0,
        });
        assert!(text.contains("remat_solves_total{solver=\"auto\",status=\"panic\"} 1"));
    }
}
