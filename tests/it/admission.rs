//! Issue 15's acceptance test of admission control: a real `remat serve` process under a
//! 4 GiB address-space limit (`prlimit --as`; without `prlimit` the server runs with
//! `--solve-memory 512MiB` instead) answers every request that used to kill it (a schedule,
//! or a 413 naming the limit) while `/healthz` keeps answering, and afterwards is alive
//! and holds little memory. Loopback only.
//!
//! By default: random-layered graphs of 1,500 and 5,000 nodes (`milp` refused, `dtr`
//! and `auto` solved), a small MILP solved. Under `REMAT_FULL=1` (CI) also 20,000
//! nodes, the 100,001-node star, 320,000 edgeless nodes on `/v1/inspect` and 60 MB of
//! `{}` nodes.

use crate::common;
use crate::server;

use remat::graph::generate::{linear, random_layered};
use serde_json::{json, Value};
use server::{Process, Reply};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const LIMIT: u64 = 4 << 30;

/// The server under test, with its address-space limit (else `--solve-memory 512MiB`).
fn start() -> Process {
    let args = ["--workers", "2", "--time-limit", "30"];
    let binary = env!("CARGO_BIN_EXE_remat");
    let (process, limited) = Process::start(binary, &args, Some(LIMIT));
    if limited {
        return process;
    }
    eprintln!("prlimit not found: --solve-memory 512MiB instead of an address-space limit");
    drop(process);
    let args = [&args[..], &["--solve-memory", "512MiB"]].concat();
    Process::start(binary, &args, None).0
}

async fn post(process: &Process, path: &str, body: &[u8]) -> Reply {
    server::request(process.addr, "POST", path, Some(body)).await
}

fn solve_body(graph: &Value, budget: Value, solver: &str) -> Vec<u8> {
    json!({"graph": graph, "budget": budget, "solver": solver, "time_limit_s": 20})
        .to_string()
        .into_bytes()
}

fn spec(graph: &remat::graph::Graph) -> Value {
    serde_json::to_value(graph.to_spec()).unwrap()
}

/// A 413 problem whose detail names the limit.
fn assert_refused(reply: &Reply, names: &str, what: &str) {
    let p = reply.assert_problem(413, "too-large");
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.contains(names), "{what}: {detail}");
}

