//! The two-level schedule: the sweep that stores interval bases to the slow tier, then the
//! intervals in reverse, each prefetching the base of the one before it and running
//! Revolve's graph view inside ([`crate::solve::dp::revolve::ChainView`]).

use crate::graph::structure::Chain;
use crate::schedule::{Event, Schedule, SimStats};
use crate::solve::details::Intervals;
use crate::solve::dp::revolve::ChainView;
use crate::solve::footprint::Halt;
use crate::solve::{SolveError, Stopped};

/// The two-level schedule for `intervals` with `s` snapshots per interval, `poll`ed before
/// each interval.
pub fn two_level_schedule(
    chain: &Chain,
    intervals: &Intervals,
    s: usize,
    mut poll: impl FnMut() -> Result<(), Stopped>,
) -> Result<Schedule, Halt> {
    let view = ChainView::new(chain).map_err(|e| Halt::Refused(internal_view(e.to_string())))?;
    let (i, q) = (intervals.interval as usize, intervals.count as usize);
    let node = |j: usize| chain.stages[j - 1].forward;
    // Interval k's base is stored for k in 1..=q−3 and kept for k = q−2, q−1.
    let stored = |k: usize| (1..=q.saturating_sub(3)).contains(&k);
    let mut events = Vec::new();
    // 1. The sweep.
    for j in 1..=(q - 1) * i {
        events.push(Event::Compute(node(j)));
        if j % i == 0 && stored(j / i) {
            events.push(Event::Store(node(j)));
        }
        let previous = j - 1;
        if previous >= 1 && !(previous % i == 0 && previous / i + 2 == q) {
            events.push(Event::Free(node(previous)));
        }
    }
    // 2. The intervals in reverse, each prefetching the base of the one before it.
    let mut grad = None;
    for k in (0..q).rev() {
        poll()?;
        if k >= 1 && stored(k - 1) {
            events.push(Event::Load(node((k - 1) * i)));
        }
        let l = if k + 1 == q {
            intervals.last
        } else {
            intervals.interval
        } as usize;
        view.push_range(k * i, l, s, &mut grad, &mut events)
            .map_err(|e| Halt::Refused(internal_view(e.to_string())))?;
    }
    Ok(Schedule::new(events))
}

fn internal_view(reason: String) -> SolveError {
    SolveError::Failed {
        solver: "two-level",
        reason,
    }
}

/// The makespan the simulator measured (the compute time when nothing is copied).
pub(super) fn makespan(stats: &SimStats) -> f64 {
    stats
        .tiers
        .as_ref()
        .map_or(stats.total_cost, |t| t.makespan)
}
