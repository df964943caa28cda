//! How the command line prints figures for people: costs, byte counts, table cells, and
//! the timed-replay lines shared by `solve` and `simulate`.

use crate::budget::human_bytes;
use crate::graph::Graph;
use crate::schedule::SimStats;
use serde::Serialize;

/// A cost for people: integers as integers, else up to four decimals.
pub(super) fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The graph's cost unit after a space, or nothing.
pub(super) fn unit(g: &Graph) -> String {
    g.cost_unit().map(|u| format!(" {u}")).unwrap_or_default()
}

/// Bytes, with the size in binary units beside them from 1 KiB on.
pub(super) fn bytes(b: u64) -> String {
    if b < 1024 {
        format!("{b} B")
    } else {
        format!("{b} B ({})", human_bytes(b))
    }
}

/// A table cell: the value with `digits` decimals, or `-`.
pub(super) fn cell(value: Option<f64>, digits: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// Prints `value` as pretty JSON.
pub(super) fn print_json(value: &impl Serialize) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).expect("outputs serialise")
    );
}

/// The timed replay's figures, for schedules that use a storage tier.
pub(super) fn print_tiers(s: &SimStats) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_bytes_for_people() {
        assert_eq!(num(3.0), "3");
        assert_eq!(num(0.125), "0.125");
        assert_eq!(num(2.00001), "2");
        assert_eq!(bytes(17), "17 B");
        assert_eq!(bytes(3 << 29), "1610612736 B (1.5 GiB)");
        assert_eq!(cell(None, 2), "-");
        assert_eq!(cell(Some(1.0 / 3.0), 2), "0.33");
    }
}
