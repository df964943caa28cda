//! The endpoints, one file per group: `solve` (solve, jobs, sweep: everything that runs a
//! solver in the worker pool), `plot` (the pictures), `max_batch` (the max-batch job),
//! `graph` (simulate and inspect: answers computed in the request, no solver), `meta`
//! (solvers, health, metrics, the contract, fallbacks). Every job (a solve, a trade-off
//! sweep, a max-batch search) is admitted and started by [`start_job`], and runs its CPU
//! work on a worker of the pool through [`Job::on_worker`].
//! Bodies are read by `super::request`, on a blocking thread ([`off_runtime`]) so that a
//! large body never holds up the async runtime's threads (`/healthz`, `/metrics` and the
//! other requests); the work goes to `crate::front`, `crate::solve` and
//! `crate::schedule`. Nothing here knows how a solver works.

// An `ApiProblem` is built at most once per request, on the way out: its size does not matter.
#![allow(clippy::result_large_err)]

mod graph;
mod max_batch;
mod meta;
mod plot;
mod solve;

pub use graph::{inspect, simulate_schedule};
pub use max_batch::max_batch;
pub use meta::{healthz, method_not_allowed, metrics, not_found, openapi, readyz, solvers};
pub use plot::plot;
pub use solve::{create_job, delete_job, get_job, solve, sweep};

use super::conn::Eviction;
use super::jobs::JobResult;
use super::pool::PoolError;
use super::problem::{ApiProblem, Kind};
use super::request::{body_bytes, body_too_large};
use super::AppState;
use crate::solve::ProgressSink;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::OwnedSemaphorePermit;

type Shared = State<Arc<AppState>>;
type ApiResult = Result<Response, ApiProblem>;

fn json_response(status: StatusCode, value: &impl Serialize) -> Response {
    (status, Json(value)).into_response()
}

/// 202 for a new job, with its id and `Location`.
fn accepted(id: &str) -> Response {
    let mut response = json_response(
        StatusCode::ACCEPTED,
        &serde_json::json!({ "id": id, "status": "queued" }),
    );
    response.headers_mut().insert(
        header::LOCATION,
        HeaderValue::try_from(format!("/v1/jobs/{id}")).expect("ids are ASCII"),
    );
    response
}

/// `value` as a JSON response, serialised off the runtime ([`off_runtime`]): a solve's
/// result at a million nodes is about 100 MB of JSON, a second of work that would keep
/// the async threads from answering `/healthz`. Where this held the last reference,
/// `value` is then freed aside (`crate::aside`), not before the answer is sent.
async fn json_off_runtime<T: Serialize + Send + Sync + 'static>(
    state: &Arc<AppState>,
    status: StatusCode,
    value: Arc<T>,
) -> Result<Response, ApiProblem> {
    let body = off_runtime(state, move |_| {
        let body = serde_json::to_vec(&*value)
            .map_err(|e| ApiProblem::new(Kind::Internal, format!("serialising the answer: {e}")));
        if Arc::strong_count(&value) == 1 {
            crate::aside::free_aside(value);
        }
        body
    })
    .await?;
    let json = HeaderValue::from_static("application/json");
    Ok((status, [(header::CONTENT_TYPE, json)], body).into_response())
}

/// A request's body, collected once a reader's place is free (`--readers`) and within
/// `--client-timeout` (else 408): at most `--readers` bodies are in memory at once, being
/// collected or read; the others wait unread, in their connections' buffers. The place is
/// held until [`read_body`] has read the body. A request whose body stalls while it is
/// collected, when its connection is closed for a new one at `--max-connections`, gets 503
/// with `Retry-After` ([`Eviction`]).
pub struct Posted {
    bytes: Bytes,
    reader: OwnedSemaphorePermit,
}

impl FromRequest<Arc<AppState>> for Posted {
    type Rejection = ApiProblem;

