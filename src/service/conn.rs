//! Connections: the accept loop (in place of `axum::serve`), so that no client holds the
//! server's files or memory. At most `--max-connections` connections are open at once,
//! never more than the process's file limit leaves room for ([`cap`]). A connection's
//! request head must arrive within `--client-timeout`, the wait for a kept-alive
//! connection's next request included, and fit in [`HEAD_BUFFER`] (else 431): an idle or
//! stalled connection is closed. Bodies are read under `--readers` within the same timeout
//! (`endpoints::Posted`).
//!
//! At the cap, a new connection is not left in the backlog behind idle ones (a client that
//! opens connections and sends nothing would keep the probes out for the client timeout,
//! long enough for Kubernetes to restart the pod): the connection idle the longest is closed
//! to make room ([`Open::evict`]). Idle means no request in flight: none being answered and
//! no answer being sent. Only when every connection is busy does the new one wait for a
//! free place.
//!
//! On shutdown the loop stops accepting and lets each connection finish its request in
//! flight.

use axum::body::Body;
use axum::Router;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::service::Service;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

/// The bytes a connection buffers while it reads: a request's head must fit.
pub const HEAD_BUFFER: usize = 64 << 10;

/// Files the process keeps for itself beside its connections (the listener, graph files,
/// logs, the runtime's own, the one connection accepted while it waits for a place).
const SPARE_FILES: usize = 64;

/// The pause after a failed accept (the file limit reached by other files, a connection
/// reset before it was accepted), so that the loop does not spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// How long a connection accepted at the cap waits for the place of the connection evicted
/// for it before another idle one is asked to close (one answering a request it had begun
/// closes once the answer is sent).
const PLACE_WAIT: Duration = Duration::from_millis(100);

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
    let places = u32::try_from(connections).unwrap_or(u32::MAX);
    let slots = Arc::new(Semaphore::new(places as usize));
    let open = Arc::new(Open::default());
    let (stopping, stopped) = watch::channel(false);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(timeout)
        .max_buf_size(HEAD_BUFFER);
    let mut stop = pin!(stop);
    loop {
        let accepted = tokio::select! {
            () = &mut stop => break,
            accepted = next(&listener, &slots, &open) => accepted,
        };
        let Some((stream, slot)) = accepted else {
            continue;
        };
        let conn = open.add();
        let service = Tracked {
            app: app.clone(),
            conn: conn.clone(),
        };
        let watched = Watched {
            stream,
            conn: conn.clone(),
        };
        let connection = http.serve_connection(TokioIo::new(watched), service);
        let (open, stopped) = (open.clone(), stopped.clone());
        tokio::spawn(async move {
            run(connection, &conn, stopped).await;
            open.remove(conn.id);
            drop(slot);
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    // every connection gives its place back as it ends
    let _ = slots.acquire_many(places).await;
}

/// One connection as hyper serves it.
type Connection = hyper::server::conn::http1::Connection<TokioIo<Watched>, Tracked>;

/// Drives one connection to its end. On shutdown, or when it is evicted after a request,
/// hyper closes it once the request in flight is answered (at once when idle); asked before
/// its first request reached the service, it is dropped (nothing is in flight; a shutdown
/// would otherwise wait for a head begun and never finished).
async fn run(connection: Connection, conn: &Conn, mut stopped: watch::Receiver<bool>) {
    let mut connection = pin!(connection);
    let mut closing = false;
    loop {
        tokio::select! {
            _ = connection.as_mut() => return,
            _ = stopped.wait_for(|s| *s), if !closing => {},
            () = conn.evict.notified(), if !closing => {},
        }
        if !conn.served.load(Ordering::Acquire) {
            return;
        }
        closing = true;
        connection.as_mut().graceful_shutdown();
    }
}

/// A connection's stream, which marks the connection active whenever bytes arrive: one
/// sending a request's head is not the one idle the longest.
struct Watched {
    stream: TcpStream,
    conn: Arc<Conn>,
}

impl tokio::io::AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.conn.active();
        }
        polled
    }
}

