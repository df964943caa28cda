//! `remat serve`: the HTTP/JSON service, a thin shell over `crate::solve`.
//!
//! ```text
//! connection (conn: capped, head within --client-timeout)
//! request ─ SetRequestId ─ Trace ─ PropagateRequestId ─ CatchPanic ─ identity ─ compression ─ metrics ─ guard ─ body limit ─ handler
//!                                                                                │
//!                       cache hit? ◄── key = blake3(graph, budget, solver, options)
//!                                                                                │ miss
//!                                  bounded queue ─► worker pool (spawn_blocking) ─► solve::solve
//! ```
//!
//! The contract is `api/openapi.yaml`, served as JSON at `/openapi.json`. Errors are
//! RFC 9457 problem documents (`problem`). Solves run in a bounded pool with a bounded
//! queue (`pool`); a client that disconnects cancels its solve. On SIGTERM the server
//! stops accepting connections, lets in-flight solves finish for `--grace` seconds, then
//! cancels what is left, gives the cancelled solves half a second to answer, and stops
//! without waiting for anything further (a client that does not read, a solver slow to
//! poll its flag): the process exits within `--grace` plus one second. The server knows
//! nothing of any solver's internals.
//!
//! Responses are gzip-compressed when the client sends `Accept-Encoding: gzip`; a client that
//! refuses `identity` and accepts no gzip gets them uncompressed all the same. A request
//! target longer than [`MAX_URI`] gets a 414 problem document; hyper itself answers a bare
//! 414, before the service sees the request, beyond 64 KiB.
//!
//! `guard` refuses what a hostile web page could send: a `Host` that is not this server's,
//! a cross-origin request, a POST body not declared as JSON.
//!
//! `request` reads bodies field by field (through the front door, `crate::front`, for
//! options, budgets and schedules, as the command line does); `endpoints` holds the
//! handlers, one file per group.

mod cache;
mod config;
mod conn;
mod endpoints;
mod guard;
mod jobs;
mod limits;
mod metrics;
mod pool;
mod problem;
mod request;
mod ui;

pub use config::{Config, LogFormat};
pub use problem::PROBLEM_JSON;

use crate::shell::panic_message;
use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::compression::CompressionLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};

/// The longest request target (path and query) the service reads: 8 KiB.
pub const MAX_URI: usize = 8 << 10;

/// The contract, parsed once from `api/openapi.yaml`.
static OPENAPI: LazyLock<serde_json::Value> = LazyLock::new(|| {
    serde_norway::from_str(include_str!("../../api/openapi.yaml"))
        .expect("api/openapi.yaml is valid YAML (checked by tests)")
});

pub(crate) fn openapi_document() -> &'static serde_json::Value {
    &OPENAPI
}

/// Everything the handlers share.
pub struct AppState {
    config: Config,
    pool: pool::Pool,
    cache: cache::Cache,
    jobs: jobs::Jobs,
    metrics: metrics::Metrics,
    guard: guard::Guard,
    draining: AtomicBool,
    /// Requests being read (`--readers`): see `endpoints::off_runtime`.
    readers: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    pub fn new(config: Config) -> AppState {
        AppState {
            pool: pool::Pool::new(config.workers, config.queue),
            cache: cache::Cache::new(config.cache, config.cache_bytes),
            jobs: jobs::Jobs::new(config.max_jobs, config.job_bytes, config.job_ttl()),
            metrics: metrics::Metrics::default(),
            guard: guard::Guard::new(&config),
            draining: AtomicBool::new(false),
            readers: Arc::new(tokio::sync::Semaphore::new(config.readers.max(1))),
            config,
        }
    }
}

