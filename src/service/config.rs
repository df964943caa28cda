//! The server's settings: each is a `remat serve` flag and an environment variable.

use crate::budget::Budget;
use crate::front::options::parse_seconds;
use crate::front::{solve_memory_limit, SolveMemory};
use std::net::SocketAddr;
use std::time::Duration;

/// How log lines are written (to stderr).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Debug, clap::Args)]
pub struct Config {
    /// Address to listen on. Inside a pod, loopback is enough for a sidecar.
    #[arg(long, env = "REMAT_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Largest request body: bytes or a size (64MiB). Larger bodies get 413. A body is held
    /// twice while it is collected; it is then read field by field and its graph node by
    /// node within `--max-nodes` and `--max-edges`, never as a whole JSON tree, so that what
    /// a request costs is the body plus the graph it describes (docker/README.md, Memory).
    #[arg(long, env = "REMAT_MAX_BODY", default_value = "64MiB", value_parser = parse_size)]
    pub max_body: usize,
    /// Solves that run at once, from 1 to 1024 (default: the number of CPUs, at most 1024).
    #[arg(long, env = "REMAT_WORKERS", default_value_t = default_workers(), value_parser = parse_workers)]
    pub workers: usize,
    /// Requests whose bodies are read at once (parsed, their graphs built), beside the
    /// solves; more wait their turn. Bounds the memory of graphs being read (see
    /// `--max-body`).
    #[arg(long, env = "REMAT_READERS", default_value_t = DEFAULT_READERS, value_parser = parse_readers)]
    pub readers: usize,
    /// Solves that may wait for a worker, from 0 to 65536; beyond that, 503 with Retry-After.
    #[arg(long, env = "REMAT_QUEUE", default_value_t = 32, value_parser = parse_queue)]
    pub queue: usize,
    /// Time limit of a solve in seconds: the default and the cap of `time_limit_s`.
    #[arg(long, env = "REMAT_TIME_LIMIT", default_value_t = 60.0, value_parser = parse_seconds)]
    pub time_limit: f64,
    /// Threads one solve may use (solvers that use threads); unset lets each solver choose.
    #[arg(long, env = "REMAT_SOLVER_THREADS", value_parser = clap::value_parser!(u32).range(1..=crate::front::options::MAX_THREADS as i64))]
    pub solver_threads: Option<u32>,
    /// Results kept in the cache (0 disables it).
    #[arg(long, env = "REMAT_CACHE", default_value_t = 256)]
    pub cache: usize,
    /// Bytes of results the cache keeps, counted as their JSON plus what their events hold
    /// in memory (a 999-node result is about 4 MB): bytes or a size.
    #[arg(long, env = "REMAT_CACHE_BYTES", default_value = "64MiB", value_parser = parse_size)]
    pub cache_bytes: usize,
    /// Jobs kept at once (finished ones are dropped oldest first to make room).
    #[arg(long, env = "REMAT_MAX_JOBS", default_value_t = 1024, value_parser = parse_positive)]
    pub max_jobs: usize,
    /// Bytes of finished jobs' results kept, counted as their events' JSON plus what the
    /// events hold in memory (a 999-node result is about 4 MB): when a job finishes, the
    /// oldest other finished jobs are dropped until the rest fit. Bytes or a size.
    #[arg(long, env = "REMAT_JOB_BYTES", default_value = "256MiB", value_parser = parse_size)]
    pub job_bytes: usize,
    /// Seconds a finished job stays readable.
    #[arg(long, env = "REMAT_JOB_TTL", default_value_t = 3600.0, value_parser = parse_seconds)]
    pub job_ttl: f64,
    /// Budgets allowed in one sweep request.
    #[arg(long, env = "REMAT_MAX_SWEEP", default_value_t = 64, value_parser = parse_positive)]
    pub max_sweep: usize,
    /// Seconds in-flight solves may take to finish after SIGTERM before they are cancelled.
    #[arg(long, env = "REMAT_GRACE", default_value_t = 20.0, value_parser = parse_seconds)]
    pub grace: f64,
    /// Memory one solve may use for its model: bytes or a size (2GiB) per solve, or a share
    /// of the container's memory (50%) split among the workers. Default: 75% of the
    /// container's memory limit (cgroup; else the physical memory) split among the workers.
    /// A model estimated larger is refused with 413 before it is allocated.
    #[arg(long, env = "REMAT_SOLVE_MEMORY", value_parser = parse_solve_memory)]
    pub solve_memory: Option<SolveMemory>,
    /// Largest graph accepted, in nodes; larger graphs get 413 while they are read, before
    /// they are built. A graph costs about 0.65 KB a node with one edge while it is built
    /// (640 MB at the default 1,000,000): one such graph fits beside two solves in 4 GiB.
    #[arg(long, env = "REMAT_MAX_NODES", default_value_t = DEFAULT_MAX_NODES, value_parser = parse_positive)]
    pub max_nodes: usize,
    /// Largest graph accepted, in edges (inputs summed over the nodes as listed, counted
    /// while the body is read: an input named twice counts twice).
    #[arg(long, env = "REMAT_MAX_EDGES", default_value_t = DEFAULT_MAX_EDGES, value_parser = parse_positive)]
    pub max_edges: usize,
    /// Connections open at once (never more than the process's file limit leaves room
    /// for). At the cap a new connection closes the one idle the longest (no request in flight)
    /// and takes its place; with none idle, the one silent the longest (250 ms at least) whose
    /// request's body is being read (503); when every one is busy otherwise, it waits
    /// until one closes.
    #[arg(long, env = "REMAT_MAX_CONNECTIONS", default_value_t = 256, value_parser = parse_positive)]
    pub max_connections: usize,
    /// Seconds a client may take to send a request's head (the wait for a kept-alive
    /// connection's next request included: the connection is then closed) and, once its
    /// turn to be read comes (`--readers`), its body (408).
    #[arg(long, env = "REMAT_CLIENT_TIMEOUT", default_value_t = 30.0, value_parser = parse_seconds)]
    pub client_timeout: f64,
    /// Log format.
    #[arg(long, env = "REMAT_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Host names a request's `Host` may name besides the address listened on (and
    /// `localhost` on a loopback or unspecified address), comma-separated; `*` any. Other
    /// hosts get 403 (a web page rebinding its name to this address).
    #[arg(
        long = "allowed-host",
        env = "REMAT_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
    /// Origins of web pages that may call the service (`https://app.example:8443`),
    /// comma-separated, `*` any; they get CORS headers. Requests from any other origin
    /// than the server's own get 403.
    #[arg(
        long = "allowed-origin",
        env = "REMAT_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            max_body: 64 << 20,
            workers: default_workers(),
            readers: DEFAULT_READERS,
            queue: 32,
            time_limit: 60.0,
            solver_threads: None,
            cache: 256,
            cache_bytes: 64 << 20,
            max_jobs: 1024,
            job_bytes: 256 << 20,
            job_ttl: 3600.0,
            max_sweep: 64,
            grace: 20.0,
            solve_memory: None,
            max_nodes: DEFAULT_MAX_NODES,
            max_edges: DEFAULT_MAX_EDGES,
            max_connections: 256,
            client_timeout: 30.0,
            log_format: LogFormat::Text,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
        }
    }
}

