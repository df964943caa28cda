//! Soak test of `remat serve` (issue 15), run by hand or in a scheduled job: a server
//! process on loopback and `REMAT_SOAK_CLIENTS` (50) client threads for `REMAT_SOAK_SECS`
//! (300) seconds, mixing small solves, large requests that must be
//! refused (a 1,500-node MILP: 413), asynchronous jobs deleted while they run, clients
//! that disconnect mid-solve (both on a 1,200-node `chen-greedy` solve with a seed of its
//! own, so that the cache never answers them), and inspects. Every answer must be 200, 202, 204, a 4xx or
//! 503; the server must be alive at the end and, after its periodic trim, hold less than
//! `REMAT_SOAK_MAX_RSS_MB` (300) resident. Prints the counts and the server's RSS before
//! and after (from /proc/PID/status).
//!
//! ```text
//! cargo build --release
//! REMAT_SOAK_BIN=target/release/remat cargo test --release --test it soak:: -- --ignored --nocapture
//! ```
//!
//! The server is `REMAT_SOAK_BIN`, else this build's binary, started with `--workers 2
//! --queue 32` and a 4 GiB address-space limit when `prlimit` exists.

use crate::server;

use remat::graph::generate::random_layered;
use serde_json::{json, Value};
use server::Process;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One HTTP/1.1 exchange (`Connection: close`); the status, or `None` when the
/// connection failed.
fn exchange(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Option<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(120))).ok()?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).ok()?;
    s.write_all(body).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    Some((status, raw[split..].to_vec()))
}

