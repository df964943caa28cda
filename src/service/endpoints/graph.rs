//! `POST /v1/simulate` and `POST /v1/inspect`: answers computed in the request from the
//! graph alone, through the front door (`crate::front`), as the command line computes
//! `remat simulate --json` and `remat inspect --json`.

// An `ApiProblem` is built at most once per request, on the way out: its size does not matter.
#![allow(clippy::result_large_err)]

use super::{json_response, read_body, ApiResult, Posted, Shared};
use crate::budget::Budget;
use crate::front::{read_schedule, report, simulate_report};
use crate::service::problem::{ApiProblem, Kind};
use crate::service::request::Body;
use axum::extract::State;
use axum::http::StatusCode;

/// `POST /v1/simulate`: replays a schedule; 200 with its figures, 422 naming the event,
/// node and rule it breaks.
pub async fn simulate_schedule(State(state): Shared, body: Posted) -> ApiResult {
    read_body(&state, body, |state, bytes| {
        let mut body = Body::parse(bytes)?;
        let graph = body.graph(&state.config)?;
        let raw = body.required_raw("schedule")?;
        let budget: Option<Budget> = body.optional("budget", Kind::InvalidBudget)?;
        body.finish()?;
        let schedule = read_schedule(raw.get())?;
        let budget = budget.map(|b| b.resolve(&graph)).transpose()?;
        let report = simulate_report(&graph, &schedule, budget).map_err(ApiProblem::schedule)?;
        Ok(json_response(StatusCode::OK, &report))
    })
    .await
}

/// `POST /v1/inspect`: size, cost and memory bounds of a graph.
pub async fn inspect(State(state): Shared, body: Posted) -> ApiResult {
    read_body(&state, body, |state, bytes| {
        let mut body = Body::parse(bytes)?;
        let graph = body.graph(&state.config)?;
        body.finish()?;
        Ok(json_response(StatusCode::OK, &report(&graph, None)))
    })
    .await
}