impl Config {
    pub fn time_limit(&self) -> Duration {
        Duration::from_secs_f64(self.time_limit)
    }
    pub fn grace(&self) -> Duration {
        Duration::from_secs_f64(self.grace)
    }
    pub fn job_ttl(&self) -> Duration {
        Duration::from_secs_f64(self.job_ttl)
    }
    pub fn client_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.client_timeout)
    }
    /// The bytes one solve may use: `--solve-memory` resolved against the container's
    /// memory and the workers.
    pub fn solve_memory_limit(&self) -> u64 {
        solve_memory_limit(self.solve_memory, self.workers)
    }
}

/// Default of `--readers`.
pub const DEFAULT_READERS: usize = 2;
/// Default of `--max-nodes`.
pub const DEFAULT_MAX_NODES: usize = 1_000_000;
/// Default of `--max-edges`.
pub const DEFAULT_MAX_EDGES: usize = 4_000_000;

/// A count within `range`, or the message that says what is expected (`expected`).
fn parse_count(
    s: &str,
    range: impl std::ops::RangeBounds<usize>,
    expected: &str,
) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(format!("expected {expected}, got '{s}'")),
    }
}

fn parse_readers(s: &str) -> Result<usize, String> {
    parse_count(s, 1..=1024, "a number from 1 to 1024")
}

/// The most solves that run at once: each holds a thread and a share of `--solve-memory`
/// (beyond some thousands of workers that share is too small for any model, and tokio's
/// semaphore refuses more than 2^61 permits outright).
const MAX_WORKERS: usize = 1024;

fn parse_workers(s: &str) -> Result<usize, String> {
    parse_count(s, 1..=MAX_WORKERS, "a number from 1 to 1024")
}

/// The most solves that may wait for a worker (each holds its graph while it waits).
const MAX_QUEUE: usize = 1 << 16;

fn parse_queue(s: &str) -> Result<usize, String> {
    parse_count(s, 0..=MAX_QUEUE, "a number from 0 to 65536")
}

/// A count that must be at least 1 (0 workers, jobs, sweep budgets, nodes or edges would
/// refuse every request, or be taken as 1).
fn parse_positive(s: &str) -> Result<usize, String> {
    parse_count(s, 1.., "a whole number of at least 1")
}

fn parse_solve_memory(s: &str) -> Result<SolveMemory, String> {
    s.parse()
}

fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_WORKERS))
}

fn parse_size(s: &str) -> Result<usize, String> {
    match s.parse::<Budget>() {
        Ok(Budget::Bytes(b)) if b > 0 => {
            usize::try_from(b).map_err(|_| format!("{s} is too large"))
        }
        _ => Err(format!(
            "expected a positive size of at most 2^53 bytes, such as 65536 or 64MiB, got '{s}'"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        config: Config,
    }

    fn parse(args: &[&str]) -> Result<Config, String> {
        Serve::try_parse_from([&["serve"], args].concat())
            .map(|s| s.config)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn counts_that_would_overflow_or_starve_are_refused_naming_the_flag() {
        for (args, says) in [
            // tokio's semaphore panics above 2^61 - 1 permits; 2^32 workers left each solve
            // too little memory for a two-node graph (413)
            (["--workers", "2305843009213693952"], "--workers"),
            (["--workers", "1025"], "a number from 1 to 1024"),
            (["--workers", "0"], "--workers"),
            // workers + queue wrapped around: every solve but the first answered 503
            (["--queue", "18446744073709551615"], "--queue"),
            (["--queue", "65537"], "a number from 0 to 65536"),
        ] {
            let said = parse(&args).err().unwrap_or_default();
            assert!(said.contains(says), "{args:?}: {said}");
        }
        let config = parse(&["--workers", "1024", "--queue", "65536"]).unwrap();
        assert_eq!((config.workers, config.queue), (1024, 65536));
        assert_eq!(parse(&["--queue", "0"]).unwrap().queue, 0);
        assert!((1..=MAX_WORKERS).contains(&parse(&[]).unwrap().workers));
    }
}
