//! The endpoints. Each reads its JSON body field by field, so that an error names the
//! field at fault, and hands the work to `crate::solve` / `crate::schedule` through the
//! worker pool. Nothing here knows how a solver works.

// An `ApiProblem` is built at most once per request, on the way out: its size does not matter.
#![allow(clippy::result_large_err)]

use super::cache::KeyParts;
use super::jobs::{Cancelled, JobView};
use super::pool::{CancelOnDrop, PoolError};
use super::problem::{ApiProblem, Kind};
use super::{AppState, Config};
use crate::budget::Budget;
use crate::graph::load::{graph_from_value, Format};
use crate::graph::{Graph, Storage};
use crate::schedule::{simulate, ScheduleJson};
use crate::solve::{
    self, checkpoint_all_peak, Instance, SolveError, SolveOptions, SolveResult, Status,
};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Shared = State<Arc<AppState>>;
type ApiResult = Result<Response, ApiProblem>;

/// A JSON object body, read one field at a time.
struct Body(Map<String, Value>);

impl Body {
    fn parse(bytes: Result<Bytes, BytesRejection>) -> Result<Body, ApiProblem> {
        let bytes = bytes.map_err(|e| {
            let kind = if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                Kind::TooLarge
            } else {
                Kind::BadJson
            };
            ApiProblem::new(kind, e.body_text())
        })?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            ApiProblem::new(
                Kind::BadJson,
                format!(
                    "malformed JSON at line {}, column {}: {e}",
                    e.line(),
                    e.column()
                ),
            )
        })?;
        match value {
            Value::Object(map) => Ok(Body(map)),
            _ => Err(ApiProblem::new(
                Kind::InvalidRequest,
                "the body must be a JSON object with a `graph` field",
            )),
        }
    }

    fn optional<T: DeserializeOwned>(
        &mut self,
        field: &str,
        kind: Kind,
    ) -> Result<Option<T>, ApiProblem> {
        match self.0.remove(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => serde_json::from_value(v).map(Some).map_err(|e| {
                ApiProblem::new(kind, format!("field '{field}': {e}")).with_field(field)
            }),
        }
    }

    fn required<T: DeserializeOwned>(&mut self, field: &str, kind: Kind) -> Result<T, ApiProblem> {
        self.optional(field, kind)?.ok_or_else(|| {
            ApiProblem::new(
                Kind::InvalidRequest,
                format!("the field '{field}' is required"),
            )
            .with_field(field)
        })
    }

    fn graph(&mut self) -> Result<Graph, ApiProblem> {
        let value: Value = self.required("graph", Kind::InvalidGraph)?;
        let format = match self.optional::<String>("format", Kind::InvalidRequest)? {
            None => Format::Auto,
            Some(f) => f.parse().map_err(|e: String| {
                ApiProblem::new(Kind::InvalidRequest, e).with_field("format")
            })?,
        };
        let graph = graph_from_value(&value, format).map_err(|e| ApiProblem::graph(&e))?;
        // A request-level `storage` replaces the graph's own (as `--storage` does).
        Ok(
            match self.optional::<Storage>("storage", Kind::InvalidGraph)? {
                Some(storage) => graph.with_storage(Some(storage)),
                None => graph,
            },
        )
    }

    /// Rejects the fields nobody read: a misspelt option must not pass silently.
    fn finish(self) -> Result<(), ApiProblem> {
        match self.0.keys().next() {
            None => Ok(()),
            Some(k) => Err(
                ApiProblem::new(Kind::InvalidRequest, format!("unknown field '{k}'"))
                    .with_field(k.clone()),
            ),
        }
    }
}

/// Solver options shared by solve, jobs and sweep.
struct Options {
    solver: String,
    time_limit: Duration,
    threads: Option<u32>,
    mip_gap: Option<f64>,
    seed: u64,
}

