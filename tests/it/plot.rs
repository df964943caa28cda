//! The pictures of `remat plot` / `POST /v1/plot/*`, checked as XML against the simulator:
//! every plot of several bundled graphs parses, has one point per event, one cell per
//! entry of R and S, one marker per sweep point; the budget line sits at the budget, the
//! peak label names the simulator's peak node. And the trade-off curve of `auto` never
//! rises with the budget on any bundled graph, while the points where a plain solver's
//! curve rises are named.

use crate::common;

use remat::budget::between_min_and_peak;
use remat::graph::Graph;
use remat::plot::{self, input, sweep, Kind};
use remat::schedule::{simulate, Event};
use remat::solve::{SolveOptions, SolveResult};
use roxmltree::{Document, Node};
use std::collections::BTreeMap;
use std::time::Duration;

fn graphs() -> Vec<(String, Graph)> {
    common::json_files(&common::root().join("graphs"))
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            (name, common::load(p))
        })
        .collect()
}

fn attr<'a>(node: Node<'a, 'a>, name: &str) -> &'a str {
    node.attribute(name)
        .unwrap_or_else(|| panic!("<{}> has no {name}", node.tag_name().name()))
}

fn num(node: Node, name: &str) -> f64 {
    attr(node, name).parse().unwrap()
}

fn with_class<'a>(doc: &'a Document<'a>, class: &str) -> Vec<Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.attribute("class") == Some(class))
        .collect()
}

/// A schedule at `budget`: the solver's result (stages included when it has them).
fn solved(g: &Graph, budget: u64, solver: &str) -> SolveResult {
    let r = common::solve_on_one_thread(g, budget, solver, Some(10));
    assert!(
        r.schedule.is_some(),
        "{solver} at {budget}: {:?}",
        r.message
    );
    r
}

#[test]
fn timelines_show_every_event_the_budget_and_the_simulators_peak() {
    for (name, g) in graphs() {
        for (solver, f) in [("dtr", 0.5), ("checkpoint-all", 1.0)] {
            let result = solved(&g, between_min_and_peak(&g, f), solver);
            let drawn = input::from_result(&g, &result).unwrap();
            let svg = plot::draw(Kind::Timeline, &g, &drawn, "test").unwrap();
            let doc = Document::parse(&svg).unwrap_or_else(|e| panic!("{name}: {e}"));
            let root = doc.root_element();
            let events = &drawn.schedule.events;
            let stats = simulate(&g, &drawn.schedule).unwrap();
            assert_eq!(num(root, "data-events") as usize, events.len(), "{name}");
            let line = with_class(&doc, "memory");
            assert_eq!(line.len(), 1);
            let points = attr(line[0], "points").split(' ').count();
            assert_eq!(points, 2 * events.len() + 1, "{name}: a step per event");
            let peak_node = g.id(events[stats.peak_event].node());
            assert_eq!(attr(root, "data-peak-node"), peak_node, "{name}");
            assert_eq!(num(root, "data-peak-bytes") as u64, stats.peak_memory);
            let label = with_class(&doc, "peak-label");
            assert!(label[0].text().unwrap().contains(peak_node), "{name}");
            // The budget line at the budget's height.
            let b = with_class(&doc, "budget");
            assert_eq!(b.len(), 1, "{name}");
            assert_eq!(num(b[0], "data-bytes") as u64, result.budget);
            let (top, bottom) = (num(root, "data-frame-top"), num(root, "data-frame-bottom"));
            let want = bottom - result.budget as f64 / num(root, "data-y-max") * (bottom - top);
            assert!(
                (num(b[0], "y1") - want).abs() < 0.01,
                "{name}: budget line at {want}"
            );
            let recomputes: u32 = stats.computes.iter().map(|c| c - 1).sum();
            assert_eq!(
                with_class(&doc, "recompute").len(),
                recomputes as usize,
                "{name}"
            );
        }
    }
}

/// The cells of each matrix: (R, S) as sums of the runs' lengths.
fn cells(doc: &Document) -> (usize, usize) {
    let groups = with_class(doc, "cells");
    assert_eq!(groups.len(), 2, "R and S");
    let sum = |g: Node| -> usize {
        g.children()
            .filter(|c| c.is_element())
            .map(|c| attr(c, "data-run").parse::<usize>().unwrap())
            .sum()
    };
    (sum(groups[0]), sum(groups[1]))
}

