//! `remat max-batch` and `POST /v1/max-batch` (issue 14): the search against a brute-force
//! scan over every batch with the same solver, the no-recomputation batch against the
//! checkpoint-all peak, bad input naming its field in both shells.

use crate::common;
use crate::server;

use remat::budget::Budget;
use remat::front::max_batch::{search, MaxBatchInput, MaxBatchRequest, MaxBatchResult};
use remat::graph::generate::{random_dag, random_layered, DagShape};
use remat::graph::load::{graph_from_value, Format};
use remat::graph::{BatchSource, BatchSpec, Graph};
use remat::schedule::checkpoint_all_peak;
use remat::solve::{self, Instance, SolveOptions};
use serde_json::{json, Value};
use server::{config, Server};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A generated training graph whose every byte is exactly linear in the batch: sizes
/// `p_v · b` (batch 1 declared), and `fixed_memory` `k · b`.
fn exactly_linear(g: Graph, k: u64) -> Graph {
    let per: Vec<(String, u64)> = g.nodes().iter().map(|n| (n.id.clone(), n.memory)).collect();
    let mut spec = g.to_spec();
    spec.fixed_memory = k;
    Graph::new(spec)
        .unwrap()
        .with_batch(BatchSpec {
            batch_size: Some(1),
            fixed_memory_per_sample: Some(k),
            memory_per_sample: per,
            source: None,
        })
        .unwrap()
}

/// A graph of the MLSys benchmark set (the `mlsys_*` tests run where `REMAT_MLSYS` names
/// it: `common::mlsys_dir`).
fn mlsys(name: &str) -> Graph {
    common::load(&common::mlsys_dir().join(name))
}

fn request(
    g: &Graph,
    memory: u64,
    rho: Option<f64>,
    fwd: Option<f64>,
    solver: &str,
) -> MaxBatchRequest {
    MaxBatchInput {
        memory: Some(Budget::Bytes(memory)),
        max_overhead: rho,
        max_extra_forward: fwd,
        solver: solver.into(),
    }
    .validate(g)
    .unwrap()
}

/// The search's definition of "batch `b` fits", computed independently: checkpoint-all
/// fits (the simulator's peak), or the solver's schedule fits with overhead within the cap.
fn fits(g: &Graph, b: u64, r: &MaxBatchRequest) -> bool {
    let at = g.at_batch(b).unwrap();
    if checkpoint_all_peak(&at) <= r.memory {
        return true;
    }
    let result = solve::solve(
        &Instance {
            graph: &at,
            budget: r.memory,
        },
        &r.solver,
        &SolveOptions::default(),
    )
    .unwrap();
    result.stats.is_some_and(|s| r.cap.admits(s.overhead))
}

/// Scans every batch from 1 to one past the proven upper bound; checks the search's answer
/// against it and returns whether the solver was monotone on this case.
fn check_against_scan(g: &Graph, r: &MaxBatchRequest, what: &str) -> bool {
    let found: MaxBatchResult = search(g, r, &SolveOptions::default()).unwrap();
    assert!(found.complete, "{what}");
    let scan: Vec<bool> = (1..=found.upper_bound + 1).map(|b| fits(g, b, r)).collect();
    assert!(
        !scan[found.upper_bound as usize],
        "{what}: fits above the proven bound"
    );
    let largest = scan.iter().rposition(|&f| f).map_or(0, |i| i as u64 + 1);
    let first_gap = scan.iter().position(|&f| !f).unwrap() as u64;
    let monotone = largest == first_gap;
    let no_recompute = (1..)
        .take_while(|&b| checkpoint_all_peak(&g.at_batch(b).unwrap()) <= r.memory)
        .last()
        .unwrap_or(0);
    assert_eq!(
        found.no_recompute.as_ref().map_or(0, |a| a.batch),
        no_recompute,
        "{what}: the closed form is the scan"
    );
    if monotone {
        assert_eq!(
            found.batch, largest,
            "{what}: the largest batch of the scan"
        );
        assert!(found.monotone_on_probes, "{what}");
    } else {
        // The answer fits and the next batch does not (see the module docs).
        assert!(found.batch == 0 || scan[found.batch as usize - 1], "{what}");
        assert!(!scan[found.batch as usize], "{what}");
    }
    if let (Some(at), Some(result)) = (&found.with_remat, &found.result) {
        let stats = result.stats.as_ref().unwrap();
        assert_eq!(at.batch, found.batch);
        assert!(
            stats.peak_memory <= r.memory && r.cap.admits(stats.overhead),
            "{what}"
        );
        assert_eq!(result.graph.nodes, g.len());
    }
    monotone
}

