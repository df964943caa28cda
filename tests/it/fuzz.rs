//! Property-based fuzzing of every input reader: the three graph importers (native,
//! node-link, chain), the budget parser, the simulator (random event lists on random
//! graphs) and the HTTP request readers (random JSON bodies through the router,
//! in-process). Properties: no panic; an importer either loads a graph that keeps the load
//! invariants (`K + Σ s_v <= 2^53`, `Σ c_v <= 1e290`) or names a field; the simulator
//! either accepts or names the event; the service never answers 5xx to a bad body and
//! every 4xx is `application/problem+json`.
//!
//! `cargo test` runs `REMAT_FUZZ_CASES` cases per target (64 by default, a few seconds);
//! longer runs: `REMAT_FUZZ_CASES=100000 cargo test --release --test it fuzz::`. A crashing
//! input proptest finds is shrunk and stored under `proptest-regressions/`; keep it there
//! and add it to the regression tests (`tests/it/hardening_input.rs`).

use axum::body::Body;
use axum::http::{header, Request};
use proptest::prelude::*;
use remat::budget::Budget;
use remat::graph::load::{graph_from_value, Format};
use remat::graph::{Graph, MAX_BYTES, MAX_TOTAL_COST};
use remat::schedule::{simulate, Event, Schedule};
use remat::service::{router, AppState, Config, PROBLEM_JSON};
use serde_json::{json, Map, Value};
use std::sync::{Arc, LazyLock};
use tower::ServiceExt;

fn cases() -> u32 {
    std::env::var("REMAT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Numbers around every edge the readers check: 0, fractions, 2^53, 2^63, u64::MAX,
/// huge floats, negatives.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..20).prop_map(Value::from),
        Just(json!(MAX_BYTES)),
        Just(json!(MAX_BYTES + 1)),
        Just(json!(1u64 << 63)),
        Just(json!(u64::MAX)),
        Just(json!(1.8e19)),
        Just(json!(1.7e308)),
        Just(json!(0.7)),
        Just(json!(-1)),
        Just(json!(1e-300)),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::from),
    ]
}

/// Any JSON value, numbers biased to the edges above, strings to field-like names.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number(),
        "[a-z_]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An object with some of `fields` (each a random value or a plausible one) and maybe a
/// stray field.
fn object(
    fields: &'static [&'static str],
    plausible: fn(&str) -> BoxedStrategy<Value>,
) -> impl Strategy<Value = Value> {
    let entries: Vec<BoxedStrategy<Option<(String, Value)>>> = fields
        .iter()
        .map(|&f| {
            prop::option::weighted(0.8, prop_oneof![3 => plausible(f), 1 => value().boxed()])
                .prop_map(move |v| v.map(|v| (f.to_string(), v)))
                .boxed()
        })
        .collect();
    (
        entries,
        prop::option::weighted(0.1, ("[a-z_]{1,10}", value())),
    )
        .prop_map(|(entries, stray)| {
            let mut map: Map<String, Value> = entries.into_iter().flatten().collect();
            if let Some((k, v)) = stray {
                map.insert(k, v);
            }
            Value::Object(map)
        })
}

fn ids() -> BoxedStrategy<Value> {
    prop_oneof![
        (0u8..6).prop_map(|i| json!(format!("n{i}"))),
        (0u8..6).prop_map(Value::from)
    ]
    .boxed()
}

fn native_field(f: &str) -> BoxedStrategy<Value> {
    match f {
        "id" => ids(),
        "inputs" => prop::collection::vec(ids(), 0..3)
            .prop_map(Value::from)
            .boxed(),
        "kind" => prop::sample::select(vec!["forward", "loss", "backward"])
            .prop_map(Value::from)
            .boxed(),
        _ => number().boxed(),
    }
}

