//! A real `remat serve` on a free loopback port, and a minimal HTTP/1.1 client over a
//! plain TCP stream (so that a test can also drop the connection mid-request).
#![allow(dead_code)]

use remat::service::{serve, Config};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub struct Server {
    pub addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<std::io::Result<()>>>,
}

impl Server {
    pub async fn start(config: Config) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(serve(config, listener, async move {
            let _ = rx.await;
        }));
        Server {
            addr,
            shutdown: Some(tx),
            handle: Some(handle),
        }
    }

    /// Sends the shutdown signal (as SIGTERM would) without waiting.
    pub fn signal_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Signals shutdown and waits for `serve` to return.
    pub async fn stop(mut self) -> std::io::Result<()> {
        self.signal_shutdown();
        self.handle.take().unwrap().await.unwrap()
    }

    pub async fn get(&self, path: &str) -> Reply {
        request(self.addr, "GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        request(self.addr, "POST", path, Some(body.to_string().as_bytes())).await
    }

    /// A gauge or counter from `/metrics` (the first sample whose line starts with `name`).
    pub async fn metric(&self, name: &str) -> f64 {
        let text = String::from_utf8(self.get("/metrics").await.body).unwrap();
        text.lines()
            .find(|l| l.starts_with(name) && !l.starts_with('#'))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }

    /// Waits until `/metrics` shows `name` equal to `value`; returns how long it took.
    pub async fn wait_metric(&self, name: &str, value: f64, limit: Duration) -> Duration {
        let start = Instant::now();
        while self.metric(name).await != value {
            assert!(
                start.elapsed() < limit,
                "{name} did not reach {value} within {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        start.elapsed()
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: body is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
    /// Asserts an RFC 9457 problem document with this status and type slug.
    pub fn assert_problem(&self, status: u16, slug: &str) -> Value {
        assert_eq!(
            self.status,
            status,
            "{}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        let p = self.json();
        assert_eq!(p["status"], status);
        assert_eq!(p["type"], format!("urn:remat:problem:{slug}"));
        assert!(p["title"].is_string() && p["detail"].is_string(), "{p}");
        p
    }
}

/// Writes a request on `stream` (HTTP/1.1, `Connection: close`).
pub async fn send(stream: &mut TcpStream, method: &str, path: &str, body: Option<&[u8]>) {
    let headers = [("Host", "localhost"), ("Content-Type", "application/json")];
    send_with(stream, method, path, &headers, body.unwrap_or_default()).await;
}

/// Writes a request with exactly `headers` (besides `Connection: close` and
/// `Content-Length`) on `stream`.
pub async fn send_with(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) {
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
}

/// One request with exactly `headers` ([`send_with`]), and its answer.
pub async fn request_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    send_with(&mut stream, method, path, headers, body).await;
    receive(&mut stream).await
}

/// Reads a whole response from `stream` (until the server closes it).
pub async fn receive(stream: &mut TcpStream) -> Reply {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    parse(&raw)
}

pub async fn request(addr: SocketAddr, method: &str, path: &str, body: Option<&[u8]>) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    send(&mut stream, method, path, body).await;
    receive(&mut stream).await
}

fn parse(raw: &[u8]) -> Reply {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&data[..line_end])
                .split(';')
                .next()
                .unwrap()
                .trim(),
            16,
        )
        .unwrap();
        data = &data[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// Reads a fixture from `tests/fixtures/`.
pub fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// A random layered graph of `nodes` nodes: a large body.
pub fn long_graph(nodes: usize) -> Value {
    serde_json::to_value(remat::graph::generate::random_layered(nodes, 3).to_spec()).unwrap()
}

/// The long solve of the cancel, queue and shutdown tests: FastSA on a graph of `nodes`
/// nodes runs until its time limit of `seconds` (it polls its cancel flag every iteration),
/// however fast the machine. A solver that finishes on its own (chen-greedy takes 0.4 s on
/// 6,000 nodes) could answer before the test disconnects or queues.
pub fn long_solve(nodes: usize, seconds: u32) -> Value {
    json!({
        "graph": long_graph(nodes),
        "budget": "70%",
        "solver": "fastsa",
        "time_limit_s": seconds,
    })
}

pub fn config(workers: usize, queue: usize) -> Config {
    Config {
        workers,
        queue,
        ..Config::default()
    }
}

/// A `remat serve` process (this build's binary, or `binary`) on a free loopback port,
/// optionally under an address-space limit (`prlimit --as`, when `prlimit` exists);
/// killed when dropped.
pub struct Process {
    pub child: std::process::Child,
    pub addr: SocketAddr,
}

impl Process {
    /// Starts `binary serve --addr ADDR args...` and waits until it accepts connections.
    /// Returns the process and whether the address-space limit could be applied.
    pub fn start(binary: &str, args: &[&str], address_space: Option<u64>) -> (Process, bool) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let limited = address_space.filter(|_| {
            std::process::Command::new("prlimit")
                .arg("--version")
                .output()
                .is_ok()
        });
        let mut command = match limited {
            Some(bytes) => {
                let mut c = std::process::Command::new("prlimit");
                c.arg(format!("--as={bytes}")).arg(binary);
                c
            }
            None => std::process::Command::new(binary),
        };
        let child = command
            .args(["serve", "--addr", &addr.to_string()])
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let process = Process { child, addr };
        let start = Instant::now();
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        (process, limited.is_some())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// A figure of /proc/PID/status in KiB (`VmRSS:`, `VmHWM:`), 0 when unreadable.
    pub fn status_kib(&self, field: &str) -> u64 {
        status_kib(self.pid(), field)
    }
}

/// A figure of /proc/`pid`/status in KiB (`VmRSS:`, `VmHWM:`), 0 when unreadable (Linux).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
