//! Schedules and the one simulator that judges them.
//!
//! A schedule is an ordered list of events `compute(v)` / `free(v)`,
//! and, on a graph with a slow storage tier, `store(v)` / `load(v)`: asynchronous copies
//! fast -> slow and slow -> fast (Kukreja, Hückelheim, Gorman, §2). Every solver emits one;
//! [`simulate()`] replays it against the graph and is the single source of peak memory and
//! cost; for schedules with copies it runs the timed replay of [`timeline`] (makespan,
//! stalls, fast-tier peak). Solvers that think in Checkmate stages attach their (R, S)
//! matrices ([`Stages`]), built and turned into events by [`stages`]. The checkpoint-all
//! schedule ([`checkpoint_all()`]) and its peak, the 100% of percentage budgets, live here too,
//! as does [`sequence`], the schedule of a compute sequence with every free implied.

mod checkpoint_all;
pub mod sequence;
mod simulate;
pub mod stages;
pub mod timeline;

pub use checkpoint_all::{checkpoint_all, checkpoint_all_peak, checkpoint_all_peak_by};
pub use simulate::{simulate, simulate_polled, Rule, SimError, SimStats};
pub use stages::Stages;
pub use timeline::{Stall, TierStats};

use crate::graph::load::excerpt;
use crate::graph::Graph;
use serde::{Deserialize, Serialize};

/// One event of a schedule, by node index in solver order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    Compute(usize),
    Free(usize),
    /// Start an asynchronous copy of `v` from the fast tier to the slow tier.
    Store(usize),
    /// Start an asynchronous copy of `v` from the slow tier back to the fast tier.
    Load(usize),
}

impl Event {
    pub fn node(self) -> usize {
        match self {
            Event::Compute(v) | Event::Free(v) | Event::Store(v) | Event::Load(v) => v,
        }
    }
    /// Whether the event is a copy between tiers.
    pub fn is_transfer(self) -> bool {
        matches!(self, Event::Store(_) | Event::Load(_))
    }
}

/// A schedule for one graph.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Schedule {
    pub events: Vec<Event>,
    /// Checkmate's stage matrices, when the solver thinks in stages.
    pub stages: Option<Stages>,
}

impl Schedule {
    pub fn new(events: Vec<Event>) -> Schedule {
        Schedule {
            events,
            stages: None,
        }
    }

    /// The JSON form, naming nodes by id.
    pub fn to_json(&self, graph: &Graph) -> ScheduleJson {
        ScheduleJson {
            events: self
                .events
                .iter()
                .map(|e| {
                    let node = graph.id(e.node()).to_string();
                    match *e {
                        Event::Compute(_) => EventJson::Compute { node },
                        Event::Free(_) => EventJson::Free { node },
                        Event::Store(_) => EventJson::Store { node },
                        Event::Load(_) => EventJson::Load { node },
                    }
                })
                .collect(),
            stages: self.stages.as_ref().map(|s| s.to_json(graph)),
        }
    }
}

/// An event as JSON: `{"op": "compute", "node": "conv1"}`; `op` is `compute`, `free`,
/// `store` or `load`. Any other field is an error, as in every document remat reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum EventJson {
    Compute { node: String },
    Free { node: String },
    Store { node: String },
    Load { node: String },
}

impl EventJson {
    /// The id of the node the event names.
    pub fn node(&self) -> &str {
        match self {
            EventJson::Compute { node }
            | EventJson::Free { node }
            | EventJson::Store { node }
            | EventJson::Load { node } => node,
        }
    }
}

/// A schedule as JSON. `stages`, when present, lists for each Checkmate stage `t` the
/// nodes with `R[t,i] = 1` and those with `S[t,i] = 1` (the sparse rows of R and S).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a schedule object")]
pub struct ScheduleJson {
    pub events: Vec<EventJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<StageJson>>,
}

/// One stage's rows of R and S, by node id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageJson {
    #[serde(rename = "R")]
    pub r: Vec<String>,
    #[serde(rename = "S")]
    pub s: Vec<String>,
}

impl ScheduleJson {
    /// Resolves node ids against `graph`. Stage matrices are not read back: the events are
    /// the schedule.
    pub fn resolve(&self, graph: &Graph) -> Result<Schedule, SimError> {
        let mut events = Vec::with_capacity(self.events.len());
        for (index, e) in self.events.iter().enumerate() {
            let (id, make): (&str, fn(usize) -> Event) = match e {
                EventJson::Compute { node } => (node, Event::Compute),
                EventJson::Free { node } => (node, Event::Free),
                EventJson::Store { node } => (node, Event::Store),
                EventJson::Load { node } => (node, Event::Load),
            };
            let v = graph.index_of(id).ok_or_else(|| {
                let id = excerpt(id);
                SimError {
                    event: Some(index),
                    node: Some(id.to_string()),
                    rule: Rule::UnknownNode,
                    message: format!("event {index} names node '{id}', which is not in the graph"),
                }
            })?;
            events.push(make(v));
        }
        Ok(Schedule::new(events))
    }
}
