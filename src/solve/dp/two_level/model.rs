//! The paper's model of two-level checkpointing (module docs of [`super`]): the recompute
//! factor `R(l, s)`, the checkpointing interval `I` and the intervals it cuts, the step
//! times `T_A`, `T_B`, the graph-exact `T_async`, the slot model of the snapshots, and
//! [`assess`], the model's verdict for a chain and a budget before any simulation (also
//! the storage tier of `remat inspect`).
//!
//! [`Assessment`], [`Intervals`] and [`StepTimes`] are figures a result reports, so they
//! are defined with the other details (`crate::solve::details`); their methods are here.

use crate::graph::structure::{chain, Chain};
use crate::graph::{Graph, Storage};
use crate::solve::details::{Assessment, Intervals, StepTimes};
use crate::solve::dp::revolve::{revolve_steps, ChainView};
use crate::solve::SolveError;

/// The recompute factor `R(l, s) = (t(l, s) + 1) / l` (1 = no recomputation); `None` when
/// no Revolve schedule exists (`s = 0`, `l >= 2`) or `l = 0`.
pub fn recompute_factor(l: u64, s: u64) -> Option<f64> {
    let t = revolve_steps(l, s)?;
    (l > 0).then(|| (t + 1) as f64 / l as f64)
}

/// The checkpointing interval `I = ⌈T_T / T_A⌉`, at least 1; `None` when `T_A = 0` and
/// `T_T > 0` (no amount of compute hides a copy).
pub fn interval(t_t: f64, t_a: f64) -> Option<u64> {
    if t_t <= t_a {
        return Some(1);
    }
    let i = (t_t / t_a).ceil();
    (i.is_finite() && i < u64::MAX as f64).then_some(i as u64)
}

impl Intervals {
    pub fn new(steps: u64, interval: u64) -> Intervals {
        let count = steps.div_ceil(interval.max(1));
        Intervals {
            steps,
            interval,
            count,
            last: steps - (count.saturating_sub(1)) * interval,
        }
    }
    /// Bases copied to the slow tier: those of intervals `1..=q−3`.
    pub fn stored(&self) -> u64 {
        self.count.saturating_sub(3)
    }
    /// Forward steps of the whole scheme with `s` snapshots per interval:
    /// `(q−1)·I + t(l_{q−1}, s) + (q−1)·t(I, s)`.
    pub fn advances(&self, s: u64) -> Option<u64> {
        let q = self.count.checked_sub(1)?;
        let inner = revolve_steps(self.interval, s)?;
        q.checked_mul(self.interval)?
            .checked_add(revolve_steps(self.last, s)?)?
            .checked_add(q.checked_mul(inner)?)
    }
}

impl StepTimes {
    pub fn of(chain: &Chain) -> StepTimes {
        let n = chain.len() as f64;
        StepTimes {
            forward: chain.stages.iter().map(|s| s.fw).sum::<f64>() / n,
            backward: chain.stages.iter().map(|s| s.bw).sum::<f64>() / n,
            loss: chain.loss_cost,
        }
    }
    /// The graph-exact time of a schedule making `advances` forward steps on a chain of
    /// `stages` stages, when nothing stalls.
    pub(super) fn total(&self, advances: u64, stages: usize) -> f64 {
        advances as f64 * self.forward + stages as f64 * self.backward + self.loss
    }
}

/// The paper's `n·R·T_A + n·T_B` with `n = l` steps.
pub(super) fn paper_time(times: &StepTimes, steps: u64, r: f64) -> f64 {
    let n = steps as f64;
    n * r * times.forward + n * times.backward
}

/// The graph-exact `T_async` of the two-level schedule with `s` snapshots per interval
/// (see the module docs); `None` when it stores nothing.
pub fn t_async(chain: &Chain, intervals: &Intervals, s: u64) -> Option<f64> {
    let advances = intervals.advances(s).filter(|_| intervals.stored() > 0)?;
    Some(StepTimes::of(chain).total(advances, chain.len()))
}

/// Bytes of the largest state a snapshot slot must hold.
pub(super) fn slot_size(chain: &Chain) -> u64 {
    chain
        .stages
        .iter()
        .flat_map(|s| [s.x, s.delta])
        .chain([chain.loss_size])
        .max()
        .unwrap_or(0)
        .max(1)
}

/// Slots of the largest state that fit beside `fixed_memory` in `budget`.
pub(super) fn slots(graph: &Graph, chain: &Chain, budget: u64) -> u64 {
    budget.saturating_sub(graph.fixed_memory()) / slot_size(chain)
}

/// Snapshots per interval the slot model allows (`K + (s + 4)` states), at most `I − 1`
/// (more do not shorten an interval's Revolve: `t(I, s) = I − 1` once `s >= I − 1`).
fn two_level_snapshots(slots: u64, interval: u64) -> Option<u64> {
    slots
        .checked_sub(4)
        .filter(|&s| s >= 1)
        .map(|s| s.min(useful_snapshots(interval)))
}

/// The most snapshots an interval of `I` steps can use.
pub(super) fn useful_snapshots(interval: u64) -> u64 {
    interval.saturating_sub(1).max(1)
}

