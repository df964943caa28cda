//! The `remat` binary: exit codes (0 ok, 1 infeasible, 2 bad input), output files, and the
//! simulate round trip on a solve result; the storage tier end to end (a graph with a
//! `storage` object, `--solver two-level`, store/load events replayed by `simulate`,
//! `inspect`'s verdict, `--storage`, `bench-tiers`).

use crate::common;

use common::remat;
use std::path::PathBuf;
use std::process::Output;

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

/// Where `auto` finds no schedule and cannot prove that none exists (a 41-node random layered
/// graph at its proven minimum), the table says a budget at which it does find one.
#[test]
fn an_unproven_infeasible_solve_says_where_a_schedule_fits() {
    let graph = temp_dir("least-budget").join("random-layered-41.json");
    let o = remat(&["gen", "random-layered", "--nodes", "41", "--seed", "4"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    std::fs::write(&graph, &o.stdout).unwrap();
    let graph = graph.to_str().unwrap();
    let o = remat(&["inspect", graph, "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let min = report["min_feasible_budget"].as_u64().unwrap().to_string();
    let o = remat(&["solve", graph, "--budget", &min]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("this solver found no schedule that fits")
            && out.contains("fits at ")
            && out.contains("(sethi-ullman finds a schedule there, and so does auto)"),
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
        // A solver whose scope the graph is out of: block-rotor as the chain solvers.
        (
            vec![
                "solve",
                "tests/fixtures/dag12.json",
                "--budget",
                "90%",
                "--solver",
                "block-rotor",
            ],
            "solver 'block-rotor' cannot solve this graph: the graph has no forward/backward kinds",
        ),
        (
            vec![
                "solve",
                "tests/fixtures/dag12.json",
                "--budget",
                "90%",
                "--solver",
                "revolve",
            ],
            "solver 'revolve' cannot solve this graph: the graph is not a chain",
        ),
        (
            vec!["inspect", "graphs/nope.json"],
            "cannot read graphs/nope.json",
        ),
        (
            vec!["gen", "linear", "--layers", "0"],
            "'--layers <LAYERS>': expected an integer from 1 to 499999, got '0'",
        ),
        (
            vec!["gen", "join", "--branches", "2,0"],
            "'--branches <BRANCHES>': expected an integer from 1 to 499999, got '0'",
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
    // An even count is written in full (it once wrote one node fewer).
    let o = remat(&["gen", "random-layered", "--nodes", "500"]);
    let g: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(g["nodes"].as_array().unwrap().len(), 500);
}

#[test]
fn gen_transformer_writes_31_ops_a_layer_and_checks_its_shape() {
    let o = remat(&["gen", "transformer", "--layers", "2", "--hidden", "256"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let g: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(g["nodes"].as_array().unwrap().len(), 2 * 31 + 8);
    assert_eq!(g["cost_unit"], "FLOP");
    let o = remat(&["gen", "transformer", "--heads", "0"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("--heads must be at least 1"),
        "{}",
        stderr(&o)
    );
    let o = remat(&["gen", "transformer", "--hidden", "100", "--heads", "16"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("not a multiple"), "{}", stderr(&o));
    // Under 2^64 bytes a tensor but over the 2^53 a graph holds: exit 2, not a panic.
    let o = remat(&[
        "gen",
        "transformer",
        "--batch",
        "100000",
        "--seq",
        "100000",
        "--layers",
        "1",
    ]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("'L0.scores'"), "{}", stderr(&o));
}

#[test]
fn bench_takes_budgets_as_every_command_does() {
    let o = remat(&[
        "bench",
        "graphs/linear-8.json",
        "--solver",
        "checkpoint-all",
        "--budgets",
        "100%,1KiB",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let labels: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["budget_label"].to_string())
        .collect();
    assert_eq!(labels, ["\"100%\"", "\"1024B\""]);
    let o = remat(&["bench", "graphs/linear-8.json", "--budgets", "12parsecs"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("--budgets: invalid budget '12parsecs'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn gen_join_writes_a_join_that_join_dp_solves() {
    let dir = std::env::temp_dir().join(format!("remat-gen-join-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("join-3-2.json");
    let file = path.to_str().unwrap();
    let o = remat(&["gen", "join", "--branches", "3,2", "-o", file]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    // Two forward chains, the loss, two backward chains.
    assert_eq!(g["nodes"].as_array().unwrap().len(), 2 * (3 + 2) + 1);
    let o = remat(&["inspect", file]);
    assert!(out(&o).contains("join"), "{}", out(&o));
    let o = remat(&[
        "solve", file, "--budget", "4", "--solver", "join-dp", "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(r["stats"]["peak_memory"].as_u64().unwrap() <= 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A chain of 40 stages with a storage tier (copies take 4 op).
const TIERED: &str = "tests/fixtures/linear-40-storage.json";

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn two_level_result_replays_in_simulate() {
    let dir = temp_dir("tiers");
    let result = dir.join("result.json");
    let o = remat(&[
        "solve",
        TIERED,
        "--budget",
        "8",
        "--solver",
        "two-level",
        "--output",
        result.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
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
    let o = remat(&[
        "simulate",
        TIERED,
        result.to_str().unwrap(),
        "--budget",
        "8",
    ]);
    assert_eq!(code(&o), 0);
    assert!(
        out(&o).contains("makespan   111 (111 computing, 0 stalled"),
        "{}",
        out(&o)
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
    assert_eq!(code(&o), 0);
    let o = remat(&[
        "simulate",
        plain.to_str().unwrap(),
        result.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("no slow storage tier"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn inspect_says_whether_the_tier_helps() {
    let o = remat(&["inspect", TIERED, "--budget", "8"]);
    assert!(
        out(&o).contains("storage tier         the tier helps"),
        "{}",
        out(&o)
    );
    // Copies of 400 time units: I = 400 > 41 steps, nothing can be stored.
    let o = remat(&["inspect", TIERED, "--storage", r#"{"transfer_time": 400}"#]);
    assert!(out(&o).contains("does not help"), "{}", out(&o));
    let o = remat(&["inspect", TIERED, "--storage", r#"{"transfer_time": -1}"#]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("storage.transfer_time"));
}

#[test]
fn bench_tiers_prints_the_figure_3_table() {
    let o = remat(&["bench-tiers"]);
    assert_eq!(code(&o), 0);
    let out = out(&o);
    // n = 10^4: Revolve 2.4748; paper I = 8, 64: 1; I = 1024: 1947/1024 = 1.9014; the
    // scheme with its sweep at I = 8: 1.8743, which the simulator reproduces.
    let row = out.lines().find(|l| l.starts_with("   10000    2.4748"));
    assert!(
        row.is_some_and(|r| r.contains("1.9014") && r.contains("1.8743")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("   10000      8        1.8743")),
        "{out}"
    );
}

/// The solver options are validated by the one front-door validator: every command
/// refuses a bad value with exit 2 and names its flag (`--mip-gap` used to reach the
/// solver unchecked).
#[test]
fn bad_option_values_exit_2_naming_the_flag() {
    let solve = ["solve", "graphs/linear-8.json", "--budget", "90%"];
    for (flag, value, says) in [
        (
            "--mip-gap",
            "-1",
            "--mip-gap must be a finite number >= 0, got -1",
        ),
        (
            "--mip-gap",
            "NaN",
            "--mip-gap must be a finite number >= 0, got NaN",
        ),
        (
            "--mip-gap",
            "inf",
            "--mip-gap must be a finite number >= 0, got inf",
        ),
        (
            "--time-limit",
            "0",
            "--time-limit must be a number of seconds greater than 0 and at most 1e6, got 0",
        ),
        (
            "--time-limit",
            "-2",
            "--time-limit must be a number of seconds greater than 0 and at most 1e6, got -2",
        ),
    ] {
        let o = remat(&[&solve[..], &[flag, value]].concat());
        assert_eq!(code(&o), 2, "{flag} {value}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim(), format!("error: {says}"));
    }
    let bench = ["bench", "graphs/linear-8.json", "--time-limit", "NaN"];
    let batch = [
        "batch",
        "--graphs",
        "graphs/linear-8.json",
        "--budgets",
        "90%",
        "--out",
        "/nonexistent",
        "--time-limit",
        "-1",
    ];
    for args in [&bench[..], &batch[..]] {
        let o = remat(args);
        assert_eq!(code(&o), 2, "{args:?}");
        let said = stderr(&o);
        assert!(
            said.contains("--time-limit must be a number of seconds greater than 0"),
            "{said}"
        );
    }
}

/// A schedule file that holds no schedule: a result without one, or the wrong shape;
/// the message lists every event kind of the contract.
#[test]
fn simulate_names_what_the_schedule_file_lacks() {
    let dir = temp_dir("no-schedule");
    let path = dir.join("result.json");
    let file = path.to_str().unwrap();
    std::fs::write(&path, r#"{"status": "infeasible", "schedule": null}"#).unwrap();
    let o = remat(&["simulate", "graphs/linear-8.json", file]);
    assert_eq!(code(&o), 2);
    assert_eq!(
        stderr(&o).trim(),
        format!("error: {file}: the result holds no schedule")
    );
    std::fs::write(&path, r#"{"steps": []}"#).unwrap();
    let o = remat(&["simulate", "graphs/linear-8.json", file]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains(r#""compute"|"free"|"store"|"load""#),
        "{}",
        stderr(&o)
    );
}

/// Issue 26, item 3: `--time-limit` counts from the command's start, reading included. A
/// 20,000-node graph (scaled down from 1,000,000; about 3 MB) cannot be read in a
/// millisecond: the command stops reading at the deadline and exits 1 (no schedule in
/// time), naming what it was doing; with time to read it, the solve runs.
#[test]
fn the_time_limit_counts_the_reading_of_the_graph() {
    let dir = temp_dir("deadline");
    let graph = dir.join("rl.json");
    let path = graph.to_str().unwrap();
    let o = remat(&["gen", "random-layered", "--nodes", "20000", "-o", path]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let solve = |limit: &str| {
        remat(&[
            "solve",
            path,
            "-b",
            "80%",
            "--solver",
            "chen-sqrt",
            "--time-limit",
            limit,
        ])
    };
    let o = solve("0.001");
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the time limit passed while reading the graph"),
        "{}",
        stderr(&o)
    );
    let o = solve("600");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("solver     chen-sqrt"),
        "{}",
        stderr(&o)
    );
}

/// Outputs that would destroy an input or cannot be written are refused before any work,
/// exit 2 naming them; the input is left as it was.
#[test]
fn an_output_that_is_an_input_or_has_no_directory_is_refused_first() {
    let dir = temp_dir("output-is-input");
    let graph = dir.join("g.json");
    std::fs::copy("graphs/linear-8.json", &graph).unwrap();
    let before = std::fs::read(&graph).unwrap();
    let g = graph.to_str().unwrap();
    for args in [
        vec!["solve", g, "-b", "90%", "-o", g],
        vec!["plot", "timeline", g, "-b", "90%", "-o", g],
        vec!["max-batch", g, "--memory", "1GiB", "-o", g],
    ] {
        let o = remat(&args);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("is the input"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert_eq!(
        std::fs::read(&graph).unwrap(),
        before,
        "the input is intact"
    );
    let missing = dir.join("no-such-dir/r.json");
    let o = remat(&["solve", g, "-b", "90%", "-o", missing.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("no-such-dir does not exist"),
        "{}",
        stderr(&o)
    );
    // A name of 245 bytes is a valid name: its temporary file's name must be one too.
    let long = dir.join(format!("{}.json", "y".repeat(245)));
    let o = remat(&["solve", g, "-b", "90%", "-o", long.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(long.is_file());
}

/// Standard output that cannot be written is an error (exit 2, the reason), not a panic.
#[test]
fn an_unwritable_standard_output_exits_2() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    let Ok(full) = full else {
        eprintln!("skipped: no /dev/full on this machine");
        return;
    };
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(["solvers", "--json"])
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot write standard output"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
}

/// Standard error that cannot be written loses its lines, not the exit code: each command
/// still ends as it would have (an error 2, a plot 0), never with a panic (101).
#[test]
fn an_unwritable_standard_error_keeps_the_exit_code() {
    let dir = temp_dir("stderr-full");
    let svg = dir.join("t.svg");
    for (args, expected) in [
        (vec!["inspect", "/nonexistent/graph.json"], 2),
        (vec!["solve", "graphs/tiny-residual.json", "-b", "nan"], 2),
        (
            vec![
                "solve",
                "graphs/tiny-residual.json",
                "-b",
                "100%",
                "-s",
                "nope",
            ],
            2,
        ),
        (
            vec![
                "plot",
                "tradeoff",
                "graphs/tiny-residual.json",
                "--points",
                "2",
                "-o",
                svg.to_str().unwrap(),
            ],
            0,
        ),
    ] {
        let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            eprintln!("skipped: no /dev/full on this machine");
            return;
        };
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_remat"))
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stderr(full)
            .output()
            .unwrap();
        assert_eq!(code(&o), expected, "{args:?}");
    }
    assert!(svg.is_file());
}

/// `gen transformer` keeps within the generators' million nodes: more layers is a flag error.
#[test]
fn gen_transformer_layers_are_capped() {
    let o = remat(&["gen", "transformer", "--layers", "100000"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("from 1 to 32257"), "{}", stderr(&o));
}

/// A graph read from a pipe whose writer stalls stops at the time limit, exit 2, instead of
/// waiting on the pipe; `-o` naming a pipe no process reads is an error, not a wait.
#[test]
fn a_stalled_pipe_is_not_waited_on_past_the_time_limit() {
    let dir = temp_dir("stalled-pipe");
    let pipe = dir.join("graph.json");
    let _ = std::fs::remove_file(&pipe);
    let made = std::process::Command::new("mkfifo").arg(&pipe).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no mkfifo on this machine");
        return;
    }
    let writer = {
        let pipe = pipe.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut w = std::fs::OpenOptions::new().write(true).open(&pipe).unwrap();
            w.write_all(b"{\"nodes\": [").unwrap();
            std::thread::sleep(std::time::Duration::from_secs(6));
        })
    };
    let start = std::time::Instant::now();
    let p = pipe.to_str().unwrap();
    let o = remat(&["solve", p, "-b", "90%", "--time-limit", "1"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("time limit"), "{}", stderr(&o));
    assert!(
        start.elapsed() < std::time::Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
    writer.join().unwrap();
    let o = remat(&["solve", "graphs/linear-8.json", "-b", "90%", "-o", p]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("no process reads"), "{}", stderr(&o));
}

/// Ctrl-C while `-o` is being written removes the temporary file: nothing is left behind.
#[test]
fn an_interrupt_while_writing_leaves_no_temporary_file() {
    let dir = temp_dir("interrupt-write");
    for _ in 0..5 {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_remat"))
            .args(["gen", "transformer", "--layers", "30000", "-o", "tr.json"])
            .current_dir(&dir)
            .spawn()
            .unwrap();
        let temporary = || {
            std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        };
        while child.try_wait().unwrap().is_none() && !temporary() {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        if child.try_wait().unwrap().is_some() {
            continue; // written before it was seen: try again
        }
        // SAFETY: sends SIGINT to the child this test started.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGINT);
        }
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert!(
            status.signal() == Some(libc::SIGINT) || status.success(),
            "{status:?}"
        );
        assert!(!temporary(), "a temporary file is left behind");
        return;
    }
    eprintln!("skipped: the write was never caught in progress");
}

/// A flag the picture does not use is an error naming it (it was ignored, exit 0); the
/// trade-off's default solvers are the sweep's own, as the help says.
#[test]
fn plot_refuses_flags_its_picture_does_not_use() {
    let dir = temp_dir("plot-misplaced");
    let out = dir.join("p.svg");
    let out = out.to_str().unwrap();
    let g = "graphs/linear-8.json";
    for (args, flag) in [
        (
            vec!["plot", "tradeoff", g, "--schedule", "s.json", "-o", out],
            "--schedule",
        ),
        (
            vec!["plot", "tradeoff", g, "--budget", "50%", "-o", out],
            "--budget",
        ),
        (
            vec![
                "plot",
                "timeline",
                g,
                "-b",
                "90%",
                "--solvers",
                "dtr",
                "-o",
                out,
            ],
            "--solvers",
        ),
        (
            vec!["plot", "stages", g, "-b", "90%", "--points", "3", "-o", out],
            "--points",
        ),
    ] {
        let o = remat(&args);
        assert_eq!(code(&o), 2, "{args:?}");
        assert!(
            stderr(&o).contains(&format!("{flag} does not apply")),
            "{}",
            stderr(&o)
        );
    }
    let help = String::from_utf8(remat(&["plot", "--help"]).stdout).unwrap();
    let defaults = remat::plot::sweep::DEFAULT_SOLVERS.join(",");
    assert!(help.contains(&format!("[default: {defaults}]")), "{help}");
}
