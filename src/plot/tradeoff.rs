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
    let solvers: Vec<&str> = {
        let mut s: Vec<&str> = Vec::new();
        for p in &sweep.points {
            if !s.contains(&p.solver.as_str()) {
                s.push(&p.solver);
            }
        }
        s
    };
    let rises: Vec<&Point> = sweep
        .points
        .iter()
        .filter(|p| p.rises_over.is_some())
        .collect();
    let notes = rises.len().min(MAX_NOTES) + usize::from(rises.len() > MAX_NOTES);
    let height = FRAME.bottom + 84.0 + 18.0 * notes as f64;
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
    let x = Scale::new(blo - bpad, bhi + bpad, FRAME.left, FRAME.right);
    let y = Scale::new(ylo, yhi, FRAME.bottom, FRAME.top);
    let data = [
        ("data-plot", "tradeoff".to_string()),
        ("data-budgets", sweep.budgets.len().to_string()),
        ("data-solvers", solvers.join(",")),
        ("data-points", sweep.points.len().to_string()),
        ("data-base-cost", sweep.base_cost.to_string()),
        ("data-rises", rises.len().to_string()),
    ];
    let mut out = Svg::new(WIDTH, height, "Budget / compute trade-off", &data);
    let name = graph.name().unwrap_or("graph");
    let unit = graph.cost_unit().unwrap_or("cost units");
    out.label(
        FRAME.left,
        24.0,
        "start",
        &format!("Compute cost against memory budget: {name}"),
        &[("font-size", "16".into()), ("font-weight", "bold".into())],
    );
    out.label(
        FRAME.left,
        44.0,
        "start",
        &format!(
            "{} budgets from the minimum feasible {} to {} · no recomputation: {} {unit}",
            sweep.budgets.len(),
            human_bytes(blo as u64),
            human_bytes(bhi as u64),
            svg::short(sweep.base_cost)
        ),
        &[],
    );
    let xmax = bhi;
    let bytes_label = |v: f64| human_bytes_in(v, xmax);
    let yticks = svg::ticks(ylo, yhi, 6);
    FRAME.axes(
        &mut out,
        (&x, &svg::byte_ticks(blo, bhi, 7), &bytes_label),
        (&y, &yticks, &|v| svg::short(v)),
        "memory budget (fixed memory included)",
        &format!("total cost ({unit})"),
    );
    for &t in &yticks {
        let label = format!("{:.3}×", t / sweep.base_cost.max(f64::MIN_POSITIVE));
        out.label(FRAME.right + 6.0, y.at(t) + 4.0, "start", &label, &[]);
    }
    out.label(
        FRAME.right + 6.0,
        FRAME.top - 12.0,
        "start",
        "overhead",
        &[],
    );
    let base = y.at(sweep.base_cost);
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
    let bound: Vec<(f64, f64)> = sweep
        .budgets
        .iter()
        .zip(&sweep.lower_bounds)
        .filter_map(|(&b, lb)| lb.map(|c| (x.at(b as f64), y.at(c))))
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
    let mut legend = Vec::new();
    for (i, solver) in solvers.iter().enumerate() {
        let colour = svg::SERIES[i % svg::SERIES.len()];
        legend.push((colour, "none", solver.to_string()));
        let points: Vec<&Point> = sweep
            .points
            .iter()
            .filter(|p| p.solver == *solver)
            .collect();
        series(&mut out, (&x, &y), colour, &points, unit);
    }
    legend.push((svg::BLACK, "6 4", "lower bound".into()));
    legend.push((svg::GREY, "2 3", "no recomputation".into()));
    out.legend(FRAME.left, FRAME.bottom + 62.0, &legend);
    for (k, p) in rises.iter().take(MAX_NOTES).enumerate() {
        out.label(
            FRAME.left,
            FRAME.bottom + 84.0 + 18.0 * k as f64,
            "start",
            &format!(
                "{}: cost {} {unit} at {} is above its {} at the smaller budget {}",
                p.solver,
                svg::short(p.cost.unwrap_or(0.0)),
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
    if rises.len() > MAX_NOTES {
        out.label(
            FRAME.left,
            FRAME.bottom + 84.0 + 18.0 * MAX_NOTES as f64,
            "start",
            &format!("... and {} more rising point(s)", rises.len() - MAX_NOTES),
            &[],
        );
    }
    out.finish()
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
