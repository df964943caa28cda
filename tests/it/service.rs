//! The real server on a loopback port, exercised over HTTP: every endpoint, every error
//! class, the queue, cancellation, the cache and graceful shutdown.

use crate::server;

use remat::budget::Budget;
use remat::graph::load::{graph_from_value, Format};
use remat::schedule::checkpoint_all_peak;
use remat::solve::{self, Instance, SolveOptions};
use serde_json::{json, Value};
use server::{config, fixture, long_solve, receive, request, send, Server};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// Checkmate's linear graph with 5 layers: 11 nodes, within the exhaustive oracle's reach.
/// Tests that run a long solve take turns, so that their timings do not depend on each other.
static LONG_SOLVES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn linear5() -> Value {
    serde_json::to_value(remat::graph::generate::linear(5).to_spec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solve_matches_the_library_and_repeats_hit_the_cache() {
    let server = Server::start(config(2, 4)).await;
    let body = json!({"graph": linear5(), "budget": "70%", "solver": "exhaustive"});
    let first = server.post("/v1/solve", &body).await;
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    assert_eq!(first.header("x-cache"), Some("miss"));
    assert!(first.header("x-request-id").is_some());
    let got = first.json();

    let graph = graph_from_value(&linear5(), Format::Auto).unwrap();
    let budget = Budget::OfPeak(0.7).resolve(&graph).unwrap();
    let instance = Instance {
        graph: &graph,
        budget,
    };
    let want = solve::solve(&instance, "exhaustive", &SolveOptions::default()).unwrap();
    let want = serde_json::to_value(&want).unwrap();
    for field in [
        "status",
        "solver",
        "scope",
        "budget",
        "schedule",
        "stats",
        "lower_bound",
    ] {
        assert_eq!(got[field], want[field], "field {field}");
    }

    let again = server.post("/solve", &body).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.header("x-cache"), Some("hit"));
    assert_eq!(again.json(), got);
    assert_eq!(server.metric("remat_cache_hits_total").await, 1.0);

    // The same graph in node-link form is the same instance: a cache hit too.
    let spec = &linear5()["nodes"];
    let nodes: Vec<Value> = spec
        .as_array()
        .unwrap()
        .iter()
        .map(
            |n| json!({"id": n["id"], "cost_cpu": n["cost"], "cost_ram": n["memory"], "backward": n["kind"] != "forward"}),
        )
        .collect();
    let links: Vec<Value> = spec
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| {
            n["inputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| json!({"source": i, "target": n["id"]}))
                .collect::<Vec<_>>()
        })
        .collect();
    let node_link =
        json!({"directed": true, "graph": {"name": "linear-5"}, "nodes": nodes, "links": links});
    let third = server
        .post(
            "/v1/solve",
            &json!({"graph": node_link, "budget": budget, "solver": "exhaustive"}),
        )
        .await;
    assert_eq!(
        third.status,
        200,
        "{}",
        String::from_utf8_lossy(&third.body)
    );
    assert_eq!(third.json()["stats"], got["stats"]);
    server.stop().await.unwrap();
}

/// A storage tier given beside the graph reaches `two-level` (as `--storage` does), is part
/// of the cache key, and a bad one is a 422 naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_level_storage_tier_reaches_the_solver_and_the_cache_key() {
    let server = Server::start(config(2, 4)).await;
    let graph = serde_json::to_value(remat::graph::generate::linear(40).to_spec()).unwrap();
    let without = json!({"graph": graph, "budget": 6, "solver": "two-level"});
    let mut with = without.clone();
    with["storage"] = json!({"transfer_time": 4});

    let plain = server.post("/v1/solve", &without).await;
    assert_eq!(plain.status, 422, "two-level without a tier");
    assert!(plain.json()["detail"].as_str().unwrap().contains("storage"));

    let tiered = server.post("/v1/solve", &with).await;
    assert_eq!(
        tiered.status,
        200,
        "{}",
        String::from_utf8_lossy(&tiered.body)
    );
    assert_eq!(tiered.header("x-cache"), Some("miss"));
    let tiers = &tiered.json()["stats"]["tiers"];
    assert!(tiers["stores"].as_u64().unwrap() > 0, "{tiers}");
    assert_eq!(tiers["stall_time"], 0.0);
    // The same tier inside the graph is the same instance.
    let mut inside = without.clone();
    inside["graph"]["storage"] = json!({"transfer_time": 4});
    let again = server.post("/v1/solve", &inside).await;
    assert_eq!(again.header("x-cache"), Some("hit"));
    assert_eq!(again.json()["stats"], tiered.json()["stats"]);

    // A faster tier is another instance: it stores every 2nd state instead of every 4th.
    let mut faster = with.clone();
    faster["storage"] = json!({"transfer_time": 2});
    let fast = server.post("/v1/solve", &faster).await;
    assert_eq!(
        fast.header("x-cache"),
        Some("miss"),
        "the tier is in the key"
    );
    assert!(
        fast.json()["stats"]["tiers"]["stores"].as_u64() > tiers["stores"].as_u64(),
        "{} vs {tiers}",
        fast.json()["stats"]["tiers"]
    );

    let mut bad = without.clone();
    bad["storage"] = json!({"transfer_time": -1});
    let rejected = server.post("/v1/solve", &bad).await;
    assert_eq!(rejected.status, 422);
    let problem = rejected.json();
    assert!(
        problem.to_string().contains("storage"),
        "the problem names the field: {problem}"
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_class_is_a_problem_document() {
    let server = Server::start(remat::service::Config {
        max_body: 64 << 10,
        ..config(1, 1)
    })
    .await;
    let bad_json = request(server.addr, "POST", "/v1/solve", Some(b"{\"graph\": ")).await;
    let p = bad_json.assert_problem(400, "bad-json");
    assert!(p["detail"].as_str().unwrap().contains("line 1"), "{p}");

    let big = vec![b' '; 100 << 10];
    request(server.addr, "POST", "/v1/solve", Some(&big))
        .await
        .assert_problem(413, "too-large");

    let cyclic = json!({"nodes": [
        {"id": "a", "cost": 1, "memory": 1, "inputs": ["b"]},
        {"id": "b", "cost": -1, "memory": 1, "inputs": ["a"]},
        {"id": "c", "cost": 1, "memory": 1, "inputs": ["nope"]}]});
    let p = server
        .post("/v1/solve", &json!({"graph": cyclic, "budget": 10}))
        .await
        .assert_problem(422, "invalid-graph");
    let problems = p["problems"].as_array().unwrap();
    let has = |kind: &str, node: &str| {
        problems
            .iter()
            .any(|q| q["kind"] == kind && q["node"] == node)
    };
    assert!(has("invalid_cost", "b") && has("unknown_input", "c"), "{p}");

    let p = server
        .post(
            "/v1/solve",
            &json!({"graph": linear5(), "budget": "12 parsecs"}),
        )
        .await
        .assert_problem(422, "invalid-budget");
    assert_eq!(p["field"], "budget");
    assert!(p["detail"].as_str().unwrap().contains("12 parsecs"));

    let p = server
        .post("/v1/solve", &json!({"graph": linear5(), "budget": 2}))
        .await;
    assert_eq!(
        p.status, 200,
        "an infeasible budget is an answer, not an error"
    );
    assert_eq!(p.json()["status"], "infeasible");

    // (body, problem type, the field it names)
    let cases = [
        (
            json!({"graph": linear5(), "budget": "80%", "solver": "magic"}),
            "invalid-solver",
            "solver",
        ),
        (
            json!({"graph": linear5(), "budget": "80%", "time_limt_s": 3}),
            "invalid-request",
            "time_limt_s",
        ),
        (json!({"graph": linear5()}), "invalid-request", "budget"),
        (
            json!({"graph": linear5(), "budget": "80%", "time_limit_s": -1}),
            "invalid-request",
            "time_limit_s",
        ),
        (
            json!({"graph": linear5(), "budget": "80%", "seed": "x"}),
            "invalid-request",
            "seed",
        ),
        (
            json!({"graph": linear5(), "budget": "80%", "format": "yaml"}),
            "invalid-request",
            "format",
        ),
        (json!({"budget": "80%"}), "invalid-request", "graph"),
        (
            json!({"graph": [], "budget": "80%"}),
            "invalid-graph",
            "graph",
        ),
    ];
    for (body, slug, field) in cases {
        let p = server
            .post("/v1/solve", &body)
            .await
            .assert_problem(422, slug);
        assert_eq!(p["field"], field, "{body}");
    }
    // A misspelt required field is named; a request body has no `meta` to suggest.
    let detail = |p: Value| p["detail"].as_str().unwrap().to_string();
    let p = server
        .post("/v1/solve", &json!({"graph": linear5(), "budgte": 8}))
        .await
        .assert_problem(422, "invalid-request");
    assert!(detail(p).contains("did you mean `budget` for `budgte`?"));
    let p = server
        .post(
            "/v1/solve",
            &json!({"graph": linear5(), "budget": 8, "meta": {}}),
        )
        .await
        .assert_problem(422, "invalid-request");
    assert!(
        !detail(p).contains("put extra metadata"),
        "a body has no `meta`"
    );
    let p = server
        .post("/v1/solve", &json!({"graph": linear5(), "budget": true}))
        .await
        .assert_problem(422, "invalid-budget");
    assert!(detail(p).contains("expected a budget: a number of bytes"));
    let p = server
        .post(
            "/v1/plot/tradeoff",
            &json!({"graph": linear5(), "solvers": []}),
        )
        .await
        .assert_problem(422, "invalid-request");
    assert_eq!(p["field"], "solvers");
    request(server.addr, "POST", "/v1/solve", Some(b"[1, 2]"))
        .await
        .assert_problem(422, "invalid-request");

    // 1e-300 s is valid (greater than 0) though no clock counts it: the same 504.
    for time_limit in [1e-6, 1e-300] {
        let p = server
            .post(
                "/v1/solve",
                &json!({"graph": fixture("dag12.json"), "budget": 35, "solver": "exhaustive", "time_limit_s": time_limit}),
            )
            .await
            .assert_problem(504, "time-limit");
        assert_eq!(p["result"]["status"], "no_solution");
    }

    server
        .get("/v2/nothing")
        .await
        .assert_problem(404, "not-found");
    server
        .get("/v1/jobs/0123")
        .await
        .assert_problem(404, "not-found");
    server
        .get("/v1/solve")
        .await
        .assert_problem(405, "method-not-allowed");
    server.stop().await.unwrap();
}

/// Sends a solve that runs for `seconds` on a raw connection and waits until a worker runs
/// it. Dropping the stream disconnects.
async fn start_long_solve(server: &Server, seconds: u32) -> TcpStream {
    let long = long_solve(2_000, seconds);
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    send(
        &mut stream,
        "POST",
        "/v1/solve",
        Some(long.to_string().as_bytes()),
    )
    .await;
    server
        .wait_metric("remat_workers_busy", 1.0, Duration::from_secs(30))
        .await;
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_answers_503_with_retry_after() {
    let _turn = LONG_SOLVES.lock().await;
    let server = Server::start(config(1, 0)).await;
    let stream = start_long_solve(&server, 30).await;
    let refused = server
        .post("/v1/solve", &json!({"graph": linear5(), "budget": "80%"}))
        .await;
    refused.assert_problem(503, "busy");
    assert_eq!(refused.header("retry-after"), Some("1"));
    server.get("/readyz").await.assert_problem(503, "busy");
    assert_eq!(server.get("/healthz").await.status, 200);
    assert_eq!(server.metric("remat_rejected_total").await, 1.0);
    drop(stream);
    server
        .wait_metric("remat_workers_busy", 0.0, Duration::from_secs(2))
        .await;
    assert_eq!(server.get("/readyz").await.status, 200);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_cancels_the_solve_and_frees_the_worker_within_a_second() {
    let _turn = LONG_SOLVES.lock().await;
    let server = Server::start(config(1, 2)).await;
    let stream = start_long_solve(&server, 30).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(stream);
    let freed = server
        .wait_metric("remat_workers_busy", 0.0, Duration::from_secs(1))
        .await;
    println!("worker free {freed:?} after the disconnect");
    assert_eq!(server.metric("remat_cancelled_total").await, 1.0);
    // The worker takes new work.
    let ok = server
        .post("/v1/solve", &json!({"graph": linear5(), "budget": "80%"}))
        .await;
    assert_eq!(ok.status, 200);
    server.stop().await.unwrap();
}

/// A job deleted while it waits for a worker gives its queue slot back at once: `/readyz`
/// and new work see the room, not after the running solve ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_deleted_while_queued_frees_its_slot_at_once() {
    let _turn = LONG_SOLVES.lock().await;
    let server = Server::start(config(1, 1)).await;
    let stream = start_long_solve(&server, 30).await;
    let queued = server
        .post("/v1/jobs", &json!({"graph": linear5(), "budget": "80%"}))
        .await;
    assert_eq!(queued.status, 202);
    let id = queued.json()["id"].as_str().unwrap().to_string();
    server
        .wait_metric("remat_queue_depth", 1.0, Duration::from_secs(5))
        .await;
    server.get("/readyz").await.assert_problem(503, "busy");
    let deleted = request(server.addr, "DELETE", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(deleted.json()["status"], "cancelled");
    server
        .wait_metric("remat_queue_depth", 0.0, Duration::from_millis(500))
        .await;
    assert_eq!(server.get("/readyz").await.status, 200);
    assert_eq!(
        server.metric("remat_workers_busy").await,
        1.0,
        "the long solve still runs"
    );
    drop(stream);
    server.stop().await.unwrap();
}

async fn wait_job(server: &Server, id: &str, status: &str) -> Value {
    let start = Instant::now();
    loop {
        let job = server.get(&format!("/v1/jobs/{id}")).await.json();
        if job["status"] == status {
            return job;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{job}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_report_progress_results_and_can_be_cancelled() {
    let _turn = LONG_SOLVES.lock().await;
    let server = Server::start(config(1, 2)).await;
    let created = server
        .post(
            "/v1/jobs",
            &json!({"graph": linear5(), "budget": "70%", "solver": "exhaustive"}),
        )
        .await;
    assert_eq!(created.status, 202);
    let id = created.json()["id"].as_str().unwrap().to_string();
    assert_eq!(created.header("location"), Some(&*format!("/v1/jobs/{id}")));
    let done = wait_job(&server, &id, "succeeded").await;
    assert_eq!(done["result"]["status"], "optimal");
    assert_eq!(
        request(server.addr, "DELETE", &format!("/v1/jobs/{id}"), None)
            .await
            .status,
        204,
        "deleting a finished job removes it"
    );
    assert_eq!(server.get(&format!("/v1/jobs/{id}")).await.status, 404);

    let long = long_solve(2_000, 30);
    let id = server.post("/v1/jobs", &long).await.json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let running = wait_job(&server, &id, "running").await;
    let start = Instant::now();
    while server.get(&format!("/v1/jobs/{id}")).await.json()["progress"].is_null() {
        assert!(start.elapsed() < Duration::from_secs(30), "{running}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancelled = request(server.addr, "DELETE", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(cancelled.status, 200);
    assert_eq!(cancelled.json()["status"], "cancelled");
    server
        .wait_metric("remat_workers_busy", 0.0, Duration::from_secs(1))
        .await;
    assert_eq!(
        server.get(&format!("/v1/jobs/{id}")).await.json()["status"],
        "cancelled"
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_inspect_sweep_solvers_health_metrics_and_openapi() {
    let server = Server::start(config(2, 4)).await;
    let solved = server
        .post("/v1/solve", &json!({"graph": linear5(), "budget": "60%"}))
        .await
        .json();
    let sim = server
        .post(
            "/v1/simulate",
            &json!({"graph": linear5(), "schedule": solved.clone(), "budget": "60%"}),
        )
        .await;
    assert_eq!(sim.status, 200);
    let sim = sim.json();
    assert_eq!(sim["valid"], true);
    assert_eq!(sim["fits_budget"], true);
    assert_eq!(sim["stats"], solved["stats"]);

    let bad = json!([{"op": "free", "node": "0"}]);
    let p = server
        .post(
            "/v1/simulate",
            &json!({"graph": linear5(), "schedule": bad}),
        )
        .await
        .assert_problem(422, "invalid-schedule");
    assert_eq!(p["schedule_error"]["event"], 0);
    assert_eq!(p["schedule_error"]["node"], "0");

    let graph = graph_from_value(&linear5(), Format::Auto).unwrap();
    let info = server
        .post("/v1/inspect", &json!({"graph": linear5()}))
        .await
        .json();
    assert_eq!(info["checkpoint_all_peak"], checkpoint_all_peak(&graph));
    assert_eq!(info["nodes"], graph.len());

    let sweep = server
        .post(
            "/v1/sweep",
            &json!({"graph": linear5(), "budgets": ["100%", "70%", "50%", 2], "solver": "exhaustive"}),
        )
        .await;
    assert_eq!(sweep.status, 200);
    let results = sweep.json()["results"].as_array().unwrap().clone();
    assert_eq!(results.len(), 4);
    let costs: Vec<f64> = results[..3]
        .iter()
        .map(|r| r["stats"]["total_cost"].as_f64().unwrap())
        .collect();
    assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{costs:?}");
    assert_eq!(results[3]["status"], "infeasible");

    let solvers = server.get("/v1/solvers").await.json();
    let names: Vec<&str> = solvers["solvers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    let want: Vec<&str> = solve::registry().iter().map(|s| s.info().name).collect();
    assert_eq!(names, want);

    assert_eq!(server.get("/healthz").await.json()["status"], "ok");
    assert_eq!(server.get("/readyz").await.json()["status"], "ready");
    let metrics = String::from_utf8(server.get("/metrics").await.body).unwrap();
    for needle in [
        "remat_http_requests_total{method=\"POST\",route=\"/v1/solve\",status=\"200\"} 1",
        "remat_http_request_duration_seconds_bucket{route=\"/v1/sweep\",le=\"+Inf\"} 1",
        "remat_solves_total{solver=\"exhaustive\",status=\"optimal\"}",
        "remat_queue_depth 0",
        "remat_cache_misses_total 1",
    ] {
        assert!(metrics.contains(needle), "{needle} missing in\n{metrics}");
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_the_solve_in_flight() {
    let _turn = LONG_SOLVES.lock().await;
    let mut server = Server::start(config(1, 1)).await;
    let addr = server.addr;
    let mut in_flight = start_long_solve(&server, 2).await;
    server.signal_shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "no new connections while draining"
    );
    let reply = receive(&mut in_flight).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(reply.json()["solver"], "fastsa");
    server.stop().await.unwrap();
}

#[test]
fn the_binary_serves_and_exits_cleanly_on_sigterm() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(["serve", "--log-format", "json"])
        .env("REMAT_ADDR", format!("127.0.0.1:{port}"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let start = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let health = rt.block_on(request(addr, "GET", "/healthz", None));
    assert_eq!(health.status, 200);
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let mut logs = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut logs).unwrap();
    let lines: Vec<Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines
        .iter()
        .any(|l| l["span"]["request_id"].is_string() && l["span"]["uri"] == "/healthz"));
    assert!(
        lines.iter().any(|l| l["fields"]["message"] == "stopped"),
        "{logs}"
    );
}

/// Runs the `remat` binary from the crate's directory.
fn remat_cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

/// A JSON file of the crate (`api/examples/...`, `graphs/...`).
fn crate_json(path: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The saved simulate example's graph and a schedule (the example's when `schedule` is
/// null), written to files for the CLI: their paths, and the graph and schedule.
fn simulate_example(dir: &std::path::Path, schedule: Value) -> (String, String, Value, Value) {
    let example = crate_json("api/examples/simulate.request.json");
    std::fs::create_dir_all(dir).unwrap();
    let (graph, events) = (dir.join("graph.json"), dir.join("schedule.json"));
    std::fs::write(&graph, example["graph"].to_string()).unwrap();
    let schedule = if schedule.is_null() {
        example["schedule"].clone()
    } else {
        schedule
    };
    std::fs::write(&events, schedule.to_string()).unwrap();
    (
        graph.display().to_string(),
        events.display().to_string(),
        example["graph"].clone(),
        schedule,
    )
}

/// `remat simulate --json` and `POST /v1/simulate` give the same report for the same
/// graph and schedule (the contract's, without the CLI's old `memory_after`), and the same
/// message for a schedule that breaks a rule or holds none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_the_service_simulate_alike() {
    let server = Server::start(config(1, 1)).await;
    let dir = std::env::temp_dir().join(format!("remat-sim-parity-{}", std::process::id()));
    let (graph, file, graph_json, schedule) = simulate_example(&dir, Value::Null);
    for budget in ["100%", "60%"] {
        let cli = remat_cli(&["simulate", &graph, &file, "--budget", budget, "--json"]);
        let http = server
            .post(
                "/v1/simulate",
                &json!({"graph": graph_json, "schedule": schedule, "budget": budget}),
            )
            .await;
        assert_eq!(http.status, 200);
        let printed: Value = serde_json::from_slice(&cli.stdout).unwrap();
        assert_eq!(printed, http.json(), "{budget}");
        assert!(printed.get("memory_after").is_none());
        assert_eq!(
            cli.status.code(),
            Some(if budget == "100%" { 0 } else { 1 })
        );
    }
    let saved = crate_json("api/examples/simulate.response.json");
    let cli = remat_cli(&["simulate", &graph, &file, "--budget", "100%", "--json"]);
    assert_eq!(serde_json::from_slice::<Value>(&cli.stdout).unwrap(), saved);

    for bad in [
        json!([{"op": "compute", "node": "x"}, {"op": "compute", "node": "loss"}]),
        json!({"status": "infeasible", "schedule": null}),
        json!({"steps": []}),
    ] {
        let (graph, file, _, _) = simulate_example(&dir, bad.clone());
        let cli = remat_cli(&["simulate", &graph, &file, "--json"]);
        assert_eq!(cli.status.code(), Some(2));
        let p = server
            .post(
                "/v1/simulate",
                &json!({"graph": graph_json, "schedule": bad}),
            )
            .await
            .assert_problem(422, "invalid-schedule");
        let detail = p["detail"].as_str().unwrap();
        let said = String::from_utf8_lossy(&cli.stderr);
        assert!(said.trim().ends_with(detail), "{said} vs {detail}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
    server.stop().await.unwrap();
}

/// A percentage budget resolves to the same bytes through the CLI, the service and
/// `Budget::resolve`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_percentage_budget_resolves_alike_in_the_cli_and_the_service() {
    let server = Server::start(config(1, 1)).await;
    let path = "graphs/resnet18.json";
    let graph_json = crate_json(path);
    let graph = graph_from_value(&graph_json, Format::Auto).unwrap();
    for budget in ["80%", "33.3%", "100%"] {
        let want = budget.parse::<Budget>().unwrap().resolve(&graph).unwrap();
        let cli = remat_cli(&[
            "solve",
            path,
            "--budget",
            budget,
            "--solver",
            "checkpoint-all",
            "--json",
        ]);
        let printed: Value = serde_json::from_slice(&cli.stdout).unwrap();
        assert_eq!(printed["budget"], want, "{budget}");
        let sweep = server
            .post(
                "/v1/sweep",
                &json!({"graph": graph_json, "budgets": [budget], "solver": "checkpoint-all"}),
            )
            .await
            .json();
        assert_eq!(sweep["results"][0]["budget"], want, "{budget}");
        let solved = server
            .post(
                "/v1/solve",
                &json!({"graph": graph_json, "budget": budget, "solver": "checkpoint-all"}),
            )
            .await
            .json();
        assert_eq!(solved["budget"], want, "{budget}");
    }
    server.stop().await.unwrap();
}
