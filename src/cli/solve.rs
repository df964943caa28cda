//! `remat solve`: one solve with a spinner, the result as a table or JSON, and optionally
//! written to a file.

use super::args::SolveArgs;
use super::output::check_output;
use super::render::{bytes, num, print_tiers, unit};
use super::{deliver, load_within, solve_options, CliError};
use crate::budget::Budget;
use crate::front::{answer_reserve, timed_peak, Clock};
use crate::graph::load::Limits;
use crate::graph::Graph;
use crate::solve::{self, EndedBy, Instance, Scope, SolveOptions, SolveResult, Status};
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::Arc;
use std::time::Duration;

/// Solves, prints, writes; returns the result's status (the exit code follows from it).
/// The time limit counts from here (`crate::front::clock`): reading and building the
/// graph and the checkpoint-all replay (the 100% of budgets) stop at it, and the solve
/// gets what is left less the reserve for judging and printing. The graph and the result
/// are not freed: the process exits right after, and freeing the millions of small
/// allocations of a million-node graph one by one would take seconds past the limit.
pub(super) fn run(args: &SolveArgs) -> Result<Status, CliError> {
    if let Some(output) = &args.output {
        check_output(output, &[&args.graph.graph])?;
    }
    let mut options = solve_options(&args.solver_flags, args.time_limit, 1)?;
    let clock = Clock::start(options.time_limit);
    let limits = Limits {
        deadline: clock.deadline(),
        ..Limits::NONE
    };
    let g = load_within(&args.graph, limits)?;
    let Some((peak, replay)) = timed_peak(&g, clock.deadline()) else {
        std::mem::forget(g);
        return Err(CliError::TimeLimit(format!(
            "{}: the time limit passed while replaying the checkpoint-all schedule (the 100% \
             of budgets)",
            args.graph.graph.display()
        )));
    };
    let budget = args.budget.parse::<Budget>()?.resolve_with(|| peak)?;
    options.time_limit = clock.solve_limit(answer_reserve(replay));
    options.judge_by = clock.judge_by();
    let result = solve_with_progress(&g, budget, &args.solver, options)?;
    deliver(&result, args.output.as_deref(), args.json, |r| {
        print_result(&g, peak, r)
    })?;
    let status = result.status;
    std::mem::forget(result);
    std::mem::forget(g);
    Ok(status)
}

/// Runs the solve with a spinner on stderr (drawn only when stderr is a terminal).
pub(super) fn solve_with_progress(
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

fn print_result(g: &Graph, peak: u64, r: &SolveResult) {
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
    let scope = r.scope.map_or("-", |s| s.as_str());
    println!("solver     {} ({scope}{asked})", r.solver);
    println!(
        "budget     {} = {:.1}% of the checkpoint-all peak {}",
        bytes(r.budget),
        100.0 * r.budget as f64 / peak.max(1) as f64,
        bytes(peak)
    );
    let status = r.status;
    match (r.proven, r.proven_in_scope, r.status) {
        (Some(true), _, _) => println!("status     {status} (proven: no schedule fits)"),
        (_, Some(true), _) => println!(
            "status     {status} (proven for the {} only: others may fit)",
            scope_phrase(r.scope)
        ),
        (Some(false), _, _) => {
            println!("status     {status} (this solver found no schedule that fits)")
        }
        (_, _, Status::OptimalInScope) => println!(
            "status     {status} (optimal among the {}; others may be cheaper)",
            scope_phrase(r.scope)
        ),
        _ => println!("status     {status}"),
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
        print_recomputed(g, &s.computes);
    }
    if let Some(lb) = r.lower_bound {
        let gap = r
            .gap
            .map(|g| format!(" (gap {:.2}%)", 100.0 * g))
            .unwrap_or_default();
        let method = r.lower_bound_method.map_or("-", |m| m.as_str());
        println!(
            "bound      {}{gap} ({method}, over {})",
            num(lb),
            scope_phrase(r.lower_bound_scope)
        );
    }
    if let Some(m) = &r.message {
        println!("note       {m}");
    }
    if let Some(l) = &r.least_budget_found {
        println!(
            "fits at    {} = {:.1}% of the checkpoint-all peak ({} finds a schedule there, and so \
             does auto{})",
            bytes(l.budget),
            100.0 * l.budget as f64 / peak.max(1) as f64,
            l.solver,
            if l.complete {
                ""
            } else {
                "; the search below it did not finish"
            }
        );
    }
    if let Some(e) = r.ended_by {
        println!("ended by   {}", ended_phrase(e));
    }
    println!("time       {:.3} s", r.solve_time_s);
}

/// What ended an `auto` search, in words.
fn ended_phrase(e: EndedBy) -> &'static str {
    match e {
        EndedBy::Converged => "converged (within the MIP gap of the bound)",
        EndedBy::Stall => "stall (a polishing round found nothing cheaper)",
        EndedBy::WorkLimit => "work limit (the effort was spent)",
        EndedBy::TimeLimit => "time limit (the answer may differ on another machine or load)",
    }
}

/// The set of schedules a scope names, in words.
fn scope_phrase(scope: Option<Scope>) -> &'static str {
    match scope {
        Some(Scope::GlobalOptimum) => "all schedules",
        Some(Scope::OptimalForOrder) => "frontier-advancing schedules in the solver order",
        Some(Scope::OptimalAmongPersistent) => "persistent chain schedules",
        Some(Scope::Heuristic | Scope::LowerBound) | None => "schedules the solver considers",
    }
}

/// The nodes computed more than once, most recomputed first (eight at the most).
fn print_recomputed(g: &Graph, computes: &[u32]) {
    let mut recomputed: Vec<(usize, u32)> = computes
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c > 1)
        .map(|(v, &c)| (v, c))
        .collect();
    recomputed.sort_by_key(|&(v, c)| (std::cmp::Reverse(c), v));
    if recomputed.is_empty() {
        return;
    }
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
