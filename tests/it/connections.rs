//! What one client can hold of the server: connections (capped, closed when idle or
//! stalled, the oldest idle one closed to make room at the cap), bodies (read in a reader's place within the client timeout), metrics labels
//! (made-up methods share one), and answers it refuses to decode (`identity;q=0`).

use crate::server;

use remat::service::Config;
use serde_json::json;
use server::{long_solve, receive, request_with, send, Server};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn quick(config: Config) -> Config {
    Config {
        client_timeout: 1.0,
        ..config
    }
}

/// Many connections that send nothing neither keep `/healthz` from answering nor stay open:
/// at most `--max-connections` are accepted, and each is closed after `--client-timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_capped_and_closed() {
    let server = Server::start(quick(Config {
        max_connections: 8,
        ..Config::default()
    }))
    .await;
    let mut idle = Vec::new();
    for _ in 0..40 {
        idle.push(TcpStream::connect(server.addr).await.unwrap());
    }
    let start = Instant::now();
    let health = tokio::time::timeout(Duration::from_secs(10), server.get("/healthz"))
        .await
        .expect("/healthz answers while 40 idle connections wait");
    assert_eq!(health.status, 200);
    println!("/healthz answered after {:?}", start.elapsed());
    assert_closed(
        &mut idle[0],
        5,
        "an idle connection is closed by the server",
    )
    .await;
    server.stop().await.unwrap();
}

/// At the cap, a new connection gets the place of the oldest idle one, which is closed: with
/// the default client timeout (30 s), connections that send nothing would otherwise keep
/// `/healthz` waiting for that long, past any probe's timeout. A connection whose request is
/// in flight is never the one closed: its answer arrives whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_an_idle_connection_makes_room_and_a_busy_one_is_kept() {
    let server = Server::start(Config {
        max_connections: 4,
        ..Config::default()
    })
    .await;
    let solve = long_solve(2_000, 2);
    let mut busy = TcpStream::connect(server.addr).await.unwrap();
    send(
        &mut busy,
        "POST",
        "/v1/solve",
        Some(solve.to_string().as_bytes()),
    )
    .await;
    server
        .wait_metric("remat_workers_busy", 1.0, Duration::from_secs(30))
        .await;
    let mut idle = Vec::new();
    for _ in 0..20 {
        idle.push(TcpStream::connect(server.addr).await.unwrap());
    }
    let start = Instant::now();
    for _ in 0..5 {
        let health = tokio::time::timeout(Duration::from_secs(5), server.get("/healthz"))
            .await
            .expect("/healthz answers at the cap while 20 idle connections are open");
        assert_eq!(health.status, 200);
    }
    println!("5 × /healthz at the cap in {:?}", start.elapsed());
    assert_closed(
        &mut idle[0],
        1,
        "the oldest idle connection was closed for a new one",
    )
    .await;
    let answer = tokio::time::timeout(Duration::from_secs(30), receive(&mut busy))
        .await
        .expect("the solve answers");
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert!(answer.json()["status"].is_string(), "{}", answer.json());
    server.stop().await.unwrap();
}

/// At the cap the connection idle the longest is closed, not the one opened first: a kept-alive
/// client that has just been answered keeps its connection while one that never spoke loses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_the_connection_idle_the_longest_goes_first() {
    let (server, mut kept, mut silent) = answered_then_silent(3).await;
    assert_eq!(kept_alive_get(&mut kept, "/healthz").await, 200);
    let _other = TcpStream::connect(server.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.get("/healthz").await.status, 200);
    assert_closed(&mut silent, 1, "the connection idle the longest was closed").await;
    assert_eq!(kept_alive_get(&mut kept, "/healthz").await, 200);
    server.stop().await.unwrap();
}

/// A kept-alive client sending its next request's head is active: at the cap the silent
/// connection opened after its last answer goes first, and its request is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_sending_its_head_is_not_the_one_evicted() {
    let (server, mut kept, mut silent) = answered_then_silent(2).await;
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.get("/healthz").await.status, 200);
    assert_closed(&mut silent, 1, "the silent connection was closed").await;
    assert_eq!(kept_alive_get(&mut kept, "").await, 200);
    server.stop().await.unwrap();
}

