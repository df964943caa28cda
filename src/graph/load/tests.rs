//! Tests of the graph readers.

use super::*;
use crate::graph::NodeKind;

#[test]
fn node_link_with_numbered_link_ends_and_order() {
    let text = r#"{"directed": true, "graph": {"name": "t", "order": [0, 2, 1]},
        "nodes": [{"name": 0, "duration": 1, "out_cost": 5, "param_cost": 3},
                  {"name": 1, "duration": 2, "out_cost": 6, "param_cost": 0},
                  {"name": 2, "duration": 0, "out_cost": 7, "param_cost": 0}],
        "links": [{"0": 0, "1": 2}, {"0": 2, "1": 1}]}"#;
    let g = parse_graph(text, Format::Auto).unwrap();
    assert_eq!(g.fixed_memory(), 3);
    assert_eq!((0..3).map(|v| g.id(v)).collect::<Vec<_>>(), ["0", "2", "1"]);
    assert_eq!(g.preds(2), &[1]);
}

#[test]
fn every_problem_is_counted_and_the_first_hundred_kept() {
    let nodes: Vec<Value> = (0..1000)
        .map(|i| serde_json::json!({"id": format!("n{i}"), "cost": 1, "memory": 1, "a": 1, "b": 2}))
        .collect();
    let e = graph_from_value(&serde_json::json!({ "nodes": nodes }), Format::Auto).unwrap_err();
    let GraphError::Invalid(p) = &e else {
        panic!("{e:?}")
    };
    assert_eq!((p.len(), p.iter().count()), (2000, 100));
    assert!(
        e.to_string().starts_with("the graph has 2000 problems"),
        "{e}"
    );
    assert_eq!(
        e.problems()[100].message,
        "1900 more problems are not listed"
    );
}

#[test]
fn limits_stop_the_reading_and_meta_is_not_read() {
    let text = r#"{"meta": [[[]]], "nodes": [
        {"id": "a", "cost": 1, "memory": 1, "meta": {"x": [1, 2]}},
        {"id": "b", "cost": 1, "memory": 1, "inputs": ["a"]}]}"#;
    let limits = |nodes, edges| Limits {
        nodes,
        edges,
        deadline: None,
    };
    assert!(read_graph(text.as_bytes(), Format::Auto, limits(2, 1)).is_ok());
    let e = read_graph(text.as_bytes(), Format::Auto, limits(1, 1)).unwrap_err();
    assert_eq!(e.to_string(), "the graph has more than 1 nodes");
    let e = read_graph(text.as_bytes(), Format::Auto, limits(2, 0)).unwrap_err();
    assert_eq!(e.to_string(), "the graph has more than 0 edges");
    let links = r#"{"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 1}, {"id": 1, "cost_cpu": 1, "cost_ram": 1}],
        "links": [{"source": 0, "target": 1}]}"#;
    assert!(read_graph(links.as_bytes(), Format::Auto, limits(2, 1)).is_ok());
    assert!(read_graph(links.as_bytes(), Format::Auto, limits(2, 0)).is_err());
}

#[test]
fn a_deadline_that_has_passed_stops_the_reading() {
    let g = crate::graph::generate::linear(3000);
    let text = serde_json::to_string(&g.to_spec()).unwrap();
    let limits = |deadline| Limits {
        deadline,
        ..Limits::NONE
    };
    let late = Some(std::time::Instant::now());
    let e = read_graph(text.as_bytes(), Format::Auto, limits(late)).unwrap_err();
    assert!(matches!(e, GraphError::TimeLimit { nodes: 0 }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "the time limit passed while reading the graph (0 nodes read)"
    );
    let later = std::time::Instant::now().checked_add(std::time::Duration::from_secs(600));
    let read = read_graph(text.as_bytes(), Format::Auto, limits(later)).unwrap();
    assert_eq!(read.len(), g.len());
}

#[test]
fn checkmate_flags_become_kinds_with_one_loss() {
    let text = r#"{"nodes": [
        {"id": 0, "name": "a", "backward": false, "cost_cpu": 1, "cost_ram": 1},
        {"id": 1, "name": "loss", "backward": true, "cost_cpu": 1, "cost_ram": 1},
        {"id": 2, "name": "a_bwd", "backward": true, "cost_cpu": 1, "cost_ram": 1}],
        "links": [{"source": 0, "target": 1}, {"source": 1, "target": 2}, {"source": 0, "target": 2}]}"#;
    let g = parse_graph(text, Format::Auto).unwrap();
    let kinds: Vec<_> = g.nodes().iter().map(|n| n.kind.unwrap()).collect();
    assert_eq!(
        kinds,
        [NodeKind::Forward, NodeKind::Loss, NodeKind::Backward]
    );
    assert_eq!(g.node(1).op.as_deref(), Some("loss"));
}

#[test]
fn a_file_that_cannot_start_json_is_not_read_to_its_end() {
    let dir = std::env::temp_dir().join(format!("remat-read-text-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let zeros = dir.join("zeros");
    std::fs::write(&zeros, vec![0u8; 1 << 17]).unwrap();
    let e = read_text(&zeros).unwrap_err();
    assert!(e.to_string().contains("starts with the byte 0x00"), "{e}");
    let graph = dir.join("graph.json");
    std::fs::write(&graph, "\u{feff} {\"nodes\": []}").unwrap();
    assert_eq!(read_text(&graph).unwrap(), " {\"nodes\": []}");
    // The byte-order mark is dropped, so the graph behind it is read.
    let one = r#"{"nodes": [{"id": "a", "cost": 1, "memory": 1}]}"#;
    std::fs::write(&graph, format!("\u{feff}{one}")).unwrap();
    let text = read_text(&graph).unwrap();
    assert_eq!(parse_graph(&text, Format::Auto).unwrap().len(), 1);
    // /dev/zero, a stream with no end, is refused at its first byte.
    if Path::new("/dev/zero").exists() {
        assert!(read_text(Path::new("/dev/zero")).is_err());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_field_given_twice_is_an_error_naming_it() {
    for text in [
        r#"{"nodes": [{"id": "a", "cost": 1, "cost": 2, "memory": 1}]}"#,
        r#"{"nodes": [{"id": "a", "cost": 1, "memory": 1}], "nodes": []}"#,
    ] {
        let e = parse_graph(text, Format::Auto).unwrap_err().to_string();
        assert!(e.contains("is given twice"), "{text}: {e}");
    }
}
