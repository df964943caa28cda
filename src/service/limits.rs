//! The stated input limits of the service (`--max-nodes`, `--max-edges`, beside
//! `--max-body`): a graph over them is refused with 413 before it is built. The request's
//! JSON is counted first (the `nodes` array, each node's `inputs`, node-link's `links` or
//! `edges`, a chain's stages), so that the graph's own structures are never allocated;
//! the built graph is checked again, whatever format it came in.

// An `ApiProblem` is built at most once per request, on the way out: its size does not matter.
#![allow(clippy::result_large_err)]

use super::problem::{ApiProblem, Kind};
use super::Config;
use crate::graph::Graph;
use serde_json::Value;

fn array_len(value: Option<&Value>) -> usize {
    value.and_then(Value::as_array).map_or(0, Vec::len)
}

/// Nodes and edges as the graph's JSON states them (an upper bound for a chain: its
/// training graph has 2L + 1 nodes and about 4L edges for L stages).
fn stated(graph: &Value) -> (usize, usize) {
    let nodes = array_len(graph.get("nodes"));
    let inputs: usize = graph
        .get("nodes")
        .and_then(Value::as_array)
        .map_or(0, |nodes| {
            nodes.iter().map(|n| array_len(n.get("inputs"))).sum()
        });
    let links = array_len(graph.get("links")).max(array_len(graph.get("edges")));
    let stages = array_len(graph.get("fw"));
    (
        nodes.max(stages.saturating_mul(2).saturating_add(1)),
        (inputs + links).max(stages.saturating_mul(4)),
    )
}

fn refuse(what: &str, count: usize, limit: usize, flag: &str) -> ApiProblem {
    ApiProblem::new(
        Kind::TooLarge,
        format!("the graph has {count} {what}, over the server's limit of {limit} {what} ({flag})"),
    )
    .with_field("graph")
}

/// Refuses a graph whose JSON states more nodes or edges than the limits.
pub(super) fn check_value(graph: &Value, config: &Config) -> Result<(), ApiProblem> {
    let (nodes, edges) = stated(graph);
    check(nodes, edges, config)
}

/// Refuses a built graph over the limits (formats whose JSON [`check_value`] cannot count).
pub(super) fn check_graph(graph: &Graph, config: &Config) -> Result<(), ApiProblem> {
    check(graph.len(), graph.edge_count(), config)
}

fn check(nodes: usize, edges: usize, config: &Config) -> Result<(), ApiProblem> {
    if nodes > config.max_nodes {
        return Err(refuse("nodes", nodes, config.max_nodes, "--max-nodes"));
    }
    if edges > config.max_edges {
        return Err(refuse("edges", edges, config.max_edges, "--max-edges"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use serde_json::json;

    #[test]
    fn graphs_over_the_limits_are_refused_naming_them() {
        let config = Config {
            max_nodes: 3,
            max_edges: 2,
            ..Config::default()
        };
        let native = |n: usize| json!({"nodes": (0..n).map(|i| json!({"id": i.to_string(), "inputs": ["x", "y"]})).collect::<Vec<_>>()});
        assert!(check_value(&native(1), &config).is_ok());
        let too_many = check_value(&native(4), &config).unwrap_err();
        assert_eq!(
            too_many.into_response().status(),
            StatusCode::PAYLOAD_TOO_LARGE
        );
        let e = check_value(&native(2), &config).unwrap_err();
        let body = format!("{e:?}");
        assert!(
            body.contains("4 edges")
                && body.contains("limit of 2 edges")
                && body.contains("--max-edges"),
            "{body}"
        );
        let links = json!({"nodes": [{}, {}], "links": [{}, {}, {}]});
        assert!(check_value(&links, &config).is_err());
        let chain = json!({"fw": [1, 1], "bw": [1, 1]});
        assert!(check_value(&chain, &config).is_err());
        // Sixty million `{}` are counted, not built.
        let empties = Value::Array(vec![json!({}); 1000]);
        assert!(check_value(&json!({ "nodes": empties }), &config).is_err());
        let config = Config {
            max_edges: 10,
            ..config
        };
        let g = crate::graph::generate::linear(1); // 3 nodes
        assert!(check_graph(&g, &config).is_ok());
        assert!(check_graph(&crate::graph::generate::linear(2), &config).is_err());
    }
}
