//! The storage tier end to end through the `remat` binary: a graph file with a `storage`
//! object, `solve --solver two-level`, the store/load events of its result replayed by
//! `simulate`, `inspect`'s verdict, `--storage` overrides, and `bench-tiers`.

use std::process::{Command, Output};

const GRAPH: &str = "tests/fixtures/linear-40-storage.json";

fn remat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn two_level_result_replays_in_simulate() {
    let dir = std::env::temp_dir().join(format!("remat-tiers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let result = dir.join("result.json");
    let o = remat(&[
        "solve",
        GRAPH,
        "--budget",
        "8",
        "--solver",
        "two-level",
        "--output",
        result.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["details"]["mode"], "two-level");
    // 41 steps, I = 4: 11 intervals, 8 stored bases; no stall, makespan = model.
    assert_eq!(r["stats"]["tiers"]["stores"], 8);
    assert_eq!(r["stats"]["tiers"]["makespan"], r["details"]["t_async"]);
    let ops: Vec<&str> = r["schedule"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops.iter().filter(|&&op| op == "load").count(), 8);
    let o = remat(&["simulate", GRAPH, result.to_str().unwrap(), "--budget", "8"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stdout(&o).contains("makespan   111 (111 computing, 0 stalled"),
        "{}",
        stdout(&o)
    );
    // Without the tier the same events are rejected, naming the rule.
    let plain = dir.join("plain.json");
    let o = remat(&[
        "gen",
        "linear",
        "--layers",
        "40",
        "-o",
        plain.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let o = remat(&[
        "simulate",
        plain.to_str().unwrap(),
        result.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no slow storage tier"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn inspect_says_whether_the_tier_helps() {
    let o = remat(&["inspect", GRAPH, "--budget", "8"]);
    assert!(
        stdout(&o).contains("storage tier         the tier helps"),
        "{}",
        stdout(&o)
    );
    // Copies of 400 time units: I = 400 > 41 steps, nothing can be stored.
    let o = remat(&["inspect", GRAPH, "--storage", r#"{"transfer_time": 400}"#]);
    assert!(stdout(&o).contains("does not help"), "{}", stdout(&o));
    let o = remat(&["inspect", GRAPH, "--storage", r#"{"transfer_time": -1}"#]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("storage.transfer_time"));
}

#[test]
fn bench_tiers_prints_the_figure_3_table() {
    let o = remat(&["bench-tiers"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    let last = out.lines().last().unwrap();
    // n = 10^4: Revolve 2.4748; paper I = 8, 64: 1; I = 1024: 1947/1024.
    assert!(last.starts_with("   10000    2.4748"), "{last}");
    assert!(last.contains("1.9014"), "{last}");
}