/// The routes and layers.
pub fn router(state: Arc<AppState>) -> Router {
    let max_body = state.config.max_body;
    Router::new()
        .route("/solve", post(endpoints::solve))
        .route("/v1/solve", post(endpoints::solve))
        .route("/v1/jobs", post(endpoints::create_job))
        .route(
            "/v1/jobs/{id}",
            get(endpoints::get_job).delete(endpoints::delete_job),
        )
        .route("/v1/sweep", post(endpoints::sweep))
        .route("/v1/max-batch", post(endpoints::max_batch))
        .route("/v1/plot/{kind}", post(endpoints::plot))
        .route("/", get(ui::page))
        .route("/v1/simulate", post(endpoints::simulate_schedule))
        .route("/v1/inspect", post(endpoints::inspect))
        .route("/v1/solvers", get(endpoints::solvers))
        .route("/healthz", get(endpoints::healthz))
        .route("/readyz", get(endpoints::readyz))
        .route("/metrics", get(endpoints::metrics))
        .route("/openapi.json", get(endpoints::openapi))
        .fallback(endpoints::not_found)
        .method_not_allowed_fallback(endpoints::method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .layer(axum::middleware::from_fn(limit_uri))
        .layer(state.guard.cors())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::admit,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            record_metrics,
        ))
        .layer(CompressionLayer::new())
        .layer(axum::middleware::map_request(identity_acceptable))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request| {
                let id = req
                    .headers()
                    .get("x-request-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                tracing::info_span!("request", method = %req.method(), uri = %req.uri(), request_id = %id)
            })
            .on_response(DefaultOnResponse::new().level(tracing::Level::INFO))
            .on_failure(log_failure),
        )
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(axum::middleware::map_request(readable_request_id))
        .with_state(state)
}

/// The most bytes of a client's `x-request-id` the service takes.
pub const MAX_REQUEST_ID: usize = 128;

/// Drops a client's `x-request-id` that is not 1 to [`MAX_REQUEST_ID`] visible ASCII
/// characters (spaces, tabs, non-ASCII bytes, kilobytes of it), so that a new UUID takes its
/// place: the id is echoed in the answer and written on every log line of the request.
async fn readable_request_id(mut req: Request) -> Request {
    let readable = |id: &[u8]| {
        (1..=MAX_REQUEST_ID).contains(&id.len()) && id.iter().all(|b| b.is_ascii_graphic())
    };
    let ids = req.headers().get_all("x-request-id");
    if !ids.iter().all(|id| readable(id.as_bytes())) || ids.iter().count() > 1 {
        req.headers_mut().remove("x-request-id");
    }
    req
}

/// A response of status 5xx in the log: the contract's 503 (the queue or the job table full,
/// or draining) and 504 (the request's own time limit passed) are what the service answers
/// under load or when asked, at WARN; anything else (a 500 is a bug) at ERROR, where an
/// operator's alerts look.
fn log_failure(class: ServerErrorsFailureClass, latency: Duration, _span: &tracing::Span) {
    let latency_ms = latency.as_millis();
    match class {
        ServerErrorsFailureClass::StatusCode(
            status @ (StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT),
        ) => tracing::warn!(%status, latency_ms, "answered {status}"),
        class => tracing::error!(classification = %class, latency_ms, "response failed"),
    }
}

/// Counts every request by route and status, with its latency.
async fn record_metrics(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = method_label(req.method());
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_string();
    let response = next.run(req).await;
    state
        .metrics
        .request(&method, &route, response.status().as_u16(), start.elapsed());
    response
}

/// The `method` label of a request's metrics: one of HTTP's methods, else `other`, so that
/// made-up methods (any token) cannot grow the metrics without bound.
fn method_label(method: &axum::http::Method) -> String {
    use axum::http::Method;
    let known = [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::OPTIONS,
        Method::PATCH,
        Method::TRACE,
        Method::CONNECT,
    ];
    if known.contains(method) {
        method.to_string()
    } else {
        "other".into()
    }
}

