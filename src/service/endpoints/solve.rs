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

use super::{
    json_off_runtime, json_response, pool_problem, read_body, start_job, ApiResult, Posted, Shared,
};
use crate::aside::free_aside;
use crate::budget::Budget;
use crate::front::{answer_reserve, timed_peak, Clock};
use crate::graph::Graph;
use crate::plot::sweep::solve_each;
use crate::service::jobs::{Cancelled, JobResult};
use crate::service::pool::CancelOnDrop;
use crate::service::problem::{ApiProblem, Kind};
use crate::service::request::{Body, Options, SolveRequest};
use crate::service::AppState;
use crate::solve::{self, Instance, SolveError, SolveResult, Status};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::IntoResponse;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs one solve in the pool (or answers it from the cache). `progress` receives the
/// solver's reports. The time limit counts from `admitted` (a synchronous solve: reading
/// the body and waiting for a worker count), else from the moment a worker starts it (a
/// job), and the solve gets it less the reserve for the answer, timed on its graph by the
/// worker (`crate::front::clock`). The cache key came with the request (computed where it
/// was read, `SolveRequest::new`), and the result is weighed and cached by the worker (its
/// weight is the length of its JSON), so that the async threads stay free to answer
/// `/healthz`; the worker frees the graph aside (`crate::aside`). Returns the result and
/// whether it came from the cache.
pub(super) async fn run_solve(
    state: &Arc<AppState>,
    request: SolveRequest,
    admitted: Option<Instant>,
    cancel: Arc<AtomicBool>,
    progress: Option<solve::ProgressSink>,
    on_start: impl FnOnce() + Send + 'static,
) -> Result<(Arc<SolveResult>, bool), ApiProblem> {
    let key = request.key;
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
            // Past the deadline during the replay: no time left, the solve answers at once.
            options.time_limit = match timed_peak(&graph, clock.deadline()) {
                Some((_, replay)) => clock.solve_limit(answer_reserve(replay)),
                None => Some(Duration::ZERO),
            };
            options.judge_by = clock.judge_by();
            let result = solve::solve(
                &Instance {
                    graph: &graph,
                    budget,
                },
                &solver,
                &options,
            );
            count_solve(&worker_state, &solver, &options.cancel, &result);
            // The answer does not wait for a million-node graph to be freed.
            free_aside(graph);
            result.map(|r| {
                let r = Arc::new(r);
                if !options.cancel.load(Ordering::Relaxed) {
                    worker_state.cache.put(key, r.clone());
                }
                r
            })
        })
        .await;
    let solver = &request.options.solver;
    match outcome {
        Err(e) => Err(pool_problem(state, solver, e)),
        Ok(Err(e)) => Err(e.into()),
        Ok(Ok(result)) => Ok((result, false)),
    }
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
    match result {
        Ok(r) => tracing::info!(
            solver,
            status,
            cost = r.stats.as_ref().map(|s| s.total_cost),
            solve_time_s = r.solve_time_s,
            "solve finished"
        ),
        Err(e) => tracing::info!(solver, status, error = %e, "solve finished"),
    }
}

/// Reads a solve request off the async runtime, its graph within the request's time limit
/// from `received` when given ([`SolveRequest::read`]).
pub(super) async fn read_solve(
    state: &Arc<AppState>,
    body: Posted,
    received: Option<Instant>,
) -> Result<SolveRequest, ApiProblem> {
    read_body(state, body, move |state, bytes| {
        SolveRequest::read(state, bytes, received)
    })
    .await
}

/// A solve run for the request in hand (`POST /v1/solve`, a picture solved on the spot):
/// the request's future holds the cancel flag's guard from before the solve is queued
/// until its answer is ready, so a client that disconnects drops the future, which raises
/// the flag (the solver's `Stop`) and frees the worker. The time limit counts from
/// `admitted` as [`run_solve`] says. A time limit with no schedule is 504. Returns the
/// result and whether it came from the cache.
pub(super) async fn solve_in_request(
    state: &Arc<AppState>,
    request: SolveRequest,
    admitted: Option<Instant>,
) -> Result<(Arc<SolveResult>, bool), ApiProblem> {
    let cancel = Arc::new(AtomicBool::new(false));
    let guard = CancelOnDrop::new(cancel.clone());
    let (result, hit) = run_solve(state, request, admitted, cancel, None, || ()).await?;
    guard.disarm();
    if result.status == Status::NoSolution {
        return Err(ApiProblem::time_limit((*result).clone()));
    }
    Ok((result, hit))
}

/// `POST /solve`, `POST /v1/solve` ([`solve_in_request`]).
pub async fn solve(State(state): Shared, body: Posted) -> ApiResult {
    let admitted = Instant::now();
    let request = read_solve(&state, body, Some(admitted)).await?;
    let events_only = request.options.events_only;
    let (result, hit) = solve_in_request(&state, request, Some(admitted)).await?;
    let result = Options::shape(events_only, result);
    if result.status == Status::Error {
        return Err(ApiProblem::new(
            Kind::Internal,
            result.message.clone().unwrap_or_default(),
        ));
    }
    let mut response = json_off_runtime(&state, StatusCode::OK, result).await?;
    response.headers_mut().insert(
        "x-cache",
        HeaderValue::from_static(if hit { "hit" } else { "miss" }),
    );
    Ok(response)
}

