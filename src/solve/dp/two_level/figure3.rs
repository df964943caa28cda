//! The table behind the paper's Figure 3 (`remat bench-tiers`): recompute factors of plain
//! Revolve, of the paper's model and of the two-level schedule with its sweep, against the
//! sequence length; and the factor the simulator measures on a linear graph.

use super::model::{recompute_factor, useful_snapshots};
use super::schedule::{makespan, two_level_schedule};
use crate::graph::structure::chain;
use crate::graph::{Graph, Storage};
use crate::schedule::simulate;
use crate::solve::details::Intervals;
use crate::solve::Footprint;
use serde::Serialize;

/// One row of the table behind the paper's Figure 3: recompute factors at sequence
/// length `n` with `s` snapshots.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FactorRow {
    pub n: u64,
    /// `R(n, s)`: plain Revolve.
    pub revolve: f64,
    /// Per interval `I`: the paper's `R(min(I, n), s)`, constant in `n` once `n >= I`.
    pub paper: Vec<f64>,
    /// Per interval `I`: `(forward steps of the two-level schedule + 1) / n`, its sweep
    /// included; `None` when it stores nothing (`q <= 3`) and plain Revolve runs instead.
    pub scheme: Vec<Option<f64>>,
}

/// The Figure 3 table for `s` snapshots, the given intervals and sequence lengths.
pub fn figure3(s: u64, intervals: &[u64], lengths: &[u64]) -> Option<Vec<FactorRow>> {
    lengths
        .iter()
        .map(|&n| {
            let paper = intervals
                .iter()
                .map(|&i| recompute_factor(i.min(n), s))
                .collect::<Option<Vec<f64>>>()?;
            let scheme = intervals
                .iter()
                .map(|&i| {
                    let shape = Intervals::new(n, i);
                    (shape.stored() > 0)
                        .then(|| shape.advances(s).map(|a| (a + 1) as f64 / n as f64))
                        .flatten()
                })
                .collect();
            Some(FactorRow {
                n,
                revolve: recompute_factor(n, s)?,
                paper,
                scheme,
            })
        })
        .collect()
}

/// The two-level schedule's recompute factor measured by the simulator on Checkmate's
/// linear graph of `n − 1` stages (`n` steps, unit costs), with copies of `I` time units
/// so that `I = ⌈T_T / T_A⌉ = interval`, and `s` snapshots per interval: `(forward
/// computes + 1) / n` and the makespan; `None` when it stores nothing.
pub fn simulated_factor(
    n: u64,
    interval: u64,
    s: u64,
    memory_limit: u64,
) -> Result<Option<(f64, f64)>, Footprint> {
    let intervals = Intervals::new(n, interval);
    if intervals.stored() == 0 || n < 2 {
        return Ok(None);
    }
    let s = s.min(useful_snapshots(interval));
    // The schedule's forward computes, counted before it is built (with few snapshots
    // they grow as n·I: 5·10^8 at n = 10^6, I = 1024, s = 1).
    let Some(advances) = intervals.advances(s) else {
        return Ok(None);
    };
    let computes = advances.saturating_add(2 * n);
    let graph = crate::graph::generate::linear(n as usize - 1)
        .with_storage(Storage::per_copy(interval as f64).ok());
    let footprint = Footprint::linear(
        &graph,
        computes,
        format!("a two-level schedule of {computes} compute events"),
    );
    if footprint.bytes > memory_limit {
        return Err(footprint);
    }
    Ok(simulate_factor(&graph, &intervals, s as usize, n))
}

/// [`simulated_factor`] once admitted.
fn simulate_factor(graph: &Graph, intervals: &Intervals, s: usize, n: u64) -> Option<(f64, f64)> {
    let chain = chain(graph).ok()?;
    let schedule = two_level_schedule(&chain, intervals, s, || Ok(())).ok()?;
    let stats = simulate(graph, &schedule).ok()?;
    let forward: u32 = chain
        .stages
        .iter()
        .map(|st| stats.computes[st.forward])
        .sum();
    Some(((forward + 1) as f64 / n as f64, makespan(&stats)))
}
