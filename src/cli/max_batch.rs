//! `remat max-batch`: the largest batch that fits a memory under an overhead cap, through
//! `crate::front::max_batch`; the search's progress on stderr, the answer as a table or
//! JSON.

use super::args::MaxBatchArgs;
use super::render::{bytes, num, unit};
use super::{deliver, load, solve_options, CliError};
use crate::front::max_batch::{search, AtBatch, MaxBatchError, MaxBatchInput, MaxBatchResult};
use crate::graph::Graph;
use crate::solve::Progress;
use std::sync::Arc;

impl From<MaxBatchError> for CliError {
    fn from(e: MaxBatchError) -> CliError {
        let text = match e.field() {
            Some(f) => format!("{}: {e}", f.flag()),
            None => e.to_string(),
        };
        if e.is_bad_input() {
            CliError::BadInput(text)
        } else {
            CliError::Internal(text)
        }
    }
}

/// Searches, prints, writes; exit 0 when a batch fits, 1 when none does.
pub(super) fn run(args: &MaxBatchArgs) -> Result<i32, CliError> {
    if let Some(output) = &args.output {
        super::output::check_output(output, &[&args.graph.graph])?;
    }
    let g = load(&args.graph)?;
    let request = MaxBatchInput {
        memory: Some(
            args.memory
                .parse()
                .map_err(|e| CliError::BadInput(format!("--memory: {e}")))?,
        ),
        max_overhead: args.max_overhead,
        max_extra_forward: args.max_extra_forward,
        solver: args.solver.clone(),
    }
    .validate(&g)?;
    let mut options = solve_options(&args.solver_flags, args.time_limit, 1)?;
    options.progress = Some(Arc::new(|p: Progress| {
        crate::shell::to_stderr(format_args!("max-batch: {}", p.message))
    }));
    let result = search(&g, &request, &options)?;
    deliver(&result, args.output.as_deref(), args.json, |r| {
        print_result(&g, r)
    })?;
    Ok(if result.batch > 0 { 0 } else { 1 })
}

fn print_result(g: &Graph, r: &MaxBatchResult) {
    println!(
        "graph        {} ({} nodes)",
        g.name().unwrap_or("(unnamed)"),
        g.len()
    );
    println!(
        "batch model  batch_size {}: {}",
        r.batch_model.batch_size, r.batch_model.assumption
    );
    println!("memory       {}", bytes(r.memory));
    let cap = match (
        r.cap.max_overhead,
        r.cap.max_extra_forward,
        r.cap.forward_share,
    ) {
        (None, ..) => "none".to_string(),
        (Some(rho), Some(f), Some(share)) => format!(
            "overhead <= {rho:.4} ({} extra forward pass(es); forward = {:.1}% of a step)",
            num(f),
            100.0 * share
        ),
        (Some(rho), ..) => format!("overhead <= {rho:.4}"),
    };
    println!("cap          {cap}");
    println!("solver       {}", r.solver);
    println!(
        "{:<13}{:>10}  {:>22}  {:>9}  {:>14}",
        "", "batch", "peak", "overhead", "samples/cost"
    );
    let row = |name: &str, at: &Option<AtBatch>| match at {
        Some(a) => println!(
            "{name:<13}{:>10}  {:>22}  {:>9.4}  {:>14}",
            a.batch,
            bytes(a.peak_memory),
            a.overhead,
            a.samples_per_cost
                .map_or_else(|| "-".to_string(), |s| format!("{s:.6}"))
        ),
        None => println!("{name:<13}{:>10}", 0),
    };
    row("no recompute", &r.no_recompute);
    row("with remat", &r.with_remat);
    if let Some(gain) = r.gain {
        println!("gain         {gain:.3}x the batch without recomputation");
    }
    println!(
        "bounds       no schedule fits above batch {} (footprint bound); the model holds up to {}",
        r.upper_bound, r.model_limit
    );
    if let Some((result, stats)) = r.result.as_ref().and_then(|x| Some((x, x.stats.as_ref()?))) {
        println!(
            "schedule     by {} ({}): cost {}{}, recompute +{}",
            result.solver,
            result.status,
            num(stats.total_cost),
            unit(g),
            num(stats.recompute_cost)
        );
    }
    println!(
        "search       {} probe(s), {:.3} s{}{}",
        r.probes.len(),
        r.search_time_s,
        if r.complete {
            ""
        } else {
            ", stopped by the time limit"
        },
        if r.monotone_on_probes {
            ""
        } else {
            "; the probes were not monotone in the batch (the answer fits, the next batch did not)"
        }
    );
}
