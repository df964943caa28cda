//! A schedule as a caller gives it, and the report of its replay: the one function behind
//! `remat simulate --json` and `POST /v1/simulate`.
//!
//! A schedule may come as `{"events": [...]}`, as a bare list of events, or inside a
//! solve result (its `schedule` field). The report is the contract's (`api/openapi.yaml`,
//! `/v1/simulate`): `valid`, `budget`, `fits_budget`, the simulator's `stats` and the
//! compute events per node id.

use crate::graph::load::raw;
use crate::graph::Graph;
use crate::schedule::{simulate, ScheduleJson, SimError, SimStats};
use serde::Serialize;
use std::collections::BTreeMap;

/// A value that holds no schedule.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleInputError {
    /// A solve result whose `schedule` is null (it found none), or null itself.
    #[error("the result holds no schedule")]
    NoSchedule,
    #[error(
        "not a schedule ({0}); expected {{\"events\": [{{\"op\": \"compute\"|\"free\"|\"store\"|\"load\", \"node\": ID}}, ...]}}"
    )]
    NotASchedule(String),
}

/// Reads a schedule in any of the accepted shapes from its JSON text, without building
/// the whole text as a `serde_json::Value` (a solve result's other fields are split off
/// unread). A result's `schedule` is read as a schedule itself, not unwrapped again: a
/// body of `{"schedule": ` nested thousands deep is refused, not followed down a stack.
pub fn read_schedule(text: &str) -> Result<ScheduleJson, ScheduleInputError> {
    let text = text.trim();
    match raw::fields(text.as_bytes()) {
        Ok(Ok(fields)) => match fields.get("schedule") {
            Some(inner) => read_plain(inner.get()),
            None => read_plain(text),
        },
        _ => read_plain(text),
    }
}

/// A schedule itself: its events alone, or the object of its events (and stages).
fn read_plain(text: &str) -> Result<ScheduleJson, ScheduleInputError> {
    let text = text.trim();
    if text == "null" {
        return Err(ScheduleInputError::NoSchedule);
    }
    if text.starts_with('[') {
        return serde_json::from_str(text)
            .map(|events| ScheduleJson {
                events,
                stages: None,
            })
            .map_err(not_a_schedule);
    }
    serde_json::from_str(text).map_err(not_a_schedule)
}

/// The reader's error, its quotes of the input [`elide`](crate::graph::load::elide)d.
fn not_a_schedule(e: serde_json::Error) -> ScheduleInputError {
    ScheduleInputError::NotASchedule(crate::graph::load::elide(&e.to_string(), 100).into_owned())
}

/// What a valid schedule does on a graph (fields in the order the service has always
/// printed them).
#[derive(Clone, Debug, Serialize)]
pub struct SimulateReport {
    /// The budget checked, in bytes.
    pub budget: Option<u64>,
    /// Compute events per node id.
    pub computes: BTreeMap<String, u32>,
    /// Whether the peak fits `budget`, when there is one.
    pub fits_budget: Option<bool>,
    pub stats: SimStats,
    /// Always true: an invalid schedule is a `SimError`, not a report.
    pub valid: bool,
}

impl SimulateReport {
    /// Whether the schedule fits (true when no budget was given).
    pub fn fits(&self) -> bool {
        self.fits_budget.unwrap_or(true)
    }
}

/// Replays `schedule` on `graph` and checks it against `budget` (bytes).
pub fn simulate_report(
    graph: &Graph,
    schedule: &ScheduleJson,
    budget: Option<u64>,
) -> Result<SimulateReport, SimError> {
    let stats = simulate(graph, &schedule.resolve(graph)?)?;
    Ok(SimulateReport {
        budget,
        computes: stats
            .computes
            .iter()
            .enumerate()
            .map(|(v, &c)| (graph.id(v).to_string(), c))
            .collect(),
        fits_budget: budget.map(|b| stats.peak_memory <= b),
        stats,
        valid: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::schedule::checkpoint_all;
    use serde_json::json;

    #[test]
    fn every_shape_reads_to_the_same_schedule() {
        let g = linear(2);
        let events = serde_json::to_value(checkpoint_all(&g).to_json(&g).events).unwrap();
        let read = |v: serde_json::Value| read_schedule(&v.to_string());
        let want = read(json!({ "events": events })).unwrap();
        assert_eq!(read(events.clone()).unwrap(), want);
        let result = json!({"status": "feasible", "schedule": {"events": events}});
        assert_eq!(read(result).unwrap(), want);
        assert!(matches!(
            read(json!({"status": "infeasible", "schedule": null})),
            Err(ScheduleInputError::NoSchedule)
        ));
        let e = read(json!({"steps": []})).unwrap_err();
        assert!(e.to_string().contains("\"store\"|\"load\""), "{e}");
        // A field no schedule has is an error naming it, on the schedule and on an event.
        let e = read(json!({"events": events, "bogus": 1})).unwrap_err();
        assert!(e.to_string().contains("unknown field `bogus`"), "{e}");
        let e = read(json!([{"op": "compute", "node": "0", "colour": "red"}])).unwrap_err();
        assert!(e.to_string().contains("unknown field `colour`"), "{e}");
    }

    /// A result's schedule is unwrapped once: a body of `{"schedule": ` nested 100,000 deep
    /// (1.2 MB) is refused, where reading it level by level overflowed a 2 MiB thread stack
    /// from about 15,000 levels and aborted the server.
    #[test]
    fn a_schedule_nested_in_results_is_unwrapped_once() {
        let deep = 100_000;
        let text = "{\"schedule\": ".repeat(deep) + "[]" + &"}".repeat(deep);
        let e = read_schedule(&text).unwrap_err();
        assert!(e.to_string().contains("unknown field `schedule`"), "{e}");
    }

    #[test]
    fn the_report_is_the_contracts() {
        let g = linear(2);
        let schedule = checkpoint_all(&g).to_json(&g);
        let r = simulate_report(&g, &schedule, Some(3)).unwrap();
        let v = serde_json::to_value(&r).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["budget", "computes", "fits_budget", "stats", "valid"]
        );
        assert_eq!(v["computes"]["0"], 1);
        assert_eq!(r.fits_budget, Some(r.stats.peak_memory <= 3));
        assert!(v["stats"].get("memory_after").is_none());
        assert!(simulate_report(&g, &schedule, None).unwrap().fits());
    }
}
