//! What a picture is drawn from: a schedule in any shape the simulator's front door reads
//! (`{"events": [...]}`, a bare event list, a solve result), with its stage matrices when
//! it carries them and the budget of the result it came from.

use super::PlotError;
use crate::budget::human_bytes;
use crate::front::read_schedule;
use crate::graph::load::raw;
use crate::graph::Graph;
use crate::schedule::{Event, Schedule, ScheduleJson, StageJson, Stages};
use crate::solve::SolveResult;
use fixedbitset::FixedBitSet;

/// A schedule to draw and the budget it was solved for, when known.
#[derive(Clone, Debug)]
pub struct Drawn {
    pub schedule: Schedule,
    pub budget: Option<u64>,
    /// Where the schedule came from, for a result: its solver and budget.
    pub caption: Option<String>,
}

/// Reads `text` (a schedule file or a solve result, JSON) against `graph`. The budget is
/// the result's own `budget` field, when `text` is a result.
pub fn read(graph: &Graph, text: &str) -> Result<Drawn, PlotError> {
    let fields = raw::fields(text.as_bytes()).ok().and_then(Result::ok);
    let field = |name: &str| fields.as_ref().and_then(|f| f.get(name)).map(|v| v.get());
    let budget = field("budget").and_then(|v| v.parse::<u64>().ok());
    let solver = field("solver").and_then(|v| serde_json::from_str::<String>(v).ok());
    let json = read_schedule(text)?;
    let mut drawn = from_json(graph, &json, budget)?;
    if let (Some(solver), Some(budget)) = (solver, budget) {
        drawn.caption = Some(caption(&solver, budget));
    }
    Ok(drawn)
}

/// The schedule of a solve's result, with the result's budget; a result without one is
/// [`PlotError::NoSchedule`] with its status and message.
pub fn from_result(graph: &Graph, result: &SolveResult) -> Result<Drawn, PlotError> {
    match &result.schedule {
        Some(json) => Ok(Drawn {
            caption: Some(caption(&result.solver, result.budget)),
            ..from_json(graph, json, Some(result.budget))?
        }),
        None => Err(PlotError::NoSchedule(format!(
            "{} at budget {} bytes: {}",
            result.solver,
            result.budget,
            result
                .message
                .clone()
                .unwrap_or_else(|| result.status.to_string())
        ))),
    }
}

/// The words beside a picture of a result: the solver that answered and the budget.
fn caption(solver: &str, budget: u64) -> String {
    format!("{solver} at {}", human_bytes(budget))
}

/// A schedule's JSON form resolved against `graph`, its stage matrices included where they
/// are those of its events (the simulator reads the events alone: matrices drawn beside
/// other events would picture another schedule). On a graph too large for a stage plot
/// ([`super::stages::MAX_NODES`]) they are not read: nothing draws them, and their `2n²`
/// bits would be allocated for nothing (a 5.6 MB file of empty rows made 2.5 GB on 100,001
/// nodes).
pub fn from_json(
    graph: &Graph,
    json: &ScheduleJson,
    budget: Option<u64>,
) -> Result<Drawn, PlotError> {
    let mut schedule = json.resolve(graph)?;
    if graph.len() <= super::stages::MAX_NODES {
        if let Some(rows) = json.stages.as_deref() {
            let stages = stages_from_json(graph, rows)?;
            agree(graph, &stages, &schedule.events)?;
            schedule.stages = Some(stages);
        }
    }
    Ok(Drawn {
        schedule,
        budget,
        caption: None,
    })
}

/// Checks that `stages` (`n` rows, [`stages_from_json`]) are the matrices whose events
/// (`Stages::events`) are `events`.
fn agree(graph: &Graph, stages: &Stages, events: &[Event]) -> Result<(), PlotError> {
    let theirs = stages.events(graph);
    match theirs.iter().zip(events).position(|(a, b)| a != b) {
        None if theirs.len() == events.len() => Ok(()),
        at => Err(PlotError::StagesDisagree {
            why: format!(
                "give other events: the schedule's event {} is not theirs",
                at.unwrap_or(theirs.len().min(events.len()))
            ),
        }),
    }
}

/// The R and S matrices of `rows`, one bit row per stage: Checkmate's `n × n`, checked
/// before they are allocated.
fn stages_from_json(graph: &Graph, rows: &[StageJson]) -> Result<Stages, PlotError> {
    let n = graph.len();
    if rows.len() != n {
        return Err(PlotError::StagesDisagree {
            why: format!(
                "have {} rows for a graph of {n} nodes (one per node)",
                rows.len()
            ),
        });
    }
    let bits = |stage: usize, ids: &[String]| -> Result<FixedBitSet, PlotError> {
        let mut row = FixedBitSet::with_capacity(n);
        for id in ids {
            let v = graph
                .index_of(id)
                .ok_or_else(|| PlotError::UnknownStageNode {
                    stage,
                    node: id.clone(),
                })?;
            row.insert(v);
        }
        Ok(row)
    };
    let mut stages = Stages {
        r: Vec::with_capacity(rows.len()),
        s: Vec::with_capacity(rows.len()),
    };
    for (t, row) in rows.iter().enumerate() {
        stages.r.push(bits(t, &row.r)?);
        stages.s.push(bits(t, &row.s)?);
    }
    Ok(stages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::schedule::stages::empty_s;
    use serde_json::json;

    #[test]
    fn a_result_gives_its_budget_and_stages() {
        let g = linear(2);
        let schedule = Stages::from_s(&g, empty_s(g.len())).into_schedule(&g);
        let result = json!({"budget": 7, "schedule": schedule.to_json(&g)});
        let drawn = read(&g, &result.to_string()).unwrap();
        assert_eq!(drawn.budget, Some(7));
        assert_eq!(drawn.schedule, schedule);
        let mut rows = vec![json!({"R": [], "S": []}); g.len()];
        rows[0] = json!({"R": ["nope"], "S": []});
        let bad = json!({"events": [], "stages": rows});
        let e = read(&g, &bad.to_string()).unwrap_err();
        assert!(e.to_string().contains("'nope'"), "{e}");
        let short = json!({"events": [], "stages": [{"R": [], "S": []}]});
        let e = read(&g, &short.to_string()).unwrap_err();
        assert!(
            e.to_string().contains("1 rows for a graph of 5 nodes"),
            "{e}"
        );
    }
}
