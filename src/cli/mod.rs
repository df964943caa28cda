//! The `remat` command line: a thin shell over `graph`, `solve` and `schedule`.
//!
//! Exit codes: 0 a schedule (or the requested output) was produced; 1 no schedule within
//! the budget (infeasible, or none found in time); 2 bad input (graph, budget, schedule,
//! solver name, unsupported graph); 3 an internal error.

mod batch;
mod bench;
mod bench_tiers;
mod output;

pub use output::write_atomic;

use crate::budget::{human_bytes, Budget};
use crate::graph::generate;
use crate::graph::load::{load_graph, Format};
use crate::graph::{Graph, Storage};
use crate::schedule::{simulate, ScheduleJson, SimStats};
use crate::solve::{
    self, checkpoint_all_peak, Instance, SolveError, SolveOptions, SolveResult, Status,
};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "remat",
    version,
    about = "Optimal rematerialization (activation checkpointing) schedules"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug)]
struct GraphArg {
    /// A training graph: native JSON, networkx node-link JSON or a chain (fw, bw, x, xbar).
    graph: PathBuf,
    /// Input format: auto, native, node-link or chain.
    #[arg(long, default_value = "auto", value_parser = parse_format)]
    format: Format,
    /// A slow storage tier as JSON, replacing the graph's `storage` (e.g. '{"transfer_time": 8}').
    #[arg(long)]
    storage: Option<String>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Size, cost and memory bounds of a graph.
    Inspect {
        #[command(flatten)]
        graph: GraphArg,
        /// Budget for the storage-tier verdict (default: the least two-level can run in).
        #[arg(short, long)]
        budget: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Compute a schedule within a memory budget.
    Solve {
        #[command(flatten)]
        graph: GraphArg,
        /// Bytes (17179869184), a size (6GiB, 512MB, "1.5 GB") or a share of the checkpoint-all peak (80%).
        #[arg(short, long)]
        budget: String,
        /// Solver name (see `remat solvers`).
        #[arg(short, long, default_value = "auto")]
        solver: String,
        /// Write the result JSON to this file (atomically).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Print the result JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Time limit in seconds.
        #[arg(long)]
        time_limit: Option<f64>,
        /// Relative MIP gap at which the MILP may stop.
        #[arg(long)]
        mip_gap: Option<f64>,
        /// Seed for randomised steps.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Threads for the MILP solver.
        #[arg(long)]
        threads: Option<u32>,
    },
    /// Check a schedule file (events, or a result JSON) against a graph.
    Simulate {
        #[command(flatten)]
        graph: GraphArg,
        /// Schedule: {"events": [...]}, a bare event list, or a `remat solve` result.
        schedule: PathBuf,
        /// Also check the peak against this budget.
        #[arg(short, long)]
        budget: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Write a generated training graph (native JSON).
    Gen {
        #[command(subcommand)]
        kind: GenKind,
    },
    /// Run a solver over graphs and budget fractions and print a table.
    Bench(bench::BenchArgs),
    /// Recompute factors of Revolve and two-level checkpointing against the sequence
    /// length (the table behind Kukreja et al.'s Figure 3).
    BenchTiers {
        /// Snapshots s that fit in fast memory.
        #[arg(long, default_value_t = 100)]
        snapshots: u64,
        /// Checkpointing intervals I.
        #[arg(long, value_delimiter = ',', default_values_t = [8u64, 64, 1024])]
        intervals: Vec<u64>,
        /// Sequence lengths n.
        #[arg(long, value_delimiter = ',', default_values_t = bench_tiers::DEFAULT_LENGTHS.to_vec())]
        lengths: Vec<u64>,
        #[arg(long)]
        json: bool,
    },
    /// List the solvers.
    Solvers {
        #[arg(long)]
        json: bool,
    },
    /// Serve the HTTP/JSON API (see api/openapi.yaml).
    Serve(crate::service::Config),
    /// Solve many graphs at several budgets, one result file each, with summaries.
    Batch(batch::BatchArgs),
}

#[derive(Subcommand, Debug)]
enum GenKind {
    /// Checkmate's linear graph: 2N+1 nodes, unit costs and sizes.
    Linear {
        #[arg(long)]
        layers: usize,
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// A join graph (Beaumont et al.): chains of the given lengths meeting at the loss,
    /// with their backward chains; unit costs and sizes (the shape `join-dp` solves).
    Join {
        /// Branch lengths, e.g. `3,2,4`.
        #[arg(long, value_delimiter = ',', required = true)]
        branches: Vec<usize>,
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// A random layered training graph (forward layers, loss, mirrored backward).
    RandomLayered {
        #[arg(long)]
        nodes: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
}

/// A failure, with its exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    Internal(String),
}

impl CliError {
    fn exit_code(&self) -> i32 {
        match self {
            CliError::BadInput(_) => 2,
            CliError::Internal(_) => 3,
        }
    }
}

impl From<SolveError> for CliError {
    fn from(e: SolveError) -> CliError {
        match e {
            SolveError::Failed { .. } => CliError::Internal(e.to_string()),
            _ => CliError::BadInput(e.to_string()),
        }
    }
}

/// Parses the arguments, runs the command and returns the exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    match execute(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

fn bad(e: impl std::fmt::Display) -> CliError {
    CliError::BadInput(e.to_string())
}

fn load(arg: &GraphArg) -> Result<Graph, CliError> {
    let graph = load_graph(&arg.graph, arg.format)
        .map_err(|e| bad(format!("{}: {e}", arg.graph.display())))?;
    Ok(match &arg.storage {
        None => graph,
        Some(text) => graph.with_storage(Some(
            serde_json::from_str::<Storage>(text).map_err(|e| bad(format!("--storage: {e}")))?,
        )),
    })
}

fn resolve_budget(text: &str, graph: &Graph) -> Result<u64, CliError> {
    let budget: Budget = text.parse().map_err(bad)?;
    Ok(budget.resolve(checkpoint_all_peak(graph)))
}

fn execute(command: Command) -> Result<i32, CliError> {
    match command {
        Command::Serve(config) => Ok(crate::service::run(config)),
        Command::Batch(args) => batch::run(args),
        Command::Inspect {
            graph,
            budget,
            json,
        } => {
            let g = load(&graph)?;
            let budget = budget.map(|b| resolve_budget(&b, &g)).transpose()?;
            inspect(&g, budget, json)
        }
        Command::BenchTiers {
            snapshots,
            intervals,
            lengths,
            json,
        } => bench_tiers::run(snapshots, &intervals, &lengths, json),
        Command::Solve {
            graph,
            budget,
            solver,
            output,
            json,
            time_limit,
            mip_gap,
            seed,
            threads,
        } => {
            let g = load(&graph)?;
            let budget = resolve_budget(&budget, &g)?;
            if let Some(t) = time_limit.filter(|t| !(t.is_finite() && *t > 0.0)) {
                return Err(bad(format!(
                    "--time-limit must be a positive number of seconds, got {t}"
                )));
            }
            let options = SolveOptions {
                time_limit: time_limit.map(Duration::from_secs_f64),
                mip_gap,
                seed,
                threads,
                ..SolveOptions::default()
            };
            let result = solve_with_progress(&g, budget, &solver, options)?;
            if let Some(path) = &output {
                let text = serde_json::to_vec_pretty(&result).expect("results serialise");
                write_atomic(path, &text)
                    .map_err(|e| bad(format!("cannot write {}: {e}", path.display())))?;
            }
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&result).expect("results serialise")
                );
            } else {
                print_result(&g, &result);
            }
            Ok(match result.status {
                Status::Optimal | Status::Feasible => 0,
                Status::Infeasible | Status::NoSolution => 1,
                Status::Error => 3,
            })
        }
        Command::Simulate {
            graph,
            schedule,
            budget,
            json,
        } => simulate_file(&load(&graph)?, &schedule, budget.as_deref(), json),
        Command::Gen { kind } => {
            let (g, output) = match kind {
                GenKind::Linear { layers, output } => {
                    if layers == 0 {
                        return Err(bad("--layers must be at least 1"));
                    }
                    (generate::linear(layers), output)
                }
                GenKind::Join { branches, output } => {
                    if let Some(b) = branches.iter().position(|&l| l == 0) {
                        return Err(bad(format!(
                            "--branches: branch {} has length 0; every branch needs a stage",
                            b + 1
                        )));
                    }
                    (generate::join(&branches), output)
                }
                GenKind::RandomLayered {
                    nodes,
                    seed,
                    output,
                } => {
                    if nodes < 3 {
                        return Err(bad("--nodes must be at least 3"));
                    }
                    (generate::random_layered(nodes, seed), output)
                }
            };
            let text = serde_json::to_string_pretty(&g.to_spec()).expect("graphs serialise");
            match output {
                Some(path) => write_atomic(&path, text.as_bytes())
                    .map_err(|e| bad(format!("cannot write {}: {e}", path.display())))?,
                None => println!("{text}"),
            }
            Ok(0)
        }
        Command::Bench(args) => bench::run(&args),
        Command::Solvers { json } => {
            let infos: Vec<_> = solve::registry().iter().map(|s| s.info()).collect();
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&infos).expect("infos serialise")
                );
            } else {
                for i in infos {
                    println!(
                        "{:<16} {:<26} {}\n{:<16} {}",
                        i.name,
                        scope_name(i.scope),
                        i.accepts,
                        "",
                        i.description
                    );
                }
            }
            Ok(0)
        }
    }
}

