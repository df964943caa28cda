//! Asynchronous jobs: `POST /v1/jobs` (a solve) and `POST /v1/max-batch` (a max-batch
//! search) answer 202 with an id at once, the work runs in the worker pool, `GET /v1/jobs/{id}` reports its state and progress and, when done,
//! its result; `DELETE` cancels it (raising the solver's cancel flag).
//!
//! Jobs live in memory (the sidecar is stateless): at most `max_jobs` at once, and a
//! finished job is dropped `ttl` after it finished. When the table is full, the oldest
//! finished job makes room; when every job is still active, a new one is refused (503).
//! Finished results are also bounded in bytes (`max_bytes`, their events' JSON and what the
//! events hold in memory, the cache's floor): when a job finishes, the oldest other finished
//! jobs are dropped until all fit, the new one included, which always stays; so the table
//! holds at most `max_bytes` of results, or the newest alone (a solve's memory limit bounded
//! it).
//!
//! A finished job's result is shared ([`Arc`]): `GET /v1/jobs/{id}` takes the view without
//! copying it and serialises it off the async threads, and a job that leaves the table
//! (expired, evicted, deleted) is freed on a thread of its own (`free_jobs`), since
//! freeing a million-node result (millions of small allocations) is a pass of its own.

// An `ApiProblem` is built at most once per request, on the way out: its size does not matter.
#![allow(clippy::result_large_err)]

use super::cache::weight_floor;
use super::problem::ApiProblem;
use crate::front::max_batch::MaxBatchResult;
use crate::solve::{Progress, SolveResult};
use rand::Rng;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Waiting for a worker.
    Queued,
    Running,
    /// The solve ended; `result` holds its answer (whatever its status).
    Succeeded,
    /// The solve could not run or failed; `error` says why.
    Failed,
    Cancelled,
}

impl JobStatus {
    fn is_active(self) -> bool {
        matches!(self, JobStatus::Queued | JobStatus::Running)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct JobProgress {
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f64>,
}

/// What a finished job answers: a solve result, a max-batch result, or a trade-off
/// picture and its sweep.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum JobResult {
    Solve(Arc<SolveResult>),
    MaxBatch(Box<MaxBatchResult>),
    Tradeoff(crate::plot::tradeoff::Picture),
}

/// A job as `GET /v1/jobs/{id}` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct JobView {
    pub id: String,
    pub status: JobStatus,
    /// Seconds since the Unix epoch.
    pub created_at: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<JobProgress>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Arc<JobResult>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiProblem>,
}

struct Job {
    view: JobView,
    cancel: Arc<AtomicBool>,
    finished: Option<Instant>,
    /// Its result's weight ([`weight`]).
    bytes: usize,
}

/// What `DELETE /v1/jobs/{id}` did.
pub enum Cancelled {
    /// The job was active and is now cancelled.
    Stopped(Box<JobView>),
    /// The job had finished; its record is gone.
    Removed,
}

pub struct Jobs {
    max: usize,
    max_bytes: usize,
    ttl: Duration,
    table: Mutex<HashMap<String, Job>>,
}

/// The weight of a finished job's result: its schedule's events, their JSON and what they
/// hold in memory (the cache's floor), which is what grows with the graph; the rest of a
/// result is a few hundred bytes.
fn weight(result: &JobResult) -> usize {
    match result {
        JobResult::Solve(r) => weight_floor(r),
        JobResult::MaxBatch(m) => m.result.as_ref().map_or(0, weight_floor),
        JobResult::Tradeoff(_) => 0,
    }
}

