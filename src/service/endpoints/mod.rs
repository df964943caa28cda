//! The endpoints, one file per group: `solve` (solve, jobs, sweep: everything that runs a
//! solver in the worker pool), `graph` (simulate and inspect: answers computed in the
//! request, no solver), `meta` (solvers, health, metrics, the contract, fallbacks).
//! Bodies are read by `super::request`; the work goes to `crate::front`, `crate::solve`
//! and `crate::schedule`. Nothing here knows how a solver works.

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

use super::problem::ApiProblem;
use super::AppState;
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