#[test]
fn on_exactly_linear_graphs_the_search_is_the_scan() {
    let mut cases = 0;
    for seed in 0..6 {
        let graphs = [
            exactly_linear(random_dag(&DagShape::sparse(), seed), seed % 2),
            exactly_linear(random_layered(14, seed), 3),
        ];
        for g in graphs {
            let peak = checkpoint_all_peak(&g.at_batch(1).unwrap());
            for memory in [peak - 1, 5 * peak + 3, 23 * peak] {
                for rho in [None, Some(1.0), Some(1.2), Some(2.0)] {
                    for solver in ["checkpoint-all", "chen-greedy", "sethi-ullman"] {
                        let r = request(&g, memory, rho, None, solver);
                        let what = format!("seed {seed} memory {memory} cap {rho:?} {solver}");
                        // Exactly linear: batch b at M is batch 1 at M/b, and these
                        // solvers' feasibility does not drop as the budget grows.
                        assert!(check_against_scan(&g, &r, &what), "{what}: not monotone");
                        cases += 1;
                    }
                }
            }
        }
    }
    assert_eq!(cases, 6 * 2 * 3 * 4 * 3);
}

#[test]
#[ignore = "needs the MLSys set: REMAT_MLSYS=DIR"]
fn mlsys_graphs_under_the_linear_assumption_the_search_is_the_scan() {
    let cases = [
        (
            "VGG16_256_224x224_train.json",
            [4_000_000_000, 16_000_000_000],
        ),
        (
            "MobileNet_512_224x224_train.json",
            [2_000_000_000, 4_000_000_000],
        ),
    ];
    for (name, memories) in cases {
        let g = mlsys(name);
        let batch = g.batch().unwrap();
        assert_eq!(batch.source, BatchSource::InferredLinear);
        assert_eq!(g.at_batch(batch.size).unwrap().nodes(), g.nodes());
        for memory in memories {
            for (rho, fwd) in [(None, None), (Some(1.1), None), (None, Some(1.0))] {
                for solver in ["checkpoint-all", "chen-greedy"] {
                    let r = request(&g, memory, rho, fwd, solver);
                    let what = format!("{name} memory {memory} cap {rho:?}/{fwd:?} {solver}");
                    // Measured: both solvers are monotone in the batch on these cases.
                    assert!(check_against_scan(&g, &r, &what), "{what}: not monotone");
                }
            }
        }
    }
}

#[test]
#[ignore = "needs the MLSys set: REMAT_MLSYS=DIR"]
fn mlsys_with_auto_the_fast_solver_brackets_and_auto_confirms() {
    let g = mlsys("VGG16_256_224x224_train.json");
    let r = request(&g, 16_000_000_000, None, Some(1.0), "auto");
    let found = search(&g, &r, &SolveOptions::default()).unwrap();
    let solvers: Vec<&str> = found.probes.iter().map(|p| p.solver.as_str()).collect();
    assert_eq!(solvers[0], "sethi-ullman");
    assert!(found.batch > found.no_recompute.as_ref().unwrap().batch);
    assert_eq!(
        found.result.as_ref().unwrap().requested_solver.as_deref(),
        Some("auto")
    );
    assert!(!fits(&g, found.batch + 1, &r) || !found.monotone_on_probes);
    assert!(r.cap.admits(found.with_remat.unwrap().overhead));
}

#[test]
#[ignore = "needs the MLSys set: REMAT_MLSYS=DIR"]
fn mlsys_the_time_limit_bounds_the_whole_search() {
    let g = mlsys("MobileNet_512_224x224_train.json");
    let r = request(&g, 16_000_000_000, None, Some(1.0), "auto");
    let options = SolveOptions {
        time_limit: Some(Duration::from_secs(2)),
        ..SolveOptions::default()
    };
    let start = Instant::now();
    let found = search(&g, &r, &options).unwrap();
    // Constructive solvers run past the deadline as auto's floor; a second of slack.
    assert!(
        start.elapsed() < Duration::from_secs(6),
        "{:?}",
        start.elapsed()
    );
    assert!(found.batch >= found.no_recompute.as_ref().unwrap().batch);
}

