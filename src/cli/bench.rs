//! `remat bench`: runs one solver over graphs and budget fractions and prints one row per
//! case: graph size, model size, build and solve time, status, cost, lower bound, gap and
//! peak/budget. Model figures come from the result's `details` when the solver reports
//! them (the MILP and LP solvers do).

use super::{bad, CliError};
use crate::budget::Budget;
use crate::graph::load::{load_graph, Format};
use crate::solve::details::{CheckmateDetails, Details};
use crate::solve::{self, checkpoint_all_peak, Instance, SolveOptions, SolveResult};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Graph files, or directories whose `*.json` files are all benchmarked.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Solver name (see `remat solvers`).
    #[arg(short, long, default_value = "milp")]
    solver: String,
    /// Budgets as fractions of the checkpoint-all peak.
    #[arg(long, value_delimiter = ',', default_value = "0.9,0.8")]
    fractions: Vec<f64>,
    /// Time limit per case, in seconds.
    #[arg(long)]
    time_limit: Option<f64>,
    /// Threads for the MILP solver.
    #[arg(long)]
    threads: Option<u32>,
    /// Skip graphs with more nodes than this.
    #[arg(long)]
    max_nodes: Option<usize>,
    /// Print one JSON result per line instead of the table.
    #[arg(long)]
    json: bool,
}

/// The graph files named by `paths`, directories expanded, in a stable order.
fn graph_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

fn short_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    stem.chars().take(24).collect()
}

/// The MILP/LP model's figures, for solvers that build one.
fn model(result: &SolveResult) -> Option<&CheckmateDetails> {
    match result.details.as_ref()? {
        Details::Checkmate(d) => Some(d),
        _ => None,
    }
}

fn cell(value: Option<f64>, digits: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.digits$}"))
}

pub fn run(args: &BenchArgs) -> Result<i32, CliError> {
    if let Some(t) = args.time_limit.filter(|t| !(t.is_finite() && *t > 0.0)) {
        return Err(bad(format!(
            "--time-limit must be a positive number of seconds, got {t}"
        )));
    }
    if let Some(f) = args
        .fractions
        .iter()
        .find(|f| !(f.is_finite() && **f > 0.0))
    {
        return Err(bad(format!(
            "--fractions must be positive numbers, got {f}"
        )));
    }
    solve::find(&args.solver)?;
    let options = SolveOptions {
        time_limit: args.time_limit.map(Duration::from_secs_f64),
        threads: args.threads,
        ..SolveOptions::default()
    };
    if !args.json {
        println!(
            "{:<24} {:>5} {:>5} {:>8} {:>8} {:>7} {:>8} {:<11} {:>14} {:>14} {:>7} {:>7}",
            "graph",
            "nodes",
            "edges",
            "vars",
            "rows",
            "build_s",
            "solve_s",
            "status",
            "cost",
            "lower_bound",
            "gap",
            "peak/B"
        );
    }
    for file in graph_files(&args.paths)? {
        let graph =
            load_graph(&file, Format::Auto).map_err(|e| bad(format!("{}: {e}", file.display())))?;
        if args.max_nodes.is_some_and(|m| graph.len() > m) {
            continue;
        }
        let peak = checkpoint_all_peak(&graph);
        for &fraction in &args.fractions {
            let budget = Budget::OfPeak(fraction).resolve(peak);
            let instance = Instance {
                graph: &graph,
                budget,
            };
            let result = solve::solve(&instance, &args.solver, &options)?;
            if args.json {
                let mut line = serde_json::to_value(&result).expect("results serialise");
                line["file"] = file.display().to_string().into();
                line["fraction"] = fraction.into();
                line["schedule"] = serde_json::Value::Null;
                println!("{line}");
                continue;
            }
            let status = serde_json::to_value(result.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let cost = result.stats.as_ref().map(|s| s.total_cost);
            let peak_ratio = result
                .stats
                .as_ref()
                .map(|s| s.peak_memory as f64 / budget as f64);
            println!(
                "{:<24} {:>5} {:>5} {:>8} {:>8} {:>7} {:>8} {:<11} {:>14} {:>14} {:>7} {:>7}",
                format!("{}@{fraction}", short_name(&file)),
                graph.len(),
                graph.edge_count(),
                cell(
                    model(&result).and_then(|m| m.variables).map(|v| v as f64),
                    0
                ),
                cell(
                    model(&result).and_then(|m| m.constraints).map(|v| v as f64),
                    0
                ),
                cell(model(&result).and_then(|m| m.build_time_s), 2),
                format!("{:.2}", result.solve_time_s),
                status,
                cell(cost, 0),
                cell(result.lower_bound, 0),
                result
                    .gap
                    .map_or("-".into(), |g| format!("{:.2}%", 100.0 * g)),
                cell(peak_ratio, 3),
            );
        }
    }
    Ok(0)
}
