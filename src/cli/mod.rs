//! The `remat` command line: a thin shell over `crate::front`, `solve` and `schedule`.
//! `args` defines the commands and flags, `render` prints figures for people, and each
//! command has its own file; this file dispatches and owns the exit codes.
//!
//! Exit codes: 0 a schedule (or the requested output) was produced; 1 no schedule within
//! the budget (infeasible, or none found in time); 2 bad input (graph, budget, schedule,
//! solver name, option, unsupported graph); 3 an internal error.

mod args;
mod batch;
mod bench;
mod bench_tiers;
mod gen;
mod inspect;
mod max_batch;
mod output;
mod plot;
mod probe;
mod render;
mod simulate;
mod solve;
mod solvers;

pub use args::Cli;
pub use output::write_atomic;
use output::{deliver, write_file};

use crate::budget::{Budget, BudgetError};
use crate::front::{solve_memory_limit, GraphFilesError, InvalidOption, OptionsInput};
use crate::graph::load::{load_graph_within, Limits};
use crate::graph::{Graph, GraphError, Storage};
use crate::solve::{SolveError, SolveOptions, Status};
use args::{Command, GraphArg, SolverFlags};
use clap::Parser;
use std::path::Path;

/// A failure, with its exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    Internal(String),
    /// The time limit passed before there was anything to solve (reading the graph).
    #[error("{0}")]
    TimeLimit(String),
}

impl CliError {
    fn exit_code(&self) -> i32 {
        match self {
            CliError::TimeLimit(_) => 1,
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

impl From<InvalidOption> for CliError {
    fn from(e: InvalidOption) -> CliError {
        bad(e)
    }
}

impl From<GraphFilesError> for CliError {
    fn from(e: GraphFilesError) -> CliError {
        bad(e)
    }
}

impl From<BudgetError> for CliError {
    fn from(e: BudgetError) -> CliError {
        bad(e)
    }
}

/// The exit code of a solve's status.
fn status_code(status: Status) -> i32 {
    match status {
        Status::Optimal | Status::OptimalInScope | Status::Feasible => 0,
        Status::Infeasible | Status::NoSolution => 1,
        Status::Error => 3,
    }
}

/// Parses the arguments, runs the command and returns the exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    match execute(cli.command) {
        Ok(code) => code,
        Err(e) => {
            crate::shell::to_stderr(format_args!("error: {}", printable(&e.to_string())));
            e.exit_code()
        }
    }
}

/// `message` with its control characters other than line breaks and tabs escaped (`\u{1b}`):
/// a message may quote what a file holds (a schedule's unknown node id), and a terminal
/// would run an escape sequence in it.
pub(crate) fn printable(message: &str) -> String {
    message
        .chars()
        .map(|c| match c {
            '\n' | '\t' => c.to_string(),
            c if c.is_control() => c.escape_default().to_string(),
            c => c.to_string(),
        })
        .collect()
}

fn bad(e: impl std::fmt::Display) -> CliError {
    CliError::BadInput(e.to_string())
}

/// Loads the graph an argument names, with `--storage` replacing its tier.
fn load(arg: &GraphArg) -> Result<Graph, CliError> {
    load_within(arg, Limits::NONE)
}

/// [`load`] within `limits` (a deadline): past it, [`CliError::TimeLimit`].
fn load_within(arg: &GraphArg, limits: Limits) -> Result<Graph, CliError> {
    let graph = load_graph_within(&arg.graph, arg.format, limits).map_err(|e| {
        let message = format!("{}: {e}", arg.graph.display());
        match e {
            GraphError::TimeLimit { .. } => CliError::TimeLimit(message),
            _ => bad(message),
        }
    })?;
    Ok(match &arg.storage {
        None => graph,
        Some(text) => graph.with_storage(Some(
            serde_json::from_str::<Storage>(text).map_err(|e| bad(format!("--storage: {e}")))?,
        )),
    })
}

/// The text of a schedule file (`--schedule`, `remat simulate`'s argument), checked as
/// JSON: the one reader of schedule files, whatever reads the schedule in it.
fn read_schedule_file(path: &Path) -> Result<String, CliError> {
    let text = crate::graph::load::read_text(path)
        .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str::<serde::de::IgnoredAny>(&text).map_err(|e| {
        bad(format!(
            "{}: malformed JSON at line {}, column {}",
            path.display(),
            e.line(),
            e.column()
        ))
    })?;
    Ok(text)
}

/// A `--budget` in bytes for `graph`.
fn resolve_budget(text: &str, graph: &Graph) -> Result<u64, CliError> {
    Ok(text.parse::<Budget>()?.resolve(graph)?)
}

/// An optional `--budget` in bytes for `graph`.
fn resolve_optional_budget(text: Option<&str>, graph: &Graph) -> Result<Option<u64>, CliError> {
    text.map(|b| resolve_budget(b, graph)).transpose()
}

/// The `SolveOptions` of a command: its solver flags and time limit, validated by the front
/// door, with the one memory policy of the command line: `--solve-memory` per solve, or
/// the default share of the machine split among the `concurrent` solves run at once.
fn solve_options(
    flags: &SolverFlags,
    time_limit_s: Option<f64>,
    concurrent: usize,
) -> Result<SolveOptions, CliError> {
    Ok(OptionsInput {
        time_limit_s,
        mip_gap: flags.mip_gap,
        seed: flags.seed,
        threads: flags.threads,
        memory_limit: Some(solve_memory_limit(flags.solve_memory, concurrent)),
        effort: flags.effort,
    }
    .validate()?)
}

fn execute(command: Command) -> Result<i32, CliError> {
    // Commands that write one file with `-o` and handle no signal themselves: Ctrl-C
    // while it is written removes its temporary file (`batch` and `serve` have their own).
    if matches!(
        command,
        Command::Solve(_) | Command::Gen { .. } | Command::MaxBatch(_) | Command::Plot(_)
    ) {
        output::remove_temporary_on_interrupt();
    }
    match command {
        Command::Inspect(args) => inspect::run(&args),
        Command::Solve(args) => solve::run(&args).map(status_code),
        Command::Simulate(args) => simulate::run(&args),
        Command::Gen { kind } => gen::run(kind),
        Command::Bench(args) => bench::run(&args),
        Command::BenchTiers(args) => bench_tiers::run(&args),
        Command::Solvers { json } => solvers::run(json),
        Command::Serve(config) => Ok(crate::service::run(config)),
        Command::Batch(args) => batch::run(args),
        Command::MaxBatch(args) => max_batch::run(&args),
        Command::Plot(args) => plot::run(&args),
        Command::Probe(args) => probe::run(&args),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn messages_are_printed_with_control_characters_escaped() {
        assert_eq!(
            super::printable("node '\u{1b}]0;x\u{7}':\n  - bad\tcost"),
            "node '\\u{1b}]0;x\\u{7}':\n  - bad\tcost"
        );
    }
}