fn scope_name(scope: solve::Scope) -> String {
    serde_json::to_value(scope)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Runs the solve with a spinner on stderr (drawn only when stderr is a terminal).
fn solve_with_progress(
    graph: &Graph,
    budget: u64,
    solver: &str,
    mut options: SolveOptions,
) -> Result<SolveResult, CliError> {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed} {msg}").expect("valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    bar.set_message(format!("solving with {solver}"));
    let sink = bar.clone();
    options.progress = Some(Arc::new(move |p: solve::Progress| {
        let pct = p
            .fraction
            .map(|f| format!(" {:.0}%", 100.0 * f))
            .unwrap_or_default();
        sink.set_message(format!("{}{pct}", p.message));
    }));
    let result = solve::solve(&Instance { graph, budget }, solver, &options);
    bar.finish_and_clear();
    Ok(result?)
}

fn inspect(g: &Graph, budget: Option<u64>, json: bool) -> Result<i32, CliError> {
    let r = solve::report(g, budget);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).expect("reports serialise")
        );
        return Ok(0);
    }
    println!("graph                {}", g.name().unwrap_or("(unnamed)"));
    println!("nodes                {} ({} edges)", r.nodes, r.edges);
    if g.has_kinds() {
        println!(
            "kinds                {} forward, {} loss, {} backward",
            r.kinds.forward, r.kinds.loss, r.kinds.backward
        );
    }
    println!("total cost           {}{}", num(r.total_cost), unit(g));
    println!("fixed memory         {}", bytes(r.fixed_memory));
    println!("checkpoint-all peak  {}", bytes(r.checkpoint_all_peak));
    println!(
        "lower bound          {} (computing '{}' with its inputs)",
        bytes(r.min_feasible_budget),
        r.min_feasible_budget_node
    );
    println!("structure            {}", r.structure_detail);
    if let Some(tier) = &r.storage_tier {
        println!(
            "storage tier         {}",
            tier["verdict"].as_str().unwrap_or("-")
        );
    }
    Ok(0)
}

