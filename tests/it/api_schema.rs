//! The JSON schemas in `api/` describe what the code reads and writes: every field the
//! native graph and schedule types serialise is in the schema, with the same required set,
//! and every bundled graph is in the native format.

use crate::common;

use remat::graph::GraphSpec;
use serde_json::Value;
use std::collections::BTreeSet;

fn schema(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(common::root().join("api").join(name)).unwrap()).unwrap()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn graph_schema_matches_the_native_format() {
    let s = schema("graph.schema.json");
    let node = &s["$defs"]["node"];
    for path in common::json_files(&common::root().join("graphs")) {
        let value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        // Bundled graphs use only schema fields and carry every required one.
        assert!(
            keys(&value).is_subset(&keys(&s["properties"])),
            "{}",
            path.display()
        );
        for n in value["nodes"].as_array().unwrap() {
            assert!(
                keys(n).is_subset(&keys(&node["properties"])),
                "{}: {n}",
                path.display()
            );
            assert!(
                strings(&node["required"]).is_subset(&keys(n)),
                "{}: {n}",
                path.display()
            );
        }
        // And they round-trip through the typed form unchanged.
        let spec: GraphSpec = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            value,
            "{}",
            path.display()
        );
    }
    let kinds = strings(&node["properties"]["kind"]["enum"]);
    assert_eq!(
        kinds,
        ["backward", "forward", "loss"].map(String::from).into()
    );
}

#[test]
fn schedule_schema_matches_the_event_format() {
    let s = schema("schedule.schema.json");
    let graph = remat::graph::generate::linear(2);
    let json =
        serde_json::to_value(remat::schedule::checkpoint_all(&graph).to_json(&graph)).unwrap();
    let event = &s["properties"]["events"]["items"];
    let ops = strings(&event["properties"]["op"]["enum"]);
    for e in json["events"].as_array().unwrap() {
        assert_eq!(keys(e), keys(&event["properties"]));
        assert!(ops.contains(e["op"].as_str().unwrap()));
    }
}

#[test]
fn storage_schema_matches_the_storage_format() {
    let s = schema("graph.schema.json");
    let fields = keys(&s["$defs"]["storage"]["properties"]);
    let every = remat::graph::StorageSpec {
        write_bandwidth: Some(1.0),
        read_bandwidth: Some(1.0),
        write_time: Some(1.0),
        read_time: Some(1.0),
        transfer_time: Some(1.0),
    };
    assert_eq!(keys(&serde_json::to_value(every).unwrap()), fields);
    let schedule = schema("schedule.schema.json");
    let ops = strings(&schedule["properties"]["events"]["items"]["properties"]["op"]["enum"]);
    assert!(ops.contains("store") && ops.contains("load"));
}
