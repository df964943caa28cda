//! Load test, run by hand (it takes about 35 s):
//!
//! ```text
//! cargo build --release
//! REMAT_LOAD_BIN=target/release/remat cargo test --test it load:: -- --ignored --nocapture
//! ```
//!
//! Starts `remat serve` (the binary in `REMAT_LOAD_BIN`, else this build's) on a loopback
//! port and runs `REMAT_LOAD_CLIENTS` (50) clients for `REMAT_LOAD_SECS` (30) seconds, each
//! sending solve requests one after the other: a chain (Checkmate's linear graph, 20
//! layers) or a 12-node DAG, at a random budget between 60% and 100% of the checkpoint-all
//! peak, with a new seed four times in five (so most requests miss the cache). Two workers
//! and a queue of 16 are fewer than 50 clients: overload answers 503. It checks that every answer is
//! 200 or 503 (overload) and that the server's resident memory stays bounded, and prints
//! throughput, latency percentiles and memory.

use crate::server;

use rand::{Rng, SeedableRng};
use serde_json::json;
use server::{fixture, request, Process};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident memory of a process in KiB (Linux).
fn rss_kib(pid: u32) -> u64 {
    server::status_kib(pid, "VmRSS:")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[test]
#[ignore = "a 30 s load test; run by hand"]
fn fifty_clients_for_thirty_seconds() {
    let clients: usize = env_or("REMAT_LOAD_CLIENTS", 50);
    let secs: u64 = env_or("REMAT_LOAD_SECS", 30);
    let bin = std::env::var("REMAT_LOAD_BIN").unwrap_or(env!("CARGO_BIN_EXE_remat").into());
    let (mut server, _) = Process::start(&bin, &["--workers", "2", "--queue", "16"], None);
    let (addr, pid) = (server.addr, server.pid());
    let rss_start = rss_kib(pid);

    let chain = serde_json::to_value(remat::graph::generate::linear(20).to_spec()).unwrap();
    let dag = fixture("dag12.json");
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let statuses = Arc::new(Mutex::new(BTreeMap::<u16, u64>::new()));
    let rss_samples = Arc::new(Mutex::new(Vec::new()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(secs);
    runtime.block_on(async {
        let sampler = {
            let rss = rss_samples.clone();
            tokio::spawn(async move {
                while Instant::now() < end {
                    rss.lock().unwrap().push(rss_kib(pid));
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            })
        };
        let mut tasks = Vec::new();
        for c in 0..clients {
            let (chain, dag) = (chain.clone(), dag.clone());
            let (latencies, statuses) = (latencies.clone(), statuses.clone());
            tasks.push(tokio::spawn(async move {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(c as u64);
                while Instant::now() < end {
                    let graph = if rng.random_bool(0.5) { &chain } else { &dag };
                    let pct = rng.random_range(60..=100);
                    // One request in five repeats a seed (and may hit the cache); the others are new.
                    let seed: u64 = if rng.random_bool(0.2) {
                        0
                    } else {
                        rng.random()
                    };
                    let body = json!({"graph": graph, "budget": format!("{pct}%"), "seed": seed})
                        .to_string();
                    let t = Instant::now();
                    let reply = request(addr, "POST", "/v1/solve", Some(body.as_bytes())).await;
                    let elapsed = t.elapsed();
                    *statuses.lock().unwrap().entry(reply.status).or_default() += 1;
                    if reply.status == 200 {
                        latencies.lock().unwrap().push(elapsed);
                    } else if reply.status == 503 {
                        let wait: u64 = reply.header("retry-after").unwrap().parse().unwrap();
                        tokio::time::sleep(Duration::from_millis(100 * wait)).await;
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        sampler.await.unwrap();
    });
    let metrics = runtime.block_on(request(addr, "GET", "/metrics", None));
    let metrics = String::from_utf8(metrics.body).unwrap();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    assert_eq!(server.child.wait().unwrap().code(), Some(0));

    let statuses = statuses.lock().unwrap().clone();
    let mut lat = latencies.lock().unwrap().clone();
    lat.sort();
    let rss = rss_samples.lock().unwrap().clone();
    let total: u64 = statuses.values().sum();
    println!("clients {clients}, {secs} s, server {bin}");
    println!("responses by status: {statuses:?}");
    println!(
        "throughput: {:.0} responses/s, {:.0} solves answered (200)/s",
        total as f64 / secs as f64,
        lat.len() as f64 / secs as f64
    );
    println!(
        "latency of 200s: p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
        percentile(&lat, 0.5),
        percentile(&lat, 0.9),
        percentile(&lat, 0.99),
        lat[lat.len() - 1]
    );
    let peak = rss.iter().copied().max().unwrap_or(0);
    println!(
        "server RSS: {rss_start} KiB at start, peak {peak} KiB, last {} KiB",
        rss.last().copied().unwrap_or(0)
    );
    for line in metrics.lines().filter(|l| {
        l.starts_with("remat_cache_hits_total")
            || l.starts_with("remat_cache_misses_total")
            || l.starts_with("remat_rejected_total")
    }) {
        println!("{line}");
    }
    assert!(
        statuses.keys().all(|&s| s == 200 || s == 503),
        "only 200 or 503 under overload: {statuses:?}"
    );
    assert!(statuses.get(&200).copied().unwrap_or(0) > 0);
    assert!(peak < 512 * 1024, "memory stays bounded (peak {peak} KiB)");
    // No growth over the second half of the run beyond allocator noise.
    let half = &rss[rss.len() / 2..];
    let (first, last) = (half[0], half[half.len() - 1]);
    assert!(
        last <= first + first / 2 + 16 * 1024,
        "RSS kept growing: {first} -> {last} KiB"
    );
}
