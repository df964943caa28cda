//! The endpoints, one file per group: `solve` (solve, jobs, sweep: everything that runs a
//! solver in the worker pool), `graph` (simulate and inspect: answers computed in the
//! request, no solver), `meta` (solvers, health, metrics, the contract, fallbacks).
//! Bodies are read by `super::request`, on a blocking thread ([`off_runtime`]) so that a
//! large body never holds up the async runtime's threads (`/healthz`, `/metrics` and the
//! other requests); the work goes to `crate::front`, `crate::solve` and
//! `crate::schedule`. Nothing here knows how a solver works.

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

use super::problem::{ApiProblem, Kind};
use super::request::body_bytes;
use super::AppState;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::sync::Arc;

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

/// Reads a request's body with `work` off the runtime ([`off_runtime`]).
async fn read_body<T: Send + 'static>(
    state: &Arc<AppState>,
    bytes: Result<Bytes, BytesRejection>,
    work: impl FnOnce(&AppState, &[u8]) -> Result<T, ApiProblem> + Send + 'static,
) -> Result<T, ApiProblem> {
    let bytes = body_bytes(bytes, state.config.max_body)?;
    off_runtime(state, move |state| work(state, &bytes)).await
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
    let closed = |_| ApiProblem::new(Kind::Draining, "the server is shutting down").retry_after(1);
    let permit = state
        .readers
        .clone()
        .acquire_owned()
        .await
        .map_err(closed)?;
    let state = state.clone();
    let read = tokio::task::spawn_blocking(move || {
        let out = work(&state);
        drop(permit);
        out
    });
    match read.await {
        Ok(result) => result,
        Err(e) if e.is_panic() => {
            let message = super::pool::panic_message(e.into_panic().as_ref());
            tracing::error!(panic = %message, "reading a request panicked");
            Err(ApiProblem::new(Kind::Internal, format!("panic: {message}")))
        }
        Err(e) => Err(ApiProblem::new(Kind::Draining, e.to_string()).retry_after(1)),
    }
}