/// A cost for people: integers as integers, else up to four decimals.
fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn unit(g: &Graph) -> String {
    g.cost_unit().map(|u| format!(" {u}")).unwrap_or_default()
}

fn bytes(b: u64) -> String {
    if b < 1024 {
        format!("{b} B")
    } else {
        format!("{b} B ({})", human_bytes(b))
    }
}

fn print_result(g: &Graph, r: &SolveResult) {
    let peak = checkpoint_all_peak(g);
    println!(
        "graph      {} ({} nodes, {} edges)",
        g.name().unwrap_or("(unnamed)"),
        g.len(),
        g.edge_count()
    );
    let asked = r
        .requested_solver
        .as_ref()
        .map(|s| format!(", chosen by {s}"))
        .unwrap_or_default();
    let scope = r.scope.map(scope_name).unwrap_or_else(|| "-".into());
    println!("solver     {} ({scope}{asked})", r.solver);
    println!(
        "budget     {} = {:.1}% of the checkpoint-all peak {}",
        bytes(r.budget),
        100.0 * r.budget as f64 / peak.max(1) as f64,
        bytes(peak)
    );
    let status = scope_name_status(r.status);
    match &r.proven {
        Some(true) => println!("status     {status} (proven: no schedule fits)"),
        Some(false) => println!("status     {status} (this solver found no schedule that fits)"),
        None => println!("status     {status}"),
    }
    if let Some(s) = &r.stats {
        println!(
            "cost       {}{} (no recomputation: {}, recompute +{}, overhead {:.3}x)",
            num(s.total_cost),
            unit(g),
            num(g.total_cost()),
            num(s.recompute_cost),
            s.overhead
        );
        println!(
            "peak       {} at event {} of {}",
            bytes(s.peak_memory),
            s.peak_event,
            s.memory_after.len()
        );
        print_tiers(s);
        let mut recomputed: Vec<(usize, u32)> = s
            .computes
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 1)
            .map(|(v, &c)| (v, c))
            .collect();
        recomputed.sort_by_key(|&(v, c)| (std::cmp::Reverse(c), v));
        if !recomputed.is_empty() {
            let shown: Vec<String> = recomputed
                .iter()
                .take(8)
                .map(|&(v, c)| format!("{} x{c}", g.id(v)))
                .collect();
            let more = recomputed.len().saturating_sub(shown.len());
            println!(
                "recomputed {} node(s): {}{}",
                recomputed.len(),
                shown.join(", "),
                if more > 0 {
                    format!(", ... {more} more")
                } else {
                    String::new()
                }
            );
        }
    }
    if let Some(lb) = r.lower_bound {
        let gap = r
            .gap
            .map(|g| format!(" (gap {:.2}%)", 100.0 * g))
            .unwrap_or_default();
        println!("bound      {}{gap}", num(lb));
    }
    if let Some(m) = &r.message {
        println!("note       {m}");
    }
    println!("time       {:.3} s", r.solve_time_s);
}

