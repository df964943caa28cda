//! Session 26's audit of `POST /v1/sweep` at scale, on a real `remat serve` over loopback:
//!
//! * a sweep answers a schedule per budget, so budgets × nodes is capped (4 × `--max-nodes`)
//!   before any solve: on main, 64 budgets of a 100,001-node graph answered 400 MB of JSON at
//!   a peak of 1.7 GB (64 budgets of a million nodes: about 4 GB of answer);
//! * the whole sweep, reading its graph included, runs within the server's time limit from
//!   the request's receipt: on main the clock started on the worker, after the graph was
//!   read (8 budgets of a 1,000,000-node chain under `--time-limit 2` answered in 7.6 s).
//!
//! The full-size figures, measured by hand on a release build, are in docs/performance.md.

use crate::server::{self, long_graph, Server};
use serde_json::{json, Value};
use std::time::Instant;

fn linear5() -> Value {
    serde_json::to_value(remat::graph::generate::linear(2).to_spec()).unwrap()
}

#[tokio::test]
async fn a_sweep_over_its_schedule_cap_is_refused_before_it_runs() {
    let server = Server::start(remat::service::Config {
        max_nodes: 10,
        ..server::config(1, 1)
    })
    .await;
    let sweep = |budgets: usize| {
        json!({
            "graph": linear5(),
            "budgets": vec!["100%"; budgets],
            "solver": "checkpoint-all",
        })
    };
    // 8 budgets × 5 nodes = 40 = 4 × --max-nodes: answered.
    let reply = server.post("/v1/sweep", &sweep(8)).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(reply.json()["results"].as_array().unwrap().len(), 8);
    let problem = server
        .post("/v1/sweep", &sweep(9))
        .await
        .assert_problem(413, "too-large");
    assert_eq!(problem["field"], "budgets");
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("9 budgets of a 5-node graph are 45 nodes of schedules")
            && detail.contains("limit of 40 (4 x --max-nodes)"),
        "{detail}"
    );
    assert_eq!(server.metric("remat_solves_total").await, 8.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_stops_reading_its_graph_at_the_server_time_limit() {
    let server = Server::start(remat::service::Config {
        time_limit: 0.001,
        ..server::config(1, 1)
    })
    .await;
    let body = json!({
        "graph": long_graph(100_000),
        "budgets": ["80%", "90%"],
        "solver": "checkpoint-all",
    });
    let started = Instant::now();
    let reply = server.post("/v1/sweep", &body).await;
    let text = String::from_utf8_lossy(&reply.body).to_string();
    assert_eq!(reply.status, 504, "{text}");
    assert!(text.contains("while reading the graph"), "{text}");
    eprintln!("answered in {:?}", started.elapsed());
}