impl Options {
    fn read(body: &mut Body, config: &Config) -> Result<Options, ApiProblem> {
        let cap = config.time_limit();
        let solver = body
            .optional::<String>("solver", Kind::InvalidSolver)?
            .unwrap_or_else(|| "auto".into());
        solve::find(&solver)?;
        let time_limit = match body.optional::<f64>("time_limit_s", Kind::InvalidRequest)? {
            None => cap,
            Some(t) if t.is_finite() && t > 0.0 => Duration::from_secs_f64(t).min(cap),
            Some(t) => {
                return Err(ApiProblem::new(
                    Kind::InvalidRequest,
                    format!("time_limit_s must be a positive number of seconds, got {t}"),
                )
                .with_field("time_limit_s"))
            }
        };
        let mip_gap = body.optional::<f64>("mip_gap", Kind::InvalidRequest)?;
        if let Some(g) = mip_gap.filter(|g| !(g.is_finite() && *g >= 0.0)) {
            return Err(ApiProblem::new(
                Kind::InvalidRequest,
                format!("mip_gap must be a non-negative number, got {g}"),
            )
            .with_field("mip_gap"));
        }
        let seed = body.optional("seed", Kind::InvalidRequest)?.unwrap_or(0);
        Ok(Options {
            solver,
            time_limit,
            threads: config.solver_threads,
            mip_gap,
            seed,
        })
    }

    fn key(&self, graph: &Graph, budget: u64) -> super::cache::Key {
        KeyParts {
            graph,
            budget,
            solver: &self.solver,
            time_limit_s: self.time_limit.as_secs_f64(),
            mip_gap: self.mip_gap,
            seed: self.seed,
        }
        .key()
    }

    fn solve_options(&self, cancel: Arc<AtomicBool>) -> SolveOptions {
        SolveOptions {
            time_limit: Some(self.time_limit),
            mip_gap: self.mip_gap,
            seed: self.seed,
            threads: self.threads,
            cancel,
            ..SolveOptions::default()
        }
    }
}

fn budget(value: Budget, graph: &Graph) -> u64 {
    value.resolve(checkpoint_all_peak(graph))
}

/// A parsed solve request.
struct SolveRequest {
    graph: Graph,
    budget: u64,
    options: Options,
}

impl SolveRequest {
    fn read(
        state: &AppState,
        bytes: Result<Bytes, BytesRejection>,
    ) -> Result<SolveRequest, ApiProblem> {
        let mut body = Body::parse(bytes)?;
        let graph = body.graph()?;
        let b: Budget = body.required("budget", Kind::InvalidBudget)?;
        let options = Options::read(&mut body, &state.config)?;
        body.finish()?;
        Ok(SolveRequest {
            budget: budget(b, &graph),
            graph,
            options,
        })
    }
}

/// Runs one solve in the pool (or answers it from the cache). `progress` receives the
/// solver's reports. Returns the result and whether it came from the cache.
async fn run_solve(
    state: &Arc<AppState>,
    request: SolveRequest,
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
    let SolveRequest { graph, budget, .. } = request;
    let outcome = state
        .pool
        .run(options.cancel.clone(), move || {
            on_start();
            solve::solve(
                &Instance {
                    graph: &graph,
                    budget,
                },
                &solver,
                &options,
            )
        })
        .await;
    let solver = &request.options.solver;
    let result = match outcome {
        Err(e) => return Err(pool_problem(state, solver, e)),
        Ok(Err(SolveError::Cancelled)) => {
            state.metrics.solve(solver, "cancelled");
            return Err(ApiProblem::from(SolveError::Cancelled));
        }
        Ok(Err(e)) => {
            state.metrics.solve(solver, "error");
            return Err(e.into());
        }
        Ok(Ok(r)) => Arc::new(r),
    };
    state
        .metrics
        .solve(&result.solver, status_name(result.status));
    state.cache.put(key, result.clone());
    Ok((result, false))
}

fn pool_problem(state: &AppState, solver: &str, e: PoolError) -> ApiProblem {
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

fn status_name(s: Status) -> &'static str {
    match s {
        Status::Optimal => "optimal",
        Status::Feasible => "feasible",
        Status::Infeasible => "infeasible",
        Status::NoSolution => "no_solution",
        Status::Error => "error",
    }
}

