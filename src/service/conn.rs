//! Connections: the accept loop (in place of `axum::serve`), so that no client holds the
//! server's files or memory. At most `--max-connections` connections are open at once,
//! never more than the process's file limit leaves room for ([`cap`]); further ones wait
//! in the listener's backlog. A connection's request head must arrive within
//! `--client-timeout`, the wait for a kept-alive connection's next request included, and
//! fit in [`HEAD_BUFFER`] (else 431): an idle or stalled connection is closed. Bodies are
//! read under `--readers` within the same timeout (`endpoints::Posted`). On shutdown the
//! loop stops accepting and lets each connection finish its request in flight.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bytes a connection buffers while it reads: a request's head must fit.
pub const HEAD_BUFFER: usize = 64 << 10;

/// Files the process keeps for itself beside its connections (the listener, graph files,
/// logs, the runtime's own).
const SPARE_FILES: usize = 64;

/// The pause after a failed accept (the file limit reached by other files, a connection
/// reset before it was accepted), so that the loop does not spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// `asked` connections, or fewer where the process's file limit (`RLIMIT_NOFILE`) leaves
/// room for fewer beside [`SPARE_FILES`]; at least 1.
pub fn cap(asked: usize) -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into `limit`, which it is given.
    let files = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX)
    } else {
        usize::MAX
    };
    asked.min(files.saturating_sub(SPARE_FILES)).max(1)
}

/// Serves `app` on `listener`, at most `connections` at once, each with `timeout` for a
/// request's head, until `stop` resolves; then waits for the connections to finish their
/// requests in flight (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    connections: usize,
    timeout: Duration,
    stop: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(timeout)
        .max_buf_size(HEAD_BUFFER);
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            () = &mut stop => break,
            accepted = next(&listener, &slots) => accepted,
        };
        let Some((stream, slot)) = accepted else {
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            let _ = connection.await;
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// The next connection, once a slot is free; `None` after a failed accept, logged, after
/// [`ACCEPT_PAUSE`].
async fn next(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> Option<(TcpStream, OwnedSemaphorePermit)> {
    let slot = slots
        .clone()
        .acquire_owned()
        .await
        .expect("the slots are never closed");
    match listener.accept().await {
        Ok((stream, _)) => Some((stream, slot)),
        Err(e) => {
            tracing::warn!(error = %e, "accepting a connection failed");
            tokio::time::sleep(ACCEPT_PAUSE).await;
            None
        }
    }
}