/// Drops from `Accept-Encoding` the codings a client refuses with `q=0` when they are
/// `identity` or `*`: the answer is then sent uncompressed where the client accepts no
/// gzip (RFC 9110 lets a server disregard the header), rather than computed and then
/// answered 406 by the compression layer.
async fn identity_acceptable(mut req: Request) -> Request {
    use axum::http::{header::ACCEPT_ENCODING, HeaderValue};
    let refuses_identity = |coding: &str| {
        let mut parts = coding.split(';').map(str::trim);
        let name = parts.next().unwrap_or("");
        let q = parts
            .filter_map(|p| p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")))
            .filter_map(|q| q.trim().parse::<f64>().ok())
            .next_back();
        (name == "*" || name.eq_ignore_ascii_case("identity")) && q == Some(0.0)
    };
    let codings: Vec<String> = req
        .headers()
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|c| c.trim().to_string())
        .collect();
    if codings.iter().any(|c| refuses_identity(c)) {
        let kept: Vec<&str> = codings
            .iter()
            .map(String::as_str)
            .filter(|c| !refuses_identity(c) && !c.is_empty())
            .collect();
        let headers = req.headers_mut();
        headers.remove(ACCEPT_ENCODING);
        if !kept.is_empty() {
            if let Ok(value) = HeaderValue::from_str(&kept.join(", ")) {
                headers.insert(ACCEPT_ENCODING, value);
            }
        }
    }
    req
}

/// Refuses a request target longer than [`MAX_URI`] with a 414 problem document.
async fn limit_uri(req: Request, next: Next) -> Response {
    let len = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if len > MAX_URI {
        return problem::ApiProblem::new(
            problem::Kind::UriTooLong,
            format!("the request target has {len} bytes; at most {MAX_URI} are read"),
        )
        .into_response();
    }
    next.run(req).await
}

/// A panic outside the worker pool (in a handler) still answers with a problem document.
fn panic_response(payload: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let message = panic_message(payload.as_ref());
    tracing::error!(panic = %message, "a handler panicked");
    problem::ApiProblem::new(problem::Kind::Internal, format!("panic: {message}")).into_response()
}

/// How often the server returns freed heap memory to the system (beside each solve's end).
const TRIM_EVERY: Duration = Duration::from_secs(5);

/// How often draining checks whether the work in flight is done.
const DRAIN_POLL: Duration = Duration::from_millis(20);

/// How long, once the grace period is over and the solves left are cancelled, their
/// clients may take to get their answers before the connections are closed.
const ANSWER_AFTER_CANCEL: Duration = Duration::from_millis(500);

/// How long the process waits, once the server stopped, for the runtime's threads: a
/// solver that has not yet seen its cancel flag is not waited for.
const RUNTIME_STOP: Duration = Duration::from_millis(100);

/// Serves on `listener` until `shutdown` resolves, then drains: no new connections,
/// in-flight requests and jobs get `config.grace` to finish, then their solves are
/// cancelled, and `ANSWER_AFTER_CANCEL` later whatever is left is dropped (its
/// connections closed), so that `serve` returns within the grace period plus that.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // The address really listened on (port 0 picks one), which `Host` must name.
    let config = Config {
        addr: listener.local_addr()?,
        ..config
    };
    serve_state(Arc::new(AppState::new(config)), listener, shutdown).await
}

/// [`serve`] with the state given (its `config.addr` the listener's address).
async fn serve_state(
    state: Arc<AppState>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(state.clone());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let signal = {
        let state = state.clone();
        async move {
            shutdown.await;
            state.draining.store(true, Ordering::Relaxed);
            tracing::info!("shutting down: no new connections, draining in-flight work");
            let _ = tx.send(());
        }
    };
    let connections = conn::cap(state.config.max_connections);
    let timeout = state.config.client_timeout();
    let server = tokio::spawn(conn::serve(listener, app, connections, timeout, signal));
    // Requests read off the runtime (bodies, inspect, simulate) free their memory into
    // their threads' arenas; give it back now and then.
    let trim = tokio::spawn(async {
        let mut every = tokio::time::interval(TRIM_EVERY);
        loop {
            every.tick().await;
            pool::release_free_memory();
        }
    });
    // Resolves on the shutdown signal, or fails when the server ended without one.
    let _ = rx.await;
    let drained = || server.is_finished() && state.pool.running() + state.pool.queued() == 0;
    let deadline = Instant::now() + state.config.grace();
    while !drained() && Instant::now() < deadline {
        tokio::time::sleep(DRAIN_POLL).await;
    }
    if !drained() {
        tracing::warn!(
            grace_s = state.config.grace,
            "grace period over: cancelling in-flight solves"
        );
        state.pool.cancel_all();
        let answered_by = Instant::now() + ANSWER_AFTER_CANCEL;
        while !drained() && Instant::now() < answered_by {
            tokio::time::sleep(DRAIN_POLL).await;
        }
        // What is left (a client that does not read, a solver slow to poll its flag)
        // is not waited for: its connection is closed and its thread left to the exit.
        server.abort();
    }
    trim.abort();
    match server.await {
        Ok(()) => {}
        Err(e) if e.is_cancelled() => tracing::warn!(
            running = state.pool.running(),
            "stopped with work left: connections closed, solves not waited for"
        ),
        Err(e) => return Err(std::io::Error::other(e)),
    }
    tracing::info!("stopped");
    Ok(())
}