fn native_graph() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(
            object(&["id", "cost", "memory", "inputs", "kind"], native_field),
            0..6,
        ),
        prop::option::of(number()),
    )
        .prop_map(|(nodes, fixed)| {
            let mut g = json!({"nodes": nodes});
            if let Some(k) = fixed {
                g["fixed_memory"] = k;
            }
            g
        })
}

fn node_link_field(f: &str) -> BoxedStrategy<Value> {
    match f {
        "id" | "name" => ids(),
        "backward" => any::<bool>().prop_map(Value::from).boxed(),
        _ => number().boxed(),
    }
}

fn node_link_graph() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(
            object(
                &["id", "cost_cpu", "cost_ram", "param_cost", "backward"],
                node_link_field,
            ),
            0..6,
        ),
        prop::collection::vec((ids(), ids()), 0..6),
    )
        .prop_map(|(nodes, links)| {
            let links: Vec<Value> = links
                .into_iter()
                .map(|(s, t)| json!({"source": s, "target": t}))
                .collect();
            json!({"nodes": nodes, "links": links})
        })
}

fn chain_field(_: &str) -> BoxedStrategy<Value> {
    prop::collection::vec(number(), 1..4)
        .prop_map(Value::from)
        .boxed()
}

fn chain_graph() -> impl Strategy<Value = Value> {
    object(&["fw", "bw", "x", "xbar", "ftmp", "btmp"], chain_field)
}

