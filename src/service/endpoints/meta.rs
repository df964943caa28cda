//! The endpoints about the service itself: the solver list, liveness and readiness,
//! Prometheus metrics, the contract, and the fallbacks for unknown routes and methods.

// An `ApiProblem` is built at most once per request, on the way out: its size does not matter.
#![allow(clippy::result_large_err)]

use super::{json_response, ApiResult, Shared};
use crate::service::metrics::Gauges;
use crate::service::problem::{ApiProblem, Kind};
use crate::solve;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::sync::atomic::Ordering;

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
        return Err(ApiProblem::queue_full());
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
    let text = state.metrics.render(&Gauges {
        queue_depth: state.pool.queued(),
        workers_busy: state.pool.running(),
        workers: state.pool.workers(),
        jobs: state.jobs.len(),
        cache_entries: state.cache.len(),
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
    json_response(StatusCode::OK, crate::service::openapi_document())
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
