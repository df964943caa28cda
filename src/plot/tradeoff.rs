//! The trade-off curve a user reads to pick a budget: the total cost of the schedule
//! found at each budget of a [`Sweep`], one curve per solver (costs in the graph's
//! `cost_unit` on the left, overhead `cost / Σ c_v` on the right), the cost without
//! recomputation (dotted) and the best lower bound known (dashed black).
//!
//! Markers: a filled circle per schedule found; a hollow one where `auto` draws a cheaper
//! schedule found at a smaller budget (`carried_from`); a vermillion ring where another
//! solver's cost rises above its cost at a smaller budget (`rises_over`, also listed under
//! the plot); a cross on the axis where no schedule was found. Every marker carries its
//! figures as `data-*` attributes and a tooltip.

use super::svg::{self, Frame, Scale, Svg};
use super::sweep::{Point, Sweep};
use crate::budget::{human_bytes, human_bytes_in};
use crate::graph::Graph;

const WIDTH: f64 = 960.0;
const FRAME: Frame = Frame::below_title(870.0, 420.0);
/// The most non-monotone points listed in words under the plot.
const MAX_NOTES: usize = 6;

/// A trade-off picture with the sweep it shows (the result of a trade-off job).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Picture {
    pub svg: String,
    pub sweep: Sweep,
}

/// The SVG of `sweep`'s trade-off curves.
pub fn render(graph: &Graph, sweep: &Sweep) -> String {
    let t = Tradeoff::layout(graph, sweep);
    let mut out = Svg::new(WIDTH, t.height(), "Budget / compute trade-off", &t.data());
    t.titles(&mut out);
    t.axes(&mut out);
    t.reference_lines(&mut out);
    t.curves(&mut out);
    t.rise_notes(&mut out);
    out.finish()
}

/// A trade-off picture's layout: its solvers, rising points and scales.
struct Tradeoff<'a> {
    sweep: &'a Sweep,
    name: &'a str,
    /// The graph's cost unit (or "cost units").
    unit: &'a str,
    /// The solvers in the order of their first point.
    solvers: Vec<&'a str>,
    /// The points costlier than the same solver's at a smaller budget.
    rises: Vec<&'a Point>,
    /// The smallest and largest budget swept.
    budgets: (f64, f64),
    /// The ends of the cost axis.
    costs: (f64, f64),
    x: Scale,
    y: Scale,
}

