//! Issue 26, items 2 and 3 (the HTTP part), on a real `remat serve` over loopback:
//!
//! * large bodies are read within the limits, not built: a body of millions of `{}` nodes
//!   is refused naming `--max-nodes` before its nodes are built, and a solve whose `meta`
//!   is a long array is answered without reading it, each with the server's peak memory
//!   (`VmHWM`) growing by a small multiple of the body (today's main built a
//!   `serde_json::Value` of the whole body first: 32 bytes per JSON value);
//! * bodies are read off the async runtime: `/healthz` answers within a second while two
//!   large inspects are read;
//! * a client that leaves while its body is read starts no solve;
//! * a synchronous solve's time limit counts from the request's receipt and covers reading
//!   its graph: a graph still being read at the limit is a 504 that says so (on main the
//!   reader had no deadline and the whole graph was read, built and replayed first);
//! * SIGTERM: the process exits within `--grace` + 1 s even with a solve in flight and a
//!   client stalled in the middle of its upload;
//! * a finished job's large result is served off the async threads: `/healthz` answers
//!   within a second while eight clients fetch it at once (on main, `GET /v1/jobs/{id}`
//!   copied and serialised the result on the async threads).
//!
//! Scale: a 22 MB body of 8 M `{}` nodes and a 45 MB solve with two 12 M-number `meta`
//! arrays (the issue's are 60-62 MB under a 64 MiB `--max-body`, three at once),
//! 200,000-node inspects (the issue's are 1,000,000), a 1 s grace (the issue's is 5 s with a
//! 100,000-node solve), a job result of 400,002 events (the issue's is a 1,000,001-node
//! chain's). The full-size figures, measured by hand on a release build, are in
//! docs/performance.md.

use crate::server;

use serde_json::{json, Value};
use server::{long_graph, long_solve, send, Process, Server};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const MB: u64 = 1 << 20;

/// A server process with its peak memory (kB) once it is up and idle.
fn start(args: &[&str]) -> (Process, u64) {
    let (process, _) = Process::start(env!("CARGO_BIN_EXE_remat"), args, None);
    std::thread::sleep(Duration::from_millis(200));
    let idle = process.status_kib("VmHWM:");
    (process, idle)
}

async fn post(process: &Process, path: &str, body: &[u8]) -> server::Reply {
    server::request(process.addr, "POST", path, Some(body)).await
}