fn assert_schedule(reply: &Reply, what: &str) {
    assert_eq!(
        reply.status,
        200,
        "{what}: {}",
        String::from_utf8_lossy(&reply.body[..reply.body.len().min(500)])
    );
    let r = reply.json();
    assert!(
        r["stats"]["peak_memory"].as_u64() <= r["budget"].as_u64(),
        "{what}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_under_4_gib_answers_every_large_request() {
    let mut process = start();
    let addr = process.addr;
    // /healthz, polled all along.
    let (polls, failures) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let poller = tokio::spawn({
        let (polls, failures) = (polls.clone(), failures.clone());
        async move {
            loop {
                let ok = tokio::time::timeout(
                    Duration::from_secs(5),
                    server::request(addr, "GET", "/healthz", None),
                )
                .await
                .is_ok_and(|r| r.status == 200);
                polls.fetch_add(1, Ordering::Relaxed);
                if !ok {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
    let mut sizes = vec![1500, 5000];
    if common::full() {
        sizes.push(20_000);
    }
    for n in sizes {
        let g = spec(&random_layered(n, 1));
        let what = format!("random-layered {n}");
        let milp = post(&process, "/v1/solve", &solve_body(&g, json!("70%"), "milp")).await;
        assert_refused(&milp, "over the memory limit", &what);
        let dtr = post(&process, "/v1/solve", &solve_body(&g, json!("70%"), "dtr")).await;
        assert_schedule(&dtr, &what);
        // The portfolio skips the MILP the limit refuses and answers with a schedule.
        let mut body: Value =
            serde_json::from_slice(&solve_body(&g, json!("70%"), "auto")).unwrap();
        body["time_limit_s"] = json!(3);
        let auto = post(&process, "/v1/solve", body.to_string().as_bytes()).await;
        assert_schedule(&auto, &what);
        assert!(process.alive(), "{what}: the server died");
    }
    let small = post(
        &process,
        "/v1/solve",
        &solve_body(&spec(&linear(8)), json!(4), "milp"),
    )
    .await;
    assert_schedule(&small, "linear-8 milp");
    if common::full() {
        let mut star = vec![json!({"id": "c", "cost": 1, "memory": 1, "inputs": []})];
        star.extend(
            (0..100_000)
                .map(|i| json!({"id": format!("l{i}"), "cost": 1, "memory": 1, "inputs": ["c"]})),
        );
        let star = json!({ "nodes": star });
        let reply = post(
            &process,
            "/v1/solve",
            &solve_body(&star, json!(50_000), "dtr"),
        )
        .await;
        assert_schedule(&reply, "star, dtr");
        let reply = post(
            &process,
            "/v1/solve",
            &solve_body(&star, json!(50_000), "milp"),
        )
        .await;
        assert_refused(&reply, "over the memory limit", "star, milp");
        drop(star);
        let edgeless: Vec<Value> = (0..320_000)
            .map(|i| json!({"id": format!("v{i}"), "cost": 1, "memory": 1, "inputs": []}))
            .collect();
        let body = json!({"graph": {"nodes": edgeless}}).to_string();
        drop(edgeless);
        let reply = post(&process, "/v1/inspect", body.as_bytes()).await;
        assert_eq!(reply.status, 200, "edgeless inspect");
        assert_eq!(reply.json()["nodes"], 320_000);
        drop(body);
        let mut empties = String::with_capacity(60_000_100);
        empties.push_str(r#"{"budget": 100, "graph": {"nodes": ["#);
        empties.push_str(&["{}"; 20_000_000].join(","));
        empties.push_str("]}}");
        let reply = post(&process, "/v1/solve", empties.as_bytes()).await;
        assert_refused(&reply, "--max-nodes", "60 MB of {} nodes");
    }
    // The periodic trim gives the freed heap back within seconds.
    tokio::time::sleep(Duration::from_secs(6)).await;
    poller.abort();
    assert!(process.alive(), "the server died");
    let (rss, peak) = (process.status_kib("VmRSS:"), process.status_kib("VmHWM:"));
    eprintln!(
        "healthz: {} polls, {} failed; server RSS {} MB after, peak {} MB",
        polls.load(Ordering::Relaxed),
        failures.load(Ordering::Relaxed),
        rss / 1024,
        peak / 1024
    );
    assert_eq!(failures.load(Ordering::Relaxed), 0, "/healthz failed");
    assert!(polls.load(Ordering::Relaxed) > 10);
    assert!(
        rss < 400 * 1024,
        "the server holds {rss} kB after its requests"
    );
}

/// The command line refuses the same model with exit 2, naming the figures; a bad
/// `--solve-memory` is a usage error.
#[test]
fn the_cli_refuses_a_model_over_solve_memory_with_exit_2() {
    let dir = std::env::temp_dir().join(format!("remat-admission-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("g1500.json");
    std::fs::write(&path, spec(&random_layered(1500, 1)).to_string()).unwrap();
    let remat = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_remat"))
            .args(args)
            .env_remove("REMAT_SOLVE_MEMORY")
            .output()
            .unwrap()
    };
    let graph = path.to_str().unwrap();
    let out = remat(&[
        "solve",
        graph,
        "-b",
        "70%",
        "-s",
        "milp",
        "--solve-memory",
        "1GiB",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("over the memory limit of 1073741824 bytes") && stderr.contains("columns"),
        "{stderr}"
    );
    // Every command that solves takes the same flag and the same policy (`bench` too).
    let svg = dir.join("g1500.svg");
    let memory = ["-s", "milp", "--solve-memory", "1GiB"];
    for command in [
        &["bench", graph, "--fractions", "0.7"][..],
        &[
            "plot",
            "timeline",
            graph,
            "-b",
            "70%",
            "-o",
            svg.to_str().unwrap(),
        ],
    ] {
        let out = remat(&[command, &memory].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {stderr}");
        assert!(
            stderr.contains("over the memory limit of 1073741824 bytes"),
            "{command:?}: {stderr}"
        );
    }
    let out = remat(&[
        "solve",
        graph,
        "-b",
        "70%",
        "-s",
        "dtr",
        "--solve-memory",
        "1GiB",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let out = remat(&["solve", graph, "-b", "70%", "--solve-memory", "lots"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--solve-memory"));
    let _ = std::fs::remove_dir_all(&dir);
}
