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
    /// Σ c_v over compute events: `Σ_v c_v + recompute_cost`.
    pub total_cost: f64,
    /// Σ c_v over the computations after each node's first, summed on its own: exact where
    /// `total_cost − Σ_v c_v` would lose it to rounding (a loss of 1e16 beside ops of 0.5).
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
    let Ok(result) = simulate_polled(graph, schedule, || Ok::<(), Infallible>(()));
    result
}

/// Events replayed between two calls of the poll of [`simulate_polled`].
pub const POLL_EVERY: usize = 1 << 16;

/// [`simulate`], calling `poll` every `POLL_EVERY` (65,536) events: its error ends the replay
/// (`Err`); otherwise the replay's answer (`Ok`). For callers that replay under a deadline.
pub fn simulate_polled<E>(
    graph: &Graph,
    schedule: &Schedule,
    mut poll: impl FnMut() -> Result<(), E>,
) -> Result<Result<SimStats, SimError>, E> {
    let mut tape = Tape::new(graph, schedule.events.len());
    for (index, &event) in schedule.events.iter().enumerate() {
        if index % POLL_EVERY == 0 {
            poll()?;
        }
        if let Err(e) = tape.apply(index, event) {
            return Ok(Err(e));
        }
    }
    Ok(check_all_computed(graph, &tape.computes).map(|()| tape.into_stats(schedule)))
}

/// The event-order replay so far: what each tier holds, the bytes in use and their peak.
struct Tape<'g> {
    graph: &'g Graph,
    /// `v` is in the fast tier.
    resident: Vec<bool>,
    /// The slow tier holds a copy of `v`.
    stored: Vec<bool>,
    computes: Vec<u32>,
    /// `K + Σ_{v resident} s_v`.
    memory: u64,
    peak: u64,
    peak_event: usize,
    memory_after: Vec<u64>,
}