fn json_response(status: StatusCode, value: &impl Serialize) -> Response {
    (status, Json(value)).into_response()
}

/// `POST /solve`, `POST /v1/solve`.
pub async fn solve(State(state): Shared, bytes: Result<Bytes, BytesRejection>) -> ApiResult {
    let request = SolveRequest::read(&state, bytes)?;
    let cancel = Arc::new(AtomicBool::new(false));
    let guard = CancelOnDrop::new(cancel.clone());
    let (result, hit) = run_solve(&state, request, cancel, None, || ()).await?;
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
    let request = SolveRequest::read(&state, bytes)?;
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
    tokio::spawn(async move {
        let outcome = run_solve(&job_state, request, cancel, Some(progress), move || {
            start_state.jobs.started(&start_id)
        })
        .await
        .map(|(result, _)| result);
        job_state.jobs.finish(&job_id, outcome);
    });
    let mut response = json_response(
        StatusCode::ACCEPTED,
        &json!({ "id": id, "status": "queued" }),
    );
    response.headers_mut().insert(
        header::LOCATION,
        HeaderValue::try_from(format!("/v1/jobs/{id}")).expect("ids are ASCII"),
    );
    Ok(response)
}

fn no_job(id: &str) -> ApiProblem {
    ApiProblem::new(
        Kind::NotFound,
        format!("no job '{id}' (it may have expired)"),
    )
    .with_field("id")
}

/// `GET /v1/jobs/{id}`.
pub async fn get_job(
    State(state): Shared,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiProblem> {
    state.jobs.get(&id).map(Json).ok_or_else(|| no_job(&id))
}

/// `DELETE /v1/jobs/{id}`: cancels an active job (200 with the job), removes a finished
/// one (204).
pub async fn delete_job(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    match state.jobs.cancel(&id) {
        None => Err(no_job(&id)),
        Some(Cancelled::Stopped(view)) => Ok(json_response(StatusCode::OK, &*view)),
        Some(Cancelled::Removed) => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// `POST /v1/sweep`: one result per budget, in the order given, solved one after the
/// other on one worker within the server's time limit overall.
pub async fn sweep(State(state): Shared, bytes: Result<Bytes, BytesRejection>) -> ApiResult {
    let mut body = Body::parse(bytes)?;
    let graph = body.graph()?;
    let budgets: Vec<Budget> = body.required("budgets", Kind::InvalidBudget)?;
    if budgets.is_empty() || budgets.len() > state.config.max_sweep {
        return Err(ApiProblem::new(
            Kind::InvalidBudget,
            format!(
                "budgets must list 1 to {} budgets, got {}",
                state.config.max_sweep,
                budgets.len()
            ),
        )
        .with_field("budgets"));
    }
    let options = Options::read(&mut body, &state.config)?;
    body.finish()?;
    let cap = state.config.time_limit();
    let bytes: Vec<u64> = budgets.iter().map(|&b| budget(b, &graph)).collect();
    let cancel = Arc::new(AtomicBool::new(false));
    let guard = CancelOnDrop::new(cancel.clone());
    let work_cancel = cancel.clone();
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
                    solve::solve(
                        &Instance {
                            graph: &graph,
                            budget,
                        },
                        &options.solver,
                        &o,
                    )
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .await;
    guard.disarm();
    let results = outcome.map_err(|e| pool_problem(&state, "sweep", e))??;
    for r in &results {
        state.metrics.solve(&r.solver, status_name(r.status));
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({ "results": results }),
    ))
}

/// `POST /v1/simulate`: replays a schedule; 200 with its figures, 422 naming the event,
/// node and rule it breaks.
pub async fn simulate_schedule(
    State(_state): Shared,
    bytes: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let mut body = Body::parse(bytes)?;
    let graph = body.graph()?;
    let raw: Value = body.required("schedule", Kind::InvalidSchedule)?;
    let b: Option<Budget> = body.optional("budget", Kind::InvalidBudget)?;
    body.finish()?;
    let raw = match raw {
        Value::Array(events) => json!({ "events": events }),
        Value::Object(mut o) if o.contains_key("schedule") => {
            o.remove("schedule").unwrap_or(Value::Null)
        }
        other => other,
    };
    let schedule: ScheduleJson = serde_json::from_value(raw).map_err(|e| {
        ApiProblem::new(
            Kind::InvalidSchedule,
            format!(
                "not a schedule ({e}); expected {{\"events\": [{{\"op\": \"compute\"|\"free\", \"node\": ID}}, ...]}}"
            ),
        )
        .with_field("schedule")
    })?;
    let schedule = schedule.resolve(&graph).map_err(ApiProblem::schedule)?;
    let stats = simulate(&graph, &schedule).map_err(ApiProblem::schedule)?;
    let budget = b.map(|b| budget(b, &graph));
    let computes: Map<String, Value> = stats
        .computes
        .iter()
        .enumerate()
        .map(|(v, &c)| (graph.id(v).to_string(), json!(c)))
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "valid": true,
            "budget": budget,
            "fits_budget": budget.map(|b| stats.peak_memory <= b),
            "stats": stats,
            "computes": computes,
        }),
    ))
}

