//! `remat batch`: solves every (graph, budget) pair of a set of graph files and writes one
//! result file per pair, plus `summary.csv` and `summary.json`.
//!
//! - Work items are the graphs (files, or the `*.json` files of directories, sorted by
//!   path) times the budgets (in the order given); item `i` belongs to shard `i mod N`, so
//!   `--shard K/N` (K in 0..N, as Kubernetes' `JOB_COMPLETION_INDEX`) takes a
//!   deterministic slice and N machines together cover every item once.
//! - Each result is written atomically (temporary file + rename): a reader, or a killed
//!   run, never leaves a partial result under its final name. A result file that already
//!   exists is a finished item: a second run skips it (resume). The temporary files have
//!   unguessable names, are never opened through a link, and the start-up sweep removes
//!   only those no live process holds, so runs sharing an `--out` do not disturb each
//!   other (`super::output`).
//! - Results with an answer (`optimal`, `feasible`, `infeasible`) are written; a time
//!   limit without a schedule or an error writes nothing, so a later run retries it.
//! - SIGINT/SIGTERM cancel the solves in flight and stop the run before any new item.
//! - Items are isolated: a graph that cannot be read or is invalid, a budget that does not
//!   resolve for a graph, a solver error, or a panic while solving one item (caught by
//!   `catch_unwind` as the last line of defence) becomes an `error` row of the summary with
//!   its message, and the run goes on.
//!
//! Exit code: 0 when every item has a schedule; 1 when some item has none (infeasible, or
//! no schedule within the time limit) and none failed; 4 when some item failed (an `error`
//! row); 2 for bad arguments (before any item runs); 130 when interrupted.

use super::args::{BatchArgs, Shard};
use super::output;
use super::{bad, solve_options, write_atomic, write_file, CliError};
use crate::budget::Budget;
use crate::front::graph_files;
use crate::graph::load::load_graph;
use crate::solve::{self, Instance, SolveOptions, SolveResult, Status};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One (graph, budget) pair.
struct Item {
    graph: PathBuf,
    budget: String,
    output: PathBuf,
}

/// A line of the summaries.
#[derive(Clone, Debug, Serialize)]
struct Row {
    graph: String,
    budget: String,
    budget_bytes: Option<u64>,
    solver: String,
    status: Status,
    cost: Option<f64>,
    overhead: Option<f64>,
    peak: Option<u64>,
    lower_bound: Option<f64>,
    time_s: Option<f64>,
    /// The result file, when there is one.
    output: Option<String>,
    /// Found finished from an earlier run.
    skipped: bool,
    message: Option<String>,
}

impl Row {
    fn ok(&self) -> bool {
        matches!(
            self.status,
            Status::Optimal | Status::OptimalInScope | Status::Feasible
        )
    }
}