/// A loaded graph keeps the load invariants; an error names a field.
fn check_import(value: &Value, format: Format) -> Result<(), TestCaseError> {
    match graph_from_value(value, format) {
        Ok(g) => {
            let bytes: u128 = u128::from(g.fixed_memory())
                + (0..g.len()).map(|v| u128::from(g.memory(v))).sum::<u128>();
            prop_assert!(bytes <= u128::from(MAX_BYTES), "{value}");
            prop_assert!(g.total_cost() <= MAX_TOTAL_COST, "{value}");
            // Every figure the report computes from it is defined.
            let report = remat::front::report(&g, None);
            prop_assert!(report.checkpoint_all_peak >= report.min_feasible_budget);
        }
        Err(e) => {
            for p in e.problems() {
                prop_assert!(!p.field.is_empty() && !p.message.is_empty(), "{value}: {p}");
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_native_importer(g in native_graph()) {
        check_import(&g, Format::Native)?;
        check_import(&g, Format::Auto)?;
    }

    #[test]
    fn fuzz_node_link_importer(g in node_link_graph()) {
        check_import(&g, Format::NodeLink)?;
    }

    #[test]
    fn fuzz_chain_importer(g in chain_graph()) {
        check_import(&g, Format::Chain)?;
    }

    #[test]
    fn fuzz_any_json_as_a_graph(v in value()) {
        for format in [Format::Auto, Format::Native, Format::NodeLink, Format::Chain] {
            check_import(&v, format)?;
        }
    }

    #[test]
    fn fuzz_budget_parser(
        text in prop_oneof![
            "[0-9.eE+-]{0,12}(%|[kKmMgGtT]?i?[bB])?",
            "\\PC{0,16}",
            number().prop_map(|n| n.to_string()),
            number().prop_map(|n| format!("{n}%")),
        ],
        json in number(),
    ) {
        let g = remat::graph::generate::linear(3);
        if let Ok(b) = text.parse::<Budget>() {
            if let Ok(bytes) = b.resolve(&g) {
                prop_assert!(bytes <= MAX_BYTES);
            }
        }
        if let Ok(b) = serde_json::from_value::<Budget>(json.clone()) {
            match b {
                Budget::Bytes(bytes) => prop_assert!(bytes <= MAX_BYTES, "{json}"),
                Budget::OfPeak(_) => prop_assert!(false, "a number is never a percentage"),
            }
        }
    }

    #[test]
    fn fuzz_simulator(
        seed in any::<u64>(),
        n in 1usize..12,
        tier in any::<bool>(),
        events in prop::collection::vec((0u8..4, 0usize..14), 0..40),
    ) {
        let g: Graph = remat::graph::generate::random_dag(
            &remat::graph::generate::DagShape::dense(n),
            seed,
        )
        .with_storage(tier.then(|| remat::graph::Storage::per_copy(2.0).unwrap()));
        let events: Vec<Event> = events
            .into_iter()
            .map(|(k, v)| match k {
                0 => Event::Compute(v),
                1 => Event::Free(v),
                2 => Event::Store(v),
                _ => Event::Load(v),
            })
            .collect();
        let count = events.len();
        match simulate(&g, &Schedule::new(events)) {
            Ok(stats) => prop_assert!(stats.total_cost.is_finite()),
            Err(e) => {
                // Names the event (every rule but "never computed" is about one).
                match e.event {
                    Some(i) => prop_assert!(
                        i < count && e.message.contains(&format!("event {i}")),
                        "{}", e.message
                    ),
                    None => prop_assert!(e.node.is_some()),
                }
            }
        }
    }

    /// Whatever the body, no 500: an error is a problem document, 4xx, 503 when busy, or the
    /// contract's 504 where the request's own time limit passed with no schedule (a
    /// `time_limit_s` of 1e-300 is valid, greater than 0, and passes before the solve starts).
    #[test]
    fn fuzz_http_request_readers(
        path in prop::sample::select(vec!["/v1/solve", "/v1/jobs", "/v1/sweep", "/v1/simulate", "/v1/inspect"]),
        body in request_body(),
    ) {
        let (status, content_type, text) = RUNTIME.block_on(send(path, body.clone()));
        let timed_out = status == 504 && text.contains("urn:remat:problem:time-limit");
        prop_assert!(status < 500 || status == 503 || timed_out, "{path} {body}: {status} {text}");
        if status >= 400 {
            prop_assert_eq!(content_type, PROBLEM_JSON, "{} {}: {}", path, body, text);
        }
    }
}

fn request_field(f: &str) -> BoxedStrategy<Value> {
    match f {
        "graph" => prop_oneof![
            native_graph().boxed(),
            node_link_graph().boxed(),
            Just(serde_json::to_value(remat::graph::generate::linear(2).to_spec()).unwrap())
                .boxed(),
        ]
        .boxed(),
        "budget" => prop_oneof![
            number(),
            Just(json!("90%")),
            Just(json!("1e308%")),
            Just(json!("0.7"))
        ]
        .boxed(),
        "budgets" => prop::collection::vec(prop_oneof![number(), Just(json!("50%"))], 0..3)
            .prop_map(Value::from)
            .boxed(),
        "solver" => prop::sample::select(vec!["checkpoint-all", "chen-greedy", "dtr", "magic"])
            .prop_map(Value::from)
            .boxed(),
        "schedule" => prop::collection::vec(
            (
                prop::sample::select(vec!["compute", "free", "store", "load", "x"]),
                ids(),
            ),
            0..6,
        )
        .prop_map(|es| {
            Value::from(
                es.into_iter()
                    .map(|(op, node)| json!({"op": op, "node": node}))
                    .collect::<Vec<_>>(),
            )
        })
        .boxed(),
        "events_only" => any::<bool>().prop_map(Value::from).boxed(),
        _ => number().boxed(),
    }
}

fn request_body() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => object(
            &["graph", "budget", "budgets", "solver", "time_limit_s", "mip_gap", "seed", "schedule", "events_only"],
            request_field,
        )
        .prop_map(|v| v.to_string()),
        1 => value().prop_map(|v| v.to_string()),
        1 => "\\PC{0,40}",
    ]
}

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
});

static APP: LazyLock<axum::Router> = LazyLock::new(|| {
    router(Arc::new(AppState::new(Config {
        workers: 2,
        queue: 64,
        time_limit: 2.0,
        ..Config::default()
    })))
});

async fn send(path: &str, body: String) -> (u16, String, String) {
    let request = Request::post(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap();
    let response = APP.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        content_type,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}
