//! The deployment files in `docker/` parse, and agree with each other and with the binary:
//! the same settings in the Dockerfiles, compose and Kubernetes, every setting one that
//! `remat serve` reads, and the probes on the documented endpoints.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

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
    assert_eq!(remat["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(remat["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(remat["securityContext"]["runAsUser"], 10001);
    let grace: f64 = runtime["REMAT_GRACE"].parse().unwrap();
    assert!(pod["terminationGracePeriodSeconds"].as_f64().unwrap() > grace);
    assert_eq!(
        k8s_env(&pod["containers"][0])["REMAT_URL"],
        "http://127.0.0.1:8080"
    );

    let batch = yaml("k8s-batch-job.yaml");
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

    // One memory story (docker/README.md): 4 GiB everywhere, the per-solve share spelled
    // out, two solves at a time.
    assert_eq!(runtime["REMAT_SOLVE_MEMORY"], "75%");
    assert_eq!(sidecar["mem_limit"], "4g");
    assert_eq!(remat["resources"]["limits"]["memory"], "4Gi");
    let batch_container = &batch["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(batch_container["resources"]["limits"]["memory"], "4Gi");
    assert_eq!(k8s_env(batch_container)["REMAT_SOLVE_MEMORY"], "75%");
    assert!(args.contains("--jobs 2"), "{args}");
    assert_eq!(runtime["REMAT_WORKERS"], "2");
}