/// The file-name form of a budget: `80%` -> `80pct`, `6GiB` -> `6GiB`.
fn budget_label(budget: &str) -> String {
    budget
        .trim()
        .replace('%', "pct")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn plan(args: &BatchArgs) -> Result<Vec<Item>, CliError> {
    for b in &args.budgets {
        b.parse::<Budget>()?;
    }
    let files = graph_files(&args.graphs)?;
    let mut stems = std::collections::HashMap::new();
    for f in &files {
        let stem = f.file_stem().unwrap_or_default();
        if let Some(other) = stems.insert(stem, f) {
            return Err(bad(format!(
                "{} and {} would write the same result files ({}--*.json)",
                other.display(),
                f.display(),
                stem.to_string_lossy()
            )));
        }
    }
    refuse_out_among_graphs(&args.out, &files)?;
    // A budget given twice (`90%,90%`) is one item: both would write the same result file.
    let mut labels = std::collections::HashSet::new();
    let budgets: Vec<&String> = (args.budgets.iter())
        .filter(|b| labels.insert(budget_label(b)))
        .collect();
    let shard = args.shard.unwrap_or(Shard { k: 0, n: 1 });
    Ok(files
        .iter()
        .flat_map(|g| budgets.iter().map(move |&b| (g, b)))
        .enumerate()
        .filter(|(i, _)| i % shard.n == shard.k)
        .map(|(_, (graph, budget))| {
            // The stem as the file system has it: two names that differ in bytes that are not
            // UTF-8 write two files.
            let mut name = graph.file_stem().unwrap_or_default().to_os_string();
            name.push(format!("--{}.json", budget_label(budget)));
            Item {
                graph: graph.clone(),
                output: args.out.join(name),
                budget: budget.clone(),
            }
        })
        .collect())
}

/// Whether the stored result `value` (its JSON `text`) answers `item` as asked now: the
/// solver asked for, the budget resolved on the graph as it is now, and, when it holds a
/// schedule, the simulator's figures of that schedule on that graph (cost and peak).
fn still_true(item: &Item, args: &BatchArgs, value: &Value, text: &str) -> bool {
    let asked = value
        .get("requested_solver")
        .or_else(|| value.get("solver"))
        .and_then(Value::as_str);
    if asked != Some(args.solver.as_str()) {
        return false;
    }
    let Ok(graph) = load_graph(&item.graph, args.format) else {
        return false;
    };
    let budget = item
        .budget
        .parse::<Budget>()
        .and_then(|b| b.resolve(&graph));
    if budget.ok() != value.get("budget").and_then(Value::as_u64) {
        return false;
    }
    let stats = value.get("stats");
    if stats.is_none_or(Value::is_null) {
        return value.get("schedule").is_none_or(Value::is_null);
    }
    let replayed = crate::front::simulate::read_schedule(text)
        .ok()
        .and_then(|s| s.resolve(&graph).ok())
        .and_then(|s| crate::schedule::simulate(&graph, &s).ok());
    let stated = |k: &str| stats.and_then(|s| s.get(k));
    replayed.is_some_and(|r| {
        stated("total_cost")
            .and_then(Value::as_f64)
            .is_some_and(|c| same_cost(r.total_cost, c))
            && stated("peak_memory").and_then(Value::as_u64) == Some(r.peak_memory)
    })
}

/// Whether a cost read back from a result file is the cost that was written there. The file
/// holds the shortest digits that give the cost again, but serde_json's reader (without its
/// `float_roundtrip` feature) can land one or two units in the last place away on numbers
/// of seventeen digits (51.837199999999996), so equal within a few units is the same cost.
fn same_cost(replayed: f64, read: f64) -> bool {
    (replayed - read).abs() <= 4.0 * f64::EPSILON * replayed.abs().max(read.abs())
}

/// Refuses an `--out` directory that holds graph files: a result could be written over a
/// graph of the same name, and the next run would read the results as graphs.
fn refuse_out_among_graphs(out: &Path, files: &[PathBuf]) -> Result<(), CliError> {
    let Ok(out_dir) = std::fs::canonicalize(out) else {
        return Ok(()); // created by this run: it holds no graph yet
    };
    let dir_of = |f: &PathBuf| {
        let parent = f.parent().filter(|p| !p.as_os_str().is_empty());
        std::fs::canonicalize(parent.unwrap_or(Path::new("."))).ok()
    };
    match files.iter().find(|f| dir_of(f).as_ref() == Some(&out_dir)) {
        Some(graph) => Err(bad(format!(
            "--out {} holds the graph {}: results written there could replace a graph, and \
             the next run would read them as graphs; give --out a directory of its own",
            out.display(),
            graph.display()
        ))),
        None => Ok(()),
    }
}

/// A result file from an earlier run, as a summary row; `None` if unreadable or not this
/// item's answer (redo it). Only a regular file is read, within `graph::load`'s file limit:
/// a pipe or a device planted at a result's name is neither waited on nor read without end.
/// It is this item's answer when its solver is the one asked for and the simulator replays
/// its schedule on the graph as it is now, at the budget as it resolves now, to the figures
/// it states ([`still_true`]): a changed graph, budget or solver is solved again.
fn finished(item: &Item, args: &BatchArgs) -> Option<Row> {
    let meta = std::fs::symlink_metadata(&item.output).ok()?;
    if !meta.is_file() {
        return None;
    }
    let text = crate::graph::load::read_text(&item.output).ok()?;
    let value: Value = serde_json::from_str(&text).ok()?;
    if !still_true(item, args, &value, &text) {
        return None;
    }
    let status: Status = serde_json::from_value(value.get("status")?.clone()).ok()?;
    let stats = value.get("stats");
    let num = |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_f64);
    Some(Row {
        graph: item.graph.display().to_string(),
        budget: item.budget.clone(),
        budget_bytes: value.get("budget").and_then(Value::as_u64),
        solver: value.get("solver")?.as_str()?.to_string(),
        status,
        cost: num(stats, "total_cost"),
        overhead: num(stats, "overhead"),
        peak: stats
            .and_then(|s| s.get("peak_memory"))
            .and_then(Value::as_u64),
        lower_bound: num(Some(&value), "lower_bound"),
        time_s: num(Some(&value), "solve_time_s"),
        output: Some(item.output.display().to_string()),
        skipped: true,
        message: value
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// Solves one item and writes its result file. `None` when cancelled. A panic inside is
/// caught and becomes an `error` row: one bad item never ends the run.
fn run_item(item: &Item, args: &BatchArgs, options: &SolveOptions) -> Option<Row> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        solve_item(item, args, options)
    }))
    .unwrap_or_else(|payload| {
        let mut row = empty_row(item, args);
        row.message = Some(format!(
            "internal error (panic) while solving this item: {}",
            crate::shell::panic_message(payload.as_ref())
        ));
        Some(row)
    })
}

