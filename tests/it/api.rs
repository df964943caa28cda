//! The contract in `api/`: the served `/openapi.json` is `api/openapi.yaml`, every path in
//! it is served, and every example in `api/examples/` replays against the real server
//! with the documented status and a body that matches both the saved response and the
//! contract's schema.

use crate::server;

use serde_json::Value;
use server::{config, request, Server};
use std::path::{Path, PathBuf};

fn api_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("api")
}

fn contract() -> Value {
    let text = std::fs::read_to_string(api_dir().join("openapi.yaml")).unwrap();
    serde_norway::from_str(&text).unwrap()
}

/// Follows a local `$ref` (`#/components/...`).
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let target = doc
                .pointer(r.trim_start_matches('#'))
                .unwrap_or_else(|| panic!("dangling $ref {r}"));
            resolve(doc, target)
        }
        None => v,
    }
}

/// A JSON Schema check for the keywords the contract uses. Returns the first mismatch.
fn check(doc: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let schema = resolve(doc, schema);
    let fail = |why: String| Err(format!("{at}: {why} (value {v})"));
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_i64() || v.is_u64(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        });
        if !ok {
            return fail(format!("not of type {types:?}"));
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        if !options.contains(v) {
            return fail(format!("not one of {options:?}"));
        }
    }
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
        if v.as_f64().is_some_and(|x| x < min) {
            return fail(format!("below {min}"));
        }
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
        if v.as_f64().is_some_and(|x| x > max) {
            return fail(format!("above {max}"));
        }
    }
    if let Some(min) = schema.get("exclusiveMinimum").and_then(Value::as_f64) {
        if v.as_f64().is_some_and(|x| x <= min) {
            return fail(format!("not above {min}"));
        }
    }
    if let Some(options) = schema.get("oneOf").and_then(Value::as_array) {
        let matching = options
            .iter()
            .filter(|o| check(doc, o, v, at).is_ok())
            .count();
        if matching != 1 {
            return fail(format!("matches {matching} of the oneOf schemas, not 1"));
        }
    }
    if let Some(obj) = v.as_object() {
        for field in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !obj.contains_key(field.as_str().unwrap()) {
                return fail(format!("missing required field {field}"));
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, x) in obj {
            match (
                props.and_then(|p| p.get(k)),
                schema.get("additionalProperties"),
            ) {
                (Some(s), _) => check(doc, s, x, &format!("{at}.{k}"))?,
                (None, Some(Value::Bool(false))) => return fail(format!("unexpected field {k}")),
                (None, Some(s)) if s.is_object() => check(doc, s, x, &format!("{at}.{k}"))?,
                _ => {}
            }
        }
    }
    if let Some(items) = v.as_array() {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
            if (items.len() as u64) < min {
                return fail(format!("fewer than {min} items"));
            }
        }
        if let Some(s) = schema.get("items") {
            for (i, x) in items.iter().enumerate() {
                check(doc, s, x, &format!("{at}[{i}]"))?;
            }
        }
    }
    Ok(())
}

/// The schema of a response: path, method, status and media type.
fn response_schema<'a>(
    doc: &'a Value,
    path: &str,
    method: &str,
    status: u16,
    media: &str,
) -> &'a Value {
    let op = &doc["paths"][path][method.to_ascii_lowercase()];
    let response = resolve(doc, &op["responses"][status.to_string()]);
    assert!(
        !response.is_null(),
        "{method} {path} does not document status {status}"
    );
    let schema = &response["content"][media]["schema"];
    assert!(
        !schema.is_null(),
        "{method} {path} {status} documents no {media} body"
    );
    schema
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_document_is_the_yaml_contract_and_every_path_is_served() {
    let server = Server::start(config(2, 4)).await;
    let doc = contract();
    assert_eq!(server.get("/openapi.json").await.json(), doc);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    let mut operations = 0;
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            if method == "parameters" {
                continue;
            }
            operations += 1;
            let concrete = path.replace("{id}", "no-such-job");
            let method = method.to_ascii_uppercase();
            let body = (method == "POST").then_some(&b"{}"[..]);
            let reply = request(server.addr, &method, &concrete, body).await;
            assert_ne!(reply.status, 405, "{method} {path} is not routed");
            if reply.status == 404 {
                let p = reply.json();
                assert!(
                    !p["detail"].as_str().unwrap().contains("no such route"),
                    "{method} {path} is not routed"
                );
            }
            let documented = &op["responses"][reply.status.to_string()];
            assert!(
                !documented.is_null(),
                "{method} {path} answered {} which it does not document",
                reply.status
            );
        }
    }
    assert_eq!(operations, 18);
    server.stop().await.unwrap();
}

