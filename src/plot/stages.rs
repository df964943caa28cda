//! Checkmate's stage matrices (Jain et al., MLSys 2020, Fig. 4 and 7): R on the left,
//! S on the right, a row per stage `t` and a column per node `i` in solver order.
//! `R[t,i] = 1` (blue) when stage `t` computes `i`; `S[t,i] = 1` (orange) when `i` is
//! resident entering stage `t`. The solver's own matrices are drawn when the schedule has
//! them (`Schedule::stages`: the MILP, its LP rounding, DTR's stage form).
//!
//! For any other schedule, [`EventStages`] reads equivalent matrices off the events, with
//! Checkmate's stage as the unit: **a stage ends at the first computation of a node**.
//! Stage `k` holds the computes from the one after the `k`-th first computation up to
//! the `(k+1)`-th (the recomputations that prepare it, then the new node), so there are
//! exactly `n` stages, stage `k`'s row is labelled with the node it computes first, and
//! `R[k,i] = 1` when `i` is computed in stage `k`. `S[k,i] = 1` when `i` is resident just
//! before stage `k`'s first compute (frees between stages count before the stage, as
//! Checkmate's events free at a stage's start). For a frontier-advancing schedule in
//! solver order (every stage solver's), stage `k` first computes node `k`, as in the
//! paper. The frontier node of each row is marked dark (vermillion) in R.

use super::svg::{self, Svg};
use super::PlotError;
use crate::graph::Graph;
use crate::schedule::{Event, Schedule, Stages};
use fixedbitset::FixedBitSet;

/// The most nodes a stage plot draws (the matrices have n² cells).
pub const MAX_NODES: usize = 3000;

/// Stage matrices read off a schedule's events (see the module docs).
pub struct EventStages {
    pub stages: Stages,
    /// The node each stage computes for the first time.
    pub frontier: Vec<usize>,
}

impl EventStages {
    pub fn from_events(n: usize, events: &[Event]) -> EventStages {
        let mut resident = FixedBitSet::with_capacity(n);
        let mut seen = FixedBitSet::with_capacity(n);
        let mut stages = Stages {
            r: Vec::new(),
            s: Vec::new(),
        };
        let mut frontier = Vec::new();
        let mut open = false;
        for &e in events {
            let v = e.node();
            if v >= n {
                continue;
            }
            match e {
                Event::Compute(_) => {
                    if !open {
                        stages.s.push(resident.clone());
                        stages.r.push(FixedBitSet::with_capacity(n));
                        open = true;
                    }
                    stages.r.last_mut().expect("a stage is open").insert(v);
                    resident.insert(v);
                    if !seen.put(v) {
                        frontier.push(v);
                        open = false;
                    }
                }
                Event::Free(_) => resident.set(v, false),
                Event::Load(_) => resident.insert(v),
                Event::Store(_) => {}
            }
        }
        if open && !stages.r.is_empty() && frontier.len() < stages.r.len() {
            // Trailing recomputations after the last new node: part of the last stage.
            let extra = stages.r.pop().expect("checked");
            stages.s.pop();
            if let Some(last) = stages.r.last_mut() {
                last.union_with(&extra);
            }
        }
        EventStages { stages, frontier }
    }
}

/// The SVG of the stage matrices of `schedule`: its own, or those read off its events.
pub fn render(graph: &Graph, schedule: &Schedule, caption: &str) -> Result<String, PlotError> {
    let n = graph.len();
    if n > MAX_NODES {
        return Err(PlotError::TooLarge {
            what: "the graph",
            count: n,
            unit: "nodes",
            max: MAX_NODES,
        });
    }
    crate::schedule::simulate(graph, schedule)?;
    let (stages, frontier, source) = stages_of(n, schedule);
    let t = stages.r.len();
    let layout = Layout::new(n, t);
    let count = |rows: &[FixedBitSet]| rows.iter().map(|r| r.count_ones(..)).sum::<usize>();
    let data = [
        ("data-plot", "stages".to_string()),
        ("data-stages", t.to_string()),
        ("data-nodes", n.to_string()),
        ("data-r-cells", count(&stages.r).to_string()),
        ("data-s-cells", count(&stages.s).to_string()),
        ("data-source", source.to_string()),
    ];
    let (width, height) = layout.size();
    let mut out = Svg::new(width.max(960.0), height, "Stage matrices R and S", &data);
    let name = graph.name().unwrap_or("graph");
    out.label(
        20.0,
        24.0,
        "start",
        &format!("Checkmate's R and S: {name} ({caption}; {source})"),
        &[("font-size", "16".into()), ("font-weight", "bold".into())],
    );
    out.label(
        20.0,
        44.0,
        "start",
        &format!(
            "{t} stages × {n} nodes · R: {} computes ({} recomputations) · S: {} kept values",
            count(&stages.r),
            count(&stages.r).saturating_sub(n),
            count(&stages.s)
        ),
        &[],
    );
    let matrices = [
        (&stages.r, "R[t, i]: stage t computes node i", svg::BLUE),
        (
            &stages.s,
            "S[t, i]: node i resident entering stage t",
            svg::ORANGE,
        ),
    ];
    for (i, (matrix, title, colour)) in matrices.into_iter().enumerate() {
        let x0 = layout.left + i as f64 * (layout.side + GAP);
        out.label(
            x0,
            TOP - 22.0,
            "start",
            title,
            &[("font-weight", "bold".into())],
        );
        let cell = layout.cell;
        matrix_cells(&mut out, (x0, TOP), cell, matrix, colour, &frontier, i == 0);
        node_labels(&mut out, graph, &layout, x0, t);
    }
    for (k, &v) in frontier.iter().enumerate().step_by(layout.every) {
        out.label(
            layout.left - 6.0,
            TOP + (k as f64 + 0.8) * layout.cell,
            "end",
            &format!("{k}: {}", short_id(graph.id(v))),
            &[("font-size", "10".into())],
        );
    }
    out.label(12.0, TOP - 6.0, "start", "stage ↓", &[]);
    Ok(out.finish())
}

