//! The memory timeline: the bytes in use after every event of a schedule, as the
//! simulator replays it (`SimStats::memory_after`, `fixed_memory` included), drawn as a
//! step line over the event index. Beside it: the budget (dashed), the checkpoint-all
//! peak (dotted), a tick under every recomputation (a compute of a node computed before),
//! and the peak event, labelled with the node it computes.
//!
//! Event `i` spans `x ∈ [i, i + 1]` at the height of the memory after it; the line starts
//! at `fixed_memory` before the first event. Past [`MAX_STEPS`] events the picture has
//! fewer pixels than steps: the line is then drawn per column of [`COLUMNS`], down from the
//! most memory after an event in it to the least (its envelope: every peak still reaches
//! its height), and a column's recomputations share one tick (`data-count` of them), so
//! that the picture's size does not grow with the schedule.

use super::input::Drawn;
use super::svg::{self, Frame, Scale, Svg};
use super::PlotError;
use crate::budget::{human_bytes, human_bytes_in};
use crate::graph::Graph;
use crate::schedule::{checkpoint_all_peak, simulate, Event, SimStats};

/// The most events a timeline draws (two points each).
pub const MAX_EVENTS: usize = 2_000_000;

/// The most events drawn a step each; longer schedules are drawn per column.
pub const MAX_STEPS: usize = 10_000;

/// The columns a longer schedule is drawn in.
pub const COLUMNS: usize = 1_000;

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 470.0;
const FRAME: Frame = Frame::below_title(935.0, 400.0);

/// The events in a column of a schedule of `events` events drawn per column:
/// `⌈events / COLUMNS⌉`, so that there are at most [`COLUMNS`].
fn column_width(events: usize) -> usize {
    events.div_ceil(COLUMNS).max(1)
}

/// The event ranges `start..end` of the columns a schedule of `events` events is drawn in
/// past [`MAX_STEPS`].
fn columns(events: usize) -> impl Iterator<Item = (usize, usize)> {
    let width = column_width(events);
    (0..events)
        .step_by(width)
        .map(move |start| (start, (start + width).min(events)))
}

/// The SVG of `drawn`'s memory timeline; `caption` says where the schedule came from.
pub fn render(graph: &Graph, drawn: &Drawn, caption: &str) -> Result<String, PlotError> {
    let t = Timeline::measure(graph, drawn)?;
    let mut out = Svg::new(WIDTH, HEIGHT, "Memory timeline", &t.data());
    t.titles(&mut out, caption);
    t.axes(&mut out);
    t.memory_line(&mut out);
    t.recompute_ticks(&mut out);
    t.reference_lines(&mut out);
    t.peak(&mut out);
    legend(&mut out);
    Ok(out.finish())
}

/// The figures of one timeline, from the simulator, and its scales.
struct Timeline<'a> {
    graph: &'a Graph,
    drawn: &'a Drawn,
    stats: SimStats,
    /// The checkpoint-all peak.
    peak_all: u64,
    peak_node: &'a str,
    recomputes: Vec<usize>,
    /// The top of the memory axis.
    top: f64,
    x: Scale,
    y: Scale,
}

