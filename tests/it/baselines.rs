//! Foundation acceptance: every baseline on every bundled and benchmark graph at 100%, 80%
//! and 50% of the checkpoint-all peak returns a schedule within the budget (checked by the
//! simulator) or `infeasible`; checkpoint-all costs exactly Σ c_v and peaks at the
//! checkpoint-all peak that `remat inspect` reports. Each check runs on the repository's
//! graphs, and again on the MLSys benchmark set where `REMAT_MLSYS` names it (the
//! `mlsys_*` tests, ignored otherwise: `common::mlsys_dir`).

use crate::common;

use remat::budget::Budget;
use remat::schedule::checkpoint_all_peak;
use remat::schedule::{simulate, ScheduleJson};
use remat::solve::{self, Instance, SolveOptions, Status};
use std::path::PathBuf;
use std::process::Command;

const BASELINES: [&str; 4] = [
    "checkpoint-all",
    "chen-sqrt",
    "chen-greedy",
    "recompute-all",
];

#[test]
fn every_baseline_fits_or_says_infeasible() {
    every_baseline_fits_or_says_infeasible_on(common::repo_graph_files());
}

#[test]
#[ignore = "needs the MLSys set: REMAT_MLSYS=DIR"]
fn mlsys_every_baseline_fits_or_says_infeasible() {
    every_baseline_fits_or_says_infeasible_on(common::mlsys_graph_files());
}

fn every_baseline_fits_or_says_infeasible_on(files: Vec<PathBuf>) {
    let mut feasible = 0;
    let mut infeasible = 0;
    for path in files {
        let graph = common::load(&path);
        for fraction in [1.0, 0.8, 0.5] {
            let budget = Budget::OfPeak(fraction).resolve(&graph).unwrap();
            for solver in BASELINES {
                let instance = Instance {
                    graph: &graph,
                    budget,
                };
                let r = solve::solve(&instance, solver, &SolveOptions::default()).unwrap();
                let case = format!("{} at {fraction} with {solver}", path.display());
                match r.status {
                    // A baseline claims nothing; the judge says `optimal` when the cost is
                    // Σ c_v, the bound on every schedule.
                    Status::Feasible | Status::Optimal => {
                        assert_eq!(
                            r.status == Status::Optimal,
                            r.stats.as_ref().unwrap().total_cost == graph.total_cost(),
                            "{case}"
                        );
                        // Re-simulate the JSON the user gets, not the solver's internals.
                        let json: ScheduleJson = r.schedule.clone().expect(&case);
                        let stats =
                            simulate(&graph, &json.resolve(&graph).expect(&case)).expect(&case);
                        assert!(
                            stats.peak_memory <= budget,
                            "{case}: peak {} > {budget}",
                            stats.peak_memory
                        );
                        assert_eq!(
                            Some(stats.total_cost),
                            r.stats.as_ref().map(|s| s.total_cost),
                            "{case}"
                        );
                        feasible += 1;
                    }
                    Status::Infeasible => {
                        assert!(r.schedule.is_none() && r.message.is_some(), "{case}");
                        // Proven only below the trivial bound, where no solver runs.
                        let below = budget < graph.min_feasible_budget().0;
                        assert_eq!(r.proven, Some(below), "{case}");
                        // Checkpoint-all peaks at the checkpoint-all peak: it fits at 100%.
                        assert!(fraction < 1.0 || solver != "checkpoint-all", "{case}");
                        infeasible += 1;
                    }
                    other => panic!("{case}: status {other:?}: {:?}", r.message),
                }
            }
        }
    }
    eprintln!("{feasible} feasible, {infeasible} infeasible");
    assert!(feasible > 0 && infeasible > 0);
}

#[test]
fn checkpoint_all_costs_the_sum_and_peaks_where_inspect_says() {
    checkpoint_all_costs_the_sum_and_peaks_where_inspect_says_on(common::repo_graph_files());
}

#[test]
#[ignore = "needs the MLSys set: REMAT_MLSYS=DIR"]
fn mlsys_checkpoint_all_costs_the_sum_and_peaks_where_inspect_says() {
    checkpoint_all_costs_the_sum_and_peaks_where_inspect_says_on(common::mlsys_graph_files());
}

fn checkpoint_all_costs_the_sum_and_peaks_where_inspect_says_on(files: Vec<PathBuf>) {
    let binary = env!("CARGO_BIN_EXE_remat");
    for path in files {
        let graph = common::load(&path);
        let out = Command::new(binary)
            .arg("inspect")
            .arg(&path)
            .arg("--json")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let inspect_peak = report["checkpoint_all_peak"].as_u64().unwrap();
        let r = solve::solve(
            &Instance {
                graph: &graph,
                budget: inspect_peak,
            },
            "checkpoint-all",
            &SolveOptions::default(),
        )
        .unwrap();
        let stats = r
            .stats
            .unwrap_or_else(|| panic!("{}: {:?}", path.display(), r.message));
        assert_eq!(stats.total_cost, graph.total_cost(), "{}", path.display());
        assert_eq!(stats.recompute_cost, 0.0);
        assert_eq!(stats.peak_memory, inspect_peak, "{}", path.display());
    }
}

/// A sanity ordering on training graphs of real networks: at the checkpoint-all peak,
/// both have a schedule and Chen's greedy one costs less than keeping nothing. The
/// repository's are the PyTorch exports.
#[test]
fn chen_recomputes_less_than_recompute_all_on_real_graphs() {
    chen_recomputes_less_than_recompute_all_on(common::json_files(
        &common::root().join("graphs/pytorch"),
    ));
}

/// [`chen_recomputes_less_than_recompute_all_on_real_graphs`] on the MLSys set's
/// training graphs (`*train*`).
#[test]
#[ignore = "needs the MLSys set: REMAT_MLSYS=DIR"]
fn mlsys_chen_recomputes_less_than_recompute_all_on_real_graphs() {
    chen_recomputes_less_than_recompute_all_on(
        common::mlsys_graph_files()
            .into_iter()
            .filter(|p| p.to_string_lossy().contains("train"))
            .collect(),
    );
}

fn chen_recomputes_less_than_recompute_all_on(train: Vec<PathBuf>) {
    assert!(!train.is_empty(), "no training graph among the benchmarks");
    for path in &train {
        let graph = common::load(path);
        let budget = checkpoint_all_peak(&graph);
        let cost = |s| {
            solve::solve(
                &Instance {
                    graph: &graph,
                    budget,
                },
                s,
                &SolveOptions::default(),
            )
            .unwrap()
            .stats
            .map(|s| s.total_cost)
        };
        let (greedy, all) = (cost("chen-greedy"), cost("recompute-all"));
        let (Some(g), Some(a)) = (greedy, all) else {
            panic!(
                "{}: no schedule at the checkpoint-all peak: chen-greedy {greedy:?}, \
                 recompute-all {all:?}",
                path.display()
            );
        };
        assert!(
            g < a,
            "{}: chen-greedy {g} >= recompute-all {a}",
            path.display()
        );
    }
}