impl Jobs {
    pub fn new(max: usize, max_bytes: usize, ttl: Duration) -> Jobs {
        Jobs {
            max: max.max(1),
            max_bytes,
            ttl,
            table: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Job>> {
        let mut table = self.table.lock().expect("jobs lock");
        let ttl = self.ttl;
        let expired: Vec<String> = table
            .iter()
            .filter(|(_, j)| j.finished.is_some_and(|t| t.elapsed() >= ttl))
            .map(|(id, _)| id.clone())
            .collect();
        free_jobs(expired.iter().filter_map(|id| table.remove(id)).collect());
        table
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Registers a queued job; returns its id and cancel flag.
    pub fn create(&self) -> Result<(String, Arc<AtomicBool>), ApiProblem> {
        let mut table = self.lock();
        if table.len() >= self.max {
            let oldest = table
                .iter()
                .filter_map(|(id, j)| j.finished.map(|t| (t, id.clone())))
                .min();
            match oldest {
                Some((_, id)) => free_jobs(table.remove(&id).into_iter().collect()),
                None => {
                    return Err(ApiProblem::new(
                        super::problem::Kind::Busy,
                        format!("all {} job slots hold active jobs", self.max),
                    )
                    .retry_after(5))
                }
            }
        }
        let id = format!("{:032x}", rand::rng().random::<u128>());
        let cancel = Arc::new(AtomicBool::new(false));
        let created_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        table.insert(
            id.clone(),
            Job {
                view: JobView {
                    id: id.clone(),
                    status: JobStatus::Queued,
                    created_at,
                    progress: None,
                    result: None,
                    error: None,
                },
                cancel: cancel.clone(),
                finished: None,
                bytes: 0,
            },
        );
        Ok((id, cancel))
    }

    fn update(&self, id: &str, f: impl FnOnce(&mut Job)) {
        if let Some(job) = self.lock().get_mut(id) {
            if job.view.status.is_active() {
                f(job);
            }
        }
    }

    pub fn started(&self, id: &str) {
        self.update(id, |j| j.view.status = JobStatus::Running);
    }

    pub fn progress(&self, id: &str, p: Progress) {
        self.update(id, |j| {
            j.view.progress = Some(JobProgress {
                message: p.message,
                fraction: p.fraction,
            })
        });
    }

    /// Records the end of a job's work (ignored if it was cancelled meanwhile), then drops
    /// the oldest other finished jobs until the results kept, this one's included, weigh
    /// at most `max_bytes` (or this one is alone).
    pub fn finish(&self, id: &str, outcome: Result<JobResult, ApiProblem>) {
        // Weighed before the table is locked: a pass over a result's events.
        let bytes = outcome.as_ref().map_or(0, weight);
        self.update(id, |j| {
            j.finished = Some(Instant::now());
            match outcome {
                Ok(r) => {
                    j.view.status = JobStatus::Succeeded;
                    j.bytes = bytes;
                    j.view.result = Some(Arc::new(r));
                }
                Err(p) => {
                    j.view.status = JobStatus::Failed;
                    j.view.error = Some(p);
                }
            }
        });
        let mut table = self.lock();
        let mut others: Vec<(Instant, String, usize)> = table
            .iter()
            .filter(|(other, j)| *other != id && j.bytes > 0)
            .filter_map(|(other, j)| j.finished.map(|t| (t, other.clone(), j.bytes)))
            .collect();
        let own = table.get(id).map_or(0, |j| j.bytes);
        let mut held: usize = others.iter().map(|o| o.2).sum::<usize>() + own;
        others.sort();
        let mut dropped = Vec::new();
        for (_, other, bytes) in others {
            if held <= self.max_bytes {
                break;
            }
            held -= bytes;
            dropped.extend(table.remove(&other));
        }
        free_jobs(dropped);
    }

    pub fn get(&self, id: &str) -> Option<JobView> {
        self.lock().get(id).map(|j| j.view.clone())
    }

    pub fn cancel(&self, id: &str) -> Option<Cancelled> {
        let mut table = self.lock();
        let job = table.get_mut(id)?;
        if job.view.status.is_active() {
            job.cancel.store(true, Ordering::Relaxed);
            job.view.status = JobStatus::Cancelled;
            job.finished = Some(Instant::now());
            Some(Cancelled::Stopped(Box::new(job.view.clone())))
        } else {
            free_jobs(table.remove(id).into_iter().collect());
            Some(Cancelled::Removed)
        }
    }
}

/// Frees `jobs`, on a thread of their own when any holds a result (see the module docs).
fn free_jobs(jobs: Vec<Job>) {
    if jobs.iter().any(|j| j.view.result.is_some()) {
        crate::aside::free_aside(jobs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::schedule::checkpoint_all_peak;
    use crate::solve::{self, Instance, SolveOptions};

    /// Ends job `id` with a failure (no result).
    fn fail(jobs: &Jobs, id: &str) {
        let problem = ApiProblem::new(crate::service::problem::Kind::Internal, "x");
        jobs.finish(id, Err(problem));
    }

    #[test]
    fn bounded_table_drops_finished_jobs_first_and_expires_them() {
        let jobs = Jobs::new(2, usize::MAX, Duration::from_millis(50));
        let (a, _) = jobs.create().unwrap();
        let (b, _) = jobs.create().unwrap();
        assert_eq!(jobs.create().unwrap_err().status, 503);
        fail(&jobs, &a);
        let (c, flag) = jobs.create().unwrap();
        assert!(jobs.get(&a).is_none(), "the finished job made room");
        assert!(matches!(jobs.cancel(&c), Some(Cancelled::Stopped(_))));
        assert!(flag.load(Ordering::Relaxed));
        assert_eq!(jobs.get(&c).unwrap().status, JobStatus::Cancelled);
        std::thread::sleep(Duration::from_millis(60));
        assert!(jobs.get(&c).is_none(), "expired after the ttl");
        assert_eq!(jobs.get(&b).unwrap().status, JobStatus::Queued);
    }

    /// Finished results are bounded in bytes as well as in number: four jobs' results of
    /// about 8 KB each under a bound of three and a half of them keep the newest three,
    /// dropping the oldest first (1,024 kept jobs of 119 MB each were bounded by count
    /// alone).
    #[test]
    fn finished_results_are_kept_within_their_bytes() {
        let g = linear(20);
        let budget = checkpoint_all_peak(&g);
        let result = || {
            let r = solve::solve(
                &Instance { graph: &g, budget },
                "checkpoint-all",
                &SolveOptions::default(),
            )
            .unwrap();
            JobResult::Solve(Arc::new(r))
        };
        let one = weight(&result());
        assert!((4000..16000).contains(&one), "{one}");
        let jobs = Jobs::new(100, 3 * one + one / 2, Duration::from_secs(60));
        let ids: Vec<String> = (0..4)
            .map(|_| {
                let (id, _) = jobs.create().unwrap();
                jobs.finish(&id, Ok(result()));
                id
            })
            .collect();
        let kept: Vec<bool> = ids.iter().map(|id| jobs.get(id).is_some()).collect();
        assert_eq!(kept, [false, true, true, true]);
        // A job without a result weighs nothing and stays.
        let (failed, _) = jobs.create().unwrap();
        fail(&jobs, &failed);
        let (last, _) = jobs.create().unwrap();
        jobs.finish(&last, Ok(result()));
        assert!(jobs.get(&failed).is_some());
        assert!(jobs.get(&ids[1]).is_none());
    }
}