/// `{"graph": {"nodes": [{}, {}, ...]}}` with `n` empty nodes (3 bytes each).
fn empty_nodes(n: usize) -> String {
    let mut body = String::with_capacity(3 * n + 32);
    body.push_str(r#"{"graph": {"nodes": ["#);
    body.push_str(&vec!["{}"; n].join(","));
    body.push_str("]}}");
    body
}

fn linear(n: usize) -> Value {
    serde_json::to_value(remat::graph::generate::linear(n).to_spec()).unwrap()
}

/// The slowest of the `/healthz` answers polled every 100 ms until every one of `tasks` has
/// finished (each must be 200).
async fn slowest_healthz<T>(server: &Server, tasks: &[tokio::task::JoinHandle<T>]) -> Duration {
    let mut worst = Duration::ZERO;
    while !tasks.iter().all(|h| h.is_finished()) {
        let start = Instant::now();
        assert_eq!(server.get("/healthz").await.status, 200);
        worst = worst.max(start.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    worst
}

/// The growth of the server's peak memory since `idle`, in MB.
fn growth_mb(process: &Process, idle: u64) -> u64 {
    (process.status_kib("VmHWM:").saturating_sub(idle)) / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn millions_of_empty_nodes_are_refused_before_they_are_built() {
    let (process, idle) = start(&["--workers", "1"]);
    let body = empty_nodes(8_000_000);
    let size = body.len() as u64 / MB;
    let reply = post(&process, "/v1/inspect", body.as_bytes()).await;
    let p = reply.assert_problem(413, "too-large");
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("more than 1000000 nodes") && detail.contains("--max-nodes"),
        "{detail}"
    );
    let grown = growth_mb(&process, idle);
    eprintln!("{size} MB of {{}} nodes: peak memory grew by {grown} MB");
    // The body, its copy while it is collected, 16 bytes per node counted: about 3x the
    // body. Building it (main) took over 10x.
    assert!(
        grown < 4 * size,
        "peak memory grew by {grown} MB for a {size} MB body"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_meta_array_is_not_read() {
    let (process, idle) = start(&["--workers", "1"]);
    let mut graph = linear(5);
    let zeros = vec!["0"; 12_000_000].join(",");
    graph["meta"] = json!("PLACEHOLDER");
    graph["nodes"][0]["meta"] = json!("PLACEHOLDER");
    let body = json!({"graph": graph, "budget": "80%", "solver": "chen-sqrt", "meta": 1})
        .to_string()
        .replacen("\"PLACEHOLDER\"", &format!("[{zeros}]"), 2);
    let size = body.len() as u64 / MB;
    let reply = post(&process, "/v1/solve", body.as_bytes()).await;
    // `meta` is not a field of a request: named, after the graph was read.
    let p = reply.assert_problem(422, "invalid-request");
    assert_eq!(p["field"], "meta", "{p}");
    let body = body.replacen(r#","meta":1"#, "", 1);
    let reply = post(&process, "/v1/solve", body.as_bytes()).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body[..reply.body.len().min(400)])
    );
    let grown = growth_mb(&process, idle);
    eprintln!("{size} MB solve with two long `meta`: peak memory grew by {grown} MB");
    assert!(
        grown < 4 * size,
        "peak memory grew by {grown} MB for a {size} MB body"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_two_large_inspects_are_read() {
    let server = Server::start(server::config(1, 1)).await;
    let nodes: Vec<Value> = (0..200_000)
        .map(|i| {
            let inputs = if i == 0 {
                vec![]
            } else {
                vec![format!("v{}", i - 1)]
            };
            json!({"id": format!("v{i}"), "cost": 1, "memory": 1, "inputs": inputs})
        })
        .collect();
    let body = json!({"graph": {"nodes": nodes}}).to_string();
    let addr = server.addr;
    let inspects: Vec<_> = (0..2)
        .map(|_| {
            let body = body.clone();
            tokio::spawn(async move {
                let start = Instant::now();
                let r = server::request(addr, "POST", "/v1/inspect", Some(body.as_bytes())).await;
                (r.status, start.elapsed())
            })
        })
        .collect();
    let worst = slowest_healthz(&server, &inspects).await;
    for h in inspects {
        let (status, took) = h.await.unwrap();
        assert_eq!(status, 200);
        eprintln!("a 200,000-node inspect took {took:?}");
    }
    eprintln!("slowest /healthz during two inspects: {worst:?}");
    assert!(worst < Duration::from_secs(1), "/healthz took {worst:?}");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_while_its_body_is_read_starts_no_solve() {
    let server = Server::start(server::config(1, 1)).await;
    let body =
        json!({"graph": long_graph(200_000), "budget": "70%", "solver": "chen-greedy"}).to_string();
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    send(&mut stream, "POST", "/v1/solve", Some(body.as_bytes())).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(stream);
    // Long enough for the body to be read and a solve to start, had it been.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let solves = server.metric("remat_solves_total").await;
    let cancelled = server.metric("remat_cancelled_total").await;
    assert_eq!((solves, cancelled), (0.0, 0.0), "a solve started");
    assert_eq!(server.metric("remat_workers_busy").await, 0.0);
    server.stop().await.unwrap();
}

#[test]
fn sigterm_exits_within_the_grace_with_a_solve_in_flight_and_a_stalled_upload() {
    let grace = 1.0;
    let (mut process, _) = start(&["--workers", "1", "--grace", "1"]);
    let addr = process.addr;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let body = long_solve(2_000, 30).to_string();
    let (_solve, _stalled) = rt.block_on(async {
        let mut solve = TcpStream::connect(addr).await.unwrap();
        send(&mut solve, "POST", "/v1/solve", Some(body.as_bytes())).await;
        let start = Instant::now();
        while server::request(addr, "GET", "/metrics", None)
            .await
            .body
            .windows(20)
            .all(|w| w != b"remat_workers_busy 1")
        {
            assert!(start.elapsed() < Duration::from_secs(30), "no solve started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // A client that sends 10 bytes of a 1,000-byte body and then nothing.
        let mut stalled = TcpStream::connect(addr).await.unwrap();
        let head = "POST /v1/inspect HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"graph\": ";
        stalled.write_all(head.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        (solve, stalled)
    });
    let sent = Instant::now();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &process.pid().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let exited = loop {
        if !process.alive() {
            break sent.elapsed();
        }
        assert!(
            sent.elapsed() < Duration::from_secs(30),
            "still running 30 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!("exited {exited:?} after SIGTERM with --grace {grace}");
    assert!(
        exited < Duration::from_secs_f64(grace + 1.0),
        "exited {exited:?} after SIGTERM, over --grace {grace} + 1 s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_solve_stops_reading_its_graph_at_its_time_limit() {
    let server = Server::start(server::config(1, 1)).await;
    let body = json!({
        "graph": long_graph(100_000),
        "budget": "80%",
        "solver": "checkpoint-all",
        "time_limit_s": 0.001,
    });
    let started = Instant::now();
    let reply = server.post("/v1/solve", &body).await;
    let text = String::from_utf8_lossy(&reply.body).to_string();
    assert_eq!(reply.status, 504, "{text}");
    assert!(text.contains("while reading the graph"), "{text}");
    eprintln!("answered in {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_a_large_job_result_is_fetched() {
    let server = Server::start(server::config(1, 1)).await;
    let body = json!({
        "graph": linear(100_000),
        "budget": "100%",
        "solver": "checkpoint-all",
        "time_limit_s": 300,
    });
    let created = server.post("/v1/jobs", &body).await;
    assert_eq!(created.status, 202);
    let path = format!("/v1/jobs/{}", created.json()["id"].as_str().unwrap());
    let started = Instant::now();
    loop {
        let job = server.get(&path).await.json();
        match job["status"].as_str() {
            Some("succeeded") => break,
            Some("queued" | "running") => {}
            other => panic!("the job ended {other:?}: {job}"),
        }
        assert!(started.elapsed() < Duration::from_secs(240), "no result");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let addr = server.addr;
    let fetches: Vec<_> = (0..8)
        .map(|_| {
            let path = path.clone();
            tokio::spawn(async move { server::request(addr, "GET", &path, None).await })
        })
        .collect();
    let worst = slowest_healthz(&server, &fetches).await;
    for h in fetches {
        let reply = h.await.unwrap();
        assert_eq!(reply.status, 200);
        let events = reply.json()["result"]["schedule"]["events"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(
            events, 400_002,
            "checkpoint-all computes and frees every node"
        );
    }
    eprintln!("slowest /healthz while eight clients fetched the job: {worst:?}");
    assert!(worst < Duration::from_secs(1), "/healthz took {worst:?}");
    server.stop().await.unwrap();
}

/// A body whose Content-Length is over `--max-body` is refused at once (413), before it
/// waits for a reader's place: it held the only place, or waited for one, until
/// `--client-timeout` and then got 408.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_announced_over_the_limit_is_refused_at_once() {
    let server = Server::start(remat::service::Config {
        max_body: 1 << 20,
        client_timeout: 20.0,
        ..server::config(1, 1)
    })
    .await;
    // The one reader's place held by a client that sends part of a body and stalls.
    let mut stalled = TcpStream::connect(server.addr).await.unwrap();
    let head = "POST /v1/inspect HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"graph\": ";
    stalled.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut big = TcpStream::connect(server.addr).await.unwrap();
    let head = "POST /v1/solve HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 99999999999999\r\n\r\n{";
    big.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let reply = tokio::time::timeout(Duration::from_secs(10), server::receive(&mut big))
        .await
        .expect("an answer before the client timeout");
    let p = reply.assert_problem(413, "too-large");
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("Content-Length is 99999999999999"),
        "{detail}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(stalled);
    server.stop().await.unwrap();
}