/// A row with no answer yet (`error` until filled).
fn empty_row(item: &Item, args: &BatchArgs) -> Row {
    Row {
        graph: item.graph.display().to_string(),
        budget: item.budget.clone(),
        budget_bytes: None,
        solver: args.solver.clone(),
        status: Status::Error,
        cost: None,
        overhead: None,
        peak: None,
        lower_bound: None,
        time_s: None,
        output: None,
        skipped: false,
        message: None,
    }
}

fn solve_item(item: &Item, args: &BatchArgs, options: &SolveOptions) -> Option<Row> {
    let mut row = empty_row(item, args);
    let planted = std::fs::symlink_metadata(&item.output).is_ok_and(|m| !m.is_file());
    if planted {
        row.message = Some(format!(
            "{} exists and is not a regular file: results are written as regular files only",
            item.output.display()
        ));
        return Some(row);
    }
    let graph = match load_graph(&item.graph, args.format) {
        Ok(g) => g,
        Err(e) => {
            row.message = Some(e.to_string());
            return Some(row);
        }
    };
    let budget = match item
        .budget
        .parse::<Budget>()
        .and_then(|b| b.resolve(&graph))
    {
        Ok(b) => b,
        Err(e) => {
            row.message = Some(e.to_string());
            return Some(row);
        }
    };
    row.budget_bytes = Some(budget);
    let result = match solve::solve(
        &Instance {
            graph: &graph,
            budget,
        },
        &args.solver,
        options,
    ) {
        Ok(r) => r,
        Err(solve::SolveError::Cancelled) => return None,
        Err(e) => {
            row.message = Some(e.to_string());
            return Some(row);
        }
    };
    fill(&mut row, &result);
    if matches!(
        result.status,
        Status::Optimal | Status::OptimalInScope | Status::Feasible | Status::Infeasible
    ) {
        let text = serde_json::to_vec_pretty(&result).expect("results serialise");
        match write_atomic(&item.output, &text) {
            Ok(()) => row.output = Some(item.output.display().to_string()),
            Err(e) => {
                row.status = Status::Error;
                row.message = Some(format!("cannot write {}: {e}", item.output.display()));
            }
        }
    }
    Some(row)
}