#[test]
fn stage_matrices_have_a_cell_per_entry_of_the_solvers_stages_or_the_events() {
    for (name, g) in graphs().into_iter().take(3) {
        let budget = between_min_and_peak(&g, 0.5);
        // A stage solver's own matrices.
        let result = solved(&g, budget, "recompute-all");
        let stages = result.schedule.as_ref().unwrap().stages.clone().unwrap();
        let drawn = input::from_result(&g, &result).unwrap();
        let svg = plot::draw(Kind::Stages, &g, &drawn, "test").unwrap();
        let doc = Document::parse(&svg).unwrap();
        let root = doc.root_element();
        assert_eq!(num(root, "data-stages") as usize, stages.len(), "{name}");
        assert_eq!(num(root, "data-nodes") as usize, g.len());
        let want_r: usize = stages.iter().map(|s| s.r.len()).sum();
        let want_s: usize = stages.iter().map(|s| s.s.len()).sum();
        assert_eq!(cells(&doc), (want_r, want_s), "{name}");
        assert_eq!(attr(root, "data-source"), "the solver's stages");

        // Any other schedule: a stage per first computation, every compute in one stage.
        let result = solved(&g, budget, "dtr");
        let drawn = input::from_result(&g, &result).unwrap();
        let svg = plot::draw(Kind::Stages, &g, &drawn, "test").unwrap();
        let doc = Document::parse(&svg).unwrap();
        let root = doc.root_element();
        assert_eq!(num(root, "data-stages") as usize, g.len(), "{name}");
        let events = &drawn.schedule.events;
        let computes = events
            .iter()
            .filter(|e| matches!(e, Event::Compute(_)))
            .count();
        let (r, s) = cells(&doc);
        assert_eq!(r, computes, "{name}: R holds every compute");
        // S: the values resident just before each stage's first compute, counted here by
        // replaying the events.
        let mut resident = vec![false; g.len()];
        let (mut seen, mut kept, mut open) = (vec![false; g.len()], 0, false);
        for e in events {
            match *e {
                Event::Compute(v) => {
                    if !open {
                        kept += resident.iter().filter(|&&x| x).count();
                        open = true;
                    }
                    resident[v] = true;
                    if !std::mem::replace(&mut seen[v], true) {
                        open = false;
                    }
                }
                Event::Free(v) => resident[v] = false,
                _ => {}
            }
        }
        assert_eq!(s, kept, "{name}");
        assert_eq!(attr(root, "data-source"), "stages read off the events");
    }
}

/// Stage matrices are drawn only where they are those of the schedule's events: every
/// solver's own pass, and matrices from a file that picture another schedule (a row
/// missing, a row changed) are refused, naming `stages`.
#[test]
fn stage_matrices_that_are_not_the_events_are_refused() {
    let mut drawn_own = 0;
    for (name, g) in graphs().into_iter().take(3) {
        let budget = between_min_and_peak(&g, 0.5);
        for solver in [
            "checkpoint-all",
            "recompute-all",
            "chen-sqrt",
            "lp-rounding",
            "dtr",
        ] {
            let r = common::solve_on_one_thread(&g, budget, solver, Some(10));
            let has_stages = r.schedule.as_ref().is_some_and(|s| s.stages.is_some());
            if has_stages {
                input::from_result(&g, &r).unwrap_or_else(|e| panic!("{name} {solver}: {e}"));
                drawn_own += 1;
            }
        }
        let result = solved(&g, budget, "recompute-all");
        let mut fewer = result.clone();
        let rows = fewer.schedule.as_mut().unwrap().stages.as_mut().unwrap();
        rows.pop();
        let mut other = result.clone();
        let rows = other.schedule.as_mut().unwrap().stages.as_mut().unwrap();
        let last = rows.last_mut().unwrap();
        last.r.clear();
        for (case, bad) in [("a row fewer", fewer), ("a row changed", other)] {
            let e = input::from_result(&g, &bad).err();
            let said = e.map(|e| e.to_string()).unwrap_or_default();
            assert!(
                said.contains("stage matrices (`stages`)"),
                "{name}, {case}: {said}"
            );
        }
    }
    assert!(drawn_own >= 3, "{drawn_own} solvers' own matrices drawn");
}

fn run_sweep(g: &Graph, solvers: &[&str], points: usize, limit: Duration) -> sweep::Sweep {
    let request = sweep::Request {
        solvers: solvers.iter().map(|s| s.to_string()).collect(),
        budgets: sweep::default_budgets(g, points),
        options: SolveOptions {
            time_limit: Some(limit),
            threads: Some(1),
            ..SolveOptions::default()
        },
        total: None,
    };
    sweep::run(g, &request, &|_, _, _| ()).unwrap()
}