/// `POST /v1/jobs`: 202 with the job's id and `Location`.
pub async fn create_job(State(state): Shared, body: Posted) -> ApiResult {
    let request = read_solve(&state, body, None).await?;
    start_job(&state, move |job| async move {
        let events_only = request.options.events_only;
        let (progress, started) = (job.progress(), job.starter());
        let (result, _) = run_solve(
            &job.state,
            request,
            None,
            job.cancel.clone(),
            Some(progress),
            started,
        )
        .await?;
        Ok(JobResult::Solve(Options::shape(events_only, result)))
    })
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

/// `GET /v1/jobs/{id}`: the job's view (its result shared, not copied), serialised off the
/// async threads ([`json_off_runtime`]): a million-node result is about 100 MB of JSON.
pub async fn get_job(State(state): Shared, path: Result<Path<String>, PathRejection>) -> ApiResult {
    let id = job_id(path)?;
    let view = state.jobs.get(&id).ok_or_else(|| no_job(&id))?;
    json_off_runtime(&state, StatusCode::OK, Arc::new(view)).await
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

/// `POST /v1/sweep`: one result per budget, in the order given, solved one after the other
/// on one worker within the server's time limit overall, counted from the request's
/// receipt as a synchronous solve's is: the graph is read by then (a 504 past it), and
/// each solve gets what is left less the answer's reserve (`crate::plot::sweep::solve_each`).
pub async fn sweep(State(state): Shared, body: Posted) -> ApiResult {
    let clock = Clock::since(Instant::now(), Some(state.config.time_limit()));
    let deadline = clock.deadline();
    let (graph, budgets, options) = read_body(&state, body, move |state, bytes| {
        read_sweep(state, bytes, deadline)
    })
    .await?;
    let cancel = Arc::new(AtomicBool::new(false));
    let guard = CancelOnDrop::new(cancel.clone());
    let solve_options = options.solve_options(cancel.clone());
    let worker_state = state.clone();
    let outcome = state
        .pool
        .run(cancel, move || {
            let counted = |result: &Result<SolveResult, SolveError>| {
                count_solve(
                    &worker_state,
                    &options.solver,
                    &solve_options.cancel,
                    result,
                )
            };
            // Past the deadline during the replay: no time left, every solve answers at once.
            let reserve = timed_peak(&graph, clock.deadline())
                .map_or(Duration::ZERO, |(_, replay)| answer_reserve(replay));
            let results = solve_each(
                &graph,
                &options.solver,
                &budgets,
                &solve_options,
                &clock,
                reserve,
                &counted,
            );
            free_aside(graph);
            let mut results = results?;
            if options.events_only {
                results.iter_mut().for_each(Options::drop_stages);
            }
            Ok::<_, SolveError>(results)
        })
        .await;
    guard.disarm();
    let results = outcome.map_err(|e| pool_problem(&state, "sweep", e))??;
    /// The sweep's answer.
    #[derive(serde::Serialize)]
    struct Sweep {
        results: Vec<SolveResult>,
    }
    json_off_runtime(&state, StatusCode::OK, Arc::new(Sweep { results })).await
}

/// A sweep request: the graph (read by `deadline`), its budgets in bytes (1 to `--max-sweep`, counted before
/// they are read, and no more schedules in all than `limits::check_sweep` allows), the
/// options.
fn read_sweep(
    state: &AppState,
    bytes: &[u8],
    deadline: Option<Instant>,
) -> Result<(Graph, Vec<u64>, Options), ApiProblem> {
    let mut body = Body::parse(bytes)?;
    let graph = body.graph_by(&state.config, deadline)?;
    let most = state.config.max_sweep;
    let budgets: Vec<Budget> = body
        .list("budgets", Kind::InvalidBudget, most)?
        .ok_or_else(|| body.missing("budgets"))?;
    if budgets.is_empty() {
        return Err(ApiProblem::new(
            Kind::InvalidBudget,
            format!("budgets must list 1 to {most} budgets, got 0"),
        )
        .with_field("budgets"));
    }
    crate::service::limits::check_sweep(budgets.len(), &graph, &state.config)?;
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

    /// A graph read goes on to the cache and the pool in hand: were its cache key computed
    /// in a second reader's place, it would wait behind every body being read, and every
    /// graph read would stay in memory meanwhile, beyond `--readers` and `--queue` (six
    /// concurrent 57 MB solves with one reader, one worker and no queue: 2.5 GB, no 503).
    #[tokio::test]
    async fn a_graph_read_needs_no_second_reader_place_to_be_solved() {
        let state = Arc::new(AppState::new(Config {
            workers: 1,
            queue: 0,
            readers: 1,
            ..Config::default()
        }));
        let body = br#"{"graph": {"nodes": [{"id": "a", "cost": 1, "memory": 1}]},
                        "budget": "100%", "solver": "checkpoint-all"}"#;
        let request = SolveRequest::read(&state, body, None).unwrap();
        let _every_reader = state.readers.clone().acquire_owned().await.unwrap();
        let cancel = Arc::new(AtomicBool::new(false));
        let solve = run_solve(&state, request, None, cancel, None, || ());
        let (result, hit) = tokio::time::timeout(Duration::from_secs(20), solve)
            .await
            .expect("the solve waited for a reader's place")
            .unwrap();
        assert_eq!((result.status, hit), (Status::Optimal, false));
    }
}