fn fill(row: &mut Row, r: &SolveResult) {
    row.solver = r.solver.clone();
    row.status = r.status;
    row.cost = r.stats.as_ref().map(|s| s.total_cost);
    row.overhead = r.stats.as_ref().map(|s| s.overhead);
    row.peak = r.stats.as_ref().map(|s| s.peak_memory);
    row.lower_bound = r.lower_bound;
    row.time_s = Some(r.solve_time_s);
    row.message = r.message.clone();
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn summary_csv(rows: &[Row]) -> String {
    let mut out = String::from(
        "graph,budget,budget_bytes,solver,status,cost,overhead,peak,lower_bound,time_s,output,skipped,message\n",
    );
    let opt = |v: Option<String>| v.unwrap_or_default();
    for r in rows {
        let fields = [
            csv_field(&r.graph),
            csv_field(&r.budget),
            opt(r.budget_bytes.map(|b| b.to_string())),
            csv_field(&r.solver),
            r.status.to_string(),
            opt(r.cost.map(|c| c.to_string())),
            opt(r.overhead.map(|c| c.to_string())),
            opt(r.peak.map(|c| c.to_string())),
            opt(r.lower_bound.map(|c| c.to_string())),
            opt(r.time_s.map(|c| format!("{c:.6}"))),
            csv_field(r.output.as_deref().unwrap_or_default()),
            r.skipped.to_string(),
            csv_field(r.message.as_deref().unwrap_or_default()),
        ];
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

/// Raises `cancel` on SIGINT or SIGTERM until the returned sender is dropped, with the
/// exit code the signal's (`128 + signo`: 130, 143) in `code`.
fn watch_signals(
    cancel: Arc<AtomicBool>,
    code: Arc<AtomicI32>,
) -> Option<tokio::sync::oneshot::Sender<()>> {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    std::thread::spawn(move || {
        runtime.block_on(async move {
            let signo = tokio::select! {
                signo = crate::shell::shutdown_signal() => signo,
                _ = rx => return,
            };
            code.store(128 + signo, Ordering::SeqCst);
            cancel.store(true, Ordering::SeqCst);
        })
    });
    Some(tx)
}

pub(super) fn run(args: BatchArgs) -> Result<i32, CliError> {
    solve::find(&args.solver)?;
    let items = plan(&args)?;
    // The solve memory is split among the solves that run at once: no more than the items.
    let at_once = args.jobs.min(items.len()).max(1);
    let mut options = solve_options(&args.solver_flags, args.time_limit, at_once)?;
    if args.out.exists() && !args.out.is_dir() {
        return Err(bad(format!(
            "--out {} is not a directory: give the directory the results go to",
            args.out.display()
        )));
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| bad(format!("cannot create {}: {e}", args.out.display())))?;
    remove_stale_temporaries(&args.out);
    let cancel = Arc::new(AtomicBool::new(false));
    let signalled = Arc::new(AtomicI32::new(130));
    let _signals = watch_signals(cancel.clone(), signalled.clone());
    options.cancel = cancel.clone();
    let start = Instant::now();
    let rows = run_items(&items, &args, &options, at_once);
    if cancel.load(Ordering::SeqCst) {
        crate::shell::to_stderr(format_args!(
            "interrupted after {} of {} items; run the same command again to resume",
            rows.len(),
            items.len()
        ));
        return Ok(signalled.load(Ordering::SeqCst));
    }
    // The failures are listed even when the summaries cannot be written.
    let written = write_summaries(&args, &rows);
    let code = report(&rows, start);
    written.map(|()| code)
}

/// Runs the items on `threads` threads (`--jobs`, no more than the items) with a progress bar, until they are done or the
/// options' cancel flag is raised; the rows of the items that ended, in item order.
fn run_items(items: &[Item], args: &BatchArgs, options: &SolveOptions, threads: usize) -> Vec<Row> {
    let bar = ProgressBar::new(items.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}")
            .expect("valid template"),
    );
    // The clock and the running solves' reports (incumbent, bound) move while a solve runs.
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let progress_bar = bar.clone();
    let options = &SolveOptions {
        progress: Some(Arc::new(move |p: solve::Progress| {
            progress_bar.set_message(super::printable(&p.message));
        })),
        ..options.clone()
    };
    let rows: Mutex<Vec<Option<Row>>> = Mutex::new(vec![None; items.len()]);
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                if options.cancel.load(Ordering::SeqCst) {
                    return;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(item) = items.get(i) else { return };
                let row = finished(item, args).or_else(|| run_item(item, args, options));
                if let Some(row) = &row {
                    let stem = item.graph.file_stem().unwrap_or_default();
                    let done = format!(
                        "{} @ {}: {}",
                        stem.to_string_lossy(),
                        item.budget,
                        row.status
                    );
                    bar.set_message(super::printable(&done));
                    bar.inc(1);
                }
                rows.lock().expect("rows lock")[i] = row;
            });
        }
    });
    bar.finish_and_clear();
    rows.into_inner()
        .expect("rows lock")
        .into_iter()
        .flatten()
        .collect()
}