/// `POST /v1/inspect`: size, cost and memory bounds of a graph.
pub async fn inspect(State(_state): Shared, bytes: Result<Bytes, BytesRejection>) -> ApiResult {
    let mut body = Body::parse(bytes)?;
    let graph = body.graph()?;
    body.finish()?;
    Ok(json_response(StatusCode::OK, &solve::report(&graph, None)))
}

/// `GET /v1/solvers`.
pub async fn solvers() -> Response {
    let infos: Vec<_> = solve::registry().iter().map(|s| s.info()).collect();
    json_response(StatusCode::OK, &json!({ "solvers": infos }))
}

/// `GET /healthz`: the process is up.
pub async fn healthz() -> Response {
    json_response(StatusCode::OK, &json!({ "status": "ok" }))
}

/// `GET /readyz`: ready for work (not draining, queue not full).
pub async fn readyz(State(state): Shared) -> ApiResult {
    if state.draining.load(Ordering::Relaxed) {
        return Err(ApiProblem::new(
            Kind::Draining,
            "the server is shutting down",
        ));
    }
    if state.pool.is_full() {
        return Err(ApiProblem::new(Kind::Busy, "the solve queue is full").retry_after(1));
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "status": "ready",
            "workers": state.pool.workers(),
            "workers_busy": state.pool.running(),
            "queue_depth": state.pool.queued(),
        }),
    ))
}

/// `GET /metrics`: Prometheus text format.
pub async fn metrics(State(state): Shared) -> Response {
    let text = state.metrics.render(&super::metrics::Gauges {
        queue_depth: state.pool.queued(),
        workers_busy: state.pool.running(),
        workers: state.pool.workers(),
        jobs: state.jobs.len(),
        cache_entries: state.cache.len(),
        cancelled: state.pool.cancelled(),
    });
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// `GET /openapi.json`: the contract in `api/openapi.yaml`, as JSON.
pub async fn openapi() -> Response {
    json_response(StatusCode::OK, super::openapi_document())
}

pub async fn not_found() -> ApiProblem {
    ApiProblem::new(Kind::NotFound, "no such route; see /openapi.json")
}

pub async fn method_not_allowed() -> ApiProblem {
    ApiProblem::new(
        Kind::MethodNotAllowed,
        "this route does not take this method; see /openapi.json",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
            response.headers()[header::CONTENT_TYPE],
            super::super::PROBLEM_JSON
        );
        assert_eq!(state.pool.run(flag, || 1).await, Ok(1));
        let text = state.metrics.render(&super::super::metrics::Gauges {
            queue_depth: 0,
            workers_busy: 0,
            workers: 1,
            jobs: 0,
            cache_entries: 0,
            cancelled: 0,
        });
        assert!(text.contains("remat_solves_total{solver=\"auto\",status=\"panic\"} 1"));
    }

    #[test]
    fn a_handler_panic_becomes_a_problem_document() {
        let response = super::super::panic_response(Box::new("oops"));
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            super::super::PROBLEM_JSON
        );
    }
}
