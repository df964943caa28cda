//! `remat bench`: runs one solver over graphs and budgets and prints one row per case:
//! graph size, model size, build time, the time to the first verified schedule and the
//! whole solve time, the solver that produced the schedule, status, cost and its increase
//! over `Σ_v c_v`, lower bound, gap, peak/budget and what ended an `auto` search. Model figures come from the result's `details` when the solver reports
//! them (the MILP and LP solvers do).

use super::args::BenchArgs;
use super::render::cell;
use super::{bad, solve_options, CliError};
use crate::budget::{between_min_and_peak, Budget};
use crate::front::graph_files;
use crate::graph::load::{load_graph, Format};
use crate::graph::Graph;
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

/// A budget of the bench: a fraction of the checkpoint-all peak, a fraction of the way
/// from the minimum feasible budget to that peak, or a budget as every command takes it.
#[derive(Clone, Copy)]
enum BenchBudget {
    OfPeak(f64),
    Span(f64),
    Given(Budget),
}

impl BenchBudget {
    fn resolve(self, graph: &Graph) -> Result<u64, CliError> {
        Ok(match self {
            BenchBudget::OfPeak(f) => Budget::OfPeak(f).resolve(graph)?,
            BenchBudget::Span(f) => between_min_and_peak(graph, f),
            BenchBudget::Given(b) => b.resolve(graph)?,
        })
    }

    fn label(self) -> String {
        match self {
            BenchBudget::OfPeak(f) => format!("{f}"),
            BenchBudget::Span(f) => format!("span{f}"),
            BenchBudget::Given(Budget::Bytes(b)) => format!("{b}B"),
            BenchBudget::Given(b) => b.to_string(),
        }
    }
}

/// The budgets the arguments ask for.
fn budgets(args: &BenchArgs) -> Result<Vec<BenchBudget>, CliError> {
    let within = |flag: &str, values: &[f64], max: f64| match values
        .iter()
        .find(|f| !(f.is_finite() && **f > 0.0 && **f <= max))
    {
        Some(f) => Err(bad(format!(
            "{flag} must be numbers in (0, {max}], got {f}"
        ))),
        None => Ok(()),
    };
    within("--fractions", &args.fractions, 1e6)?;
    within("--span", &args.span, 1.0)?;
    Ok(if !args.budgets.is_empty() {
        args.budgets
            .iter()
            .map(|b| {
                b.parse::<Budget>()
                    .map(BenchBudget::Given)
                    .map_err(|e| bad(format!("--budgets: {e}")))
            })
            .collect::<Result<_, _>>()?
    } else if !args.span.is_empty() {
        args.span.iter().map(|&f| BenchBudget::Span(f)).collect()
    } else {
        args.fractions
            .iter()
            .map(|&f| BenchBudget::OfPeak(f))
            .collect()
    })
}

/// Seconds to the first verified schedule: `auto` records it, any other solver has its
/// schedule at the end.
fn first_found_s(result: &SolveResult) -> Option<f64> {
    match result.details.as_ref() {
        Some(Details::Auto(d)) => d.first_found_s,
        _ => result.stats.as_ref().map(|_| result.solve_time_s),
    }
}

pub(super) fn run(args: &BenchArgs) -> Result<i32, CliError> {
    let options = solve_options(&args.solver_flags, args.time_limit, 1)?;
    let budgets = budgets(args)?;
    solve::find(&args.solver)?;
    let files = graph_files(&args.paths)?;
    if !args.json {
        println!(
            "{:<30} {:>5} {:>5} {:>8} {:>8} {:>7} {:>7} {:>7} {:<14} {:<16} {:>14} {:>8} {:>14} {:>7} {:>6} {:<10}",
            "graph@budget",
            "nodes",
            "edges",
            "vars",
            "rows",
            "build_s",
            "first_s",
            "solve_s",
            "solver",
            "status",
            "cost",
            "increase",
            "lower_bound",
            "gap",
            "peak/B",
            "ended_by"
        );
    }
    for file in files {
        let graph =
            load_graph(&file, Format::Auto).map_err(|e| bad(format!("{}: {e}", file.display())))?;
        if args.max_nodes.is_some_and(|m| graph.len() > m) {
            continue;
        }
        for &budget in &budgets {
            let label = budget.label();
            let budget = budget.resolve(&graph)?;
            let instance = Instance {
                graph: &graph,
                budget,
            };
            let result = solve::solve(&instance, &args.solver, &options)?;
            if args.json {
                let mut line = serde_json::to_value(&result).expect("results serialise");
                line["file"] = file.display().to_string().into();
                line["budget_label"] = label.into();
                line["schedule"] = serde_json::Value::Null;
                println!("{line}");
                continue;
            }
            let cost = result.stats.as_ref().map(|s| s.total_cost);
            let increase = result.stats.as_ref().map(|s| 100.0 * (s.overhead - 1.0));
            let peak_ratio = result
                .stats
                .as_ref()
                .map(|s| s.peak_memory as f64 / budget as f64);
            println!(
                "{:<30} {:>5} {:>5} {:>8} {:>8} {:>7} {:>7} {:>7} {:<14} {:<16} {:>14} {:>8} {:>14} {:>7} {:>6} {:<10}",
                format!("{}@{label}", short_name(&file)),
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
                cell(first_found_s(&result), 2),
                format!("{:.2}", result.solve_time_s),
                result.solver,
                result.status.as_str(),
                cell(cost, 0),
                increase.map_or("-".into(), |i| format!("{i:.2}%")),
                cell(result.lower_bound, 0),
                result
                    .gap
                    .map_or("-".into(), |g| format!("{:.2}%", 100.0 * g)),
                cell(peak_ratio, 3),
                result.ended_by.map_or("-", |e| e.as_str()),
            );
        }
    }
    Ok(0)
}
