//! The deployment files in `docker/` parse, and agree with each other and with the binary:
//! the same settings in the Dockerfiles, compose and Kubernetes, every setting one that
//! `remat serve` reads, and the probes on the documented endpoints.

use crate::server;

use serde_json::Value;
use server::Process;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

fn read(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docker")
            .join(name),
    )
    .unwrap()
}

fn yaml(name: &str) -> Value {
    serde_norway::from_str(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The `REMAT_*` settings of a Dockerfile's `ENV` instruction.
fn dockerfile_env(name: &str) -> BTreeMap<String, String> {
    let text = read(name);
    let start = text.find("\nENV ").expect("an ENV instruction");
    text[start + 5..]
        .lines()
        .map_while(|l| {
            let l = l.trim().trim_end_matches('\\').trim();
            l.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .filter(|(k, _)| k.starts_with("REMAT_"))
        .collect()
}

fn k8s_env(container: &Value) -> BTreeMap<String, String> {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn compose_kubernetes_and_dockerfiles_agree_with_the_binary() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();

    let runtime = dockerfile_env("Dockerfile.runtime");
    assert_eq!(runtime, dockerfile_env("Dockerfile"));
    assert!(runtime.contains_key("REMAT_ADDR") && runtime.contains_key("REMAT_WORKERS"));
    for key in runtime.keys() {
        assert!(
            help.contains(&format!("env: {key}=")),
            "remat serve does not read {key}"
        );
    }
    for name in ["Dockerfile", "Dockerfile.runtime"] {
        let text = read(name);
        assert!(text.contains("USER 10001:10001"), "{name} runs as non-root");
        assert!(
            text.contains("HEALTHCHECK") && text.contains("/healthz"),
            "{name}"
        );
        assert!(
            !text.contains("--mount="),
            "{name}: classic builder syntax only"
        );
    }

    let compose = yaml("compose.yaml");
    let sidecar = &compose["services"]["remat"];
    let compose_env: BTreeMap<String, String> =
        serde_json::from_value(sidecar["environment"].clone()).unwrap();
    assert_eq!(compose_env, runtime);
    assert!(sidecar["healthcheck"]["test"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t.as_str().unwrap().ends_with("/healthz")));
    let trainer = &compose["services"]["trainer"];
    assert_eq!(trainer["network_mode"], "service:remat");
    assert_eq!(
        trainer["depends_on"]["remat"]["condition"],
        "service_healthy"
    );
    assert!(trainer["command"][0]
        .as_str()
        .unwrap()
        .contains("http://127.0.0.1:8080/v1/solve"));

    let job = yaml("k8s-sidecar.yaml");
    let pod = &job["spec"]["template"]["spec"];
    let remat = &pod["initContainers"][0];
    assert_eq!(remat["restartPolicy"], "Always", "a native sidecar");
    assert_eq!(k8s_env(remat), runtime);
    // The server listens on loopback: the probes run inside the container (issue 26,
    // item 6: httpGet probes go to the pod IP and never pass).
    assert_eq!(runtime["REMAT_ADDR"], "127.0.0.1:8080");
    for (probe, path) in [
        ("startupProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
        ("livenessProbe", "/healthz"),
    ] {
        let p = &remat[probe];
        assert!(p.get("httpGet").is_none(), "{probe}: {p}");
        let command: Vec<&str> = p["exec"]["command"]
            .as_array()
            .unwrap_or_else(|| panic!("{probe} is not an exec probe: {p}"))
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(
            command[..3],
            ["/usr/local/bin/remat", "probe", path],
            "{probe}"
        );
        assert!(
            p["timeoutSeconds"].as_u64().unwrap() >= 2,
            "{probe}: above --timeout 1"
        );
    }
    assert_eq!(remat["securityContext"]["runAsUser"], 10001);
    let batch = yaml("k8s-batch-job.yaml");
    let batch_container = &batch["spec"]["template"]["spec"]["containers"][0];
    for container in [remat, &pod["containers"][0], batch_container] {
        assert_restricted(&container["securityContext"]);
    }
    let grace: f64 = runtime["REMAT_GRACE"].parse().unwrap();
    assert!(pod["terminationGracePeriodSeconds"].as_f64().unwrap() > grace);
    assert_eq!(
        k8s_env(&pod["containers"][0])["REMAT_URL"],
        "http://127.0.0.1:8080"
    );

    assert_eq!(batch["spec"]["completionMode"], "Indexed");
    let n = batch["spec"]["completions"].as_u64().unwrap();
    let args = batch["spec"]["template"]["spec"]["containers"][0]["args"][0]
        .as_str()
        .unwrap();
    assert!(
        args.contains(&format!("--shard \"${{JOB_COMPLETION_INDEX}}/{n}\"")),
        "{args}"
    );
    assert!(args.contains("remat batch"));

    // One memory story (docker/README.md, Memory): 4 GiB everywhere, two solves at a time,
    // and what the server admits at once fits the limit (issue 26: the defaults, 1,000,000
    // nodes, 2 readers and 32 queued solves, did not).
    let admitted = admitted_bytes(&runtime);
    assert!(
        admitted <= 4 << 30,
        "the flags admit {admitted} bytes at once"
    );
    assert_eq!(sidecar["mem_limit"], "4g");
    assert_eq!(remat["resources"]["limits"]["memory"], "4Gi");
    assert_eq!(batch_container["resources"]["limits"]["memory"], "4Gi");
    assert_eq!(k8s_env(batch_container)["REMAT_SOLVE_MEMORY"], "75%");
    assert!(args.contains("--jobs 2"), "{args}");
    assert_eq!(runtime["REMAT_WORKERS"], "2");
}

/// Bytes a graph of `nodes` holds while it is read and built (docs/performance.md: 0.65 KB
/// a node with one edge, 0.7 KB at four), and about what a solve result of it holds.
const GRAPH_BYTES_PER_NODE: u64 = 700;

/// What the server's settings `env` admit at once (docker/README.md, Memory): the solves at
/// their memory limit, the bodies being read (each held twice while collected) with their
/// graphs, the queued solves' graphs, the kept job results (their bytes, or one result
/// alone, which a solve's memory limit bounded), the cache and the server.
fn admitted_bytes(env: &BTreeMap<String, String>) -> u64 {
    let get = |key: &str| env.get(key).unwrap_or_else(|| panic!("{key} is not set"));
    let size = |key: &str| -> u64 {
        let v = get(key);
        match (v.strip_suffix("GiB"), v.strip_suffix("MiB")) {
            (Some(g), _) => g.parse::<u64>().unwrap() << 30,
            (_, Some(m)) => m.parse::<u64>().unwrap() << 20,
            _ => v
                .parse()
                .unwrap_or_else(|_| panic!("{key}={v}: bytes, NMiB or NGiB")),
        }
    };
    let count = |key: &str| get(key).parse::<u64>().unwrap();
    let graph = count("REMAT_MAX_NODES") * GRAPH_BYTES_PER_NODE;
    let body = env
        .get("REMAT_MAX_BODY")
        .map_or(64 << 20, |_| size("REMAT_MAX_BODY"));
    let cache_and_server = (64 << 20) + (64 << 20);
    count("REMAT_WORKERS") * size("REMAT_SOLVE_MEMORY")
        + count("REMAT_READERS") * (2 * body + graph)
        + count("REMAT_QUEUE") * graph
        + size("REMAT_JOB_BYTES").max(size("REMAT_SOLVE_MEMORY"))
        + cache_and_server
}

/// The container-level fields of the restricted Pod Security Standard.
fn assert_restricted(context: &Value) {
    assert_eq!(context["runAsNonRoot"], true, "{context}");
    assert_eq!(context["allowPrivilegeEscalation"], false, "{context}");
    assert_eq!(
        context["capabilities"]["drop"],
        serde_json::json!(["ALL"]),
        "{context}"
    );
    assert_eq!(
        context["seccompProfile"]["type"], "RuntimeDefault",
        "{context}"
    );
}

fn probe(args: &[&str], addr: Option<SocketAddr>) -> (Option<i32>, String, Duration) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_remat"));
    command.arg("probe").args(args).env_remove("REMAT_ADDR");
    if let Some(addr) = addr {
        command.env("REMAT_ADDR", addr.to_string());
    }
    let start = Instant::now();
    let out = command.output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code(), said, start.elapsed())
}

/// `remat probe`, the manifests' exec probe (issue 26, item 6), against a real server: 0
/// on `/healthz` and `/readyz` at `REMAT_ADDR` or `--addr`; 1 on another status, a closed
/// port, or a server that accepts and never answers (within its one second); 2 for a bad
/// path.
#[test]
fn the_probe_passes_on_a_live_server_and_fails_otherwise_within_its_timeout() {
    let (server, _) = Process::start(env!("CARGO_BIN_EXE_remat"), &[], None);
    let addr = server.addr.to_string();
    for args in [&["/healthz"][..], &["/readyz"], &[]] {
        let (code, said, _) = probe(args, Some(server.addr));
        assert_eq!(code, Some(0), "{args:?}: {said}");
    }
    let (code, said, _) = probe(
        &["/readyz", "--addr", addr.as_str(), "--timeout", "1"],
        None,
    );
    assert_eq!(code, Some(0), "{said}");
    let (code, said, _) = probe(&["/nope", "--addr", addr.as_str()], None);
    assert_eq!(
        (code, said.contains("status 404")),
        (Some(1), true),
        "{said}"
    );

    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (code, said, _) = probe(&[], Some(closed));
    assert_eq!(code, Some(1), "{said}");

    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (code, said, took) = probe(&["--timeout", "1"], Some(silent.local_addr().unwrap()));
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("no answer within 1 s"), "{said}");
    assert!(took < Duration::from_secs(3), "{took:?}");

    let (code, said, _) = probe(&["healthz"], Some(server.addr));
    assert_eq!(code, Some(2), "{said}");
    drop(server);
}
