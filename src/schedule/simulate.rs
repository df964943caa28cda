//! The simulator: the single memory and cost model every schedule from
//! every solver is judged by.
//!
//! Rules, checked event by event:
//! 1. `compute(v)` needs every input of `v` resident ([`Rule::MissingInput`]) and `v` not
//!    resident already ([`Rule::AlreadyResident`]). At that instant the memory in use is
//!    `K + Σ_{u resident} s_u + s_v`: the output and all inputs are live together.
//! 2. `free(v)` needs `v` resident ([`Rule::FreeNotResident`]).
//! 3. Every node is computed at least once ([`Rule::NeverComputed`]).
//!
//! On a graph with a slow storage tier (`Graph::storage`, else [`Rule::NoStorage`]) two
//! more events copy values between the tiers (Kukreja, Hückelheim, Gorman, §2):
//! 4. `store(v)` needs `v` resident ([`Rule::StoreNotResident`]) and no slow copy of `v`
//!    yet ([`Rule::AlreadyStored`]); the slow copy then lasts for the rest of the step.
//! 5. `load(v)` needs a slow copy of `v` ([`Rule::LoadNotStored`]) and `v` not resident
//!    ([`Rule::AlreadyResident`]); `v` is resident from the event on and its bytes count
//!    from then.
//!
//! Cost is `Σ c_v` over compute events, so every recomputation pays again. Without copies,
//! the peak is the maximum over events of the memory after the event (frees only lower
//! it, so the peak is always reached at a compute). With copies, memory depends on time
//! (a value being copied is released only when its copy completes), so the peak is the
//! fast-tier peak of the timed replay in [`super::timeline`], which also gives the
//! makespan and the stalls ([`SimStats::tiers`]). The budget is checked against it.

use super::timeline::{replay, TierStats};
use super::{Event, Schedule};
use crate::graph::Graph;
use serde::Serialize;
use std::convert::Infallible;

/// Which rule an invalid schedule breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    UnknownNode,
    MissingInput,
    AlreadyResident,
    FreeNotResident,
    NeverComputed,
    NoStorage,
    StoreNotResident,
    AlreadyStored,
    LoadNotStored,
}

/// An invalid schedule: the event (0-based index), the node and the rule it breaks.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[error("invalid schedule: {message}")]
pub struct SimError {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub rule: Rule,
    pub message: String,
}

/// What a valid schedule costs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimStats {
    /// Peak bytes in use, `fixed_memory` included.
    pub peak_memory: u64,
    /// Index of the first event at which the peak is reached.
    pub peak_event: usize,
    /// Σ c_v over compute events.
    pub total_cost: f64,
    /// `total_cost − Σ_v c_v`.
    pub recompute_cost: f64,
    /// `total_cost / Σ_v c_v` (1 when every cost is 0).
    pub overhead: f64,
    /// Number of compute events per node, in solver order.
    #[serde(skip)]
    pub computes: Vec<u32>,
    /// Bytes in use after every event, in event order (a released copy source counts as
    /// freed at its `free` event here; [`TierStats`] has the timed view).
    #[serde(skip)]
    pub memory_after: Vec<u64>,
    /// The timed replay, for schedules that copy values between tiers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiers: Option<TierStats>,
}

/// Replays `schedule` against `graph`.
pub fn simulate(graph: &Graph, schedule: &Schedule) -> Result<SimStats, SimError> {
    match replay_polled(graph, schedule, || Ok::<(), Infallible>(())) {
        Ok(stats) => Ok(stats),
        Err(Ended::Invalid(e)) => Err(e),
        Err(Ended::Stopped(never)) => match never {},
    }
}

/// Events replayed between two calls of the poll of [`simulate_polled`].
pub const POLL_EVERY: usize = 1 << 16;

/// [`simulate`], calling `poll` every [`POLL_EVERY`] events: its error ends the replay
/// (`Err`); otherwise the replay's answer (`Ok`). For callers that replay under a deadline.
pub fn simulate_polled<E>(
    graph: &Graph,
    schedule: &Schedule,
    poll: impl FnMut() -> Result<(), E>,
) -> Result<Result<SimStats, SimError>, E> {
    match replay_polled(graph, schedule, poll) {
        Ok(stats) => Ok(Ok(stats)),
        Err(Ended::Invalid(e)) => Ok(Err(e)),
        Err(Ended::Stopped(e)) => Err(e),
    }
}

/// Why a replay ended without stats.
enum Ended<E> {
    Invalid(SimError),
    Stopped(E),
}

impl<E> From<SimError> for Ended<E> {
    fn from(e: SimError) -> Ended<E> {
        Ended::Invalid(e)
    }
}

