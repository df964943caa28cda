//! Issue 15's input reproducers, each a regression test: overflowing graphs refused at
//! load naming the field, strict fields with a hint, budgets that are not byte counts,
//! numeric flags and fields out of range, batch isolation, labels, 414 and non-UTF-8 job
//! ids, gzip and `events_only`. CLI cases run the built binary and assert exit 2 (or the
//! documented code); HTTP cases go through the router in-process and assert a 4xx
//! `application/problem+json` naming the field.

use crate::common;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use common::remat;
use remat::service::{router, AppState, Config, PROBLEM_JSON};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Output;
use std::sync::Arc;
use tower::ServiceExt;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remat-input-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `graph` to a file and runs `remat solve FILE --budget 100%` plus `extra`.
fn solve_file(dir: &std::path::Path, name: &str, graph: &Value, extra: &[&str]) -> Output {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, graph.to_string()).unwrap();
    let mut args = vec!["solve", path.to_str().unwrap(), "--budget", "100%"];
    args.extend_from_slice(extra);
    remat(&args)
}

fn chained(memory: Value, cost: Value) -> Value {
    json!({"nodes": [
        {"id": "a", "cost": cost, "memory": memory},
        {"id": "b", "cost": cost, "memory": memory, "inputs": ["a"]}
    ]})
}

/// Exit 2 and every `says` in stderr.
fn assert_bad(o: &Output, says: &[&str], case: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{case}: {err}");
    for s in says {
        assert!(err.contains(s), "{case}: {err} should say {s}");
    }
}

