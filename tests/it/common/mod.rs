//! Helpers shared by the integration tests.
#![allow(dead_code)]

use remat::graph::load::{load_graph, Format};
use remat::graph::Graph;
use remat::solve::{self, Instance, SolveOptions, SolveResult};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The repository's own graphs, which every clone has: the bundled `graphs/*.json` and
/// the PyTorch exports in `graphs/pytorch/`.
pub fn repo_graph_files() -> Vec<PathBuf> {
    let mut files = json_files(&root().join("graphs"));
    files.extend(json_files(&root().join("graphs/pytorch")));
    files
}

/// The environment variable that names the directory of the MLSys benchmark set
/// (Checkmate's and Moccasin's graphs, GPL-3.0, kept out of this repository; README says
/// where to get them).
pub const MLSYS: &str = "REMAT_MLSYS";

/// The MLSys benchmark set's directory. The tests that read it are named `mlsys_*` and
/// ignored by default (`#[ignore = "needs the MLSys set: REMAT_MLSYS=DIR"]`, run with
/// `cargo test -- --ignored mlsys_`); run so without the set, they fail rather than
/// test less.
pub fn mlsys_dir() -> PathBuf {
    let dir = std::env::var_os(MLSYS)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!("{MLSYS} is not set: it names the directory of the MLSys benchmark graphs")
        });
    assert!(
        dir.is_dir(),
        "{MLSYS}={} is not a directory: it names the MLSys benchmark graphs",
        dir.display()
    );
    dir
}

/// The graph files of the MLSys benchmark set ([`mlsys_dir`]).
pub fn mlsys_graph_files() -> Vec<PathBuf> {
    let files = json_files(&mlsys_dir());
    assert!(!files.is_empty(), "no graph in {}", mlsys_dir().display());
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

/// Whether the full sweeps run: `REMAT_FULL=1` (CI sets it), or `REMAT_BLESS=1`, which
/// needs the full sweep to rewrite fixtures. Without either every sweep runs its fast
/// subset, so that `cargo test` stays quick on a developer's machine.
pub fn full() -> bool {
    std::env::var_os("REMAT_FULL").is_some_and(|v| v != "0") || bless()
}

/// Whether stored fixtures are rewritten from what the tests compute: `REMAT_BLESS=1`
/// (the only regeneration switch; it implies the full sweep).
pub fn bless() -> bool {
    std::env::var_os("REMAT_BLESS").is_some_and(|v| v != "0")
}

/// `items` in full under [`full`], else every `keep_one_in`-th of them, the first
/// included: the fast subset of a sweep.
pub fn subset<T>(items: impl IntoIterator<Item = T>, keep_one_in: usize) -> Vec<T> {
    let all = full();
    items
        .into_iter()
        .enumerate()
        .filter(|(i, _)| all || i % keep_one_in.max(1) == 0)
        .map(|(_, x)| x)
        .collect()
}

/// The one shape of every stored fixture in `tests/fixtures/`: what it lists, how many
/// cases the full sweep checked to find them, and the cases.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture<T> {
    pub about: String,
    pub checked: usize,
    pub cases: Vec<T>,
}

/// Compares the `cases` a sweep found with `tests/fixtures/{name}`. Under the full sweep
/// the whole fixture must match (`REMAT_BLESS=1` rewrites it first); under the fast
/// subset, the stored cases for which `in_subset` holds must equal `cases`.
pub fn check_fixture<T>(
    name: &str,
    about: &str,
    checked: usize,
    cases: Vec<T>,
    in_subset: impl Fn(&T) -> bool,
) where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let path = root().join("tests/fixtures").join(name);
    let found = Fixture {
        about: about.to_string(),
        checked,
        cases,
    };
    let text = serde_json::to_string_pretty(&found).expect("fixtures serialise") + "\n";
    if bless() {
        std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let stored: Fixture<T> = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if full() {
        assert!(
            stored == found,
            "{} changed ({checked} cases checked); REMAT_BLESS=1 rewrites it; got:\n{text}",
            path.display()
        );
    } else {
        let expected: Vec<&T> = stored.cases.iter().filter(|c| in_subset(c)).collect();
        let got: Vec<&T> = found.cases.iter().collect();
        assert!(
            expected == got,
            "{}: the fast subset differs from the stored cases; got:\n{text}",
            path.display()
        );
    }
}

/// Runs the built `remat` binary with `args` in the repository root.
pub fn remat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

/// Solves `graph` at `budget` with `solver` on one thread, within `time_limit_s` seconds
/// when given.
pub fn solve_on_one_thread(
    graph: &Graph,
    budget: u64,
    solver: &str,
    time_limit_s: Option<u64>,
) -> SolveResult {
    let options = SolveOptions {
        threads: Some(1),
        time_limit: time_limit_s.map(Duration::from_secs),
        ..SolveOptions::default()
    };
    solve::solve(&Instance { graph, budget }, solver, &options).unwrap()
}