fn replay_polled<E>(
    graph: &Graph,
    schedule: &Schedule,
    mut poll: impl FnMut() -> Result<(), E>,
) -> Result<SimStats, Ended<E>> {
    let n = graph.len();
    let mut resident = vec![false; n];
    let mut stored = vec![false; n];
    let mut computes = vec![0u32; n];
    let mut memory = graph.fixed_memory();
    let mut peak = memory;
    let mut peak_event = 0;
    let mut total_cost = 0.0;
    let mut memory_after = Vec::with_capacity(schedule.events.len());
    let fail = |index: usize, v: usize, rule: Rule, message: String| SimError {
        event: Some(index),
        node: Some(graph.id(v).to_string()),
        rule,
        message,
    };
    for (index, &event) in schedule.events.iter().enumerate() {
        if index % POLL_EVERY == 0 {
            poll().map_err(Ended::Stopped)?;
        }
        let v = event.node();
        if v >= n {
            return Err(Ended::Invalid(SimError {
                event: Some(index),
                node: None,
                rule: Rule::UnknownNode,
                message: format!("event {index} names node #{v}, but the graph has {n} nodes"),
            }));
        }
        match event {
            Event::Compute(v) => {
                if resident[v] {
                    return Err(Ended::Invalid(fail(
                        index,
                        v,
                        Rule::AlreadyResident,
                        format!(
                            "event {index} computes '{}', which is already resident",
                            graph.id(v)
                        ),
                    )));
                }
                if let Some(&u) = graph.preds(v).iter().find(|&&u| !resident[u]) {
                    return Err(Ended::Invalid(fail(
                        index,
                        v,
                        Rule::MissingInput,
                        format!(
                            "event {index} computes '{}', but its input '{}' is not resident",
                            graph.id(v),
                            graph.id(u)
                        ),
                    )));
                }
                resident[v] = true;
                computes[v] += 1;
                memory += graph.memory(v);
                total_cost += graph.cost(v);
                if memory > peak {
                    peak = memory;
                    peak_event = index;
                }
            }
            Event::Free(v) => {
                if !resident[v] {
                    return Err(Ended::Invalid(fail(
                        index,
                        v,
                        Rule::FreeNotResident,
                        format!(
                            "event {index} frees '{}', which is not resident",
                            graph.id(v)
                        ),
                    )));
                }
                resident[v] = false;
                memory -= graph.memory(v);
            }
            Event::Store(v) | Event::Load(v) if graph.storage().is_none() => {
                return Err(Ended::Invalid(fail(
                    index,
                    v,
                    Rule::NoStorage,
                    format!(
                        "event {index} copies '{}' between tiers, but the graph describes no \
                         slow storage tier (add a `storage` object)",
                        graph.id(v)
                    ),
                )));
            }
            Event::Store(v) | Event::Load(v) => {
                let load = matches!(event, Event::Load(_));
                let broken = match (load, resident[v], stored[v]) {
                    (false, false, _) => Some((Rule::StoreNotResident, "which is not resident")),
                    (false, true, true) => {
                        Some((Rule::AlreadyStored, "which the slow tier already holds"))
                    }
                    (true, _, false) => Some((Rule::LoadNotStored, "which was never stored")),
                    (true, true, true) => {
                        Some((Rule::AlreadyResident, "which is already resident"))
                    }
                    _ => None,
                };
                if let Some((rule, why)) = broken {
                    let verb = if load { "loads" } else { "stores" };
                    return Err(Ended::Invalid(fail(
                        index,
                        v,
                        rule,
                        format!("event {index} {verb} '{}', {why}", graph.id(v)),
                    )));
                }
                if load {
                    resident[v] = true;
                    memory += graph.memory(v);
                    if memory > peak {
                        peak = memory;
                        peak_event = index;
                    }
                } else {
                    stored[v] = true;
                }
            }
        }
        memory_after.push(memory);
    }
    let missing: Vec<&str> = (0..n)
        .filter(|&v| computes[v] == 0)
        .map(|v| graph.id(v))
        .collect();
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(10).copied().collect();
        return Err(Ended::Invalid(SimError {
            event: None,
            node: Some(missing[0].to_string()),
            rule: Rule::NeverComputed,
            message: format!(
                "{} node(s) are never computed: {}{}",
                missing.len(),
                shown.join(", "),
                if missing.len() > shown.len() {
                    ", ..."
                } else {
                    ""
                }
            ),
        }));
    }
    let tiers = match graph.storage() {
        Some(storage) if schedule.events.iter().any(|e| e.is_transfer()) => {
            let timed = replay(graph, schedule, storage);
            (peak, peak_event) = (timed.fast_peak, timed.fast_peak_event);
            Some(timed)
        }
        _ => None,
    };
    let base = graph.total_cost();
    Ok(SimStats {
        peak_memory: peak,
        peak_event,
        total_cost,
        recompute_cost: total_cost - base,
        overhead: if base > 0.0 { total_cost / base } else { 1.0 },
        computes,
        memory_after,
        tiers,
    })
}
