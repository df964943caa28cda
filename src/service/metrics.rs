//! Counters and a latency histogram, rendered in the Prometheus text exposition format
//! (version 0.0.4) at `GET /metrics`. Gauges that describe the present (queue depth,
//! busy workers, jobs) are read from their owners at scrape time and passed to
//! [`Metrics::render`], so they cannot drift.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds (seconds) of the latency histogram's buckets.
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Default)]
struct Histogram {
    /// Observations at or below each bucket bound (not cumulative; summed on render).
    counts: Vec<u64>,
    count: u64,
    sum: f64,
}

#[derive(Default)]
struct Inner {
    /// (method, route, status) -> requests.
    requests: BTreeMap<(String, String, u16), u64>,
    /// route -> latency.
    latency: BTreeMap<String, Histogram>,
    /// (solver, status) -> solves.
    solves: BTreeMap<(String, String), u64>,
    cache_hits: u64,
    cache_misses: u64,
    rejected: u64,
}

/// The service's counters.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

/// Present-state gauges, read at scrape time.
pub struct Gauges {
    pub queue_depth: usize,
    pub workers_busy: usize,
    pub workers: usize,
    pub jobs: usize,
    pub cache_entries: usize,
}

impl Metrics {
    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        f(&mut self.inner.lock().expect("metrics lock"))
    }

    pub fn request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        self.with(|m| {
            *m.requests
                .entry((method.to_string(), route.to_string(), status))
                .or_default() += 1;
            let h = m.latency.entry(route.to_string()).or_default();
            if h.counts.is_empty() {
                h.counts = vec![0; BUCKETS.len()];
            }
            let s = elapsed.as_secs_f64();
            if let Some(i) = BUCKETS.iter().position(|&b| s <= b) {
                h.counts[i] += 1;
            }
            h.count += 1;
            h.sum += s;
        });
    }

    pub fn solve(&self, solver: &str, status: &str) {
        self.with(|m| *m.solves.entry((solver.into(), status.into())).or_default() += 1);
    }

    pub fn cache(&self, hit: bool) {
        self.with(|m| {
            if hit {
                m.cache_hits += 1
            } else {
                m.cache_misses += 1
            }
        });
    }

    /// A request refused because the queue was full.
    pub fn rejected(&self) {
        self.with(|m| m.rejected += 1);
    }

    pub fn render(&self, g: &Gauges) -> String {
        let mut o = String::new();
        self.with(|m| {
            m.render_requests(&mut o);
            m.render_latency(&mut o);
            m.render_solves(&mut o);
            m.render_counters(&mut o);
        });
        g.render(&mut o);
        o
    }
}

impl Inner {
    /// `remat_http_requests_total`, one line per (method, route, status).
    fn render_requests(&self, o: &mut String) {
        header(
            o,
            "remat_http_requests_total",
            "counter",
            "HTTP requests by method, route and status.",
        );
        for ((method, route, status), n) in &self.requests {
            let _ = writeln!(
                o,
                "remat_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {n}",
                escape(route)
            );
        }
    }

