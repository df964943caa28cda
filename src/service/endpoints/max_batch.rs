//! `POST /v1/max-batch`: the largest batch that fits a memory under an overhead cap
//! (`crate::front::max_batch`), run as a job: 202 with the job's id at once, the search on
//! one worker of the pool, its probes as the job's progress, its answer at
//! `GET /v1/jobs/{id}`. The request is checked before the job is created, so bad input is a
//! 422 naming the field.

// An `ApiProblem` is built at most once per request, on the way out: its size does not matter.
#![allow(clippy::result_large_err)]

use super::{read_body, start_job, ApiResult, Posted, Shared};
use crate::budget::Budget;
use crate::front::max_batch::{search, Field, MaxBatchError, MaxBatchInput, MaxBatchRequest};
use crate::graph::Graph;
use crate::service::jobs::JobResult;
use crate::service::problem::{ApiProblem, Kind};
use crate::service::request::{Body, Options};
use crate::service::AppState;
use axum::extract::State;

/// A max-batch request the caller got wrong names its field (422); a solve that failed is
/// the solve's problem.
impl From<MaxBatchError> for ApiProblem {
    fn from(e: MaxBatchError) -> ApiProblem {
        let kind = match &e {
            MaxBatchError::Solve(_) => None,
            MaxBatchError::Budget(_) | MaxBatchError::BelowFixed { .. } => {
                Some(Kind::InvalidBudget)
            }
            MaxBatchError::Batch(_) | MaxBatchError::NoGrowth => Some(Kind::InvalidGraph),
            _ => Some(Kind::InvalidRequest),
        };
        let field = e.field().map(Field::field);
        let problem = match (kind, e) {
            (Some(kind), e) => ApiProblem::new(kind, e.to_string()),
            (None, MaxBatchError::Solve(s)) => ApiProblem::from(s),
            (None, e) => ApiProblem::new(Kind::Internal, e.to_string()),
        };
        match field {
            Some(f) => problem.with_field(f),
            None => problem,
        }
    }
}

/// `POST /v1/max-batch`: 202 with the job's id and `Location`.
pub async fn max_batch(State(state): Shared, body: Posted) -> ApiResult {
    let (graph, request, options) = read_body(&state, body, read).await?;
    start_job(&state, move |job| async move {
        let mut solve_options = options.solve_options(job.cancel.clone());
        solve_options.progress = Some(job.progress());
        let mut result = job
            .on_worker("max-batch", move || {
                search(&graph, &request, &solve_options)
            })
            .await??;
        if let Some(r) = result.result.as_mut().filter(|_| options.events_only) {
            Options::drop_stages(r);
        }
        Ok(JobResult::MaxBatch(Box::new(result)))
    })
}

/// A max-batch request, checked against its graph.
fn read(state: &AppState, bytes: &[u8]) -> Result<(Graph, MaxBatchRequest, Options), ApiProblem> {
    let mut body = Body::parse(bytes)?;
    let graph = body.graph(&state.config)?;
    let memory: Budget = body.required("memory", Kind::InvalidBudget)?;
    let max_overhead = body.optional("max_overhead", Kind::InvalidRequest)?;
    let max_extra_forward = body.optional("max_extra_forward", Kind::InvalidRequest)?;
    let options = Options::read(&mut body, &state.config)?;
    body.finish()?;
    let request = MaxBatchInput {
        memory: Some(memory),
        max_overhead,
        max_extra_forward,
        solver: options.solver.clone(),
    }
    .validate(&graph)?;
    Ok((graph, request, options))
}
