//! One test per validation error class: each message names the node and the field.

use remat::graph::load::{parse_graph, Format};
use remat::graph::{Graph, GraphError, GraphSpec, NodeSpec, ProblemKind};

fn problems(text: &str) -> Vec<remat::graph::Problem> {
    match parse_graph(text, Format::Auto) {
        Err(GraphError::Invalid(p)) => p.to_vec(),
        other => panic!("expected validation problems, got {other:?}"),
    }
}

fn only(text: &str, kind: ProblemKind) -> remat::graph::Problem {
    let p = problems(text);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].kind, kind);
    p[0].clone()
}

#[test]
fn duplicate_id() {
    let p = only(
        r#"{"nodes": [{"id": "a", "cost": 1, "memory": 1}, {"id": "a", "cost": 1, "memory": 1}]}"#,
        ProblemKind::DuplicateId,
    );
    assert_eq!(p.node.as_deref(), Some("a"));
    assert!(p.to_string().contains("node 'a', field 'id'"), "{p}");
}

#[test]
fn unknown_input() {
    let p = only(
        r#"{"nodes": [{"id": "a", "cost": 1, "memory": 1, "inputs": ["ghost"]}]}"#,
        ProblemKind::UnknownInput,
    );
    assert_eq!(p.node.as_deref(), Some("a"));
    assert_eq!(p.field, "inputs");
    assert!(p.message.contains("ghost"), "{p}");
}

#[test]
fn self_loop() {
    let p = only(
        r#"{"nodes": [{"id": "a", "cost": 1, "memory": 1, "inputs": ["a"]}]}"#,
        ProblemKind::SelfLoop,
    );
    assert_eq!(p.node.as_deref(), Some("a"));
}

#[test]
fn cycle_lists_its_nodes() {
    let p = only(
        r#"{"nodes": [
            {"id": "s", "cost": 1, "memory": 1},
            {"id": "a", "cost": 1, "memory": 1, "inputs": ["s", "c"]},
            {"id": "b", "cost": 1, "memory": 1, "inputs": ["a"]},
            {"id": "c", "cost": 1, "memory": 1, "inputs": ["b"]}]}"#,
        ProblemKind::Cycle,
    );
    assert_eq!(
        p.message,
        "the inputs form a cycle through nodes a -> b -> c"
    );
    assert_eq!(p.node.as_deref(), Some("a"));
}

/// A cycle through every node of a large graph is found without recursion (a recursive
/// search overflowed a 2 MiB thread stack from about 30,000 nodes and aborted the server),
/// and its problem names 20 of its nodes.
#[test]
fn a_cycle_through_100000_nodes_is_reported_not_a_stack_overflow() {
    let n = 100_000;
    let nodes: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"id": "n{i}", "cost": 1, "memory": 1, "inputs": ["n{}"]}}"#,
                (i + n - 1) % n
            )
        })
        .collect();
    let p = only(
        &format!(r#"{{"nodes": [{}]}}"#, nodes.join(",")),
        ProblemKind::Cycle,
    );
    assert_eq!(p.node.as_deref(), Some("n0"));
    assert!(
        p.message.ends_with("n18 -> n19 and 99980 more"),
        "{}",
        p.message
    );
}

#[test]
fn negative_cost() {
    let p = only(
        r#"{"nodes": [{"id": "a", "cost": -2, "memory": 1}]}"#,
        ProblemKind::InvalidCost,
    );
    assert_eq!((p.node.as_deref(), p.field.as_str()), (Some("a"), "cost"));
    assert!(p.message.contains("-2"), "{p}");
}

#[test]
fn nan_and_infinite_costs() {
    // JSON cannot carry NaN or infinity; programs building graphs directly can.
    for bad in [f64::NAN, f64::INFINITY] {
        let spec = GraphSpec {
            nodes: vec![NodeSpec {
                id: "x".into(),
                cost: bad,
                memory: 1,
                inputs: vec![],
                kind: None,
                op: None,
            }],
            ..Default::default()
        };
        let Err(GraphError::Invalid(p)) = Graph::new(spec) else {
            panic!("accepted cost {bad}")
        };
        assert_eq!(p[0].kind, ProblemKind::InvalidCost);
        assert_eq!(p[0].node.as_deref(), Some("x"));
    }
}

#[test]
fn memory_not_a_non_negative_integer() {
    for (value, shown) in [("-1", "-1"), ("1.5", "1.5"), ("\"big\"", "a string")] {
        let text = format!(r#"{{"nodes": [{{"id": "m", "cost": 1, "memory": {value}}}]}}"#);
        let p = only(&text, ProblemKind::InvalidMemory);
        assert_eq!((p.node.as_deref(), p.field.as_str()), (Some("m"), "memory"));
        assert!(p.message.contains(shown), "{p}");
    }
}

#[test]
fn empty_graph() {
    let p = only(r#"{"nodes": []}"#, ProblemKind::EmptyGraph);
    assert_eq!(p.field, "nodes");
}

#[test]
fn missing_field_names_the_node() {
    let p = only(
        r#"{"nodes": [{"id": "a", "memory": 1}]}"#,
        ProblemKind::MissingField,
    );
    assert_eq!((p.node.as_deref(), p.field.as_str()), (Some("a"), "cost"));
}

#[test]
fn malformed_json_gives_line_and_column() {
    let err = parse_graph(
        "{\n  \"nodes\": [\n    {\"id\": \"a\",, }\n  ]\n}",
        Format::Auto,
    )
    .unwrap_err();
    match err {
        GraphError::Json { line, column, .. } => assert_eq!((line, column), (3, 16)),
        other => panic!("{other:?}"),
    }
    assert!(err_text("{\"nodes\": [").contains("line 1, column"));
}

fn err_text(text: &str) -> String {
    parse_graph(text, Format::Auto).unwrap_err().to_string()
}

#[test]
fn every_problem_is_reported_not_only_the_first() {
    let p = problems(
        r#"{"fixed_memory": -5, "nodes": [
            {"id": "a", "cost": -1, "memory": 1.5},
            {"id": "b", "cost": 1, "memory": 1, "inputs": ["zzz", "b"]},
            {"id": "a", "cost": 1, "memory": 1}]}"#,
    );
    let found: Vec<(ProblemKind, Option<&str>, &str)> = p
        .iter()
        .map(|p| (p.kind, p.node.as_deref(), p.field.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (ProblemKind::InvalidMemory, None, "fixed_memory"),
            (ProblemKind::InvalidCost, Some("a"), "cost"),
            (ProblemKind::InvalidMemory, Some("a"), "memory"),
            (ProblemKind::DuplicateId, Some("a"), "id"),
            (ProblemKind::UnknownInput, Some("b"), "inputs"),
            (ProblemKind::SelfLoop, Some("b"), "inputs"),
        ]
    );
    let text = GraphError::Invalid(p.into()).to_string();
    assert!(text.starts_with("the graph has 6 problems"), "{text}");
}

#[test]
fn node_link_problems_name_the_link() {
    let p = only(
        r#"{"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 1}], "links": [{"source": 0, "target": 9}]}"#,
        ProblemKind::UnknownInput,
    );
    assert!(
        p.message.contains("link #0") && p.message.contains("'9'"),
        "{p}"
    );
}