impl tokio::io::AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The next connection and its place; `None` after a failed accept, logged, after
/// [`ACCEPT_PAUSE`]. With no place free, the connection idle the longest is evicted and its
/// place taken when it ends; with none idle, the first place freed.
async fn next(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
    open: &Open,
) -> Option<(TcpStream, OwnedSemaphorePermit)> {
    let stream = match listener.accept().await {
        Ok((stream, _)) => stream,
        Err(e) => {
            tracing::warn!(error = %e, "accepting a connection failed");
            tokio::time::sleep(ACCEPT_PAUSE).await;
            return None;
        }
    };
    let slot = loop {
        if let Ok(slot) = slots.clone().try_acquire_owned() {
            break slot;
        }
        open.evict();
        if let Ok(slot) = tokio::time::timeout(PLACE_WAIT, slots.clone().acquire_owned()).await {
            break slot.expect("the slots are never closed");
        }
    };
    Some((stream, slot))
}

/// The open connections, by the order they opened in.
#[derive(Default)]
struct Open {
    conns: Mutex<BTreeMap<u64, Arc<Conn>>>,
    /// A clock that ticks when a connection opens, receives bytes or ends a request: its tick
    /// at opening is a connection's id, its last tick [`Conn::idle_since`].
    clock: Arc<AtomicU64>,
}

/// One open connection, as the accept loop sees it.
struct Conn {
    id: u64,
    /// Requests in flight: from the service's call until its answer's body is sent.
    busy: AtomicUsize,
    /// Whether a request has reached the service (a kept-alive connection, which hyper
    /// closes gracefully).
    served: AtomicBool,
    /// Asked to close ([`Open::evict`]); set once.
    evicting: AtomicBool,
    evict: Notify,
    /// [`Open::clock`] when it opened, last received bytes or last ended a request.
    idle_since: AtomicU64,
    clock: Arc<AtomicU64>,
}

impl Conn {
    /// Marks the connection active now.
    fn active(&self) {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        self.idle_since.store(now, Ordering::Release);
    }
}

impl Open {
    fn add(&self) -> Arc<Conn> {
        let id = self.clock.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            id,
            busy: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            evicting: AtomicBool::new(false),
            evict: Notify::new(),
            idle_since: AtomicU64::new(id),
            clock: self.clock.clone(),
        });
        self.lock().insert(id, conn.clone());
        conn
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Asks the connection idle the longest (no request in flight; idle since it last received
    /// bytes or ended a request), not yet asked, to close; none when every connection is busy.
    /// Connections opened and left silent go before a kept-alive client between requests or
    /// one sending a request's head.
    fn evict(&self) {
        let conns = self.lock();
        let idle = conns
            .values()
            .filter(|c| c.busy.load(Ordering::Acquire) == 0 && !c.evicting.load(Ordering::Acquire))
            .min_by_key(|c| c.idle_since.load(Ordering::Acquire));
        if let Some(conn) = idle {
            conn.evicting.store(true, Ordering::Release);
            tracing::debug!(
                connection = conn.id,
                "at the connection cap: closing the one idle the longest"
            );
            conn.evict.notify_one();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Conn>>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The router as one connection's service, counting its requests in flight.
struct Tracked {
    app: Router,
    conn: Arc<Conn>,
}

impl Service<hyper::Request<Incoming>> for Tracked {
    type Response = hyper::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let busy = Busy::enter(self.conn.clone());
        let app = self.app.clone();
        Box::pin(async move {
            let response = app.oneshot(request).await?;
            Ok(response.map(|body| Body::new(Sending { body, _busy: busy })))
        })
    }
}

/// One request in flight on its connection, until dropped.
struct Busy(Arc<Conn>);

impl Busy {
    fn enter(conn: Arc<Conn>) -> Busy {
        conn.served.store(true, Ordering::Release);
        conn.busy.fetch_add(1, Ordering::AcqRel);
        Busy(conn)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.active();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An answer's body while hyper sends it: its request stays in flight until the body is
/// done or dropped.
struct Sending {
    body: Body,
    _busy: Busy,
}

impl hyper::body::Body for Sending {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
