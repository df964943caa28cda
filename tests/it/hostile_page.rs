//! The service against a web page of another origin in the browser of whoever runs it
//! (issue 26, item 5), over loopback with hand-written requests: a `no-cors` POST of a
//! `text/plain` body used to queue a job (202), a rebound name reached every endpoint, and
//! any `Origin` was answered. Now a POST body must be declared JSON (415), `Host` must
//! name this server (403) and `Origin`, when sent, must be the server's own or a
//! configured one (403); the configured ones get CORS headers.

use crate::server;

use serde_json::{json, Value};
use server::{config, request_with, Reply, Server};

fn job_body() -> Vec<u8> {
    let graph = serde_json::to_value(remat::graph::generate::linear(3).to_spec()).unwrap();
    json!({"graph": graph, "budget": "100%", "solver": "checkpoint-all"})
        .to_string()
        .into_bytes()
}

async fn jobs_created(server: &Server) -> f64 {
    server
        .metric("remat_http_requests_total{method=\"POST\",route=\"/v1/jobs\",status=\"202\"}")
        .await
}

fn problem(reply: &Reply, status: u16, slug: &str, mentions: &str) -> Value {
    let p = reply.assert_problem(status, slug);
    assert!(p["detail"].as_str().unwrap().contains(mentions), "{p}");
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_origin_is_refused_and_the_servers_own_clients_are_not() {
    let server = Server::start(config(1, 4)).await;
    let addr = server.addr;
    let own = addr.to_string();
    let body = job_body();
    let json = ("Content-Type", "application/json");

    // The no-cors POST a page can send without a preflight: a foreign Origin is refused
    // first; without it (a rebinding page's same-origin request, curl) a body not declared
    // JSON is refused: text/plain, a form, or no type at all.
    let headers = [
        ("Host", own.as_str()),
        ("Origin", "http://evil.example"),
        ("Content-Type", "text/plain;charset=UTF-8"),
    ];
    let reply = request_with(addr, "POST", "/v1/jobs", &headers, &body).await;
    problem(&reply, 403, "forbidden", "evil.example");
    for media in [
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut headers = vec![("Host", own.as_str())];
        headers.extend(media.map(|m| ("Content-Type", m)));
        let reply = request_with(addr, "POST", "/v1/jobs", &headers, &body).await;
        problem(&reply, 415, "unsupported-media-type", "application/json");
    }
    // A compressed body would be read as malformed JSON: 415 naming the coding.
    let headers = [("Host", own.as_str()), json, ("Content-Encoding", "gzip")];
    let reply = request_with(addr, "POST", "/v1/jobs", &headers, &body).await;
    problem(
        &reply,
        415,
        "unsupported-media-type",
        "Content-Encoding: gzip",
    );
    assert_eq!(
        jobs_created(&server).await,
        0.0,
        "a refused request queued a job"
    );

    // DNS rebinding: the page's own name in Host, for reading as for writing.
    for (method, path) in [
        ("GET", "/v1/solvers"),
        ("POST", "/v1/jobs"),
        ("GET", "/healthz"),
    ] {
        let headers = [("Host", "rebound.example:8080"), json];
        let reply = request_with(addr, method, path, &headers, &body).await;
        problem(&reply, 403, "forbidden", "rebound.example");
    }
    // A foreign Origin is refused on reads too.
    let headers = [("Host", own.as_str()), ("Origin", "http://evil.example")];
    let reply = request_with(addr, "GET", "/v1/solvers", &headers, b"").await;
    problem(&reply, 403, "forbidden", "Origin");

    // What still works: the page at `/` (same origin), curl and the Python client (no
    // Origin), by address or as localhost, JSON with a charset.
    let page = request_with(addr, "GET", "/", &[("Host", own.as_str())], b"").await;
    assert_eq!(page.status, 200);
    let own_origin = format!("http://{own}");
    for headers in [
        vec![
            ("Host", own.as_str()),
            ("Origin", own_origin.as_str()),
            json,
        ],
        vec![("Host", own.as_str()), json],
        vec![
            ("Host", "localhost:8080"),
            ("Content-Type", "application/json; charset=utf-8"),
        ],
    ] {
        let reply = request_with(addr, "POST", "/v1/jobs", &headers, &body).await;
        assert_eq!(
            reply.status,
            202,
            "{headers:?}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert!(reply.header("access-control-allow-origin").is_none());
    }
    assert_eq!(jobs_created(&server).await, 3.0);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_hosts_and_origins_are_answered_with_cors_headers() {
    let server = Server::start(remat::service::Config {
        allowed_hosts: vec!["remat.internal".into()],
        allowed_origins: vec!["https://app.example".into()],
        ..config(1, 4)
    })
    .await;
    let addr = server.addr;
    let origin = ("Origin", "https://app.example");
    let host = ("Host", "remat.internal:8080");
    // The browser's preflight, then the request it allows.
    let preflight = request_with(
        addr,
        "OPTIONS",
        "/v1/jobs",
        &[
            host,
            origin,
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type"),
        ],
        b"",
    )
    .await;
    assert!(preflight.status < 300, "{preflight:?}");
    assert_eq!(
        preflight.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    let reply = request_with(
        addr,
        "POST",
        "/v1/jobs",
        &[host, origin, ("Content-Type", "application/json")],
        &job_body(),
    )
    .await;
    assert_eq!(
        reply.status,
        202,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    // Other origins and hosts are still refused.
    let refused = request_with(
        addr,
        "GET",
        "/v1/solvers",
        &[host, ("Origin", "https://evil.example")],
        b"",
    )
    .await;
    problem(&refused, 403, "forbidden", "evil.example");
    let refused = request_with(
        addr,
        "GET",
        "/v1/solvers",
        &[("Host", "evil.example"), origin],
        b"",
    )
    .await;
    problem(&refused, 403, "forbidden", "evil.example");
    server.stop().await.unwrap();
}
