//! `remat batch` end to end: the benchmark graphs at three budgets, resume, and runs that
//! are interrupted (SIGINT) or killed (SIGKILL) midway.

use crate::common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

fn remat() -> Command {
    Command::new(env!("CARGO_BIN_EXE_remat"))
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remat-batch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A fresh directory `name` holding `g/`, with a copy of graphs/linear-8.json under each of
/// `files`: the directory and `g/`.
fn linear_graphs(name: &str, files: &[&std::ffi::OsStr]) -> (PathBuf, PathBuf) {
    let dir = tempdir(name);
    let graphs = dir.join("g");
    std::fs::create_dir_all(&graphs).unwrap();
    let linear = Path::new(env!("CARGO_MANIFEST_DIR")).join("graphs/linear-8.json");
    for file in files {
        std::fs::copy(&linear, graphs.join(file)).unwrap();
    }
    (dir, graphs)
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            !name.starts_with("summary")
        })
        .collect();
    files.sort();
    files
}

/// Every file in `dir` is a complete result (no partial or temporary file).
fn assert_complete(dir: &Path) {
    for f in json_files(dir) {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        assert!(!name.starts_with('.'), "temporary file left behind: {name}");
        let v: Value = serde_json::from_slice(&std::fs::read(&f).unwrap())
            .unwrap_or_else(|e| panic!("{name} is not complete JSON: {e}"));
        assert!(v["status"].is_string(), "{name}");
    }
}

fn summary(dir: &Path) -> Vec<Value> {
    let s: Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    s["rows"].as_array().unwrap().clone()
}

fn run(args: &[&str]) -> Output {
    remat().args(args).output().unwrap()
}

#[test]
fn the_exported_graphs_at_three_budgets_then_a_second_run_skips_everything() {
    let graphs = Path::new(env!("CARGO_MANIFEST_DIR")).join("graphs/pytorch");
    // 10% is below what any schedule of these graphs needs (a node's own inputs and output).
    three_budgets_then_a_second_run_skips_everything(&graphs, "80%,50%,10%", "pytorch");
}

/// The MLSys benchmark set, where `REMAT_MLSYS` names it (`common::mlsys_dir`).
#[test]
#[ignore = "needs the MLSys set: REMAT_MLSYS=DIR"]
fn mlsys_benchmarks_at_three_budgets_then_a_second_run_skips_everything() {
    three_budgets_then_a_second_run_skips_everything(&common::mlsys_dir(), "90%,80%,70%", "mlsys");
}

fn three_budgets_then_a_second_run_skips_everything(graphs: &Path, budgets: &str, tag: &str) {
    let n_graphs = common::json_files(graphs).len();
    let out = tempdir(tag);
    let args = [
        "batch",
        "--graphs",
        graphs.to_str().unwrap(),
        "--budgets",
        budgets,
        "--out",
        out.to_str().unwrap(),
        "--jobs",
        "2",
        // The batch mechanics under test, not a solver: chen-greedy answers every item in
        // seconds (`auto` would give the MILP up to 60 s on each non-chain graph).
        "--solver",
        "chen-greedy",
    ];
    let first = run(&args);
    let stderr = String::from_utf8_lossy(&first.stderr);
    // Some budgets are below what any schedule needs: those items are listed, exit 1.
    assert_eq!(first.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("infeasible"), "{stderr}");
    let files = json_files(&out);
    assert_eq!(
        files.len(),
        3 * n_graphs,
        "one result file per (graph, budget)"
    );
    assert_complete(&out);
    let rows = summary(&out);
    assert_eq!(rows.len(), 3 * n_graphs);
    for row in &rows {
        let file = row["output"].as_str().expect("every item has its file");
        let result: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        assert_eq!(row["status"], result["status"]);
        assert_eq!(row["cost"], result["stats"]["total_cost"]);
        assert_eq!(row["skipped"], false);
    }
    let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 3 * n_graphs);
    assert!(csv.starts_with(
        "graph,budget,budget_bytes,solver,status,cost,overhead,peak,lower_bound,time_s"
    ));

    let modified = |f: &PathBuf| std::fs::metadata(f).unwrap().modified().unwrap();
    let before: Vec<_> = files.iter().map(modified).collect();
    let second = run(&args);
    assert_eq!(second.status.code(), Some(1));
    let rows = summary(&out);
    assert!(rows.iter().all(|r| r["skipped"] == true), "all skipped");
    let after: Vec<_> = files.iter().map(modified).collect();
    assert_eq!(before, after, "no result file was rewritten");
    std::fs::remove_dir_all(&out).unwrap();
}