    async fn from_request(req: Request, state: &Arc<AppState>) -> Result<Posted, ApiProblem> {
        let Some(eviction) = req.extensions().get::<Eviction>().cloned() else {
            return Posted::collect(req, state, None).await;
        };
        let posted = tokio::select! {
            posted = Posted::collect(req, state, Some(&eviction)) => posted,
            () = eviction.clone().asked() => Err(ApiProblem::new(
                Kind::Busy,
                "the server is at its connection cap (--max-connections) and this request's \
                 body stalled: its connection is closed for a new one",
            )
            .retry_after(1)),
        };
        eviction.read();
        posted
    }
}

impl Posted {
    /// The body of `req`, collected in a reader's place within `--client-timeout` (its
    /// connection's `eviction` told when the reading begins).
    async fn collect(
        req: Request,
        state: &Arc<AppState>,
        eviction: Option<&Eviction>,
    ) -> Result<Posted, ApiProblem> {
        // A body announced over the limit is refused before it waits for a reader's place.
        let announced = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if let Some(length) = announced.filter(|&l| l > state.config.max_body as u64) {
            return Err(body_too_large(
                state.config.max_body,
                &format!("its Content-Length is {length}"),
            ));
        }
        let reader = reader(state).await?;
        if let Some(eviction) = eviction {
            eviction.reading();
        }
        let timeout = state.config.client_timeout();
        match tokio::time::timeout(timeout, Bytes::from_request(req, state)).await {
            Ok(bytes) => Ok(Posted {
                bytes: body_bytes(bytes, state.config.max_body)?,
                reader,
            }),
            Err(_) => Err(ApiProblem::new(
                Kind::BodyTimeout,
                format!(
                    "the body did not arrive within {} s (--client-timeout)",
                    state.config.client_timeout
                ),
            )),
        }
    }
}

/// Reads a request's body with `work` off the runtime ([`off_runtime`]), in the reader's
/// place its collection took.
async fn read_body<T: Send + 'static>(
    state: &Arc<AppState>,
    body: Posted,
    work: impl FnOnce(&AppState, &[u8]) -> Result<T, ApiProblem> + Send + 'static,
) -> Result<T, ApiProblem> {
    let Posted { bytes, reader } = body;
    off_runtime_in(state, reader, move |state| work(state, &bytes)).await
}

/// A reader's place (`--readers`), once one is free.
async fn reader(state: &AppState) -> Result<OwnedSemaphorePermit, ApiProblem> {
    let closed = |_| ApiProblem::new(Kind::Draining, "the server is shutting down").retry_after(1);
    state.readers.clone().acquire_owned().await.map_err(closed)
}

/// Runs `work` (reading a body, building a graph, answering from it) on a blocking thread
/// of the runtime's pool, not on the async threads that answer every other request, and
/// not in the worker pool of solves; at most `--readers` at once (the others wait), so
/// that the memory of graphs being read is bounded. A panic in `work` is a 500 problem
/// document.
async fn off_runtime<T: Send + 'static>(
    state: &Arc<AppState>,
    work: impl FnOnce(&AppState) -> Result<T, ApiProblem> + Send + 'static,
) -> Result<T, ApiProblem> {
    let permit = reader(state).await?;
    off_runtime_in(state, permit, work).await
}

/// [`off_runtime`] in the reader's place `permit`.
async fn off_runtime_in<T: Send + 'static>(
    state: &Arc<AppState>,
    permit: OwnedSemaphorePermit,
    work: impl FnOnce(&AppState) -> Result<T, ApiProblem> + Send + 'static,
) -> Result<T, ApiProblem> {
    let state = state.clone();
    let read = tokio::task::spawn_blocking(move || {
        let out = work(&state);
        drop(permit);
        out
    });
    match read.await {
        Ok(result) => result,
        Err(e) if e.is_panic() => {
            let message = crate::shell::panic_message(e.into_panic().as_ref());
            tracing::error!(panic = %message, "reading a request panicked");
            Err(ApiProblem::new(Kind::Internal, format!("panic: {message}")))
        }
        Err(e) => Err(ApiProblem::new(Kind::Draining, e.to_string()).retry_after(1)),
    }
}