impl<'a> Timeline<'a> {
    /// Replays the schedule (at most [`MAX_EVENTS`] events) and sets the scales.
    fn measure(graph: &'a Graph, drawn: &'a Drawn) -> Result<Timeline<'a>, PlotError> {
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
        Ok(Timeline {
            graph,
            drawn,
            peak_node: graph.id(events[stats.peak_event].node()),
            recomputes: recomputations(graph.len(), events),
            peak_all,
            top,
            x: Scale::new(0.0, events.len() as f64, FRAME.left, FRAME.right),
            y: Scale::new(0.0, top, FRAME.bottom, FRAME.top),
            stats,
        })
    }

    /// The root's `data-*` attributes: the figures drawn.
    fn data(&self) -> Vec<(&'static str, String)> {
        let stats = &self.stats;
        let mut data = vec![
            ("data-plot", "timeline".to_string()),
            ("data-events", self.drawn.schedule.events.len().to_string()),
            ("data-peak-bytes", stats.peak_memory.to_string()),
            ("data-peak-event", stats.peak_event.to_string()),
            ("data-peak-node", self.peak_node.to_string()),
            ("data-checkpoint-all-peak", self.peak_all.to_string()),
            ("data-recomputes", self.recomputes.len().to_string()),
            ("data-total-cost", stats.total_cost.to_string()),
            ("data-y-max", self.top.to_string()),
            ("data-frame-top", FRAME.top.to_string()),
            ("data-frame-bottom", FRAME.bottom.to_string()),
        ];
        if let Some(b) = self.drawn.budget {
            data.push(("data-budget", b.to_string()));
        }
        data
    }

    /// The title and the line of figures under it.
    fn titles(&self, out: &mut Svg, caption: &str) {
        let name = self.graph.name().unwrap_or("graph");
        out.label(
            FRAME.left,
            24.0,
            "start",
            &format!("Memory in use after each event: {name} ({caption})"),
            &[("font-size", "16".into()), ("font-weight", "bold".into())],
        );
        let unit = self
            .graph
            .cost_unit()
            .map(|u| format!(" {u}"))
            .unwrap_or_default();
        let stats = &self.stats;
        out.label(
            FRAME.left,
            44.0,
            "start",
            &format!(
                "peak {} · cost {}{unit} (overhead {:.3}×) · {} recomputation(s) · {} events",
                human_bytes(stats.peak_memory),
                svg::short(stats.total_cost),
                stats.overhead,
                self.recomputes.len(),
                self.drawn.schedule.events.len()
            ),
            &[],
        );
    }

    /// Events along x, bytes up y.
    fn axes(&self, out: &mut Svg) {
        let top = self.top;
        let bytes_label = |v: f64| human_bytes_in(v, top);
        let event_label = |v: f64| format!("{v:.0}");
        let events = self.drawn.schedule.events.len() as f64;
        FRAME.axes(
            out,
            (&self.x, &svg::ticks(0.0, events, 10), &event_label),
            (&self.y, &svg::byte_ticks(0.0, top, 6), &bytes_label),
            "event",
            "memory in use",
        );
    }

    /// The step line of the memory after each event, from `fixed_memory` before the first
    /// (per column past [`MAX_STEPS`] events: see the module docs).
    fn memory_line(&self, out: &mut Svg) {
        let (x, y) = (&self.x, &self.y);
        let after = &self.stats.memory_after;
        let mut points = Vec::with_capacity(2 * after.len().min(MAX_STEPS) + 1);
        points.push((x.at(0.0), y.at(self.graph.fixed_memory() as f64)));
        if after.len() <= MAX_STEPS {
            for (i, &m) in after.iter().enumerate() {
                let h = y.at(m as f64);
                points.push((x.at(i as f64), h));
                points.push((x.at(i as f64 + 1.0), h));
            }
        } else {
            for (start, end) in columns(after.len()) {
                let column = &after[start..end];
                let most = column.iter().max().copied().unwrap_or(0);
                let least = column.iter().min().copied().unwrap_or(0);
                points.push((x.at(start as f64), y.at(most as f64)));
                points.push((x.at(end as f64), y.at(least as f64)));
            }
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
    }

    /// A tick under every recomputation (one a column of them past [`MAX_STEPS`] events,
    /// at its first, with their count).
    fn recompute_ticks(&self, out: &mut Svg) {
        let events = self.drawn.schedule.events.len();
        let mut ticks: Vec<(usize, usize)> = Vec::new();
        if events <= MAX_STEPS {
            ticks.extend(self.recomputes.iter().map(|&i| (i, 1)));
        } else {
            let width = column_width(events);
            for &i in &self.recomputes {
                match ticks.last_mut() {
                    Some((first, count)) if *first / width == i / width => *count += 1,
                    _ => ticks.push((i, 1)),
                }
            }
        }
        for (i, count) in ticks {
            let cx = self.x.at(i as f64 + 0.5);
            out.line(
                (cx, FRAME.bottom - 10.0),
                (cx, FRAME.bottom),
                svg::VERMILLION,
                &[
                    ("class", "recompute".into()),
                    ("stroke-width", "1.5".into()),
                    ("data-event", i.to_string()),
                    ("data-count", count.to_string()),
                ],
            );
        }
    }

    /// The budget (dashed) and the checkpoint-all peak (dotted), labelled.
    fn reference_lines(&self, out: &mut Svg) {
        if let Some(b) = self.drawn.budget {
            self.hline(out, b, ("budget", svg::VERMILLION, "8 4"), "budget");
        }
        let peak = ("checkpoint-all", svg::GREY, "2 3");
        self.hline(out, self.peak_all, peak, "checkpoint-all peak");
    }

    /// A horizontal line at `value` bytes, styled `(class, colour, dash)`, labelled `name`
    /// and the bytes.
    fn hline(&self, out: &mut Svg, value: u64, style: (&str, &str, &str), name: &str) {
        let (class, colour, dash) = style;
        let h = self.y.at(value as f64);
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
            &format!("{name} {}", human_bytes(value)),
            &[("fill", colour.into())],
        );
    }

    /// The peak event, marked and labelled with the node it computes.
    fn peak(&self, out: &mut Svg) {
        let stats = &self.stats;
        let (px, py) = (
            self.x.at(stats.peak_event as f64 + 0.5),
            self.y.at(stats.peak_memory as f64),
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
                "peak {} computing {} (event {})",
                human_bytes(stats.peak_memory),
                self.peak_node,
                stats.peak_event
            ),
            &[
                ("class", "peak-label".into()),
                ("font-weight", "bold".into()),
            ],
        );
    }
}

/// What each mark of the timeline is.
fn legend(out: &mut Svg) {
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
