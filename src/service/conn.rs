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
//! no answer being sent. With none idle, a request being read in a reader's place
//! (`--readers`) whose connection has received nothing for [`STALLED`] (a stalled upload) is
//! refused with 503 and its connection closed, the one silent the longest first
//! ([`Eviction`]): clients that send half a body and stop would otherwise keep the probes out
//! as long. A request waiting for a reader's place is not refused: the reader's place it waits
//! for is held by one that will be read, refused or time out. Only when every connection is
//! answering, sending an answer or receiving a body in time does the new one wait for a free
//! place.
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
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

/// The most bytes a request's head may take (431 past it). A connection's read buffer holds
/// less than twice this: hyper reads at most this much more while the head is incomplete.
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

/// How long a connection whose request's body is being read must have received nothing
/// before it may be closed for a new connection at the cap: an upload in progress keeps its
/// place, one that stalled does not keep a probe (whose timeout is often 1 s) waiting.
pub const STALLED: Duration = Duration::from_millis(250);

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
        .max_buf_size(HEAD_BUFFER)
        .max_header_size(HEAD_BUFFER);
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
    let mut evicted = conn.evicted.subscribe();
    let mut closing = false;
    loop {
        tokio::select! {
            _ = connection.as_mut() => return,
            _ = stopped.wait_for(|s| *s), if !closing => {},
            _ = evicted.wait_for(|e| *e != Evicted::No), if !closing => {},
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
/// place taken when it ends; with none idle, the one whose body stalled the longest
/// ([`Open::evict`]); with none of either, the first place freed.
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
struct Open {
    conns: Mutex<BTreeMap<u64, Arc<Conn>>>,
    /// The next connection's id.
    next: AtomicU64,
    /// Where [`Conn::idle_since`] counts from.
    epoch: Instant,
}

impl Default for Open {
    fn default() -> Open {
        Open {
            conns: Mutex::default(),
            next: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

/// One open connection, as the accept loop sees it.
struct Conn {
    id: u64,
    /// Requests in flight: from the service's call until its answer's body is sent.
    busy: AtomicUsize,
    /// Whether a request has reached the service (a kept-alive connection, which hyper
    /// closes gracefully).
    served: AtomicBool,
    /// Whether the request in flight is having its body read, in a reader's place
    /// ([`Eviction::reading`] to [`Eviction::read`]).
    receiving: AtomicBool,
    /// Asked to close ([`Open::evict`]); set once. A request whose body was being read sees
    /// it through [`Eviction`].
    evicted: watch::Sender<Evicted>,
    /// Nanoseconds from [`Open::epoch`] to when it opened, last received bytes or last ended
    /// a request.
    idle_since: AtomicU64,
    epoch: Instant,
}

impl Conn {
    /// Marks the connection active now.
    fn active(&self) {
        self.idle_since.store(nanos(self.epoch), Ordering::Release);
    }

    fn evicted(&self) -> bool {
        *self.evicted.borrow() != Evicted::No
    }
}

/// Why a connection was asked to close.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Evicted {
    No,
    /// No request in flight: it closes, or finishes the request that arrives meanwhile.
    Idle,
    /// Its request's body stalled while being read: the request is answered 503.
    Stalled,
}

/// Nanoseconds since `epoch` (saturating: 584 years).
fn nanos(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl Open {
    fn add(&self) -> Arc<Conn> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            id,
            busy: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            receiving: AtomicBool::new(false),
            evicted: watch::Sender::new(Evicted::No),
            idle_since: AtomicU64::new(nanos(self.epoch)),
            epoch: self.epoch,
        });
        self.lock().insert(id, conn.clone());
        conn
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Asks one connection, not yet asked, to close: the one idle the longest (no request in
    /// flight; idle since it last received bytes or ended a request), else the one silent the
    /// longest, for at least [`STALLED`], whose request's body is being read; none when every
    /// connection is busy otherwise. Connections opened and left silent go before a
    /// kept-alive client between requests or one sending a request's head.
    fn evict(&self) {
        let conns = self.lock();
        let asked = |c: &&Arc<Conn>| !c.evicted();
        let since = |c: &&Arc<Conn>| c.idle_since.load(Ordering::Acquire);
        let idle = conns
            .values()
            .filter(asked)
            .filter(|c| c.busy.load(Ordering::Acquire) == 0)
            .min_by_key(since);
        let stalled_before = nanos(self.epoch).saturating_sub(STALLED.as_nanos() as u64);
        let stalled = || {
            conns
                .values()
                .filter(asked)
                .filter(|c| c.receiving.load(Ordering::Acquire))
                .filter(|c| since(c) <= stalled_before)
                .min_by_key(since)
        };
        let (conn, why) = match idle {
            Some(conn) => (conn, Evicted::Idle),
            None => match stalled() {
                Some(conn) => (conn, Evicted::Stalled),
                None => return,
            },
        };
        tracing::debug!(
            connection = conn.id,
            stalled = why == Evicted::Stalled,
            "at the connection cap: closing the one idle or stalled the longest"
        );
        conn.evicted.send_replace(why);
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

    fn call(&self, mut request: hyper::Request<Incoming>) -> Self::Future {
        let busy = Busy::enter(self.conn.clone());
        let app = self.app.clone();
        request.extensions_mut().insert(Eviction {
            asked: self.conn.evicted.subscribe(),
            conn: self.conn.clone(),
        });
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
        self.0.receiving.store(false, Ordering::Release);
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A request's view of its connection's eviction ([`Open::evict`]), in its extensions: a
/// request whose body stalls while it is read is answered 503 at once when its connection is
/// asked to close, so that the connection closes and its place goes to the new one.
#[derive(Clone)]
pub struct Eviction {
    asked: watch::Receiver<Evicted>,
    conn: Arc<Conn>,
}

impl Eviction {
    /// The request's body is being read (in a reader's place): from now, a silence of
    /// [`STALLED`] makes it evictable.
    pub fn reading(&self) {
        self.conn.active();
        self.conn.receiving.store(true, Ordering::Release);
    }

    /// The request's body is read (or refused).
    pub fn read(&self) {
        self.conn.receiving.store(false, Ordering::Release);
    }

    /// Resolves once the connection is asked to close because this body stalled.
    pub async fn asked(mut self) {
        if self
            .asked
            .wait_for(|e| *e == Evicted::Stalled)
            .await
            .is_err()
        {
            // the connection is gone, and with it the request
            std::future::pending::<()>().await;
        }
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