    /// `remat_http_request_duration_seconds`: cumulative buckets, sum and count per route.
    fn render_latency(&self, o: &mut String) {
        header(
            o,
            "remat_http_request_duration_seconds",
            "histogram",
            "HTTP request latency by route.",
        );
        for (route, h) in &self.latency {
            let route = escape(route);
            let mut cumulative = 0;
            for (bound, c) in BUCKETS.iter().zip(&h.counts) {
                cumulative += c;
                let _ = writeln!(
                    o,
                    "remat_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let (count, sum) = (h.count, h.sum);
            let _ = writeln!(
                o,
                "remat_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {count}"
            );
            let _ = writeln!(
                o,
                "remat_http_request_duration_seconds_sum{{route=\"{route}\"}} {sum}"
            );
            let _ = writeln!(
                o,
                "remat_http_request_duration_seconds_count{{route=\"{route}\"}} {count}"
            );
        }
    }

    /// `remat_solves_total`, one line per (solver, status).
    fn render_solves(&self, o: &mut String) {
        header(
            o,
            "remat_solves_total",
            "counter",
            "Solves by solver and result status.",
        );
        for ((solver, status), n) in &self.solves {
            let _ = writeln!(
                o,
                "remat_solves_total{{solver=\"{}\",status=\"{status}\"}} {n}",
                escape(solver)
            );
        }
    }

    /// The scalar counters: cache hits and misses, rejected requests, cancelled solves.
    fn render_counters(&self, o: &mut String) {
        scalar(
            o,
            "remat_cache_hits_total",
            "counter",
            "Solve requests answered from the result cache.",
            self.cache_hits,
        );
        scalar(
            o,
            "remat_cache_misses_total",
            "counter",
            "Solve requests not found in the result cache.",
            self.cache_misses,
        );
        scalar(
            o,
            "remat_rejected_total",
            "counter",
            "Requests refused with 503 because the queue was full.",
            self.rejected,
        );
        // The sum of `remat_solves_total{status="cancelled"}`: one count, two views.
        let cancelled = self
            .solves
            .iter()
            .filter(|((_, s), _)| s == "cancelled")
            .map(|(_, n)| n)
            .sum();
        scalar(o, "remat_cancelled_total", "counter", "Solves stopped by a client disconnect, a job cancel or shutdown (the sum of remat_solves_total{status=\"cancelled\"}).", cancelled);
    }
}

impl Gauges {
    /// One gauge line each, in a fixed order.
    fn render(&self, o: &mut String) {
        scalar(
            o,
            "remat_queue_depth",
            "gauge",
            "Solves waiting for a worker.",
            self.queue_depth as u64,
        );
        scalar(
            o,
            "remat_workers_busy",
            "gauge",
            "Workers running a solve.",
            self.workers_busy as u64,
        );
        scalar(
            o,
            "remat_workers",
            "gauge",
            "Size of the worker pool.",
            self.workers as u64,
        );
        scalar(
            o,
            "remat_jobs",
            "gauge",
            "Jobs held (any state).",
            self.jobs as u64,
        );
        scalar(
            o,
            "remat_cache_entries",
            "gauge",
            "Results held in the cache.",
            self.cache_entries as u64,
        );
    }
}

fn header(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn scalar(o: &mut String, name: &str, kind: &str, help: &str, value: u64) {
    header(o, name, kind, help);
    let _ = writeln!(o, "{name} {value}");
}

/// Escapes a label value (backslash, quote, newline).
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        m.request("POST", "/solve", 200, Duration::from_millis(3));
        m.request("POST", "/solve", 503, Duration::from_millis(300));
        let text = m.render(&Gauges {
            queue_depth: 1,
            workers_busy: 2,
            workers: 2,
            jobs: 0,
            cache_entries: 0,
        });
        assert!(text.contains(
            "remat_http_request_duration_seconds_bucket{route=\"/solve\",le=\"0.005\"} 1"
        ));
        assert!(text
            .contains("remat_http_request_duration_seconds_bucket{route=\"/solve\",le=\"0.5\"} 2"));
        assert!(text.contains("remat_http_request_duration_seconds_count{route=\"/solve\"} 2"));
        assert!(text.contains(
            "remat_http_requests_total{method=\"POST\",route=\"/solve\",status=\"503\"} 1"
        ));
        assert!(text.contains("remat_queue_depth 1\n"));
        m.solve("milp", "cancelled");
        m.solve("auto", "cancelled");
        m.solve("auto", "optimal");
        let text = m.render(&Gauges {
            queue_depth: 0,
            workers_busy: 0,
            workers: 2,
            jobs: 0,
            cache_entries: 0,
        });
        assert!(text.contains("remat_cancelled_total 2\n"), "{text}");
    }
}