impl<'a> Tradeoff<'a> {
    fn layout(graph: &'a Graph, sweep: &'a Sweep) -> Tradeoff<'a> {
        let mut solvers: Vec<&str> = Vec::new();
        for p in &sweep.points {
            if !solvers.contains(&p.solver.as_str()) {
                solvers.push(&p.solver);
            }
        }
        let costs = sweep
            .points
            .iter()
            .filter_map(|p| p.cost)
            .chain(sweep.lower_bounds.iter().flatten().copied())
            .chain([sweep.base_cost]);
        let (lo, hi) = costs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), c| {
            (lo.min(c), hi.max(c))
        });
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.01).max(1e-9);
        let (ylo, yhi) = ((lo - pad).max(0.0), hi + pad);
        let (blo, bhi) = (
            *sweep.budgets.first().unwrap_or(&0) as f64,
            *sweep.budgets.last().unwrap_or(&1) as f64,
        );
        let bpad = ((bhi - blo) * 0.03).max(1.0);
        Tradeoff {
            sweep,
            name: graph.name().unwrap_or("graph"),
            unit: graph.cost_unit().unwrap_or("cost units"),
            solvers,
            rises: sweep
                .points
                .iter()
                .filter(|p| p.rises_over.is_some())
                .collect(),
            budgets: (blo, bhi),
            costs: (ylo, yhi),
            x: Scale::new(blo - bpad, bhi + bpad, FRAME.left, FRAME.right),
            y: Scale::new(ylo, yhi, FRAME.bottom, FRAME.top),
        }
    }

    /// The picture's height: the plot, the legend and a line per note.
    fn height(&self) -> f64 {
        let notes = self.rises.len().min(MAX_NOTES) + usize::from(self.rises.len() > MAX_NOTES);
        FRAME.bottom + 84.0 + 18.0 * notes as f64
    }

    /// The root's `data-*` attributes.
    fn data(&self) -> [(&'static str, String); 6] {
        [
            ("data-plot", "tradeoff".to_string()),
            ("data-budgets", self.sweep.budgets.len().to_string()),
            ("data-solvers", self.solvers.join(",")),
            ("data-points", self.sweep.points.len().to_string()),
            ("data-base-cost", self.sweep.base_cost.to_string()),
            ("data-rises", self.rises.len().to_string()),
        ]
    }

    /// The title and the line of figures under it.
    fn titles(&self, out: &mut Svg) {
        out.label(
            FRAME.left,
            24.0,
            "start",
            &format!("Compute cost against memory budget: {}", self.name),
            &[("font-size", "16".into()), ("font-weight", "bold".into())],
        );
        let (blo, bhi) = self.budgets;
        out.label(
            FRAME.left,
            44.0,
            "start",
            &format!(
                "{} budgets from the minimum feasible {} to {} · no recomputation: {} {}",
                self.sweep.budgets.len(),
                human_bytes(blo as u64),
                human_bytes(bhi as u64),
                svg::short(self.sweep.base_cost),
                self.unit
            ),
            &[],
        );
    }

    /// Budgets along x, costs up y on the left and the overhead on the right.
    fn axes(&self, out: &mut Svg) {
        let (blo, bhi) = self.budgets;
        let bytes_label = |v: f64| human_bytes_in(v, bhi);
        let yticks = svg::ticks(self.costs.0, self.costs.1, 6);
        FRAME.axes(
            out,
            (&self.x, &svg::byte_ticks(blo, bhi, 7), &bytes_label),
            (&self.y, &yticks, &|v| svg::short(v)),
            "memory budget (fixed memory included)",
            &format!("total cost ({})", self.unit),
        );
        for &t in &yticks {
            let label = format!("{:.3}×", t / self.sweep.base_cost.max(f64::MIN_POSITIVE));
            out.label(FRAME.right + 6.0, self.y.at(t) + 4.0, "start", &label, &[]);
        }
        out.label(
            FRAME.right + 6.0,
            FRAME.top - 12.0,
            "start",
            "overhead",
            &[],
        );
    }

    /// The cost without recomputation (dotted) and the best lower bound (dashed).
    fn reference_lines(&self, out: &mut Svg) {
        let base = self.y.at(self.sweep.base_cost);
        out.line(
            (FRAME.left, base),
            (FRAME.right, base),
            svg::GREY,
            &[
                ("class", "base-cost".into()),
                ("stroke-width", "1.5".into()),
                ("stroke-dasharray", "2 3".into()),
            ],
        );
        let bound: Vec<(f64, f64)> = (self.sweep.budgets.iter())
            .zip(&self.sweep.lower_bounds)
            .filter_map(|(&b, lb)| lb.map(|c| (self.x.at(b as f64), self.y.at(c))))
            .collect();
        if !bound.is_empty() {
            out.polyline(
                &bound,
                svg::BLACK,
                &[
                    ("class", "lower-bound".into()),
                    ("stroke-width", "1.5".into()),
                    ("stroke-dasharray", "6 4".into()),
                    ("data-points", bound.len().to_string()),
                ],
            );
        }
    }

    /// One line and its markers per solver, and the legend.
    fn curves(&self, out: &mut Svg) {
        let mut legend = Vec::new();
        for (i, solver) in self.solvers.iter().enumerate() {
            let colour = svg::SERIES[i % svg::SERIES.len()];
            legend.push((colour, "none", solver.to_string()));
            let points: Vec<&Point> = (self.sweep.points.iter())
                .filter(|p| p.solver == *solver)
                .collect();
            series(out, (&self.x, &self.y), colour, &points, self.unit);
        }
        legend.push((svg::BLACK, "6 4", "lower bound".into()));
        legend.push((svg::GREY, "2 3", "no recomputation".into()));
        out.legend(FRAME.left, FRAME.bottom + 62.0, &legend);
    }

    /// The rising points in words under the plot (at most [`MAX_NOTES`]).
    fn rise_notes(&self, out: &mut Svg) {
        let sweep = self.sweep;
        for (k, p) in self.rises.iter().take(MAX_NOTES).enumerate() {
            out.label(
                FRAME.left,
                FRAME.bottom + 84.0 + 18.0 * k as f64,
                "start",
                &format!(
                    "{}: cost {} {} at {} is above its {} at the smaller budget {}",
                    p.solver,
                    svg::short(p.cost.unwrap_or(0.0)),
                    self.unit,
                    human_bytes(p.budget),
                    svg::short(cost_at(sweep, &p.solver, p.rises_over).unwrap_or(0.0)),
                    human_bytes(p.rises_over.unwrap_or(0))
                ),
                &[
                    ("class", "rise-note".into()),
                    ("fill", svg::VERMILLION.into()),
                ],
            );
        }
        if self.rises.len() > MAX_NOTES {
            out.label(
                FRAME.left,
                FRAME.bottom + 84.0 + 18.0 * MAX_NOTES as f64,
                "start",
                &format!(
                    "... and {} more rising point(s)",
                    self.rises.len() - MAX_NOTES
                ),
                &[],
            );
        }
    }
}