/// Snapshots plain Revolve gets: `K + (s + 2)` states (the virtual `x_0` is one of the
/// `s`), at most `l`.
fn revolve_snapshots(slots: u64, steps: u64) -> Option<u64> {
    slots
        .checked_sub(2)
        .filter(|&s| s >= 1)
        .map(|s| s.min(steps))
}

/// The model's view of `graph` (a chain with a storage tier) under `budget`.
pub fn assess(graph: &Graph, budget: u64) -> Result<Assessment, SolveError> {
    let (chain, storage) = inputs(graph)?;
    Ok(assess_chain(graph, &chain, &storage, budget))
}

pub(super) fn assess_chain(
    graph: &Graph,
    chain: &Chain,
    storage: &Storage,
    budget: u64,
) -> Assessment {
    let times = StepTimes::of(chain);
    let state = chain.stages.iter().map(|s| s.x).max().unwrap_or(0);
    let transfer_time = storage.write.time(state);
    let load_time = storage.read.time(state);
    let steps = chain.len() as u64 + 1;
    let i = interval(transfer_time, times.forward).unwrap_or(steps);
    let intervals = Intervals::new(steps, i.min(steps));
    let slots = slots(graph, chain, budget);
    let snapshots = two_level_snapshots(slots, intervals.interval);
    let revolve_snapshots = revolve_snapshots(slots, steps);
    let r_interval = snapshots.and_then(|s| recompute_factor(intervals.interval, s));
    let r_revolve = revolve_snapshots.and_then(|s| recompute_factor(steps, s));
    let paper = |r: f64| paper_time(&times, steps, r);
    let t_async = snapshots.and_then(|s| t_async(chain, &intervals, s));
    let t_revolve = revolve_snapshots
        .and_then(|s| revolve_steps(steps, s))
        .map(|a| times.total(a, chain.len()));
    let reversal = snapshots
        .and_then(|s| revolve_steps(intervals.interval, s))
        .map(|t| t as f64 * times.forward + intervals.interval as f64 * times.backward);
    let loads_hidden = reversal.is_some_and(|r| load_time <= r);
    let predicted_stall = reversal.map_or(0.0, |r| {
        intervals.stored() as f64 * (load_time - r).max(0.0)
    });
    let helps = match (t_async, t_revolve) {
        (Some(a), Some(r)) => a + predicted_stall < r,
        (Some(_), None) => true,
        _ => false,
    };
    let verdict = match (t_async, t_revolve) {
        _ if intervals.stored() == 0 => format!(
            "the tier does not help: with I = {} the {} steps make {} interval(s), too few to \
             store a checkpoint (the last two bases stay in fast memory); plain Revolve runs",
            intervals.interval, steps, intervals.count
        ),
        (None, _) => format!(
            "the tier does not help: the budget holds {slots} states of {} bytes, fewer than \
             the 5 an interval needs",
            slot_size(chain)
        ),
        (Some(a), Some(r)) if !helps => format!(
            "the tier does not help: two-level would take {} (its sweep included{}), plain \
             Revolve {r}",
            a + predicted_stall,
            if predicted_stall > 0.0 {
                format!(", {predicted_stall} waiting for loads")
            } else {
                String::new()
            }
        ),
        (Some(a), r) => format!(
            "the tier helps: two-level takes {}{}, storing {} of {} interval bases{}",
            a + predicted_stall,
            r.map_or_else(
                || " where plain Revolve does not fit".to_string(),
                |r| format!(" against {r} for plain Revolve")
            ),
            intervals.stored(),
            intervals.count,
            if loads_hidden {
                String::new()
            } else {
                format!(
                    " ({predicted_stall} of it waiting: loads take {load_time}, longer than \
                     an interval's reversal)"
                )
            }
        ),
    };
    Assessment {
        times,
        transfer_time,
        load_time,
        intervals,
        snapshots,
        revolve_snapshots,
        r_interval,
        r_revolve,
        t_async_paper: r_interval.map(paper),
        t_revolve_paper: r_revolve.map(paper),
        t_async,
        t_revolve,
        loads_hidden,
        predicted_stall,
        helps,
        verdict,
    }
}

/// The chain and the storage tier, or why the solver cannot run.
pub(super) fn inputs(graph: &Graph) -> Result<(Chain, Storage), SolveError> {
    let chain = chain(graph).map_err(|e| SolveError::Unsupported {
        solver: "two-level",
        reason: format!("two-level needs a chain training graph: {e}"),
    })?;
    ChainView::new(&chain).map_err(|e| SolveError::Unsupported {
        solver: "two-level",
        reason: e.to_string(),
    })?;
    let storage = *graph.storage().ok_or_else(|| SolveError::Unsupported {
        solver: "two-level",
        reason: "two-level needs a slow storage tier: add a `storage` object to the graph or \
                 the request (e.g. {\"transfer_time\": 8} or write/read bandwidths)"
            .into(),
    })?;
    Ok((chain, storage))
}

/// The least budget two-level can run in: `K` and five states of the largest size (one
/// snapshot, the working state, the next state or gradient, the incoming gradient, the
/// prefetch buffer); `K` when `graph` is not a chain.
pub fn least_budget(graph: &Graph) -> u64 {
    chain(graph).map_or(0, |c| 5 * slot_size(&c)) + graph.fixed_memory()
}