/// `remat serve`: sets up logging, binds, serves until SIGTERM. Returns the exit code.
pub fn run(config: Config) -> i32 {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match config.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            crate::shell::to_stderr(format_args!("error: cannot start the async runtime: {e}"));
            return 3;
        }
    };
    let code = runtime.block_on(async move {
        let listener = match TcpListener::bind(config.addr).await {
            Ok(l) => l,
            Err(e) => {
                crate::shell::to_stderr(format_args!("error: cannot listen on {}: {e}", config.addr));
                return 2;
            }
        };
        let addr = listener.local_addr().map_or(config.addr, |a| a);
        tracing::info!(%addr, workers = config.workers, queue = config.queue, time_limit_s = config.time_limit, "remat serve listening");
        match serve(config, listener, async {
            crate::shell::shutdown_signal().await;
        })
        .await
        {
            Ok(()) => 0,
            Err(e) => {
                tracing::error!(error = %e, "server error");
                3
            }
        }
    });
    // The blocking threads of solves that have not stopped yet are not waited for (a
    // dropped runtime would wait for them): the process exits with them.
    runtime.shutdown_timeout(RUNTIME_STOP);
    code
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{header, StatusCode};

    /// What the log says of a response of `status`.
    fn logged(status: StatusCode) -> String {
        #[derive(Clone, Default)]
        struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Captured {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer({
                let captured = captured.clone();
                move || captured.clone()
            })
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let class = ServerErrorsFailureClass::StatusCode(status);
            log_failure(class, Duration::from_millis(25), &tracing::Span::none());
        });
        let bytes = captured.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    /// Back-pressure and a request's own time limit are warnings; any other 5xx is an error.
    #[test]
    fn a_busy_or_timed_out_answer_is_logged_as_a_warning_a_500_as_an_error() {
        for status in [StatusCode::SERVICE_UNAVAILABLE, StatusCode::GATEWAY_TIMEOUT] {
            let line = logged(status);
            assert!(
                line.contains(" WARN ") && line.contains(status.as_str()),
                "{line}"
            );
        }
        let line = logged(StatusCode::INTERNAL_SERVER_ERROR);
        assert!(line.contains(" ERROR ") && line.contains("500"), "{line}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn draining_waits_for_no_solver_past_the_grace() {
        let state = Arc::new(AppState::new(Config {
            workers: 1,
            grace: 0.2,
            ..Config::default()
        }));
        // A solve that never looks at its cancel flag.
        let deaf = tokio::spawn({
            let state = state.clone();
            async move {
                let flag = Arc::new(AtomicBool::new(false));
                let work = || std::thread::sleep(Duration::from_secs(3));
                state.pool.run(flag, work).await
            }
        });
        while state.pool.running() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let start = Instant::now();
        serve_state(state, listener, async {}).await.unwrap();
        let took = start.elapsed();
        assert!(
            took < Duration::from_millis(1000),
            "serve returned after {took:?}"
        );
        deaf.abort();
    }

    #[test]
    fn a_handler_panic_becomes_a_problem_document() {
        let response = panic_response(Box::new("oops"));
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(response.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
    }
}