/// The cost `solver` found at `budget`.
fn cost_at(sweep: &Sweep, solver: &str, budget: Option<u64>) -> Option<f64> {
    sweep
        .points
        .iter()
        .find(|p| p.solver == solver && Some(p.budget) == budget)
        .and_then(|p| p.cost)
}

/// One solver's line and markers.
fn series(out: &mut Svg, (x, y): (&Scale, &Scale), colour: &str, points: &[&Point], unit: &str) {
    let line: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| p.cost.map(|c| (x.at(p.budget as f64), y.at(c))))
        .collect();
    out.polyline(
        &line,
        colour,
        &[("class", "curve".into()), ("stroke-width", "2".into())],
    );
    for p in points {
        let cx = x.at(p.budget as f64);
        let mut attrs = vec![
            ("data-solver", p.solver.clone()),
            ("data-budget", p.budget.to_string()),
            ("data-status", p.status.as_str().to_string()),
        ];
        let tip = match p.cost {
            Some(c) => {
                attrs.push(("data-cost", c.to_string()));
                format!(
                    "{} at {}: {} {unit} ({:.3}×, {}){}",
                    p.solver,
                    human_bytes(p.budget),
                    svg::short(c),
                    p.overhead.unwrap_or(1.0),
                    p.answered_by,
                    p.carried_from
                        .map(|b| format!(", schedule found at {}", human_bytes(b)))
                        .unwrap_or_default()
                )
            }
            None => format!("{} at {}: {}", p.solver, human_bytes(p.budget), p.status),
        };
        if let Some(b) = p.carried_from {
            attrs.push(("data-carried-from", b.to_string()));
        }
        if let Some(b) = p.rises_over {
            attrs.push(("data-rises-over", b.to_string()));
        }
        match p.cost {
            Some(c) => {
                let hollow = p.carried_from.is_some();
                attrs.extend([
                    ("class", "point".to_string()),
                    ("cx", svg::px(cx)),
                    ("cy", svg::px(y.at(c))),
                    ("r", "4.5".into()),
                    ("fill", if hollow { "#ffffff" } else { colour }.to_string()),
                    ("stroke", colour.to_string()),
                    ("stroke-width", "2".into()),
                ]);
                out.open("circle", &attrs);
                out.text_el("title", &[], &tip);
                out.close("circle");
                if p.rises_over.is_some() {
                    out.el(
                        "circle",
                        &[
                            ("class", "rise".into()),
                            ("cx", svg::px(cx)),
                            ("cy", svg::px(y.at(c))),
                            ("r", "8".into()),
                            ("fill", "none".into()),
                            ("stroke", svg::VERMILLION.into()),
                            ("stroke-width", "2".into()),
                        ],
                    );
                }
            }
            None => {
                let cy = y.from - 8.0;
                attrs.extend([
                    ("class", "nofit".to_string()),
                    (
                        "d",
                        format!("M{} {}l8 8m0 -8l-8 8", svg::px(cx - 4.0), svg::px(cy - 4.0)),
                    ),
                    ("stroke", colour.to_string()),
                    ("stroke-width", "2".into()),
                ]);
                out.open("path", &attrs);
                out.text_el("title", &[], &tip);
                out.close("path");
            }
        }
    }
}
