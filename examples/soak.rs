//! Soak test of `remat serve` (issue 15): a server process on loopback and `--clients`
//! client threads for `--seconds`, mixing small solves, large requests that must be
//! refused (a 1,500-node MILP: 413), asynchronous jobs deleted while they run, clients
//! that disconnect mid-solve (both on a 1,200-node `chen-greedy` solve with a seed of its
//! own, so that the cache never answers them), and inspects. Every answer must be 200, 202, 204, a 4xx or
//! 503; the server must be alive at the end and, after its periodic trim, hold less than
//! `--max-rss-mb` (default 300) resident. Prints the counts and the server's RSS before
//! and after (from /proc/PID/status). Exits 1 when a check fails.
//!
//! ```text
//! cargo build --release && cargo run --release --example soak -- --clients 50 --seconds 300
//! ```
//!
//! The server is `target/<profile>/remat` beside this example (or `--bin PATH`), started
//! with `--workers 2 --queue 32` and a 4 GiB address-space limit when `prlimit` exists.

use remat::graph::generate::random_layered;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Args {
    clients: usize,
    seconds: u64,
    max_rss_mb: u64,
    bin: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        clients: 50,
        seconds: 300,
        max_rss_mb: 300,
        bin: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        let number = || {
            value.parse().unwrap_or_else(|_| {
                eprintln!("{flag} needs a number, got '{value}'");
                std::process::exit(2)
            })
        };
        match flag.as_str() {
            "--clients" => a.clients = number() as usize,
            "--seconds" => a.seconds = number(),
            "--max-rss-mb" => a.max_rss_mb = number(),
            "--bin" => a.bin = Some(value.clone()),
            _ => {
                eprintln!("usage: soak [--clients N] [--seconds S] [--max-rss-mb M] [--bin PATH]");
                std::process::exit(2)
            }
        }
    }
    a
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

fn rss_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
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

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let args = args();
    let bin = args.bin.clone().unwrap_or_else(|| {
        let exe = std::env::current_exe().expect("the example's path");
        let dir = exe
            .parent()
            .and_then(|d| d.parent())
            .expect("target/<profile>");
        dir.join("remat").display().to_string()
    });
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let serve = [
        "serve",
        "--addr",
        &addr.to_string(),
        "--workers",
        "2",
        "--queue",
        "32",
    ];
    let mut command = if Command::new("prlimit").arg("--version").output().is_ok() {
        let mut c = Command::new("prlimit");
        c.arg(format!("--as={}", 4u64 << 30)).arg(&bin).args(serve);
        c
    } else {
        let mut c = Command::new(&bin);
        c.args(serve);
        c
    };
    let child = command
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
    let server = Server(child);
    let pid = server.0.id();
    let began = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            began.elapsed() < Duration::from_secs(20),
            "the server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let bodies = Arc::new(bodies());
    // Warm-up: one of each small solve, then the baseline RSS.
    for b in &bodies.small {
        exchange(addr, "POST", "/v1/solve", b);
    }
    std::thread::sleep(Duration::from_secs(6));
    let before = rss_kb(pid, "VmRSS:");
    println!(
        "soak: {} clients for {} s against {bin} (pid {pid}); server RSS before {} MB",
        args.clients,
        args.seconds,
        before / 1024
    );
    let counts: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let bad = Arc::new(AtomicBool::new(false));
    let end = Instant::now() + Duration::from_secs(args.seconds);
    let threads: Vec<_> = (0..args.clients)
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
    let mut server = server;
    let alive = server.0.try_wait().ok().flatten().is_none();
    let healthz = exchange(addr, "GET", "/healthz", b"").map(|r| r.0);
    let after = rss_kb(pid, "VmRSS:");
    let peak = rss_kb(pid, "VmHWM:");
    println!("counts (request kind, status):");
    for (k, v) in counts.lock().unwrap().iter() {
        println!("  {k:<16} {v}");
    }
    println!(
        "server alive: {alive}, /healthz {healthz:?}; RSS before {} MB, after {} MB (limit {} MB), peak {} MB",
        before / 1024,
        after / 1024,
        args.max_rss_mb,
        peak / 1024
    );
    let failed = bad.load(Ordering::Relaxed)
        || !alive
        || healthz != Some(200)
        || after > args.max_rss_mb * 1024;
    if failed {
        println!("soak: FAILED");
        std::process::exit(1);
    }
    println!("soak: passed");
}
