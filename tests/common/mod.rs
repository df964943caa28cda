//! Helpers shared by the integration tests.
#![allow(dead_code)]

use remat::graph::load::{load_graph, Format};
use remat::graph::{Graph, GraphSpec, NodeSpec};
use std::path::{Path, PathBuf};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every graph the acceptance tests run on: the bundled `graphs/*.json` and the benchmark
/// graphs beside the project in `../shared/benchmarks/mlsys/` (CI has them; a missing
/// directory fails the test rather than silently testing less).
pub fn all_graph_files() -> Vec<PathBuf> {
    let mut files = json_files(&root().join("graphs"));
    let shared = root().join("../shared/benchmarks/mlsys");
    assert!(
        shared.is_dir(),
        "{} is missing: the benchmark graphs sit beside the project",
        shared.display()
    );
    files.extend(json_files(&shared));
    files
}

pub fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

pub fn load(path: &Path) -> Graph {
    load_graph(path, Format::Auto).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A random DAG from a seed: `n` nodes in order, each reading earlier nodes with
/// probability 0.35 (at least one when it is not the first), costs 0..=4, sizes 1..=4.
pub fn random_dag(n: usize, seed: u64) -> Graph {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move |m: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % m
    };
    let nodes = (0..n)
        .map(|v| {
            let mut inputs: Vec<String> = (0..v)
                .filter(|_| next(100) < 35)
                .map(|u| u.to_string())
                .collect();
            if inputs.is_empty() && v > 0 {
                inputs.push(next(v as u64).to_string());
            }
            NodeSpec {
                id: v.to_string(),
                cost: next(5) as f64,
                memory: 1 + next(4),
                inputs,
                kind: None,
                op: None,
            }
        })
        .collect();
    Graph::new(GraphSpec {
        name: Some(format!("random-dag-{n}-{seed}")),
        fixed_memory: next(3),
        cost_unit: None,
        nodes,
    })
    .expect("random DAGs are valid")
}