/// The top of the matrices and the gap between them, in pixels.
const TOP: f64 = 92.0;
const GAP: f64 = 60.0;

/// The stage matrices of `schedule` over `n` nodes, each stage's frontier node, and where
/// they come from: the solver's own stages, or those read off the events.
fn stages_of(n: usize, schedule: &Schedule) -> (Stages, Vec<usize>, &'static str) {
    match &schedule.stages {
        Some(st) => {
            let frontier =
                st.r.iter()
                    .enumerate()
                    .map(|(t, row)| row.maximum().unwrap_or(t))
                    .collect();
            (st.clone(), frontier, "the solver's stages")
        }
        None => {
            let e = EventStages::from_events(n, &schedule.events);
            (e.stages, e.frontier, "stages read off the events")
        }
    }
}

/// The size of the cells and matrices, and how often a node or stage is labelled.
struct Layout {
    cell: f64,
    /// Left of the first matrix (room for the stage labels).
    left: f64,
    /// The width of one matrix.
    side: f64,
    /// Label every `every`-th node and stage.
    every: usize,
    stages: usize,
}

impl Layout {
    fn new(n: usize, t: usize) -> Layout {
        let cell = (640.0 / n.max(t).max(1) as f64).clamp(1.0, 28.0);
        Layout {
            cell,
            left: 150.0,
            side: cell * n as f64,
            every: (12.0 / cell).ceil().max(1.0) as usize,
            stages: t,
        }
    }

    fn size(&self) -> (f64, f64) {
        (
            self.left + 2.0 * self.side + GAP + 30.0,
            TOP + self.cell * self.stages as f64 + 70.0,
        )
    }
}

/// The node ids under the matrix at `x0`, slanted, every `layout.every`-th.
fn node_labels(out: &mut Svg, graph: &Graph, layout: &Layout, x0: f64, t: usize) {
    for v in (0..graph.len()).step_by(layout.every) {
        let x = x0 + (v as f64 + 0.5) * layout.cell;
        let y = TOP + layout.cell * t as f64 + 6.0;
        out.label(
            x,
            y,
            "start",
            &short_id(graph.id(v)),
            &[
                ("font-size", "10".into()),
                (
                    "transform",
                    format!("rotate(60 {} {})", svg::px(x), svg::px(y)),
                ),
            ],
        );
    }
}

/// The cells of one matrix: a frame, then one rectangle per run of ones in a row
/// (`data-run` holds its length in cells); R's frontier cells darker.
fn matrix_cells(
    out: &mut Svg,
    (x0, y0): (f64, f64),
    cell: f64,
    rows: &[FixedBitSet],
    colour: &str,
    frontier: &[usize],
    mark_frontier: bool,
) {
    let n = rows.first().map_or(0, |r| r.len());
    out.el(
        "rect",
        &[
            ("x", svg::px(x0)),
            ("y", svg::px(y0)),
            ("width", svg::px(cell * n as f64)),
            ("height", svg::px(cell * rows.len() as f64)),
            ("fill", "#f7f7f7".into()),
            ("stroke", "#bbbbbb".into()),
        ],
    );
    out.open("g", &[("class", "cells".into()), ("fill", colour.into())]);
    for (t, row) in rows.iter().enumerate() {
        let mut ones = row.ones().peekable();
        while let Some(start) = ones.next() {
            let mut end = start;
            while ones.peek() == Some(&(end + 1)) {
                end = ones.next().expect("peeked");
            }
            out.el(
                "rect",
                &[
                    ("x", svg::px(x0 + start as f64 * cell)),
                    ("y", svg::px(y0 + t as f64 * cell)),
                    ("width", svg::px((end - start + 1) as f64 * cell)),
                    ("height", svg::px(cell)),
                    ("data-run", (end - start + 1).to_string()),
                ],
            );
        }
    }
    out.close("g");
    if mark_frontier {
        out.open(
            "g",
            &[
                ("class", "frontier".into()),
                ("fill", svg::VERMILLION.into()),
            ],
        );
        for (t, &v) in frontier.iter().enumerate() {
            out.el(
                "rect",
                &[
                    ("x", svg::px(x0 + v as f64 * cell)),
                    ("y", svg::px(y0 + t as f64 * cell)),
                    ("width", svg::px(cell)),
                    ("height", svg::px(cell)),
                ],
            );
        }
        out.close("g");
    }
}

/// A node id cut to 18 characters for a label.
fn short_id(id: &str) -> String {
    if id.chars().count() <= 18 {
        id.to_string()
    } else {
        format!("{}…", id.chars().take(17).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::schedule::stages::empty_s;

    #[test]
    fn event_stages_of_a_stage_schedule_are_its_own() {
        // Keeping nothing: stage t recomputes every ancestor of t, and nothing is resident
        // entering a stage but what the events keep between stages.
        let g = linear(3);
        let own = Stages::from_s(&g, empty_s(g.len()));
        let events = own.events(&g);
        let read = EventStages::from_events(g.len(), &events);
        assert_eq!(read.frontier, (0..g.len()).collect::<Vec<_>>());
        assert_eq!(read.stages.r, own.r);
    }
}
