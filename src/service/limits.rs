//! The stated input limits of the service (`--max-nodes`, `--max-edges`, beside
//! `--max-body`): a graph over them is refused with 413 before it is built. The graph's
//! JSON is counted while it is read (`crate::graph::load::read_graph`: the `nodes` array,
//! each node's `inputs`, node-link's `links` or `edges`, a chain's stages), so that
//! nothing in proportion to a graph over the limits is allocated; the built graph is
//! checked again, whatever format it came in (a chain's edges are only known then).

// An `ApiProblem` is built at most once per request, on the way out: its size does not matter.
#![allow(clippy::result_large_err)]

use super::problem::{ApiProblem, Kind};
use super::Config;
use crate::graph::Graph;

/// The flag that sets the limit on `what` (`nodes` or `edges`).
fn flag(what: &str) -> &'static str {
    if what == "edges" {
        "--max-edges"
    } else {
        "--max-nodes"
    }
}

fn refuse(count: &str, what: &str, limit: usize) -> ApiProblem {
    ApiProblem::new(
        Kind::TooLarge,
        format!(
            "the graph has {count} {what}, over the server's limit of {limit} {what} ({})",
            flag(what)
        ),
    )
    .with_field("graph")
}

/// The problem of a graph found, while it was read, to have more than `limit` of `what`.
pub(super) fn refuse_more(what: &str, limit: usize) -> ApiProblem {
    refuse(&format!("more than {limit}"), what, limit)
}

/// How many times `--max-nodes` the schedules of one sweep (`POST /v1/sweep`: one result
/// per budget) may hold in all, counted as budgets × nodes: the answer of a sweep is about
/// 60 bytes of JSON per node and budget, and its results are in memory until it is sent
/// (64 budgets of a 200,001-node graph: a 400 MB answer, 1.7 GB at the peak).
const SWEEP_NODES: usize = 4;

/// Refuses a sweep of `budgets` budgets over `graph` whose schedules would hold more than
/// [`SWEEP_NODES`] × `--max-nodes` nodes in all (413, naming `budgets`), before it runs.
pub(super) fn check_sweep(
    budgets: usize,
    graph: &Graph,
    config: &Config,
) -> Result<(), ApiProblem> {
    let limit = config.max_nodes.saturating_mul(SWEEP_NODES);
    let nodes = graph.len();
    match budgets.checked_mul(nodes) {
        Some(total) if total <= limit => Ok(()),
        _ => Err(ApiProblem::new(
            Kind::TooLarge,
            format!(
                "a sweep answers a schedule per budget: {budgets} budgets of a {nodes}-node \
                 graph are {} nodes of schedules, over the server's limit of {limit} \
                 ({SWEEP_NODES} x --max-nodes); sweep fewer budgets at once, or draw the \
                 trade-off (POST /v1/plot/tradeoff: the figures, without the schedules)",
                budgets as u128 * nodes as u128
            ),
        )
        .with_field("budgets")),
    }
}

/// Refuses a built graph over the limits.
pub(super) fn check_graph(graph: &Graph, config: &Config) -> Result<(), ApiProblem> {
    let (nodes, edges) = (graph.len(), graph.edge_count());
    if nodes > config.max_nodes {
        return Err(refuse(&nodes.to_string(), "nodes", config.max_nodes));
    }
    if edges > config.max_edges {
        return Err(refuse(&edges.to_string(), "edges", config.max_edges));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::request::Body;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use serde_json::{json, Value};

    fn read(graph: &Value, config: &Config) -> Result<Graph, ApiProblem> {
        let body = json!({ "graph": graph }).to_string();
        Body::parse(body.as_bytes())?.graph(config)
    }

    #[test]
    fn graphs_over_the_limits_are_refused_naming_them() {
        let config = Config {
            max_nodes: 3,
            max_edges: 2,
            ..Config::default()
        };
        let native = |n: usize| {
            let mut nodes = vec![json!({"id": "x", "cost": 1, "memory": 1})];
            nodes.extend((0..n).map(
                |i| json!({"id": i.to_string(), "cost": 1, "memory": 1, "inputs": ["x", "x"]}),
            ));
            json!({ "nodes": nodes })
        };
        assert!(read(&native(1), &config).is_ok());
        let too_many = read(&native(3), &config).unwrap_err();
        assert_eq!(
            too_many.into_response().status(),
            StatusCode::PAYLOAD_TOO_LARGE
        );
        let e = read(&native(2), &config).unwrap_err();
        let body = format!("{e:?}");
        assert!(
            body.contains("more than 2 edges")
                && body.contains("limit of 2 edges")
                && body.contains("--max-edges"),
            "{body}"
        );
        let links = json!({"nodes": [{}, {}], "links": [{}, {}, {}]});
        assert!(format!("{:?}", read(&links, &config).unwrap_err()).contains("--max-edges"));
        let chain = json!({"fw": [1, 1], "bw": [1, 1], "x": [1, 1, 1], "xbar": [1, 1, 1]});
        assert!(format!("{:?}", read(&chain, &config).unwrap_err()).contains("--max-nodes"));
        // A thousand `{}` are counted, not built: the fourth stops the reading.
        let empties = Value::Array(vec![json!({}); 1000]);
        let e = read(&json!({ "nodes": empties }), &config).unwrap_err();
        assert!(format!("{e:?}").contains("more than 3 nodes"), "{e:?}");
        let config = Config {
            max_edges: 10,
            ..config
        };
        let g = crate::graph::generate::linear(1); // 3 nodes
        assert!(check_graph(&g, &config).is_ok());
        assert!(check_graph(&crate::graph::generate::linear(2), &config).is_err());
    }
}
