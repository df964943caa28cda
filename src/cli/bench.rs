//! `remat bench`: runs one solver over graphs and budget fractions and prints one row per
//! case: graph size, model size, build and solve time, status, cost, lower bound, gap and
//! peak/budget. Model figures come from the result's `details` when the solver reports
//! them (the MILP and LP solvers do).

use super::args::BenchArgs;
use super::render::cell;
use super::{bad, CliError};
use crate::budget::Budget;
use crate::front::{graph_files, OptionsInput};
use crate::graph::load::{load_graph, Format};
use crate::solve::details::{CheckmateDetails, Details};
use crate::solve::{self, Instance, SolveResult};
use std::path::Path;

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

pub(super) fn run(args: &BenchArgs) -> Result<i32, CliError> {
    let options = OptionsInput {
        time_limit_s: args.time_limit,
        threads: args.threads,
        ..OptionsInput::default()
    }
    .validate()?;
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
    let files = graph_files(&args.paths)?;
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
    for file in files {
        let graph =
            load_graph(&file, Format::Auto).map_err(|e| bad(format!("{}: {e}", file.display())))?;
        if args.max_nodes.is_some_and(|m| graph.len() > m) {
            continue;
        }
        for &fraction in &args.fractions {
            let budget = Budget::OfPeak(fraction).resolve(&graph)?;
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
                result.status.as_str(),
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
