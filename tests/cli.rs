//! The `remat` binary: exit codes (0 ok, 1 infeasible, 2 bad input), output files, and the
//! simulate round trip on a solve result.

use std::path::PathBuf;
use std::process::{Command, Output};

fn remat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remat-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn solve_prints_a_table_and_exits_0() {
    let o = remat(&[
        "solve",
        "graphs/tiny-residual.json",
        "--budget",
        "90%",
        "--solver",
        "exhaustive",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("status     optimal") && out.contains("global_optimum"),
        "{out}"
    );
}

#[test]
fn infeasible_exits_1_and_bad_input_exits_2() {
    let o = remat(&[
        "solve",
        "graphs/linear-8.json",
        "--budget",
        "2",
        "--solver",
        "checkpoint-all",
    ]);
    assert_eq!(code(&o), 1);
    assert!(String::from_utf8_lossy(&o.stdout).contains("infeasible"));
    for (args, says) in [
        (
            vec!["solve", "graphs/linear-8.json", "--budget", "lots"],
            "invalid budget 'lots'",
        ),
        (
            vec![
                "solve",
                "graphs/linear-8.json",
                "--budget",
                "4",
                "--solver",
                "magic",
            ],
            "unknown solver 'magic'",
        ),
        (
            vec![
                "solve",
                "graphs/linear-8.json",
                "--budget",
                "4",
                "--solver",
                "exhaustive",
            ],
            "17 nodes",
        ),
        (
            vec!["inspect", "graphs/nope.json"],
            "cannot read graphs/nope.json",
        ),
        (
            vec!["gen", "linear", "--layers", "0"],
            "--layers must be at least 1",
        ),
    ] {
        let o = remat(&args);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn invalid_graph_file_names_node_and_field() {
    let dir = temp_dir("invalid");
    let path = dir.join("bad.json");
    std::fs::write(
        &path,
        r#"{"nodes": [{"id": "x", "cost": 1, "memory": -3, "inputs": ["y"]}]}"#,
    )
    .unwrap();
    let o = remat(&["inspect", path.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    let e = stderr(&o);
    assert!(
        e.contains("node 'x', field 'memory'") && e.contains("node 'x', field 'inputs'"),
        "{e}"
    );
}

#[test]
fn output_file_round_trips_through_simulate() {
    let dir = temp_dir("roundtrip");
    let result = dir.join("result.json");
    let o = remat(&[
        "solve",
        "graphs/resnet18.json",
        "--budget",
        "80%",
        "--solver",
        "chen-greedy",
        "-o",
        result.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap();
    assert_eq!(written["status"], "feasible");
    let o = remat(&[
        "simulate",
        "graphs/resnet18.json",
        result.to_str().unwrap(),
        "--budget",
        "80%",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let sim: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(sim["stats"]["peak_memory"], written["stats"]["peak_memory"]);
    assert_eq!(sim["fits_budget"], true);
    // The same schedule against a smaller budget exits 1.
    let o = remat(&[
        "simulate",
        "graphs/resnet18.json",
        result.to_str().unwrap(),
        "--budget",
        "10%",
    ]);
    assert_eq!(code(&o), 1);
    assert!(!std::fs::read_dir(&dir).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains(".tmp")));
}

#[test]
fn simulate_reports_the_broken_rule_with_exit_2() {
    let dir = temp_dir("broken");
    let path = dir.join("schedule.json");
    std::fs::write(&path, r#"[{"op": "compute", "node": "1"}]"#).unwrap();
    let o = remat(&["simulate", "graphs/linear-8.json", path.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("event 0 computes '1', but its input '0' is not resident"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn gen_linear_writes_checkmates_graph() {
    let o = remat(&["gen", "linear", "--layers", "8"]);
    assert_eq!(code(&o), 0);
    let bundled =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/graphs/linear-8.json"))
            .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), bundled.trim());
    let o = remat(&["gen", "random-layered", "--nodes", "31", "--seed", "3"]);
    let g: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(g["nodes"].as_array().unwrap().len(), 31);
}