impl<'g> Tape<'g> {
    fn new(graph: &'g Graph, events: usize) -> Tape<'g> {
        let n = graph.len();
        let memory = graph.fixed_memory();
        Tape {
            graph,
            resident: vec![false; n],
            stored: vec![false; n],
            computes: vec![0u32; n],
            memory,
            peak: memory,
            peak_event: 0,
            memory_after: Vec::with_capacity(events),
        }
    }

    /// Checks the `index`-th event against the rules and applies it.
    fn apply(&mut self, index: usize, event: Event) -> Result<(), SimError> {
        let v = event.node();
        let n = self.graph.len();
        if v >= n {
            return Err(SimError {
                event: Some(index),
                node: None,
                rule: Rule::UnknownNode,
                message: format!("event {index} names node #{v}, but the graph has {n} nodes"),
            });
        }
        match event {
            Event::Compute(v) => self.compute(index, v)?,
            Event::Free(v) => self.free(index, v)?,
            Event::Store(v) | Event::Load(v) if self.graph.storage().is_none() => {
                return Err(self.fail(
                    index,
                    v,
                    Rule::NoStorage,
                    format!(
                        "event {index} copies '{}' between tiers, but the graph describes no \
                         slow storage tier (add a `storage` object)",
                        self.graph.id(v)
                    ),
                ));
            }
            Event::Store(v) | Event::Load(v) => {
                self.copy(index, v, matches!(event, Event::Load(_)))?
            }
        }
        self.memory_after.push(self.memory);
        Ok(())
    }

    /// Rule 1: `compute(v)` with every input resident and `v` not; pays `c_v`.
    fn compute(&mut self, index: usize, v: usize) -> Result<(), SimError> {
        let graph = self.graph;
        if self.resident[v] {
            return Err(self.fail(
                index,
                v,
                Rule::AlreadyResident,
                format!(
                    "event {index} computes '{}', which is already resident",
                    graph.id(v)
                ),
            ));
        }
        if let Some(&u) = graph.preds(v).iter().find(|&&u| !self.resident[u]) {
            return Err(self.fail(
                index,
                v,
                Rule::MissingInput,
                format!(
                    "event {index} computes '{}', but its input '{}' is not resident",
                    graph.id(v),
                    graph.id(u)
                ),
            ));
        }
        self.resident[v] = true;
        self.computes[v] += 1;
        self.memory += graph.memory(v);
        self.raise_peak(index);
        Ok(())
    }

    /// Rule 2: `free(v)` of a resident `v`.
    fn free(&mut self, index: usize, v: usize) -> Result<(), SimError> {
        if !self.resident[v] {
            return Err(self.fail(
                index,
                v,
                Rule::FreeNotResident,
                format!(
                    "event {index} frees '{}', which is not resident",
                    self.graph.id(v)
                ),
            ));
        }
        self.resident[v] = false;
        self.memory -= self.graph.memory(v);
        Ok(())
    }

    /// Rules 4 and 5: `store(v)` (`load` false) or `load(v)` (`load` true), on a graph
    /// with a slow tier.
    fn copy(&mut self, index: usize, v: usize, load: bool) -> Result<(), SimError> {
        let broken = match (load, self.resident[v], self.stored[v]) {
            (false, false, _) => Some((Rule::StoreNotResident, "which is not resident")),
            (false, true, true) => Some((Rule::AlreadyStored, "which the slow tier already holds")),
            (true, _, false) => Some((Rule::LoadNotStored, "which was never stored")),
            (true, true, true) => Some((Rule::AlreadyResident, "which is already resident")),
            _ => None,
        };
        if let Some((rule, why)) = broken {
            let verb = if load { "loads" } else { "stores" };
            return Err(self.fail(
                index,
                v,
                rule,
                format!("event {index} {verb} '{}', {why}", self.graph.id(v)),
            ));
        }
        if load {
            self.resident[v] = true;
            self.memory += self.graph.memory(v);
            self.raise_peak(index);
        } else {
            self.stored[v] = true;
        }
        Ok(())
    }

    /// Records the memory in use after the `index`-th event as the peak if it is above it.
    fn raise_peak(&mut self, index: usize) {
        if self.memory > self.peak {
            self.peak = self.memory;
            self.peak_event = index;
        }
    }

    /// The `index`-th event, on node `v`, breaks `rule`.
    fn fail(&self, index: usize, v: usize, rule: Rule, message: String) -> SimError {
        SimError {
            event: Some(index),
            node: Some(self.graph.id(v).to_string()),
            rule,
            message,
        }
    }

    /// The costs of the replayed `schedule`; its peak is the timed replay's fast-tier peak
    /// when it copies values between tiers.
    fn into_stats(self, schedule: &Schedule) -> SimStats {
        let Tape {
            graph,
            computes,
            mut peak,
            mut peak_event,
            memory_after,
            ..
        } = self;
        let tiers = match graph.storage() {
            Some(storage) if schedule.events.iter().any(|e| e.is_transfer()) => {
                let timed = replay(graph, schedule, storage);
                (peak, peak_event) = (timed.fast_peak, timed.fast_peak_event);
                Some(timed)
            }
            _ => None,
        };
        let base = graph.total_cost();
        let recompute_cost: f64 = computes
            .iter()
            .enumerate()
            .map(|(v, &count)| graph.cost(v) * f64::from(count.saturating_sub(1)))
            .sum();
        let total_cost = base + recompute_cost;
        SimStats {
            peak_memory: peak,
            peak_event,
            total_cost,
            recompute_cost,
            overhead: if base > 0.0 { total_cost / base } else { 1.0 },
            computes,
            memory_after,
            tiers,
        }
    }
}

/// Rule 3: every node is computed at least once; the error names the first ten that are not.
fn check_all_computed(graph: &Graph, computes: &[u32]) -> Result<(), SimError> {
    let missing: Vec<&str> = (0..graph.len())
        .filter(|&v| computes[v] == 0)
        .map(|v| graph.id(v))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = missing.iter().take(10).copied().collect();
    Err(SimError {
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
    })
}
