//! Benchmarks of the exact dynamic programs (issues 4 and 13): the chain DP's table fill
//! and Revolve's count and schedule. Run with `cargo run --release --example dp_bench`;
//! `-- L/slots ...` (e.g. `-- 500/500 1000/500`) runs only those chain-DP cases. The
//! slots column is what the DP used: long chains get fewer (the table cap).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use remat::graph::chain::ChainSpec;
use remat::graph::structure;
use remat::solve::SolveOptions;
use remat::solve::{revolve_actions, revolve_steps, solve_chain, Policy, RevolveAction};
use std::time::Instant;

/// Peak resident memory of this process so far, in MB (Linux).
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// rotor's benchmark chains: fw in [1, 20], bw = 2 fw, x in [1, 10] MiB, xbar = x + [0, 10] MiB.
fn random_chain(l: usize, seed: u64) -> ChainSpec {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let fw: Vec<f64> = (0..=l)
        .map(|_| rng.random_range(1..=20u32) as f64)
        .collect();
    let x: Vec<u64> = (0..=l).map(|_| rng.random_range(1..=10u64) << 20).collect();
    ChainSpec {
        name: Some(format!("random-chain-{l}")),
        bw: fw.iter().map(|f| 2.0 * f).collect(),
        fw,
        xbar: x
            .iter()
            .map(|&v| v + (rng.random_range(0..=10u64) << 20))
            .collect(),
        x,
        ftmp: None,
        btmp: None,
        budget: None,
    }
}

fn main() {
    println!("| benchmark | size | time | peak RSS | result |");
    println!("|---|---|---|---|---|");
    let picked: Vec<(usize, u64)> = std::env::args()
        .skip(1)
        .filter_map(|a| {
            let (l, s) = a.split_once('/')?;
            Some((l.parse().ok()?, s.parse().ok()?))
        })
        .collect();
    let cases = if picked.is_empty() {
        vec![(200usize, 1000u64), (500, 500), (100, 500), (1000, 500)]
    } else {
        picked
    };
    for (l, slots) in cases {
        let spec = random_chain(l, 42);
        let graph = spec.to_graph().expect("valid chain");
        let chain = structure::chain(&graph).expect("a chain");
        let total: u64 = chain.stages.iter().map(|s| s.x + s.delta).sum();
        let w = total / 3;
        let start = Instant::now();
        let answer = solve_chain(&chain, Policy::ALL, w, slots, &SolveOptions::default())
            .expect("the DP runs");
        let time = start.elapsed().as_secs_f64();
        println!(
            "| chain-dp (table + schedule) | L = {l}, {slots} slots (used {}, slot {} B) | {time:.3} s | {:.0} MB | cost {} |",
            answer.slots,
            answer.slot_size,
            peak_rss_mb().unwrap_or(f64::NAN),
            answer.plan.as_ref().map_or("infeasible".to_string(), |p| p.1.to_string()),
        );
    }
    if std::env::args().len() > 1 {
        return;
    }
    for &s in &[2u64, 10, 100] {
        let start = Instant::now();
        let mut t = 0;
        for _ in 0..1000 {
            t = std::hint::black_box(revolve_steps(std::hint::black_box(1_000_000), s))
                .expect("finite");
        }
        let time = start.elapsed().as_secs_f64() / 1000.0;
        println!(
            "| revolve count t(l, s) | l = 10^6, s = {s} | {:.3} us | - | t = {t} |",
            time * 1e6
        );
    }
    let start = Instant::now();
    let actions = revolve_actions(1_000_000, 100).expect("feasible");
    let time = start.elapsed().as_secs_f64();
    let steps: u64 = actions
        .iter()
        .map(|a| match *a {
            RevolveAction::Advance { from, to } => (to - from) as u64,
            RevolveAction::Firsturn { .. } | RevolveAction::Youturn { .. } => 1,
            _ => 0,
        })
        .sum();
    let expected = 1_000_000 + revolve_steps(1_000_000, 100).expect("finite");
    assert_eq!(steps, expected, "the schedule attains the closed form");
    println!(
        "| revolve schedule | l = 10^6, s = 100 | {time:.3} s | {:.0} MB | {} actions, {steps} forward steps (= l + t) |",
        peak_rss_mb().unwrap_or(f64::NAN),
        actions.len()
    );
}