fn example_graph() -> PathBuf {
    let path = std::env::temp_dir().join(format!("remat-max-batch-{}.json", std::process::id()));
    let request: Value = serde_json::from_slice(
        &std::fs::read(common::root().join("api/examples/max-batch.request.json")).unwrap(),
    )
    .unwrap();
    std::fs::write(&path, request["graph"].to_string()).unwrap();
    path
}

#[test]
fn the_cli_answers_and_names_the_field_of_bad_input() {
    let graph = example_graph();
    let path = graph.to_str().unwrap();
    let ok = common::remat(&[
        "max-batch",
        path,
        "--memory",
        "2000",
        "--max-overhead",
        "1.5",
        "--json",
    ]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let answer: Value = serde_json::from_slice(&ok.stdout).unwrap();
    let g = common::load(&graph);
    let want = search(
        &g,
        &request(&g, 2000, Some(1.5), None, "auto"),
        &SolveOptions::default(),
    )
    .unwrap();
    assert_eq!(answer["batch"], want.batch);
    assert!(
        String::from_utf8_lossy(&ok.stderr).contains("max-batch: batch"),
        "progress on stderr"
    );
    let no_batch = common::root().join("graphs/linear-8.json");
    let cases: [(&[&str], &str); 5] = [
        (
            &[no_batch.to_str().unwrap(), "--memory", "1GiB"],
            "batch_size",
        ),
        (&[path, "--memory", "500"], "--memory"),
        (
            &[path, "--memory", "2000", "--max-overhead", "0.9"],
            "--max-overhead",
        ),
        (
            &[path, "--memory", "2000", "--max-extra-forward", "-1"],
            "--max-extra-forward",
        ),
        (&[path, "--memory", "2000", "--solver", "nope"], "--solver"),
    ];
    for (args, field) in cases {
        let out = common::remat(&[&["max-batch"], args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(field), "{args:?}: {err}");
    }
    std::fs::remove_file(graph).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_runs_it_as_a_job_and_names_the_field_of_bad_input() {
    let server = Server::start(config(2, 4)).await;
    let example: Value = serde_json::from_slice(
        &std::fs::read(common::root().join("api/examples/max-batch.request.json")).unwrap(),
    )
    .unwrap();
    let created = server.post("/v1/max-batch", &example).await;
    assert_eq!(
        created.status,
        202,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let id = created.json()["id"].as_str().unwrap().to_string();
    let start = Instant::now();
    let job = loop {
        let job = server.get(&format!("/v1/jobs/{id}")).await.json();
        if job["status"] == "succeeded" {
            break job;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{job}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let g = graph_from_value(&example["graph"], Format::Auto).unwrap();
    let r = request(&g, 2000, Some(1.5), None, "chen-greedy");
    let want = serde_json::to_value(search(&g, &r, &SolveOptions::default()).unwrap()).unwrap();
    for field in ["batch", "no_recompute", "with_remat", "upper_bound", "gain"] {
        assert_eq!(job["result"][field], want[field], "{field}");
    }
    let mut no_batch = example.clone();
    no_batch["graph"] = serde_json::to_value(remat::graph::generate::linear(3).to_spec()).unwrap();
    let with = |field: &str, value: Value| {
        let mut body = example.clone();
        body[field] = value;
        body
    };
    let cases = [
        (no_batch, "batch_size"),
        (with("memory", json!(500)), "memory"),
        (with("max_overhead", json!(0.5)), "max_overhead"),
        (with("max_extra_forward", json!(1)), "max_overhead"),
        (with("max_overhead", json!("x")), "max_overhead"),
        (with("memroy", json!(1)), "memroy"),
    ];
    for (body, field) in cases {
        let reply = server.post("/v1/max-batch", &body).await;
        let problem = reply.json();
        assert_eq!(reply.status, 422, "{field}: {problem}");
        assert_eq!(problem["field"], field, "{problem}");
    }
    server.stop().await.unwrap();
}