/// A job being started: its id, its cancel flag (raised by `DELETE /v1/jobs/{id}` and at
/// shutdown) and the service it reports to.
struct Job {
    id: String,
    cancel: Arc<AtomicBool>,
    state: Arc<AppState>,
}

impl Job {
    /// A sink that shows the work's progress on the job.
    fn progress(&self) -> ProgressSink {
        let (state, id) = (self.state.clone(), self.id.clone());
        Arc::new(move |p| {
            tracing::info!(job = %id, fraction = p.fraction, "{}", p.message);
            state.jobs.progress(&id, p)
        })
    }

    /// Marks the job running; called when a worker takes it.
    fn starter(&self) -> impl FnOnce() + Send + 'static {
        let (state, id) = (self.state.clone(), self.id.clone());
        move || state.jobs.started(&id)
    }

    /// Runs `work` on a worker of the pool, the job marked running when it starts; `what`
    /// names the work when it panics.
    async fn on_worker<T: Send + 'static>(
        &self,
        what: &'static str,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ApiProblem> {
        let started = self.starter();
        self.state
            .pool
            .run(self.cancel.clone(), move || {
                started();
                work()
            })
            .await
            .map_err(|e| pool_problem(&self.state, what, e))
    }
}

/// Admits a job and starts it: 503 when the solve queue ([`admit`]) or the job table is
/// full; else `work`'s future runs on the runtime and its outcome is recorded on the job
/// (`GET /v1/jobs/{id}`). Answers 202 with the job's id.
fn start_job<F>(state: &Arc<AppState>, work: impl FnOnce(Job) -> F) -> ApiResult
where
    F: Future<Output = Result<JobResult, ApiProblem>> + Send + 'static,
{
    admit(state)?;
    let (id, cancel) = state.jobs.create()?;
    let outcome = work(Job {
        id: id.clone(),
        cancel,
        state: state.clone(),
    });
    let (jobs_state, job_id) = (state.clone(), id.clone());
    tracing::info!(job = %id, "job queued");
    let started = Instant::now();
    // The request's span (its id) goes with the job, whose logs come after the answer.
    let job = async move {
        let outcome = outcome.await;
        let elapsed_s = started.elapsed().as_secs_f64();
        match &outcome {
            Ok(_) => tracing::info!(job = %job_id, elapsed_s, "job succeeded"),
            Err(p) => {
                tracing::info!(job = %job_id, elapsed_s, status = p.status, detail = %p.detail, "job failed")
            }
        }
        jobs_state.jobs.finish(&job_id, outcome);
    };
    tokio::spawn(tracing::Instrument::in_current_span(job));
    Ok(accepted(&id))
}

/// Refuses new work while the solve queue is full (503, counted as rejected).
fn admit(state: &AppState) -> Result<(), ApiProblem> {
    if state.pool.is_full() {
        state.metrics.rejected();
        return Err(ApiProblem::queue_full());
    }
    Ok(())
}

/// The problem of work the pool did not run to its end: refused (busy), panicked, or the
/// pool closed; `what` names the work in the metrics of a panic.
fn pool_problem(state: &AppState, what: &str, e: PoolError) -> ApiProblem {
    match e {
        PoolError::Busy { .. } => {
            state.metrics.rejected();
            ApiProblem::new(Kind::Busy, e.to_string()).retry_after(1)
        }
        PoolError::Panicked(_) => {
            state.metrics.solve(what, "panic");
            tracing::error!(solver = what, error = %e, "a solve panicked");
            ApiProblem::new(Kind::Internal, e.to_string())
        }
        // Cancelled: a client gone or a job deleted reads nothing; else the shutdown did it.
        PoolError::Closed | PoolError::Cancelled => {
            ApiProblem::new(Kind::Draining, e.to_string()).retry_after(1)
        }
    }
}