/// The timed replay's figures, for schedules that use a storage tier.
fn print_tiers(s: &SimStats) {
    if let Some(t) = &s.tiers {
        println!(
            "makespan   {} ({} computing, {} stalled in {} stall(s))",
            t.makespan,
            t.compute_time,
            t.stall_time,
            t.stalls.len()
        );
        println!(
            "tiers      {} store(s), {} load(s); slow tier holds {}",
            t.stores,
            t.loads,
            bytes(t.slow_bytes)
        );
    }
}

fn scope_name_status(s: Status) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Reads a schedule file in any of the accepted shapes.
fn read_schedule(path: &Path) -> Result<ScheduleJson, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        bad(format!(
            "{}: malformed JSON at line {}, column {}",
            path.display(),
            e.line(),
            e.column()
        ))
    })?;
    let value = match value {
        serde_json::Value::Array(events) => json!({ "events": events }),
        serde_json::Value::Object(ref o) if o.contains_key("schedule") => o["schedule"].clone(),
        other => other,
    };
    if value.is_null() {
        return Err(bad(format!(
            "{}: the result holds no schedule",
            path.display()
        )));
    }
    serde_json::from_value(value).map_err(|e| {
        bad(format!(
            "{}: not a schedule ({e}); expected {{\"events\": [{{\"op\": \"compute\"|\"free\"|\"store\"|\"load\", \"node\": ID}}, ...]}}",
            path.display()
        ))
    })
}

fn simulate_file(
    g: &Graph,
    path: &Path,
    budget: Option<&str>,
    json: bool,
) -> Result<i32, CliError> {
    let schedule = read_schedule(path)?.resolve(g).map_err(bad)?;
    let stats = simulate(g, &schedule).map_err(bad)?;
    let budget = budget.map(|b| resolve_budget(b, g)).transpose()?;
    let fits = budget.is_none_or(|b| stats.peak_memory <= b);
    if json {
        let computes: serde_json::Map<String, serde_json::Value> = stats
            .computes
            .iter()
            .enumerate()
            .map(|(v, &c)| (g.id(v).to_string(), json!(c)))
            .collect();
        let out = json!({
            "valid": true,
            "fits_budget": budget.map(|_| fits),
            "budget": budget,
            "stats": stats,
            "computes": computes,
            "memory_after": stats.memory_after,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("stats serialise")
        );
    } else {
        println!("valid      {} events", schedule.events.len());
        println!(
            "cost       {}{} (recompute +{}, overhead {:.3}x)",
            num(stats.total_cost),
            unit(g),
            num(stats.recompute_cost),
            stats.overhead
        );
        println!(
            "peak       {} at event {}",
            bytes(stats.peak_memory),
            stats.peak_event
        );
        print_tiers(&stats);
        if let Some(b) = budget {
            println!(
                "budget     {} ({})",
                bytes(b),
                if fits { "fits" } else { "EXCEEDED" }
            );
        }
    }
    Ok(if fits { 0 } else { 1 })
}