/// Two small graphs and one on which chen-greedy takes seconds (random layered, 40,000
/// nodes: about 6 s a budget in a debug build), sorted so the slow one comes last.
fn slow_inputs() -> PathBuf {
    let dir = tempdir("inputs");
    for (name, graph) in [
        ("a-linear5.json", remat::graph::generate::linear(5)),
        ("b-linear6.json", remat::graph::generate::linear(6)),
        (
            "z-slow.json",
            remat::graph::generate::random_layered(40_000, 3),
        ),
    ] {
        std::fs::write(
            dir.join(name),
            serde_json::to_vec(&graph.to_spec()).unwrap(),
        )
        .unwrap();
    }
    dir
}

fn start(inputs: &Path, out: &Path) -> Child {
    remat()
        .args([
            "batch",
            "--graphs",
            inputs.to_str().unwrap(),
            "--budgets",
            "100%,90%",
            "--solver",
            "chen-greedy",
            "--out",
            out.to_str().unwrap(),
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the four small items are written (the slow graph is then being solved).
fn wait_for_small_items(out: &Path) {
    let start = Instant::now();
    while json_files(out).len() < 4 {
        assert!(start.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
}

fn signal(child: &Child, sig: &str) {
    assert!(Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success());
}

#[test]
fn an_interrupted_or_killed_run_leaves_no_partial_file_and_resumes() {
    let inputs = slow_inputs();
    let out = tempdir("killed");

    let mut child = start(&inputs, &out);
    wait_for_small_items(&out);
    signal(&child, "-INT");
    let begin = Instant::now();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "Ctrl-C exits 130");
    assert!(
        begin.elapsed() < Duration::from_secs(3),
        "the solve in flight was cancelled"
    );
    assert_complete(&out);
    assert_eq!(json_files(&out).len(), 4);
    assert!(!out.join("summary.json").exists());

    let mut child = start(&inputs, &out);
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, "-TERM");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143), "SIGTERM exits 143");
    assert_complete(&out);

    let mut child = start(&inputs, &out);
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, "-KILL");
    child.wait().unwrap();
    assert_complete(&out);
    assert_eq!(json_files(&out).len(), 4, "the slow items were not written");

    let resumed = start(&inputs, &out).wait_with_output().unwrap();
    assert!(
        matches!(resumed.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert_complete(&out);
    assert_eq!(json_files(&out).len(), 6);
    let rows = summary(&out);
    let skipped = rows.iter().filter(|r| r["skipped"] == true).count();
    assert_eq!(skipped, 4, "the small items were kept from the first run");
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_dir_all(&inputs).unwrap();
}

fn succeeded(o: &Output) {
    let said = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{said}");
}

/// `bench` and `batch` expand the same arguments to the same graph list: directories to
/// their `*.json` files, the whole list sorted, a file named twice taken once, and a
/// missing path refused with exit 2 by both (bench used to keep the arguments' order,
/// repeat files and skip empty directories).
#[test]
fn bench_and_batch_see_the_same_graphs_for_the_same_paths() {
    let inputs = tempdir("same-list");
    for (name, layers) in [("b-linear3.json", 3), ("a-linear2.json", 2)] {
        let spec = remat::graph::generate::linear(layers).to_spec();
        std::fs::write(inputs.join(name), serde_json::to_vec(&spec).unwrap()).unwrap();
    }
    std::fs::write(inputs.join("notes.txt"), "not a graph").unwrap();
    let explicit = inputs.join("b-linear3.json");
    let paths = [explicit.to_str().unwrap(), inputs.to_str().unwrap()];
    let bench = run(&[
        &[
            "bench",
            "--solver",
            "checkpoint-all",
            "--fractions",
            "1",
            "--json",
        ][..],
        &paths,
    ]
    .concat());
    succeeded(&bench);
    let benched: Vec<String> = String::from_utf8_lossy(&bench.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["file"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let out = tempdir("same-list-out");
    let batch = run(&[
        &[
            "batch",
            "--solver",
            "checkpoint-all",
            "--budgets",
            "100%",
            "--out",
            out.to_str().unwrap(),
            "--graphs",
        ][..],
        &paths,
    ]
    .concat());
    succeeded(&batch);
    let batched: Vec<String> = summary(&out)
        .iter()
        .map(|r| r["graph"].as_str().unwrap().to_string())
        .collect();
    let want: Vec<String> = ["a-linear2.json", "b-linear3.json"]
        .iter()
        .map(|n| inputs.join(n).display().to_string())
        .collect();
    assert_eq!(benched, want);
    assert_eq!(batched, want);

    let missing = inputs.join("nope.json");
    let missing = missing.to_str().unwrap();
    let bench = run(&["bench", "--solver", "checkpoint-all", missing]);
    let batch = run(&[
        "batch",
        "--budgets",
        "100%",
        "--out",
        out.to_str().unwrap(),
        "--graphs",
        missing,
    ]);
    for o in [&bench, &batch] {
        assert_eq!(o.status.code(), Some(2));
        assert_eq!(
            String::from_utf8_lossy(&o.stderr).trim(),
            format!("error: {missing}: no such file or directory")
        );
    }
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_dir_all(&inputs).unwrap();
}

/// Issue 26, item 4: runs sharing one `--out`. Each run's start-up sweep used to remove
/// every temporary file of its items, among them the other runs' writes in flight, which
/// then failed ("cannot write ...: No such file or directory (os error 2)"). Here one run
/// writes large results while more runs on the same items start every 100 ms: every run
/// exits 0 with no error row, and no temporary file is left.
#[test]
fn runs_sharing_an_out_directory_do_not_disturb_each_other() {
    let inputs = tempdir("shared-inputs");
    for i in 0..4 {
        let spec = remat::graph::generate::linear(3_000).to_spec();
        std::fs::write(
            inputs.join(format!("g{i}.json")),
            serde_json::to_vec(&spec).unwrap(),
        )
        .unwrap();
    }
    let out = tempdir("shared-out");
    let start = |jobs: &str| {
        remat()
            .args(["batch", "--graphs", inputs.to_str().unwrap()])
            .args(["--budgets", "100%,1TB,2TB,3TB,4TB,5TB,6TB,7TB"])
            .args(["--solver", "checkpoint-all", "--jobs", jobs])
            .args(["--out", out.to_str().unwrap()])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut first = start("2");
    let mut runs = Vec::new();
    while first.try_wait().unwrap().is_none() && runs.len() < 12 {
        runs.push(start("1"));
        std::thread::sleep(Duration::from_millis(100));
    }
    let started = runs.len();
    for run in std::iter::once(first).chain(runs) {
        let o = run.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{said}");
        assert!(!said.contains("cannot write"), "{said}");
    }
    assert!(started > 0, "the first run ended before any other started");
    assert_complete(&out);
    assert_eq!(json_files(&out).len(), 4 * 8);
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_dir_all(&inputs).unwrap();
}

/// `--out` among the graphs is refused (a result could replace a graph, the next run would
/// read results as graphs); a pipe planted at a result's name is an error row, not a hang.
#[test]
fn out_among_the_graphs_is_refused_and_a_planted_pipe_does_not_hang() {
    let dir = tempdir("out-among-graphs");
    let linear = Path::new(env!("CARGO_MANIFEST_DIR")).join("graphs/linear-8.json");
    std::fs::copy(linear, dir.join("a.json")).unwrap();
    let d = dir.to_str().unwrap();
    let o = remat()
        .args(["batch", "--graphs", d, "--budgets", "90%", "--out", d])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("holds the graph"));

    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let fifo = out.join("a--90pct.json");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped the pipe: no mkfifo on this machine");
        return;
    }
    let mut child = remat()
        .args(["batch", "--graphs", dir.join("a.json").to_str().unwrap()])
        .args(["--budgets", "90%", "--out", out.to_str().unwrap()])
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("batch hangs on a pipe planted at a result's name");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(4), "an error row");
}

/// A result from an earlier run is skipped only while it is still this item's answer: the
/// same solver, and the simulator replaying its schedule on the graph as it is now. A
/// changed graph or another solver is solved again, never reported with stale figures.
#[test]
fn a_stale_result_is_solved_again_not_skipped() {
    let (dir, graphs) = linear_graphs("stale-result", &["m.json".as_ref()]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dir.join("out");
    let run = |solver: &str| -> Value {
        let o = remat()
            .args([
                "batch",
                "--graphs",
                graphs.to_str().unwrap(),
                "--budgets",
                "90%",
            ])
            .args(["--out", out.to_str().unwrap(), "--solver", solver])
            .output()
            .unwrap();
        assert!(o.status.code().is_some_and(|c| c <= 1), "{o:?}");
        let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
        serde_json::from_str::<Value>(&summary).unwrap()["rows"][0].clone()
    };
    assert_eq!(run("auto")["skipped"], false);
    assert_eq!(
        run("auto")["skipped"],
        true,
        "the same run again is skipped"
    );
    assert_eq!(
        run("checkpoint-all")["skipped"],
        false,
        "another solver is solved"
    );
    std::fs::copy(
        root.join("graphs/tiny-residual.json"),
        graphs.join("m.json"),
    )
    .unwrap();
    let row = run("checkpoint-all");
    assert_eq!(row["skipped"], false, "a changed graph is solved again");
    assert_ne!(row["budget_bytes"], 9, "{row}");
}

/// A finished item is skipped whatever digits its cost prints with: DTR's cost on the small
/// residual graph at 90% prints as 51.837199999999996, which serde_json reads back one unit
/// in the last place off, and such items were solved again on every run.
#[test]
fn a_cost_of_seventeen_digits_is_still_skipped() {
    let dir = tempdir("seventeen-digits");
    let graphs = dir.join("g");
    std::fs::create_dir_all(&graphs).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(
        root.join("graphs/tiny-residual.json"),
        graphs.join("t.json"),
    )
    .unwrap();
    let out = dir.join("out");
    let args = [
        "batch",
        "--graphs",
        graphs.to_str().unwrap(),
        "--budgets",
        "100%,90%",
        "--solver",
        "dtr",
        "--out",
        out.to_str().unwrap(),
    ];
    succeeded(&run(&args));
    succeeded(&run(&args));
    let rows = summary(&out);
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter().all(|r| r["skipped"] == true),
        "every item skipped on the second run: {rows:?}"
    );
}

/// A `*.json` entry that is no readable file (a broken link) is named, not skipped unseen;
/// one file named by two paths, or one budget given twice, is one item.
#[test]
fn discovery_names_what_it_cannot_read_and_counts_each_item_once() {
    let (dir, graphs) = linear_graphs("discovery", &["a.json".as_ref()]);
    std::os::unix::fs::symlink("nowhere.json", graphs.join("broken.json")).unwrap();
    let out = dir.join("out");
    let batch = |paths: &[&Path], budgets: &str| {
        let mut c = remat();
        c.arg("batch").arg("--graphs").args(paths);
        c.args(["--budgets", budgets, "--out", out.to_str().unwrap()]);
        c.output().unwrap()
    };
    let o = batch(&[&graphs], "90%");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("broken.json"),
        "{o:?}"
    );
    std::fs::remove_file(graphs.join("broken.json")).unwrap();
    let twice = graphs.join(".").join("a.json");
    let o = batch(&[&graphs.join("a.json"), &twice], "90%,90%");
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["rows"].as_array().unwrap().len(), 1, "{summary}");
}

/// Two graphs whose names differ only in bytes that are not UTF-8 (`g\xff.json`,
/// `g\xfe.json`) write two result files: named from the lossy text, both were `g�--*.json`,
/// and batch refused them as one, naming `g�.json` twice.
#[test]
fn names_that_are_not_utf8_write_their_own_result_files() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let names = [b"g\xff.json", b"g\xfe.json"].map(|name| OsStr::from_bytes(name));
    let (dir, graphs) = linear_graphs("not-utf8", &names);
    let out = dir.join("out");
    let o = remat()
        .arg("batch")
        .arg("--graphs")
        .arg(&graphs)
        .args(["--budgets", "90%", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    succeeded(&o);
    let mut written: Vec<Vec<u8>> = json_files(&out)
        .iter()
        .map(|f| f.file_name().unwrap().as_bytes().to_vec())
        .collect();
    written.sort();
    assert_eq!(
        written,
        [&b"g\xfe--90pct.json"[..], &b"g\xff--90pct.json"[..]],
        "{o:?}"
    );
    assert_complete(&out);
    assert_eq!(summary(&out).len(), 2);
}
