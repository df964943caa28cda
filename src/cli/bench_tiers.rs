//! `remat bench-tiers`: the table behind Kukreja et al.'s Figure 3, recompute factors of
//! plain Revolve and of two-level checkpointing against the sequence length.

use super::args::BenchTiersArgs;
use super::render::print_json;
use super::CliError;
use crate::front::solve_memory_limit;
use crate::solve::{figure3, simulated_factor};
use std::time::Instant;

/// Prints the table (or its JSON).
pub(super) fn run(args: &BenchTiersArgs) -> Result<i32, CliError> {
    let (snapshots, intervals, lengths) = (args.snapshots, &args.intervals, &args.lengths);
    let bad = |m: String| CliError::BadInput(m);
    if snapshots == 0 {
        return Err(bad("--snapshots must be at least 1".into()));
    }
    if let Some(i) = intervals.iter().chain(lengths).find(|&&x| x == 0) {
        return Err(bad(format!(
            "intervals and lengths must be at least 1, got {i}"
        )));
    }
    let rows = figure3(snapshots, intervals, lengths)
        .ok_or_else(|| bad("a Revolve count overflows 64 bits; use shorter lengths".into()))?;
    if args.json {
        print_json(&rows);
        return Ok(0);
    }
    println!(
        "Recompute factor R = (forward steps + 1) / n, s = {snapshots} snapshots \
         (Kukreja et al., Figure 3)."
    );
    println!(
        "paper: R(I, s), the paper's T_async factor, constant in n. scheme: the two-level \
         schedule's own factor, its forward sweep included ('-': it stores nothing and \
         runs plain Revolve)."
    );
    let mut header = format!("{:>8} {:>9}", "n", "Revolve");
    for i in intervals {
        header += &format!(
            " {:>11} {:>11}",
            format!("paper I={i}"),
            format!("scheme I={i}")
        );
    }
    println!("{header}");
    for row in rows {
        let mut line = format!("{:>8} {:>9.4}", row.n, row.revolve);
        for (paper, scheme) in row.paper.iter().zip(&row.scheme) {
            let scheme = scheme.map_or_else(|| "-".to_string(), |x| format!("{x:.4}"));
            line += &format!(" {paper:>13.4} {scheme:>13}");
        }
        println!("{line}");
    }
    println!();
    println!(
        "Checked by the simulator: the two-level schedule on Checkmate's linear graph of n - 1 \
         stages (unit costs, copies of I), its forward computes counted."
    );
    println!(
        "{:>8} {:>6} {:>13} {:>11} {:>10}",
        "n", "I", "simulated R", "makespan", "time (ms)"
    );
    let memory = solve_memory_limit(None, 1);
    for &n in lengths.iter().filter(|&&n| n >= 1_000) {
        for &i in intervals {
            let start = Instant::now();
            let (r, makespan) = match simulated_factor(n, i, snapshots, memory) {
                Ok(Some(row)) => row,
                Ok(None) => continue,
                Err(footprint) => {
                    println!(
                        "{n:>8} {i:>6}  not simulated: {} would need about {} bytes, over the \
                         memory one solve may use here ({memory} bytes)",
                        footprint.what, footprint.bytes
                    );
                    continue;
                }
            };
            println!(
                "{n:>8} {i:>6} {r:>13.4} {makespan:>11} {:>10.1}",
                start.elapsed().as_secs_f64() * 1e3
            );
        }
    }
    Ok(0)
}
