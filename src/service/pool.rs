//! The bounded worker pool that runs solves off the async runtime.
//!
//! At most `workers` solves run at once, each on a blocking thread
//! (`tokio::task::spawn_blocking`); at most `queue` more wait for a worker. A request
//! that finds `workers + queue` already admitted is refused at once ([`PoolError::Busy`],
//! a 503 with `Retry-After`): the queue is bounded, so memory and latency are too.
//!
//! A worker's permit moves into the blocking closure, so it is released when the CPU
//! work really ends, not when the HTTP response is sent. Each task gets a cancel flag
//! (the solver's `SolveOptions::cancel`); [`CancelOnDrop`] raises it when the request's
//! future is dropped (the client went away), and [`Pool::cancel_all`] raises every
//! flag at the end of the shutdown grace period.
//!
//! After each task the worker gives the heap's free memory back to the system
//! ([`release_free_memory`]): glibc keeps what a thread freed in that thread's arena, so
//! after one 999-node MILP the server held 2.4 GB with nothing in use.

use crate::shell::panic_message;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// Why a task did not produce its value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PoolError {
    #[error("all {workers} workers are busy and the queue of {queue} is full")]
    Busy { workers: usize, queue: usize },
    #[error("the solve panicked: {0}")]
    Panicked(String),
    #[error("the worker pool is closed")]
    Closed,
    #[error("cancelled while it waited for a worker")]
    Cancelled,
}

/// How often a task waiting for a worker looks at its cancel flag.
const CANCEL_POLL: std::time::Duration = std::time::Duration::from_millis(20);

pub struct Pool {
    workers: usize,
    queue: usize,
    permits: Arc<Semaphore>,
    /// Tasks admitted and not finished (waiting or running).
    admitted: Arc<AtomicUsize>,
    /// Tasks running on a worker.
    running: Arc<AtomicUsize>,
    next_id: AtomicU64,
    /// The cancel flag of every admitted task.
    flags: Arc<Mutex<HashMap<u64, Arc<AtomicBool>>>>,
}

/// Raises a cancel flag when dropped, unless disarmed: held by a request handler so that
/// a client that disconnects stops its solve.
pub struct CancelOnDrop(Option<Arc<AtomicBool>>);

impl CancelOnDrop {
    pub fn new(flag: Arc<AtomicBool>) -> CancelOnDrop {
        CancelOnDrop(Some(flag))
    }
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(flag) = &self.0 {
            flag.store(true, Ordering::Relaxed);
        }
    }
}

/// Counts a task as admitted until dropped, and unregisters its cancel flag.
struct Admission {
    id: u64,
    admitted: Arc<AtomicUsize>,
    flags: Arc<Mutex<HashMap<u64, Arc<AtomicBool>>>>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.admitted.fetch_sub(1, Ordering::SeqCst);
        self.flags.lock().expect("flags lock").remove(&self.id);
    }
}

impl Pool {
    pub fn new(workers: usize, queue: usize) -> Pool {
        let workers = workers.max(1);
        Pool {
            workers,
            queue,
            permits: Arc::new(Semaphore::new(workers)),
            admitted: Arc::new(AtomicUsize::new(0)),
            running: Arc::new(AtomicUsize::new(0)),
            next_id: AtomicU64::new(0),
            flags: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Tasks running on a worker now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Tasks waiting for a worker now.
    pub fn queued(&self) -> usize {
        self.admitted
            .load(Ordering::SeqCst)
            .saturating_sub(self.running())
    }

    /// Whether a new task would be refused.
    pub fn is_full(&self) -> bool {
        self.admitted.load(Ordering::SeqCst) >= self.workers.saturating_add(self.queue)
    }

    /// Raises the cancel flag of every admitted task.
    pub fn cancel_all(&self) {
        for flag in self.flags.lock().expect("flags lock").values() {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// Runs `work` on a worker once one is free; `cancel` is the flag `work` polls. Refuses at once
    /// when the queue is full. Dropping the returned future while it waits, or raising
    /// `cancel` then (a job deleted while queued), gives the queue slot back at once;
    /// dropping the future while `work` runs does not stop `work` (raise `cancel` for that,
    /// see [`CancelOnDrop`]).
    pub async fn run<T, F>(&self, cancel: Arc<AtomicBool>, work: F) -> Result<T, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let limit = self.workers.saturating_add(self.queue);
        let admitted = self
            .admitted
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            });
        if admitted.is_err() {
            return Err(PoolError::Busy {
                workers: self.workers,
                queue: self.queue,
            });
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.flags
            .lock()
            .expect("flags lock")
            .insert(id, cancel.clone());
        let admission = Admission {
            id,
            admitted: self.admitted.clone(),
            flags: self.flags.clone(),
        };
        let cancelled = async {
            while !cancel.load(Ordering::Relaxed) {
                tokio::time::sleep(CANCEL_POLL).await;
            }
        };
        let permit = tokio::select! {
            permit = self.permits.clone().acquire_owned() => permit.map_err(|_| PoolError::Closed)?,
            () = cancelled => return Err(PoolError::Cancelled),
        };
        let running = self.running.clone();
        // The request's span (its id) goes with the work: a solver's logs name the request.
        let span = tracing::Span::current();
        let handle = tokio::task::spawn_blocking(move || {
            let _span = span.enter();
            running.fetch_add(1, Ordering::SeqCst);
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            release_free_memory();
            running.fetch_sub(1, Ordering::SeqCst);
            drop(permit);
            drop(admission);
            out.map_err(|panic| PoolError::Panicked(panic_message(panic.as_ref())))
        });
        handle.await.map_err(|_| PoolError::Closed)?
    }
}

/// Returns the free memory of every malloc arena to the system (glibc's `malloc_trim`;
/// nothing elsewhere). A few milliseconds after a large solve, microseconds after a small
/// one.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and trims the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pool(workers: usize, queue: usize) -> Arc<Pool> {
        Arc::new(Pool::new(workers, queue))
    }

    #[tokio::test]
    async fn a_panic_is_an_error_for_that_task_only() {
        let p = pool(1, 0);
        let flag = Arc::new(AtomicBool::new(false));
        let err = p
            .run(flag.clone(), || -> u32 { panic!("boom") })
            .await
            .unwrap_err();
        assert_eq!(err, PoolError::Panicked("boom".into()));
        assert_eq!(p.run(flag, || 7).await, Ok(7));
        assert_eq!((p.running(), p.queued()), (0, 0));
    }

    #[tokio::test]
    async fn refuses_when_workers_and_queue_are_taken() {
        let p = pool(1, 1);
        let stop = Arc::new(AtomicBool::new(false));
        let spin = |stop: Arc<AtomicBool>| {
            move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        };
        let a = tokio::spawn({
            let (p, s) = (p.clone(), stop.clone());
            async move { p.run(s.clone(), spin(s)).await }
        });
        let b = tokio::spawn({
            let (p, s) = (p.clone(), stop.clone());
            async move { p.run(s.clone(), spin(s)).await }
        });
        while p.running() + p.queued() < 2 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert!(p.is_full());
        let refused = p.run(stop.clone(), || ()).await.unwrap_err();
        assert!(matches!(
            refused,
            PoolError::Busy {
                workers: 1,
                queue: 1
            }
        ));
        p.cancel_all();
        assert_eq!(a.await.unwrap(), Ok(()));
        assert_eq!(b.await.unwrap(), Ok(()));
        assert!(!p.is_full());
    }
}