/// A connection that sent half of its first request's head does not hold the drain: the
/// server stops at once, not after `--grace`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_first_head_does_not_hold_the_shutdown() {
    let server = Server::start(Config {
        grace: 8.0,
        ..Config::default()
    })
    .await;
    let mut half = TcpStream::connect(server.addr).await.unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: loc")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let start = Instant::now();
    server.stop().await.unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

/// A server capped at `cap` connections, a kept-alive connection it has answered, and a
/// connection opened after that answer and left silent.
async fn answered_then_silent(cap: usize) -> (Server, TcpStream, TcpStream) {
    let server = Server::start(Config {
        max_connections: cap,
        ..Config::default()
    })
    .await;
    let mut kept = TcpStream::connect(server.addr).await.unwrap();
    assert_eq!(kept_alive_get(&mut kept, "/healthz").await, 200);
    let silent = TcpStream::connect(server.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    (server, kept, silent)
}

/// Asserts that the server closes `stream` within `secs` seconds (`what` says why it should).
async fn assert_closed(stream: &mut TcpStream, secs: u64, what: &str) {
    let mut buf = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(secs), stream.read(&mut buf))
        .await
        .expect(what);
    assert!(matches!(closed, Ok(0) | Err(_)), "{what}: {closed:?}");
}

/// A GET on a kept-alive connection; its status, the answer read to its `Content-Length`.
/// An empty `path` ends a head begun before.
async fn kept_alive_get(stream: &mut TcpStream, path: &str) -> u16 {
    let head = if path.is_empty() {
        "\r\n".to_string()
    } else {
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n")
    };
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&raw));
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw).to_string();
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length: usize = text[..end]
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .expect("a Content-Length");
        if raw.len() >= end + 4 + length {
            return text[9..12].parse().unwrap();
        }
    }
}

/// A body that stalls holds the only reader's place for `--client-timeout`, then gets 408;
/// the request behind it is read and answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_gets_408_and_the_next_request_is_read() {
    let server = Server::start(quick(Config {
        readers: 1,
        ..Config::default()
    }))
    .await;
    let mut stalled = TcpStream::connect(server.addr).await.unwrap();
    let head = "POST /v1/inspect HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
                Connection: close\r\nContent-Length: 100000\r\n\r\n{\"graph\": ";
    stalled.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let graph = serde_json::to_value(remat::graph::generate::linear(5).to_spec()).unwrap();
    let body = json!({ "graph": graph }).to_string();
    let start = Instant::now();
    let headers = [("Host", "localhost"), ("Content-Type", "application/json")];
    let next = request_with(
        server.addr,
        "POST",
        "/v1/inspect",
        &headers,
        body.as_bytes(),
    )
    .await;
    assert_eq!(next.status, 200, "{}", String::from_utf8_lossy(&next.body));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    server::receive(&mut stalled)
        .await
        .assert_problem(408, "request-timeout");
    server.stop().await.unwrap();
}