/// Sends a request and closes the connection after `after` without reading the answer.
fn disconnect(addr: SocketAddr, body: &[u8], after: Duration) {
    if let Ok(mut s) = TcpStream::connect(addr) {
        let head = format!(
            "POST /v1/solve HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        );
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(body);
        std::thread::sleep(after);
    }
}

struct Bodies {
    small: Vec<Vec<u8>>,
    refused: Vec<u8>,
    /// A graph on which `chen-greedy` runs for seconds (as JSON text).
    long: String,
    inspect: Vec<u8>,
}

impl Bodies {
    /// A long solve with its own seed, so that the cache never answers it.
    fn long(&self, seed: usize) -> Vec<u8> {
        format!(
            r#"{{"graph": {}, "budget": "60%", "solver": "chen-greedy", "time_limit_s": 10, "seed": {seed}}}"#,
            self.long
        )
        .into_bytes()
    }
}

fn bodies() -> Bodies {
    let spec =
        |n: usize, seed: u64| serde_json::to_value(random_layered(n, seed).to_spec()).unwrap();
    let solve = |graph: Value, budget: &str, solver: &str| {
        json!({"graph": graph, "budget": budget, "solver": solver, "time_limit_s": 10})
            .to_string()
            .into_bytes()
    };
    let mut small = Vec::new();
    for (i, solver) in [
        "auto",
        "chen-greedy",
        "dtr",
        "checkpoint-all",
        "milp",
        "lp-rounding",
    ]
    .iter()
    .enumerate()
    {
        for budget in ["90%", "75%"] {
            small.push(solve(spec(20 + 8 * i, i as u64), budget, solver));
        }
    }
    Bodies {
        small,
        refused: solve(spec(1500, 1), "70%", "milp"),
        long: spec(1200, 3).to_string(),
        inspect: json!({"graph": spec(2000, 2)}).to_string().into_bytes(),
    }
}

#[test]
#[ignore = "a 5-minute soak test; run by hand"]
fn clients_mixing_solves_refusals_cancels_and_disconnects() {
    let clients: usize = env_or("REMAT_SOAK_CLIENTS", 50);
    let seconds: u64 = env_or("REMAT_SOAK_SECS", 300);
    let max_rss_mb: u64 = env_or("REMAT_SOAK_MAX_RSS_MB", 300);
    let bin: String = env_or("REMAT_SOAK_BIN", env!("CARGO_BIN_EXE_remat").to_string());
    let args = ["--workers", "2", "--queue", "32"];
    let (mut server, _) = Process::start(&bin, &args, Some(4 << 30));
    let (addr, pid) = (server.addr, server.pid());
    let bodies = Arc::new(bodies());
    // Warm-up: one of each small solve, then the baseline RSS.
    for b in &bodies.small {
        exchange(addr, "POST", "/v1/solve", b);
    }
    std::thread::sleep(Duration::from_secs(6));
    let before = server.status_kib("VmRSS:");
    println!(
        "soak: {clients} clients for {seconds} s against {bin} (pid {pid}); server RSS before {} MB",
        before / 1024
    );
    let counts: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let bad = Arc::new(AtomicBool::new(false));
    let end = Instant::now() + Duration::from_secs(seconds);
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let (bodies, counts, bad) = (bodies.clone(), counts.clone(), bad.clone());
            std::thread::spawn(move || {
                let mut k = c;
                let count = |what: &str, status: Option<u16>| {
                    let ok = status.is_some_and(|s| {
                        matches!(s, 200 | 202 | 204 | 503) || (400..500).contains(&s)
                    });
                    let key = format!(
                        "{what} {}",
                        status.map_or("failed".into(), |s| s.to_string())
                    );
                    *counts.lock().unwrap().entry(key.clone()).or_default() += 1;
                    if !ok {
                        eprintln!("unexpected: {key}");
                        bad.store(true, Ordering::Relaxed);
                    }
                };
                while Instant::now() < end {
                    k = k.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    match (k >> 8) % 20 {
                        0..=10 => {
                            let b = &bodies.small[(k >> 16) % bodies.small.len()];
                            count("solve", exchange(addr, "POST", "/v1/solve", b).map(|r| r.0));
                        }
                        11..=13 => {
                            let r = exchange(addr, "POST", "/v1/solve", &bodies.refused);
                            count("large", r.map(|r| r.0));
                        }
                        14..=15 => {
                            let created = exchange(addr, "POST", "/v1/jobs", &bodies.long(k));
                            count("job", created.as_ref().map(|r| r.0));
                            let id = created
                                .filter(|r| r.0 == 202)
                                .and_then(|r| serde_json::from_slice::<Value>(&r.1).ok())
                                .and_then(|v| v["id"].as_str().map(String::from));
                            if let Some(id) = id {
                                std::thread::sleep(Duration::from_millis(50));
                                let path = format!("/v1/jobs/{id}");
                                count("cancel", exchange(addr, "DELETE", &path, b"").map(|r| r.0));
                            }
                        }
                        16..=17 => {
                            disconnect(addr, &bodies.long(k), Duration::from_millis(150));
                            *counts
                                .lock()
                                .unwrap()
                                .entry("disconnect sent".into())
                                .or_default() += 1;
                        }
                        _ => {
                            let r = exchange(addr, "POST", "/v1/inspect", &bodies.inspect);
                            count("inspect", r.map(|r| r.0));
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    // Let disconnected solves end (cancelled) and the periodic trim run.
    std::thread::sleep(Duration::from_secs(8));
    let alive = server.alive();
    let healthz = exchange(addr, "GET", "/healthz", b"").map(|r| r.0);
    let after = server.status_kib("VmRSS:");
    let peak = server.status_kib("VmHWM:");
    println!("counts (request kind, status):");
    for (k, v) in counts.lock().unwrap().iter() {
        println!("  {k:<16} {v}");
    }
    println!(
        "server alive: {alive}, /healthz {healthz:?}; RSS before {} MB, after {} MB (limit {} MB), peak {} MB",
        before / 1024,
        after / 1024,
        max_rss_mb,
        peak / 1024
    );
    assert!(!bad.load(Ordering::Relaxed), "unexpected statuses (above)");
    assert!(alive && healthz == Some(200), "the server is down");
    assert!(
        after <= max_rss_mb * 1024,
        "the server holds {after} KiB after the run"
    );
}
