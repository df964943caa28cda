//! One test per simulator rule, each asserting the error names the event and the node;
//! and the figures of a valid schedule.

use remat::graph::load::{parse_graph, Format};
use remat::graph::Graph;
use remat::schedule::{simulate, EventJson, Rule, ScheduleJson};

/// a -> b -> c, and c also reads a. Sizes 1, 2, 4; costs 1, 10, 100; fixed memory 8.
fn graph() -> Graph {
    parse_graph(
        r#"{"fixed_memory": 8, "nodes": [
            {"id": "a", "cost": 1, "memory": 1},
            {"id": "b", "cost": 10, "memory": 2, "inputs": ["a"]},
            {"id": "c", "cost": 100, "memory": 4, "inputs": ["b", "a"]}]}"#,
        Format::Native,
    )
    .unwrap()
}

fn run(events: &[(&str, &str)]) -> Result<remat::schedule::SimStats, remat::schedule::SimError> {
    let g = graph();
    let json = ScheduleJson {
        events: events
            .iter()
            .map(|&(op, node)| match op {
                "compute" => EventJson::Compute { node: node.into() },
                _ => EventJson::Free { node: node.into() },
            })
            .collect(),
        stages: None,
    };
    simulate(&g, &json.resolve(&g)?)
}

#[test]
fn valid_schedule_figures() {
    let s = run(&[
        ("compute", "a"),
        ("compute", "b"),
        ("free", "a"),
        ("compute", "a"),
        ("compute", "c"),
        ("free", "a"),
        ("free", "b"),
    ])
    .unwrap();
    assert_eq!(s.memory_after, vec![9, 11, 10, 11, 15, 14, 12]);
    assert_eq!((s.peak_memory, s.peak_event), (15, 4));
    assert_eq!(s.total_cost, 112.0);
    assert_eq!(s.recompute_cost, 1.0);
    assert!((s.overhead - 112.0 / 111.0).abs() < 1e-12);
    assert_eq!(s.computes, vec![2, 1, 1]);
}

#[test]
fn compute_needs_its_inputs_resident() {
    let e = run(&[
        ("compute", "a"),
        ("compute", "b"),
        ("free", "a"),
        ("compute", "c"),
    ])
    .unwrap_err();
    assert_eq!(
        (e.rule, e.event, e.node.as_deref()),
        (Rule::MissingInput, Some(3), Some("c"))
    );
    assert!(
        e.to_string()
            .contains("event 3 computes 'c', but its input 'a' is not resident"),
        "{e}"
    );
}

#[test]
fn computing_a_resident_node_is_an_error() {
    let e = run(&[("compute", "a"), ("compute", "a")]).unwrap_err();
    assert_eq!(
        (e.rule, e.event, e.node.as_deref()),
        (Rule::AlreadyResident, Some(1), Some("a"))
    );
    assert_eq!(
        e.to_string(),
        "invalid schedule: event 1 computes 'a', which is already resident"
    );
}

#[test]
fn free_needs_a_resident_node() {
    let e = run(&[("compute", "a"), ("free", "b")]).unwrap_err();
    assert_eq!(
        (e.rule, e.event, e.node.as_deref()),
        (Rule::FreeNotResident, Some(1), Some("b"))
    );
    assert_eq!(
        e.to_string(),
        "invalid schedule: event 1 frees 'b', which is not resident"
    );
}

#[test]
fn every_node_must_be_computed() {
    let e = run(&[("compute", "a"), ("compute", "b")]).unwrap_err();
    assert_eq!(
        (e.rule, e.event, e.node.as_deref()),
        (Rule::NeverComputed, None, Some("c"))
    );
    assert_eq!(
        e.to_string(),
        "invalid schedule: 1 node(s) are never computed: c"
    );
}

#[test]
fn unknown_node_names_the_event() {
    let e = run(&[("compute", "a"), ("free", "nope")]).unwrap_err();
    assert_eq!(
        (e.rule, e.event, e.node.as_deref()),
        (Rule::UnknownNode, Some(1), Some("nope"))
    );
    assert_eq!(
        e.to_string(),
        "invalid schedule: event 1 names node 'nope', which is not in the graph"
    );
}