/// A sweep with a total runs within it: FastSA under the time effort takes each point's
/// whole limit (2 s, 8 s for four points), the total of 1 s cuts them short.
#[test]
fn a_sweep_runs_within_its_total() {
    let g = common::load(&common::root().join("graphs/resnet18.json"));
    let request = sweep::Request {
        solvers: vec!["fastsa".into()],
        budgets: sweep::default_budgets(&g, 4),
        options: SolveOptions {
            time_limit: Some(Duration::from_secs(2)),
            effort: remat::solve::Effort::Time,
            threads: Some(1),
            ..SolveOptions::default()
        },
        total: Some(Duration::from_secs(1)),
    };
    let start = std::time::Instant::now();
    let s = sweep::run(&g, &request, &|_, _, _| ()).unwrap();
    assert_eq!(s.points.len(), 4);
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn tradeoff_pictures_have_a_marker_per_point_and_the_lower_bound() {
    for (name, g) in graphs().into_iter().take(2) {
        let solvers = ["lp-bound", "checkpoint-all"];
        let s = run_sweep(&g, &solvers, 6, Duration::from_millis(500));
        let svg = plot::tradeoff::render(&g, &s);
        let doc = Document::parse(&svg).unwrap();
        let root = doc.root_element();
        assert_eq!(
            num(root, "data-budgets") as usize,
            s.budgets.len(),
            "{name}"
        );
        assert_eq!(attr(root, "data-solvers"), "lp-bound,checkpoint-all");
        let markers = with_class(&doc, "point").len() + with_class(&doc, "nofit").len();
        assert_eq!(markers, s.budgets.len() * solvers.len(), "{name}");
        // checkpoint-all fits only at its own peak, the last budget.
        let fits: Vec<Node> = with_class(&doc, "point")
            .into_iter()
            .filter(|n| attr(*n, "data-solver") == "checkpoint-all")
            .collect();
        assert_eq!(fits.len(), 1, "{name}");
        assert_eq!(
            num(fits[0], "data-budget") as u64,
            *s.budgets.last().unwrap()
        );
        assert_eq!(num(fits[0], "data-cost"), g.total_cost());
        for p in &s.points {
            if let (Some(peak), Some(_)) = (p.peak_memory, p.cost) {
                assert!(peak <= p.budget, "{name}: {p:?}");
            }
        }
        // The bound drawn at each budget where one is known, below every cost there.
        let known = s.lower_bounds.iter().flatten().count();
        let line = with_class(&doc, "lower-bound");
        let drawn = line.first().map_or(0, |l| num(*l, "data-points") as usize);
        assert_eq!(drawn, known, "{name}");
        for (k, &b) in s.budgets.iter().enumerate() {
            for p in s.points.iter().filter(|p| p.budget == b) {
                if let (Some(lb), Some(c)) = (s.lower_bounds[k], p.cost) {
                    assert!(lb <= c * (1.0 + 1e-9), "{name}: bound {lb} above {p:?}");
                }
            }
        }
    }
}

/// The auto curve never rises; where a plain solver's does, the sweep names the point
/// (`rises_over`) exactly where its cost is above its cost at a smaller budget.
#[test]
fn the_auto_curve_never_rises_and_rising_points_of_other_solvers_are_named() {
    for (name, g) in graphs() {
        let s = run_sweep(
            &g,
            &["auto", "dtr", "chen-greedy"],
            10,
            Duration::from_millis(300),
        );
        let mut by_solver: BTreeMap<&str, Vec<&sweep::Point>> = BTreeMap::new();
        for p in &s.points {
            by_solver.entry(&p.solver).or_default().push(p);
        }
        for (solver, points) in by_solver {
            let mut best: Option<(f64, u64)> = None;
            for p in &points {
                if solver == "auto" {
                    let (Some(cost), Some(peak)) = (p.cost, p.peak_memory) else {
                        assert!(
                            best.is_none(),
                            "{name}: auto lost its schedule at {}",
                            p.budget
                        );
                        continue;
                    };
                    assert!(peak <= p.budget, "{name}: {p:?}");
                    if let Some((c, _)) = best {
                        assert!(
                            cost <= c,
                            "{name}: auto rises at {}: {cost} > {c}",
                            p.budget
                        );
                    }
                    if let Some(from) = p.carried_from {
                        assert!(from < p.budget, "{name}: carried from a larger budget");
                        let there = points.iter().find(|q| q.budget == from).unwrap();
                        assert_eq!(there.cost, Some(cost), "{name}: {p:?}");
                    }
                    best = Some((cost, p.budget));
                } else {
                    let rises = match (p.cost, best) {
                        (Some(c), Some((b, _))) => c > b * (1.0 + 1e-12),
                        _ => false,
                    };
                    assert_eq!(p.rises_over.is_some(), rises, "{name}: {p:?}");
                    if let Some(over) = p.rises_over {
                        eprintln!(
                            "{name}: {solver}'s cost {:?} at {} bytes is above its {:?} at {over}",
                            p.cost,
                            p.budget,
                            best.map(|b| b.0)
                        );
                        assert_eq!(Some(over), best.map(|b| b.1));
                    }
                    if let Some(c) = p.cost {
                        if best.is_none_or(|(b, _)| c < b * (1.0 - 1e-12)) {
                            best = Some((c, p.budget));
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn remat_plot_writes_each_picture_and_refuses_bad_input() {
    let dir = std::env::temp_dir().join(format!("remat-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let graph = "graphs/linear-8.json";
    for kind in ["timeline", "stages"] {
        let out = dir.join(format!("{kind}.svg"));
        let o = common::remat(&[
            "plot",
            kind,
            graph,
            "-b",
            "70%",
            "-s",
            "dtr",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        Document::parse(&std::fs::read_to_string(&out).unwrap()).unwrap();
    }
    let out = dir.join("tradeoff.svg");
    let o = common::remat(&[
        "plot",
        "tradeoff",
        graph,
        "--solvers",
        "dtr",
        "--points",
        "4",
        "--time-limit",
        "1",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let doc = Document::parse(&text).unwrap();
    assert_eq!(attr(doc.root_element(), "data-points"), "4");
    // Below the minimum: exit 1 naming the node, and no file.
    let none = dir.join("none.svg");
    let o = common::remat(&[
        "plot",
        "timeline",
        graph,
        "-b",
        "1",
        "-o",
        none.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no schedule fits"));
    assert!(!none.exists());
    // A schedule file that is not one: exit 2.
    std::fs::write(dir.join("bad.json"), "{\"steps\": []}").unwrap();
    let o = common::remat(&[
        "plot",
        "stages",
        graph,
        "--schedule",
        dir.join("bad.json").to_str().unwrap(),
        "-o",
        none.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A sweep's results count against the memory limit: budgets whose schedules each fit it
/// alone are refused once the schedules kept leave too little of it, and the refusal says
/// so (64 budgets of a 1,000-stage chain's least budget held 2 GB under a 1 GiB limit).
#[test]
fn a_sweep_counts_the_schedules_it_keeps_against_the_memory_limit() {
    let g = remat::graph::generate::linear(200);
    let least = g.min_feasible_budget().0;
    let options = |limit| SolveOptions {
        memory_limit: Some(limit),
        ..SolveOptions::default()
    };
    let clock = remat::front::Clock::start(None);
    let run = |budgets: &[u64], limit| {
        sweep::solve_each(
            &g,
            "revolve",
            budgets,
            &options(limit),
            &clock,
            Duration::ZERO,
            &|_| (),
        )
    };
    let one = run(&[least], u64::MAX).unwrap();
    let events = one[0].schedule.as_ref().unwrap().events.len() as u64;
    // Room for about three such schedules (at least 80 bytes an event, with the graph).
    let limit = 3 * 80 * events + (1 << 20);
    assert_eq!(run(&[least; 2], limit).unwrap().len(), 2);
    match run(&[least; 8], limit) {
        Err(remat::solve::SolveError::TooLarge { what, limit: l, .. }) => {
            assert!(what.contains("results of this sweep it keeps"), "{what}");
            assert_eq!(l, limit);
        }
        other => panic!("{:?}", other.map(|r| r.len())),
    }
}

/// Past 10,000 events a timeline is drawn per column (at most 1,000): each column from its
/// most memory down to its least, the peak's height reached, and one recomputation tick a
/// column with its count. A 17 KB request (a 1,400-stage chain at its least budget,
/// 1,964,201 events) drew a 176 MB picture; this one, 20,000-odd events, stays under 200 KB
/// where a step per event took about 1 MB.
#[test]
fn long_timelines_are_drawn_per_column() {
    let g = remat::graph::generate::linear(100);
    let result = solved(&g, g.min_feasible_budget().0, "recompute-all");
    let drawn = input::from_result(&g, &result).unwrap();
    let events = drawn.schedule.events.len();
    assert!(events > 10_000, "{events}");
    let svg = plot::draw(Kind::Timeline, &g, &drawn, "test").unwrap();
    assert!(svg.len() < 200_000, "{} bytes", svg.len());
    let doc = Document::parse(&svg).unwrap();
    let root = doc.root_element();
    assert_eq!(num(root, "data-events") as usize, events);
    let line = with_class(&doc, "memory");
    let points: Vec<f64> = attr(line[0], "points")
        .split(' ')
        .map(|p| p.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    let width = events.div_ceil(1_000);
    assert_eq!(points.len(), 2 * events.div_ceil(width) + 1);
    // The highest point (least y) is the peak's.
    let peak_y = num(with_class(&doc, "peak")[0], "cy");
    let top = points.iter().copied().fold(f64::INFINITY, f64::min);
    assert!((top - peak_y).abs() < 0.01, "{top} against {peak_y}");
    let stats = simulate(&g, &drawn.schedule).unwrap();
    let recomputes: u32 = stats.computes.iter().map(|c| c - 1).sum();
    let ticks = with_class(&doc, "recompute");
    assert!(ticks.len() <= 1_000);
    let counted: f64 = ticks.iter().map(|t| num(*t, "data-count")).sum();
    assert_eq!(counted as u32, recomputes);
}
