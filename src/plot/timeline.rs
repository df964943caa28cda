//! The memory timeline: the bytes in use after every event of a schedule, as the
//! simulator replays it (`SimStats::memory_after`, `fixed_memory` included), drawn as a
//! step line over the event index. Beside it: the budget (dashed), the checkpoint-all
//! peak (dotted), a tick under every recomputation (a compute of a node computed before),
//! and the peak event, labelled with the node it computes.
//!
//! Event `i` spans `x ∈ [i, i + 1]` at the height of the memory after it; the line starts
//! at `fixed_memory` before the first event.

use super::input::Drawn;
use super::svg::{self, Frame, Scale, Svg};
use super::PlotError;
use crate::budget::{human_bytes, human_bytes_in};
use crate::graph::Graph;
use crate::schedule::{checkpoint_all_peak, simulate, Event};

/// The most events a timeline draws (two points each).
pub const MAX_EVENTS: usize = 2_000_000;

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 470.0;
const FRAME: Frame = Frame::below_title(935.0, 400.0);

/// The SVG of `drawn`'s memory timeline; `caption` says where the schedule came from.
pub fn render(graph: &Graph, drawn: &Drawn, caption: &str) -> Result<String, PlotError> {
    let events = &drawn.schedule.events;
    if events.len() > MAX_EVENTS {
        return Err(PlotError::TooLarge {
            what: "the schedule",
            count: events.len(),
            unit: "events",
            max: MAX_EVENTS,
        });
    }
    let stats = simulate(graph, &drawn.schedule)?;
    let peak_all = checkpoint_all_peak(graph);
    let peak_node = graph.id(events[stats.peak_event].node());
    let recomputes = recomputations(graph.len(), events);
    let top = [
        Some(stats.peak_memory),
        Some(peak_all),
        drawn.budget,
        stats.memory_after.iter().max().copied(),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(1) as f64
        * 1.08;
    let e = events.len() as f64;
    let x = Scale::new(0.0, e, FRAME.left, FRAME.right);
    let y = Scale::new(0.0, top, FRAME.bottom, FRAME.top);

    let mut data = vec![
        ("data-plot", "timeline".to_string()),
        ("data-events", events.len().to_string()),
        ("data-peak-bytes", stats.peak_memory.to_string()),
        ("data-peak-event", stats.peak_event.to_string()),
        ("data-peak-node", peak_node.to_string()),
        ("data-checkpoint-all-peak", peak_all.to_string()),
        ("data-recomputes", recomputes.len().to_string()),
        ("data-total-cost", stats.total_cost.to_string()),
        ("data-y-max", top.to_string()),
        ("data-frame-top", FRAME.top.to_string()),
        ("data-frame-bottom", FRAME.bottom.to_string()),
    ];
    if let Some(b) = drawn.budget {
        data.push(("data-budget", b.to_string()));
    }
    let mut out = Svg::new(WIDTH, HEIGHT, "Memory timeline", &data);
    let name = graph.name().unwrap_or("graph");
    out.label(
        FRAME.left,
        24.0,
        "start",
        &format!("Memory in use after each event: {name} ({caption})"),
        &[("font-size", "16".into()), ("font-weight", "bold".into())],
    );
    let unit = graph
        .cost_unit()
        .map(|u| format!(" {u}"))
        .unwrap_or_default();
    out.label(
        FRAME.left,
        44.0,
        "start",
        &format!(
            "peak {} · cost {}{unit} (overhead {:.3}×) · {} recomputation(s) · {} events",
            human_bytes(stats.peak_memory),
            svg::short(stats.total_cost),
            stats.overhead,
            recomputes.len(),
            events.len()
        ),
        &[],
    );
    let ymax = top;
    let bytes_label = |v: f64| human_bytes_in(v, ymax);
    let event_label = |v: f64| format!("{v:.0}");
    FRAME.axes(
        &mut out,
        (&x, &svg::ticks(0.0, e, 10), &event_label),
        (&y, &svg::byte_ticks(0.0, top, 6), &bytes_label),
        "event",
        "memory in use",
    );

    let mut points = Vec::with_capacity(2 * events.len() + 1);
    points.push((x.at(0.0), y.at(graph.fixed_memory() as f64)));
    for (i, &m) in stats.memory_after.iter().enumerate() {
        let h = y.at(m as f64);
        points.push((x.at(i as f64), h));
        points.push((x.at(i as f64 + 1.0), h));
    }
    out.polyline(
        &points,
        svg::BLUE,
        &[
            ("class", "memory".into()),
            ("stroke-width", "1.8".into()),
            ("data-points", points.len().to_string()),
        ],
    );
    for &i in &recomputes {
        let cx = x.at(i as f64 + 0.5);
        out.line(
            (cx, FRAME.bottom - 10.0),
            (cx, FRAME.bottom),
            svg::VERMILLION,
            &[
                ("class", "recompute".into()),
                ("stroke-width", "1.5".into()),
                ("data-event", i.to_string()),
            ],
        );
    }
    let mut hline = |value: u64, class: &str, colour: &str, dash: &str, text: String| {
        let h = y.at(value as f64);
        out.line(
            (FRAME.left, h),
            (FRAME.right, h),
            colour,
            &[
                ("class", class.into()),
                ("stroke-width", "2".into()),
                ("stroke-dasharray", dash.into()),
                ("data-bytes", value.to_string()),
            ],
        );
        out.label(
            FRAME.right - 4.0,
            h - 5.0,
            "end",
            &text,
            &[("fill", colour.into())],
        );
    };
    if let Some(b) = drawn.budget {
        hline(
            b,
            "budget",
            svg::VERMILLION,
            "8 4",
            format!("budget {}", human_bytes(b)),
        );
    }
    hline(
        peak_all,
        "checkpoint-all",
        svg::GREY,
        "2 3",
        format!("checkpoint-all peak {}", human_bytes(peak_all)),
    );
    let (px, py) = (
        x.at(stats.peak_event as f64 + 0.5),
        y.at(stats.peak_memory as f64),
    );
    out.el(
        "circle",
        &[
            ("class", "peak".into()),
            ("cx", svg::px(px)),
            ("cy", svg::px(py)),
            ("r", "5".into()),
            ("fill", svg::BLACK.into()),
        ],
    );
    let anchor = if px < (FRAME.left + FRAME.right) / 2.0 {
        "start"
    } else {
        "end"
    };
    let shift = if anchor == "start" { 8.0 } else { -8.0 };
    out.label(
        px + shift,
        (py - 10.0).max(FRAME.top - 4.0),
        anchor,
        &format!(
            "peak {} computing {peak_node} (event {})",
            human_bytes(stats.peak_memory),
            stats.peak_event
        ),
        &[
            ("class", "peak-label".into()),
            ("font-weight", "bold".into()),
        ],
    );
    out.legend(
        FRAME.left,
        HEIGHT - 14.0,
        &[
            (svg::BLUE, "none", "memory after each event".into()),
            (svg::VERMILLION, "8 4", "budget".into()),
            (svg::GREY, "2 3", "checkpoint-all peak".into()),
            (svg::VERMILLION, "none", "| recomputation".into()),
        ],
    );
    Ok(out.finish())
}

/// The indices of the events that compute a node computed before.
pub fn recomputations(n: usize, events: &[Event]) -> Vec<usize> {
    let mut seen = vec![false; n];
    events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match *e {
            Event::Compute(v) if v < n => std::mem::replace(&mut seen[v], true).then_some(i),
            _ => None,
        })
        .collect()
}