/// Removes the fields whose values change from run to run.
fn strip(v: &mut Value, volatile: &[String]) {
    match v {
        Value::Object(o) => {
            o.retain(|k, _| !volatile.contains(k));
            o.values_mut().for_each(|x| strip(x, volatile));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| strip(x, volatile)),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_examples_replay_and_match_the_contract() {
    let server = Server::start(config(2, 4)).await;
    let doc = contract();
    let dir = api_dir().join("examples");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let volatile: Vec<String> = serde_json::from_value(manifest["volatile"].clone()).unwrap();
    let examples = manifest["examples"].as_array().unwrap();
    assert!(examples.len() >= 10);
    for e in examples {
        let name = e["name"].as_str().unwrap();
        let (method, path) = (e["method"].as_str().unwrap(), e["path"].as_str().unwrap());
        let body = std::fs::read(dir.join(format!("{name}.request.json"))).ok();
        if let Some(b) = &body {
            let req: Value = serde_json::from_slice(b).unwrap();
            let op = &doc["paths"][path][method.to_ascii_lowercase()];
            let schema =
                &resolve(&doc, &op["requestBody"])["content"]["application/json"]["schema"];
            check(&doc, schema, &req, name).unwrap();
        }
        let reply = request(server.addr, method, path, body.as_deref()).await;
        assert_eq!(
            reply.status,
            e["status"].as_u64().unwrap() as u16,
            "{name}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        let media = reply.header("content-type").unwrap().to_string();
        let mut got = reply.json();
        let schema = response_schema(&doc, path, method, reply.status, &media);
        check(&doc, schema, &got, name).unwrap_or_else(|e| panic!("{e}"));
        let mut want: Value = serde_json::from_slice(
            &std::fs::read(dir.join(format!("{name}.response.json"))).unwrap(),
        )
        .unwrap();
        strip(&mut got, &volatile);
        strip(&mut want, &volatile);
        assert_eq!(
            got, want,
            "{name}: the response differs from the saved example"
        );
    }
    server.stop().await.unwrap();
}

#[test]
fn the_validator_rejects_what_the_contract_forbids() {
    let doc = contract();
    let result = &doc["components"]["schemas"]["SolveResult"];
    let wrong = serde_json::json!({"status": "great", "solver": "x", "budget": 1,
        "graph": {"nodes": 1, "edges": 0}, "schedule": null, "stats": null, "solve_time_s": 0.1});
    assert!(check(&doc, result, &wrong, "r")
        .unwrap_err()
        .contains("status"));
    let request = &doc["components"]["schemas"]["SolveRequest"];
    let misspelt = serde_json::json!({"graph": {"nodes": []}, "budget": 1, "solvr": "auto"});
    assert!(check(&doc, request, &misspelt, "q")
        .unwrap_err()
        .contains("solvr"));
}

/// Every problem kind and schedule rule the code can answer is one the contract lists: a
/// client generated from it with strict enums accepts every real answer. The matches are
/// exhaustive, so a new kind or rule does not compile until it is added to the lists here.
#[test]
fn the_contract_lists_every_problem_kind_and_schedule_rule() {
    use remat::graph::ProblemKind as K;
    use remat::schedule::Rule as R;
    let kinds = [
        K::EmptyGraph,
        K::DuplicateId,
        K::UnknownInput,
        K::SelfLoop,
        K::Cycle,
        K::InvalidCost,
        K::InvalidMemory,
        K::MissingField,
        K::InvalidField,
        K::UnknownField,
    ];
    let rules = [
        R::UnknownNode,
        R::MissingInput,
        R::AlreadyResident,
        R::FreeNotResident,
        R::NeverComputed,
        R::NoStorage,
        R::StoreNotResident,
        R::AlreadyStored,
        R::LoadNotStored,
    ];
    for k in &kinds {
        match k {
            K::EmptyGraph | K::DuplicateId | K::UnknownInput | K::SelfLoop | K::Cycle => {}
            K::InvalidCost | K::InvalidMemory | K::MissingField | K::InvalidField => {}
            K::UnknownField => {}
        }
    }
    for r in &rules {
        match r {
            R::UnknownNode | R::MissingInput | R::AlreadyResident | R::FreeNotResident => {}
            R::NeverComputed | R::NoStorage | R::StoreNotResident | R::AlreadyStored => {}
            R::LoadNotStored => {}
        }
    }
    let doc = contract();
    let listed = |schema: &str, field: &str| -> Vec<Value> {
        doc["components"]["schemas"][schema]["properties"][field]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{schema}.{field} has no enum"))
            .clone()
    };
    let (kinds_listed, rules_listed) = (
        listed("GraphProblem", "kind"),
        listed("ScheduleError", "rule"),
    );
    for value in kinds.iter().map(|k| serde_json::to_value(k).unwrap()) {
        assert!(
            kinds_listed.contains(&value),
            "GraphProblem.kind lacks {value}"
        );
    }
    for value in rules.iter().map(|r| serde_json::to_value(r).unwrap()) {
        assert!(
            rules_listed.contains(&value),
            "ScheduleError.rule lacks {value}"
        );
    }
}
