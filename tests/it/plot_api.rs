//! `POST /v1/plot/*` on a real server: the same bytes as `remat plot`, the trade-off sweep
//! as a job (polled to its picture, or cancelled), and bad requests as problem documents.

use crate::common;
use crate::server;

use serde_json::{json, Value};
use server::{config, Server};
use std::time::{Duration, Instant};

fn graph() -> Value {
    serde_json::from_slice(&std::fs::read(common::root().join("graphs/linear-8.json")).unwrap())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pictures_are_the_clis_and_the_sweep_is_a_job() {
    let server = Server::start(config(1, 4)).await;
    // A schedule drawn by the service and by the CLI: the same SVG.
    let result = server
        .post(
            "/v1/solve",
            &json!({"graph": graph(), "budget": "70%", "solver": "dtr"}),
        )
        .await
        .json();
    let dir = std::env::temp_dir().join(format!("remat-plot-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("result.json");
    std::fs::write(&file, result.to_string()).unwrap();
    for kind in ["timeline", "stages"] {
        let reply = server
            .post(
                &format!("/v1/plot/{kind}"),
                &json!({"graph": graph(), "schedule": result}),
            )
            .await;
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.header("content-type"), Some("image/svg+xml"));
        let out = dir.join(format!("{kind}.svg"));
        let o = common::remat(&[
            "plot",
            kind,
            "graphs/linear-8.json",
            "--schedule",
            file.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(std::fs::read(&out).unwrap(), reply.body, "{kind}");
    }
    std::fs::remove_dir_all(&dir).unwrap();

    // The sweep: polled to its picture.
    let body = json!({"graph": graph(), "solvers": ["dtr", "checkpoint-all"], "points": 4});
    let job = server.post("/v1/plot/tradeoff", &body).await;
    assert_eq!(job.status, 202);
    let id = job.json()["id"].as_str().unwrap().to_string();
    let start = Instant::now();
    let view = loop {
        let view = server.get(&format!("/v1/jobs/{id}")).await.json();
        if view["status"] == "succeeded" {
            break view;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{view}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(view["progress"]["fraction"], 1.0);
    let svg = view["result"]["svg"].as_str().unwrap();
    let doc = roxmltree::Document::parse(svg).unwrap();
    assert_eq!(doc.root_element().attribute("data-points"), Some("8"));
    assert_eq!(
        view["result"]["sweep"]["points"].as_array().unwrap().len(),
        8
    );

    // A long sweep, cancelled.
    let body = json!({"graph": graph(), "solvers": ["fastsa"], "points": 50, "time_limit_s": 5});
    let id = server.post("/v1/plot/tradeoff", &body).await.json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let deleted = request_delete(&server, &id).await;
    assert_eq!(deleted["status"], "cancelled");

    // Bad requests: problem documents naming the field.
    let p = server
        .post(
            "/v1/plot/tradeoff",
            &json!({"graph": graph(), "solvers": ["nope"]}),
        )
        .await
        .assert_problem(422, "invalid-solver");
    assert_eq!(p["field"], "solvers");
    let p = server
        .post("/v1/plot/stages", &json!({"graph": graph()}))
        .await
        .assert_problem(422, "invalid-request");
    assert_eq!(p["field"], "budget");
    let p = server
        .post(
            "/v1/plot/timeline",
            &json!({"graph": graph(), "schedule": {"steps": []}}),
        )
        .await
        .assert_problem(422, "invalid-schedule");
    assert_eq!(p["field"], "schedule");
    // A solve's option beside a schedule is named as such, not as an unknown field.
    let p = server
        .post(
            "/v1/plot/timeline",
            &json!({"graph": graph(), "schedule": {"events": []}, "solver": "chen"}),
        )
        .await
        .assert_problem(422, "invalid-request");
    assert_eq!(p["field"], "solver");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("with a `schedule` given"),
        "{p}"
    );
    // A graph too large to draw is named.
    let large = serde_json::to_value(remat::graph::generate::linear(1600).to_spec()).unwrap();
    let p = server
        .post(
            "/v1/plot/stages",
            &json!({"graph": large, "budget": "100%", "solver": "checkpoint-all"}),
        )
        .await
        .assert_problem(413, "too-large");
    assert_eq!(p["field"], "graph", "{p}");
    server
        .post("/v1/plot/pie", &json!({"graph": graph()}))
        .await
        .assert_problem(404, "not-found");
    server.stop().await.unwrap();
}

/// The one rule of both shells (`crate::plot::request`): a trade-off takes `budgets` or
/// `points`, and refuses both with one message naming both, as each shell spells them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_shells_refuse_budgets_with_points_naming_both() {
    let server = Server::start(config(1, 4)).await;
    let body = json!({"graph": graph(), "solvers": ["dtr"], "budgets": ["80%"], "points": 4});
    let p = server
        .post("/v1/plot/tradeoff", &body)
        .await
        .assert_problem(422, "invalid-request");
    assert_eq!(p["field"], "points");
    assert_eq!(p["detail"], "give `budgets` or `points`, not both");
    server.stop().await.unwrap();
    let out = std::env::temp_dir().join(format!("remat-both-{}.svg", std::process::id()));
    let o = common::remat(&[
        "plot",
        "tradeoff",
        "graphs/linear-8.json",
        "--solvers",
        "dtr",
        "--budgets",
        "80%",
        "--points",
        "4",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("give --budgets or --points, not both"),
        "{stderr}"
    );
    assert!(!out.exists(), "no picture is written");
}

async fn request_delete(server: &Server, id: &str) -> Value {
    server::request(server.addr, "DELETE", &format!("/v1/jobs/{id}"), None)
        .await
        .json()
}