/// Writes `summary.json` and `summary.csv` (suffixed by the shard).
fn write_summaries(args: &BatchArgs, rows: &[Row]) -> Result<(), CliError> {
    let suffix = args
        .shard
        .map(|s| format!("-{}-of-{}", s.k, s.n))
        .unwrap_or_default();
    let json = serde_json::to_vec_pretty(&serde_json::json!({
        "solver": args.solver,
        "budgets": args.budgets,
        "shard": args.shard.map(|s| format!("{}/{}", s.k, s.n)),
        "rows": rows,
    }))
    .expect("summaries serialise");
    for (name, bytes) in [
        (format!("summary{suffix}.json"), json),
        (
            format!("summary{suffix}.csv"),
            summary_csv(rows).into_bytes(),
        ),
    ] {
        write_file(&args.out.join(name), &bytes)?;
    }
    Ok(())
}

/// Prints the counts and the items without a schedule; returns the exit code.
fn report(rows: &[Row], start: Instant) -> i32 {
    let skipped = rows.iter().filter(|r| r.skipped).count();
    let failed: Vec<&Row> = rows.iter().filter(|r| !r.ok()).collect();
    crate::shell::to_stderr(format_args!(
        "{} items: {} solved, {} skipped (done before), {} without a schedule, in {:.1} s",
        rows.len(),
        rows.len() - skipped - failed.iter().filter(|r| !r.skipped).count(),
        skipped,
        failed.len(),
        start.elapsed().as_secs_f64()
    ));
    for r in &failed {
        let line = format!(
            "  {} @ {}: {}{}",
            r.graph,
            r.budget,
            r.status,
            r.message
                .as_ref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        );
        crate::shell::to_stderr(format_args!("{}", super::printable(&line)));
    }
    if failed.iter().any(|r| r.status == Status::Error) {
        4
    } else if failed.is_empty() {
        0
    } else {
        1
    }
}

/// Removes the temporary files killed runs left in `out`, of any result or summary, this
/// run's budgets or others; those another live run (on the same `--out`) is writing are
/// left alone ([`output::remove_if_abandoned`]).
fn remove_stale_temporaries(out: &Path) {
    let Ok(entries) = std::fs::read_dir(out) else {
        return;
    };
    for e in entries.flatten() {
        if output::is_temporary_name(&e.file_name().to_string_lossy()) {
            output::remove_if_abandoned(&e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::parse_shard;
    use crate::graph::load::Format;
    use std::path::Path;

    #[test]
    fn shards_and_labels() {
        assert_eq!(parse_shard("1/4"), Ok(Shard { k: 1, n: 4 }));
        assert!(parse_shard("4/4").is_err() && parse_shard("x").is_err());
        assert_eq!(budget_label("80%"), "80pct");
        assert_eq!(budget_label("1.5 GB"), "1.5_GB");
        assert_eq!(csv_field("a,\"b\""), "\"a,\"\"b\"\"\"");
    }

    #[test]
    fn shards_partition_the_items() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("graphs");
        let args = |shard| BatchArgs {
            graphs: vec![dir.clone()],
            budgets: vec!["90%".into(), "80%".into(), "70%".into()],
            out: PathBuf::from("/nonexistent"),
            solver: "auto".into(),
            jobs: 1,
            time_limit: None,
            shard,
            format: Format::Auto,
            solver_flags: Default::default(),
        };
        let all: Vec<PathBuf> = plan(&args(None))
            .unwrap()
            .into_iter()
            .map(|i| i.output)
            .collect();
        let mut union: Vec<PathBuf> = (0..2)
            .flat_map(|k| plan(&args(Some(Shard { k, n: 2 }))).unwrap())
            .map(|i| i.output)
            .collect();
        union.sort();
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(union, sorted);
        assert_eq!(all.len(), 3 * graph_files(&[dir]).unwrap().len());
    }
}
