//! `remat simulate`: replays a schedule file against a graph. `--json` prints the report
//! of `crate::front::simulate_report`, the very body `POST /v1/simulate` returns.

use super::args::SimulateArgs;
use super::render::{bytes, num, print_json, print_tiers, unit};
use super::{bad, load, read_schedule_file, resolve_optional_budget, CliError};
use crate::front::{read_schedule, simulate_report};

/// Exit 0 when the schedule fits (or no budget was given), 1 when it does not.
pub(super) fn run(args: &SimulateArgs) -> Result<i32, CliError> {
    let g = load(&args.graph)?;
    let text = read_schedule_file(&args.schedule)?;
    let schedule =
        read_schedule(&text).map_err(|e| bad(format!("{}: {e}", args.schedule.display())))?;
    let budget = resolve_optional_budget(args.budget.as_deref(), &g)?;
    let report = simulate_report(&g, &schedule, budget).map_err(bad)?;
    if args.json {
        print_json(&report);
    } else {
        let stats = &report.stats;
        println!("valid      {} events", stats.memory_after.len());
        println!(
            "cost       {}{} (recompute +{}, overhead {:.3}x)",
            num(stats.total_cost),
            unit(&g),
            num(stats.recompute_cost),
            stats.overhead
        );
        println!(
            "peak       {} at event {}",
            bytes(stats.peak_memory),
            stats.peak_event
        );
        print_tiers(stats);
        if let Some(b) = budget {
            let verdict = if report.fits() { "fits" } else { "EXCEEDED" };
            println!("budget     {} ({verdict})", bytes(b));
        }
    }
    Ok(if report.fits() { 0 } else { 1 })
}