/// Clients that send half a body and stop hold every place at the cap, one in the only
/// reader's place and the others waiting for it: `/healthz` still answers within a probe's
/// second (not after the client timeout); the one whose body stalled while read is answered
/// 503 with `Retry-After` and closed, those waiting for the reader's place are left waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_bodies_at_the_cap_do_not_keep_the_probes_out() {
    let server = Server::start(Config {
        readers: 1,
        max_connections: 8,
        client_timeout: 10.0,
        ..Config::default()
    })
    .await;
    let head = "POST /v1/inspect HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
                Content-Length: 100000\r\n\r\n{\"graph\": ";
    let mut stalled = Vec::new();
    for _ in 0..8 {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        stalled.push(stream);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..3 {
        let start = Instant::now();
        let health = tokio::time::timeout(Duration::from_secs(5), server.get("/healthz"))
            .await
            .expect("/healthz answers while stalled bodies hold every place");
        assert_eq!(health.status, 200);
        let waited = start.elapsed();
        println!("/healthz answered after {waited:?}");
        assert!(waited < Duration::from_secs(1), "{waited:?}");
    }
    let first = tokio::time::timeout(Duration::from_secs(5), receive(&mut stalled[0]))
        .await
        .expect("the connection silent the longest is answered");
    assert_eq!(first.header("retry-after"), Some("1"));
    first.assert_problem(503, "busy");
    let mut byte = [0u8; 1];
    let waiting =
        tokio::time::timeout(Duration::from_millis(300), stalled[7].read(&mut byte)).await;
    assert!(
        waiting.is_err(),
        "a request waiting for a reader's place is left waiting: {waiting:?}"
    );
    drop(stalled);
    server.stop().await.unwrap();
}

/// A request's head is at most 64 KiB (`HEAD_BUFFER`): one of 100 KiB gets 431 (hyper's read
/// buffer took heads of up to twice that), one of 60 KiB is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_over_64_kib_gets_431() {
    let server = Server::start(Config::default()).await;
    for (kib, status) in [(60, 200), (100, 431)] {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        let pad = "a".repeat(kib << 10);
        let head = format!("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Pad: {pad}\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = [0u8; 12];
        stream.read_exact(&mut answer).await.unwrap();
        let line = String::from_utf8_lossy(&answer).to_string();
        assert_eq!(
            line[9..12].parse::<u16>().unwrap(),
            status,
            "{kib} KiB: {line}"
        );
    }
    server.stop().await.unwrap();
}

/// A client's `x-request-id` is echoed (and logged) when it is 1 to 128 visible ASCII
/// characters; otherwise (kilobytes of it, spaces, bytes that are not ASCII) a new UUID
/// takes its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_is_echoed_only_when_readable() {
    let server = Server::start(Config::default()).await;
    let long = "a".repeat(300);
    for (id, kept) in [
        (&b"job-7:step-42"[..], true),
        (long.as_bytes(), false),
        (&b"a b"[..], false),
        (&b"\xff\xfe"[..], false),
    ] {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        let mut head =
            b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-Request-Id: "
                .to_vec();
        head.extend_from_slice(id);
        head.extend_from_slice(b"\r\n\r\n");
        stream.write_all(&head).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let echoed = answer
            .split(|&b| b == b'\n')
            .find_map(|l| l.strip_prefix(b"x-request-id: "))
            .map(|v| v.trim_ascii().to_vec())
            .expect("an x-request-id");
        if kept {
            assert_eq!(echoed, id);
        } else {
            assert_eq!(echoed.len(), 36, "{}", String::from_utf8_lossy(&echoed));
        }
    }
    server.stop().await.unwrap();
}

/// A method no one defined gets 405 and counts under `method="other"`: a client cannot grow
/// `/metrics` with one series per method it makes up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_methods_share_one_metrics_label() {
    let server = Server::start(Config::default()).await;
    for i in 0..20 {
        let reply = request_with(
            server.addr,
            &format!("MADEUP{i}"),
            "/healthz",
            &[("Host", "localhost")],
            b"",
        )
        .await;
        assert_eq!(reply.status, 405);
    }
    let metrics = String::from_utf8(server.get("/metrics").await.body).unwrap();
    assert!(!metrics.contains("MADEUP"), "a label per made-up method");
    assert!(metrics.contains("method=\"other\""), "{metrics}");
    server.stop().await.unwrap();
}

/// `Accept-Encoding: identity;q=0` without gzip: the answer is sent uncompressed, not
/// computed and then answered 406; and the page may not be framed by another site.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_identity_is_served_anyway_and_the_page_is_not_framed() {
    let server = Server::start(Config::default()).await;
    let refuse = [("Host", "localhost"), ("Accept-Encoding", "identity;q=0")];
    assert_eq!(
        request_with(server.addr, "GET", "/healthz", &refuse, b"")
            .await
            .status,
        200
    );
    let star = [("Host", "localhost"), ("Accept-Encoding", "br, *;q=0")];
    assert_eq!(
        request_with(server.addr, "GET", "/healthz", &star, b"")
            .await
            .status,
        200
    );
    let page = server.get("/").await;
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert!(page
        .header("content-security-policy")
        .unwrap()
        .contains("frame-ancestors 'none'"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    server.stop().await.unwrap();
}