#[test]
fn graphs_whose_totals_overflow_are_refused_naming_the_field() {
    let dir = temp_dir("overflow");
    let node_link_params = json!({
        "nodes": [
            {"id": 0, "cost_cpu": 1, "cost_ram": 1, "param_cost": 9007199254740992u64},
            {"id": 1, "cost_cpu": 1, "cost_ram": 1, "param_cost": 9007199254740992u64}],
        "links": [{"source": 0, "target": 1}]});
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        // Two chained nodes of 2^63: a release build said `optimal` with peak 2^63.
        (
            "two-2^63",
            chained(json!(9223372036854775808u64), json!(1)),
            vec!["'memory'", "2^53"],
        ),
        // Each size fits, the sum does not.
        (
            "sum-over-2^53",
            chained(json!((1u64 << 52) + 1), json!(1)),
            vec!["field 'memory'", "2^53"],
        ),
        // Two nodes at 1.7e308: `total_cost: null`.
        (
            "cost-sum-inf",
            chained(json!(1), json!(1.7e308)),
            vec!["field 'cost'", "1e290"],
        ),
        (
            "fixed-memory-max",
            json!({"fixed_memory": u64::MAX, "nodes": [{"id": "a", "cost": 1, "memory": 1}]}),
            vec!["'fixed_memory'", "2^53"],
        ),
        (
            "memory-as-float",
            json!({"nodes": [{"id": "a", "cost": 1, "memory": 1.8e19}]}),
            vec!["'memory'", "1.8e+19"],
        ),
        (
            "memory-fraction",
            json!({"nodes": [{"id": "a", "cost": 1, "memory": 1.5}]}),
            vec!["'memory'", "integer"],
        ),
        (
            "node-link-param-sum",
            node_link_params,
            vec!["'param_cost'", "2^53"],
        ),
        (
            "chain-x-ftmp-max",
            json!({"fw": [1, 1], "bw": [1, 1], "x": [u64::MAX, 1], "xbar": [1, 1],
                   "ftmp": [u64::MAX, 0]}),
            vec!["x[0]", "ftmp[0]", "2^53"],
        ),
        (
            "chain-x-float",
            json!({"fw": [1, 1], "bw": [1, 1], "x": [1.5, 1], "xbar": [1, 1]}),
            vec!["field 'x'"],
        ),
        (
            "chain-loss-cost-inf",
            json!({"fw": [1, 1.7e308], "bw": [1, 1.7e308], "x": [1, 1], "xbar": [1, 1]}),
            vec!["cost"],
        ),
    ];
    for (name, graph, says) in cases {
        assert_bad(&solve_file(&dir, name, &graph, &[]), &says, name);
    }
    // At the limit itself the graph loads and the figures are exact.
    let at_limit = chained(json!(1u64 << 51), json!(1));
    let o = solve_file(&dir, "at-limit", &at_limit, &["--json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["stats"]["peak_memory"], json!(1u64 << 52));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn misspelt_fields_are_refused_with_a_hint_and_meta_is_allowed() {
    let dir = temp_dir("strict");
    let node = |extra: Value| {
        let mut n = json!({"id": "b", "cost": 1, "memory": 1});
        n.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"nodes": [{"id": "a", "cost": 1, "memory": 1}, n]})
    };
    for (name, graph, says) in [
        (
            "deps",
            node(json!({"deps": ["a"]})),
            "did you mean `inputs`",
        ),
        (
            "input",
            node(json!({"input": ["a"]})),
            "did you mean `inputs`",
        ),
        (
            "fixed_mem",
            json!({"fixed_mem": 3, "nodes": [{"id": "a", "cost": 1, "memory": 1}]}),
            "did you mean `fixed_memory`",
        ),
        (
            "memory_per_sampel",
            node(json!({"memory_per_sampel": 1})),
            "did you mean `memory_per_sample`",
        ),
        (
            "storage",
            json!({"storage": {"write_bandwith": 1, "read_time": 1},
                "nodes": [{"id": "a", "cost": 1, "memory": 1}]}),
            "did you mean `write_bandwidth`",
        ),
        (
            "fixed_memory_per_sampel",
            json!({"fixed_memory_per_sampel": 3, "nodes": [{"id": "a", "cost": 1, "memory": 1}]}),
            "did you mean `fixed_memory_per_sample`",
        ),
        (
            "node-link",
            json!({"nodes": [{"id": 0, "cost_cpu": 1, "cost_rma": 1}], "links": []}),
            "did you mean `cost_ram`",
        ),
        (
            "chain",
            json!({"fw": [1, 1], "bw": [1, 1], "x": [1, 1], "xbar": [1, 1], "xtmp": [0, 0]}),
            "unknown field `xtmp`",
        ),
    ] {
        assert_bad(&solve_file(&dir, name, &graph, &[]), &[says], name);
    }
    let with_meta = json!({"meta": {"source": "torch"}, "nodes": [
        {"id": "a", "cost": 1, "memory": 1, "meta": {"shape": [2, 3]}},
        {"id": "b", "cost": 1, "memory": 1, "inputs": ["a"], "meta": "anything"}]});
    let o = solve_file(&dir, "meta", &with_meta, &[]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A name of 100,000 characters from the input (an input id, a field, a node or an op of a
/// schedule) is quoted by its ends and its length: the message stays a few lines long.
#[test]
fn long_names_from_the_input_are_quoted_by_their_ends() {
    let dir = temp_dir("long-names");
    let long = "z".repeat(100_000);
    let assert_short = |o: &Output, case: &str| {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{case}: {}",
            &err[..err.len().min(300)]
        );
        assert!(err.len() < 1_000, "{case}: {} bytes of message", err.len());
        assert!(err.contains(" bytes]..."), "{case}: {err}");
    };
    let unknown_input = json!({"nodes": [{"id": "a", "cost": 1, "memory": 1, "inputs": [long]}]});
    assert_short(
        &solve_file(&dir, "input", &unknown_input, &[]),
        "unknown input",
    );
    let mut node = json!({"id": "a", "cost": 1, "memory": 1});
    node[long.as_str()] = json!(1);
    let unknown_field = json!({"nodes": [node]});
    assert_short(
        &solve_file(&dir, "field", &unknown_field, &[]),
        "unknown field",
    );
    let graph = dir.join("graph.json");
    std::fs::write(&graph, linear(2).to_string()).unwrap();
    for (case, event) in [
        ("schedule node", json!({"op": "compute", "node": long})),
        ("schedule op", json!({"op": long, "node": "0"})),
    ] {
        let schedule = dir.join("schedule.json");
        std::fs::write(&schedule, json!({"events": [event]}).to_string()).unwrap();
        let o = remat(&[
            "simulate",
            graph.to_str().unwrap(),
            schedule.to_str().unwrap(),
        ]);
        assert_short(&o, case);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn budgets_and_numeric_flags_out_of_range_exit_2_naming_the_flag() {
    let g = "graphs/linear-8.json";
    for (args, says) in [
        (
            vec!["--budget", "0.7"],
            vec!["0.7 is not a byte count", "write 70%"],
        ),
        (vec!["--budget", "1e308%"], vec!["invalid budget", "2^53"]),
        (vec!["--budget", "18446744073709551615"], vec!["2^53"]),
        (vec!["--budget", "1e400"], vec!["2^53", "got 1e400"]),
        (vec!["--budget", "1e400GiB"], vec!["2^53", "got 1e400"]),
        (
            vec!["--budget", "90%", "--effort", "1e300"],
            vec!["--effort", "got 1e300"],
        ),
        (
            vec!["--budget", "90%", "--time-limit", "1e19"],
            vec!["--time-limit", "1e6"],
        ),
        (
            vec!["--budget", "90%", "--time-limit", "0"],
            vec!["--time-limit"],
        ),
        (
            vec!["--budget", "90%", "--threads", "4000000000"],
            vec!["--threads", "1 to 1024"],
        ),
        (
            vec!["--budget", "90%", "--threads", "4e9"],
            vec!["--threads"],
        ),
        (
            vec!["--budget", "90%", "--mip-gap", "NaN"],
            vec!["--mip-gap", "finite"],
        ),
        (
            vec!["--budget", "90%", "--mip-gap", "inf"],
            vec!["--mip-gap", "finite"],
        ),
    ] {
        let mut all = vec!["solve", g];
        all.extend_from_slice(&args);
        assert_bad(&remat(&all), &says, &args.join(" "));
    }
    for (args, says) in [
        (vec!["serve", "--job-ttl", "1e308"], "--job-ttl"),
        (vec!["serve", "--grace", "1e308"], "--grace"),
        (vec!["serve", "--time-limit", "1e20"], "--time-limit"),
        // tokio's semaphore panicked above 2^61 - 1 workers
        (
            vec!["serve", "--workers", "2305843009213693952"],
            "--workers",
        ),
        (
            vec!["serve", "--max-body", "1e30"],
            "a positive size of at most 2^53 bytes",
        ),
        (
            vec!["serve", "--solver-threads", "4000000000"],
            "--solver-threads",
        ),
        (
            vec!["gen", "linear", "--layers", "1000000000000"],
            "--layers",
        ),
        (
            vec!["gen", "random-layered", "--nodes", "18446744073709551615"],
            "--nodes",
        ),
        (
            vec!["gen", "join", "--branches", "400000,400000"],
            "--branches",
        ),
        (
            vec!["bench-tiers", "--lengths", "100000000000"],
            "--lengths",
        ),
        (
            vec!["bench-tiers", "--snapshots", "18446744073709551615"],
            "--snapshots",
        ),
        (
            vec!["bench", "--fractions", "1e308", "graphs/linear-8.json"],
            "--fractions must be numbers in (0, 1000000]",
        ),
        (
            vec!["bench", "--span", "1.5", "graphs/linear-8.json"],
            "--span must be numbers in (0, 1]",
        ),
        (
            vec![
                "bench",
                "--budgets",
                "18446744073709551615",
                "graphs/linear-8.json",
            ],
            "2^53",
        ),
        (vec!["inspect", g, "--budget", "0.5"], "not a byte count"),
        (
            vec!["solve", g, "--budget", "inf%"],
            "a percentage must be a finite number",
        ),
        (
            vec!["solve", g, "-b", "90%", "--storage", "[1e9, 2e9]"],
            "must be an object",
        ),
        (
            vec![
                "solve",
                g,
                "-b",
                "90%",
                "--storage",
                r#"{"transfer_tme": 8}"#,
            ],
            "did you mean `transfer_time`",
        ),
        (
            vec!["solve", g, "--budget", "NaN%"],
            "a percentage must be a finite number",
        ),
        (
            vec!["solve", g, "--budget=-5%"],
            "a percentage must be greater than 0",
        ),
        (
            vec!["batch", "--graphs", g, "--budgets", "90%", "--out", g],
            "is not a directory",
        ),
        // --fractions was dropped without a word
        (
            vec![
                "bench",
                "--span",
                "0.5",
                "--fractions",
                "0.3",
                "graphs/linear-8.json",
            ],
            "cannot be used with '--fractions",
        ),
    ] {
        assert_bad(&remat(&args), &[says], &args.join(" "));
    }
}

#[test]
fn inspect_labels_the_minimum_feasible_budget() {
    let o = remat(&["inspect", "graphs/linear-8.json"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("min feasible budget"), "{out}");
    assert!(!out.contains("lower bound"), "{out}");
}

#[test]
fn one_bad_graph_is_an_error_row_and_the_batch_goes_on() {
    let dir = temp_dir("batch");
    let graphs = dir.join("graphs");
    std::fs::create_dir_all(&graphs).unwrap();
    std::fs::copy("graphs/linear-8.json", graphs.join("a-good.json")).unwrap();
    std::fs::write(graphs.join("b-broken.json"), "{\"nodes\": [").unwrap();
    std::fs::write(
        graphs.join("c-overflow.json"),
        chained(json!(1u64 << 62), json!(1)).to_string(),
    )
    .unwrap();
    std::fs::write(
        graphs.join("d-typo.json"),
        json!({"nodes": [{"id": "a", "cost": 1, "memory": 1, "deps": []}]}).to_string(),
    )
    .unwrap();
    let out = dir.join("out");
    let o = remat(&[
        "batch",
        "--graphs",
        graphs.to_str().unwrap(),
        "--budgets",
        "100%",
        "--out",
        out.to_str().unwrap(),
        "--solver",
        "checkpoint-all",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "some items failed: exit 4; {err}");
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let rows = summary["rows"].as_array().unwrap();
    let status: Vec<&str> = rows.iter().map(|r| r["status"].as_str().unwrap()).collect();
    // Checkpoint-all costs Σ c_v, the bound on every schedule: `optimal`.
    assert_eq!(status, ["optimal", "error", "error", "error"], "{summary}");
    assert!(rows[1]["message"]
        .as_str()
        .unwrap()
        .contains("malformed JSON"));
    assert!(rows[2]["message"].as_str().unwrap().contains("2^53"));
    assert!(rows[3]["message"]
        .as_str()
        .unwrap()
        .contains("did you mean"));
    assert!(out.join("a-good--100pct.json").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- HTTP, in-process --------------------------------------------------------------------

fn app() -> axum::Router {
    router(Arc::new(AppState::new(Config {
        workers: 1,
        queue: 4,
        ..Config::default()
    })))
}

struct Reply {
    status: StatusCode,
    content_type: String,
    encoding: Option<String>,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

async fn call(app: &axum::Router, request: Request<Body>) -> Reply {
    let response = app.clone().oneshot(request).await.unwrap();
    let header = |h| {
        response
            .headers()
            .get(h)
            .map(|v: &axum::http::HeaderValue| v.to_str().unwrap().to_string())
    };
    let (content_type, encoding) = (
        header(header::CONTENT_TYPE),
        header(header::CONTENT_ENCODING),
    );
    Reply {
        status: response.status(),
        content_type: content_type.unwrap_or_default(),
        encoding,
        body: axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec(),
    }
}

async fn post(app: &axum::Router, path: &str, body: &Value) -> Reply {
    call(
        app,
        Request::post(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
    )
    .await
}

/// A 4xx problem document whose `field` or `detail` names `names`.
fn assert_problem(r: &Reply, class: u16, names: &str, case: &str) -> Value {
    let body = String::from_utf8_lossy(&r.body);
    assert_eq!(r.status.as_u16() / 100, class / 100, "{case}: {body}");
    assert_eq!(r.content_type, PROBLEM_JSON, "{case}: {body}");
    let p = r.json();
    let said = format!("{} {} {}", p["field"], p["detail"], p["problems"]);
    assert!(said.contains(names), "{case}: {body} should name {names}");
    p
}

fn linear(n: usize) -> Value {
    serde_json::to_value(remat::graph::generate::linear(n).to_spec()).unwrap()
}

#[tokio::test]
async fn http_numeric_fields_and_budgets_out_of_range_are_4xx_naming_the_field() {
    let app = app();
    let g = linear(3);
    for (body, names) in [
        (
            json!({"graph": g, "budget": "90%", "time_limit_s": 1e20}),
            "time_limit_s",
        ),
        (
            json!({"graph": g, "budget": "90%", "time_limit_s": 1e300}),
            "time_limit_s",
        ),
        (
            json!({"graph": g, "budget": "90%", "mip_gap": -1}),
            "mip_gap",
        ),
        (json!({"graph": g, "budget": 0.7}), "write 70%"),
        (json!({"graph": g, "budget": 12.5}), "budget"),
        (json!({"graph": g, "budget": 1.8e19}), "2^53"),
        (json!({"graph": g, "budget": "1e308%"}), "2^53"),
        (
            json!({"graph": g, "budget": "90%", "events_only": "yes"}),
            "events_only",
        ),
        (
            json!({"graph": g, "budget": "90%", "solvr": "auto"}),
            "did you mean `solver`",
        ),
        (
            json!({"graph": g, "budget": "90%", "time_limit": 3}),
            "did you mean `time_limit_s`",
        ),
        (
            json!({"graph": chained(json!(1u64 << 63), json!(1)), "budget": "90%"}),
            "2^53",
        ),
        (
            json!({"graph": chained(json!(1), json!(1.7e308)), "budget": "90%"}),
            "1e290",
        ),
        (
            json!({"graph": {"nodes": [{"id": "a", "cost": 1, "memory": 1, "deps": []}]},
                "budget": "90%"}),
            "did you mean `inputs`",
        ),
        // an array was read as the storage fields in their order
        (
            json!({"graph": g, "budget": "90%", "storage": [1e9, 2e9]}),
            "must be an object",
        ),
        (
            json!({"graph": g, "budget": "90%", "storage": {"transfer_tme": 8}}),
            "did you mean `transfer_time`",
        ),
    ] {
        let r = post(&app, "/v1/solve", &body).await;
        assert_problem(&r, 422, names, &body.to_string());
    }
    let r = post(
        &app,
        "/v1/sweep",
        &json!({"graph": g, "budgets": ["90%", "1e308%"]}),
    )
    .await;
    let p = assert_problem(&r, 422, "2^53", "sweep");
    assert_eq!(p["field"], "budgets");
}

/// An unknown field of 100,000 characters, in the request or in a node, is named by its
/// ends in a problem document of a few hundred bytes.
#[tokio::test]
async fn long_unknown_fields_are_named_by_their_ends() {
    let app = app();
    let long = "q".repeat(100_000);
    let mut in_request = json!({"graph": linear(2), "budget": "90%"});
    in_request[long.as_str()] = json!(1);
    let mut in_node = json!({"graph": {"nodes": [{"id": "a", "cost": 1, "memory": 1}]},
        "budget": "90%"});
    in_node["graph"]["nodes"][0][long.as_str()] = json!(1);
    for (case, body) in [("request", in_request), ("node", in_node)] {
        let r = post(&app, "/v1/solve", &body).await;
        assert_problem(&r, 422, "[99940 bytes]", case);
        assert!(r.body.len() < 2_000, "{case}: {} bytes", r.body.len());
    }
}

#[tokio::test]
async fn long_uris_and_non_utf8_job_ids_get_problem_documents() {
    let app = app();
    let long = format!("/v1/jobs/{}", "a".repeat(remat::service::MAX_URI + 1));
    let r = call(&app, Request::get(long).body(Body::empty()).unwrap()).await;
    assert_eq!(r.status, StatusCode::URI_TOO_LONG);
    assert_eq!(r.content_type, PROBLEM_JSON);
    for method in ["GET", "DELETE"] {
        let r = call(
            &app,
            Request::builder()
                .method(method)
                .uri("/v1/jobs/%FF%FE")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_problem(&r, 404, "id", method);
    }
}

#[tokio::test]
async fn results_are_gzipped_on_request_and_events_only_drops_the_stage_matrices() {
    let app = app();
    // A MILP answer carries stage matrices; `events_only` leaves them out.
    let body = json!({"graph": linear(4), "budget": "80%", "solver": "lp-rounding"});
    let full = post(&app, "/v1/solve", &body).await;
    assert_eq!(full.status, 200, "{}", String::from_utf8_lossy(&full.body));
    let full = full.json();
    assert!(full["schedule"]["stages"].is_array(), "{full}");
    let mut lean = body.clone();
    lean["events_only"] = json!(true);
    let lean = post(&app, "/v1/solve", &lean).await.json();
    assert!(lean["schedule"].get("stages").is_none(), "{lean}");
    assert_eq!(lean["schedule"]["events"], full["schedule"]["events"]);
    assert_eq!(lean["stats"], full["stats"]);

    let gz = call(
        &app,
        Request::post("/v1/solve")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT_ENCODING, "gzip")
            .body(Body::from(body.to_string()))
            .unwrap(),
    )
    .await;
    assert_eq!(gz.status, 200);
    assert_eq!(gz.encoding.as_deref(), Some("gzip"));
    assert_eq!(&gz.body[..2], &[0x1f, 0x8b], "a gzip stream");
    assert!(gz.body.len() < full.to_string().len());
}
