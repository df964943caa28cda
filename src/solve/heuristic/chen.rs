//! Chen et al., "Training Deep Nets with Sublinear Memory Cost" (2016): segment the
//! forward pass at checkpoints, keep only the checkpoints through the forward pass, and
//! recompute each segment once, just before its backward pass.
//!
//! Candidates for checkpoints are the *articulation points* of the forward pass in solver
//! order: forward nodes `c` that no forward edge `u -> v` with `u < c < v` jumps over
//! (with a virtual source before every forward source and a virtual sink after every
//! forward sink), so that `c` alone separates what comes before it from what comes after,
//! as Checkmate's AP variants. When there are fewer than two, every forward node is a
//! candidate (Checkmate's "generalized"/linearised variant). Graphs without node kinds
//! are treated as all-forward.
//!
//! * `chen-sqrt`: every `k`-th candidate with `k = ⌊√|C|⌋`.
//! * `chen-greedy`: Chen's Algorithm 3: walk the forward nodes accumulating output sizes,
//!   and checkpoint a candidate once the running sum exceeds the segment budget `B`. As in
//!   Checkmate's sweep, `B` runs over a geometric grid and both candidate sets, and the
//!   cheapest schedule within the real budget is returned.
//!
//! From checkpoints to a stage schedule: let the *epoch* of stage `t` be the number of
//! checkpoints before `t`, and a node's *segment* the epoch in which it is created. A
//! checkpoint stays resident from its creation to its last use. Any other output stays
//! resident through its uses in its own epoch; for each later epoch that reads its
//! segment, the whole segment is recomputed at the first such read (Chen's "ladder") and
//! each value kept through its last use in that epoch. The minimal-R closure of
//! [`StagePlan::new`] performs the recomputation, in memory linear in the schedule.

use crate::graph::{Graph, NodeKind};
use crate::schedule::stages::CHECK_EVERY;
use crate::schedule::stages::{Keep, StagePlan};
use crate::schedule::{simulate_polled, Schedule};
use crate::solve::details::{ChenDetails, Details};
use crate::solve::footprint::{Guard, Halt};
use crate::solve::{
    fit, internal, replayed_within_budget, Footprint, Instance, Outcome, Scope, SolveError,
    SolveOptions, Solver, SolverInfo, Stop, Stopped,
};
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

pub struct ChenSqrt;
pub struct ChenGreedy;

/// The forward part: nodes of kind `forward`, or every node of a graph without kinds.
fn forward_nodes(graph: &Graph) -> Vec<usize> {
    if graph.has_kinds() {
        (0..graph.len())
            .filter(|&v| graph.node(v).kind == Some(NodeKind::Forward))
            .collect()
    } else {
        (0..graph.len()).collect()
    }
}

/// Forward nodes that no forward edge (or virtual source/sink edge) jumps over.
fn articulation_points(graph: &Graph, forward: &[usize]) -> Vec<usize> {
    let n = graph.len();
    let mut is_fwd = vec![false; n];
    for &v in forward {
        is_fwd[v] = true;
    }
    // covered[c] > 0 when some edge spans c; difference array over positions.
    let mut diff = vec![0i64; n + 1];
    let mut span = |lo: usize, hi: usize| {
        if lo < hi {
            diff[lo] += 1;
            diff[hi] -= 1;
        }
    };
    for &v in forward {
        let fwd_preds: Vec<usize> = graph
            .preds(v)
            .iter()
            .copied()
            .filter(|&u| is_fwd[u])
            .collect();
        if fwd_preds.is_empty() {
            span(0, v); // virtual source -> v
        }
        for u in fwd_preds {
            span(u + 1, v);
        }
        if !graph.succs(v).iter().any(|&w| is_fwd[w]) {
            span(v + 1, n); // v -> virtual sink
        }
    }
    let mut covered = 0;
    let mut points = Vec::new();
    for c in 0..n {
        covered += diff[c];
        if covered == 0 && is_fwd[c] {
            points.push(c);
        }
    }
    points
}

/// The candidate sets: articulation points (when there are at least two), and every
/// forward node.
fn candidate_sets(graph: &Graph) -> Vec<(&'static str, Vec<usize>)> {
    let forward = forward_nodes(graph);
    let aps = articulation_points(graph, &forward);
    let mut sets = Vec::new();
    if aps.len() >= 2 {
        sets.push(("articulation points", aps));
    }
    sets.push(("all forward nodes", forward));
    sets
}

/// The stage schedule that keeps `checkpoints` (ascending) and recomputes segments, built
/// while `guard` allows.
pub(crate) fn segment_stages(
    graph: &Graph,
    checkpoints: &[usize],
    guard: &Guard,
) -> Result<StagePlan, Halt> {
    let n = graph.len();
    let mut is_ckpt = vec![false; n];
    for &c in checkpoints {
        is_ckpt[c] = true;
    }
    // epoch[t] = number of checkpoints strictly before t.
    let mut epoch = vec![0usize; n];
    let mut count = 0;
    for t in 0..n {
        epoch[t] = count;
        if is_ckpt[t] {
            count += 1;
        }
    }
    let mut keeps = Vec::with_capacity(n);
    // `i` kept from its stage `from` through stage `to`: `S[t, i] = 1` for `from < t <= to`.
    let mut keep = |i: usize, from: usize, to: usize| {
        keeps.push(Keep {
            node: i,
            first: from + 1,
            last: to,
        });
    };
    // First read of each segment in each later epoch: the ladder's start.
    let mut ladder: HashMap<(usize, usize), usize> = HashMap::new();
    for i in (0..n).filter(|&i| !is_ckpt[i]) {
        if i % CHECK_EVERY == 0 {
            guard.check(0)?;
        }
        for &v in graph.succs(i) {
            if epoch[v] != epoch[i] {
                ladder
                    .entry((epoch[i], epoch[v]))
                    .and_modify(|t| *t = (*t).min(v))
                    .or_insert(v);
            }
        }
    }
    for i in 0..n {
        let Some(&last) = graph.succs(i).last() else {
            continue;
        };
        if is_ckpt[i] {
            keep(i, i, last);
            continue;
        }
        // Last use per epoch (successors are ascending, so epochs are too).
        let mut uses: Vec<(usize, usize)> = Vec::new();
        for &v in graph.succs(i) {
            match uses.last_mut() {
                Some((e, l)) if *e == epoch[v] => *l = v,
                _ => uses.push((epoch[v], v)),
            }
        }
        for (e, last_in_epoch) in uses {
            let start = if e == epoch[i] {
                i
            } else {
                ladder[&(epoch[i], e)]
            };
            keep(i, start, last_in_epoch);
        }
    }
    StagePlan::new(graph, keeps, |computes| guard.check(computes))
}

impl Solver for ChenSqrt {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "chen-sqrt",
            description: "Chen et al. sqrt(n): checkpoint every floor(sqrt(|C|))-th candidate (articulation \
                          points of the forward pass, else every forward node), recompute each segment once.",
            scope: Scope::Heuristic,
            accepts: "any graph (forward/backward kinds make it Chen's; without kinds every node is forward)",
        }
    }
    fn footprint(&self, instance: &Instance) -> Footprint {
        Footprint::recomputing_once(instance.graph)
    }
    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        let graph = instance.graph;
        let stop = Stop::start(options);
        let guard = Guard::new("chen-sqrt", graph, &stop, options);
        let (label, candidates) = candidate_sets(graph).swap_remove(0);
        if let Err(stopped) = stop.poll() {
            return stopped.outcome("chen-sqrt", "while choosing the checkpoints");
        }
        let k = ((candidates.len() as f64).sqrt() as usize).max(1);
        let checkpoints: Vec<usize> = candidates
            .iter()
            .enumerate()
            .filter(|(idx, _)| (idx + 1) % k == 0)
            .map(|(_, &v)| v)
            .collect();
        let details = Details::Chen(ChenDetails {
            candidates: label,
            checkpoints: ids(graph, &checkpoints),
            segment_budget: None,
        });
        match segment_stages(graph, &checkpoints, &guard)
            .and_then(|plan| plan.into_schedule(graph, |c| guard.check(c)))
        {
            Ok(schedule) => fit(instance, "chen-sqrt", schedule, Some(details)),
            Err(halt) => halt.outcome("chen-sqrt", "while building the segment schedule"),
        }
    }
}

/// Chen's Algorithm 3 for one segment budget `b`.
fn greedy_checkpoints(
    graph: &Graph,
    forward: &[usize],
    candidates: &[usize],
    b: f64,
) -> Vec<usize> {
    let mut is_candidate = vec![false; graph.len()];
    for &c in candidates {
        is_candidate[c] = true;
    }
    let mut temp = 0.0;
    let mut checkpoints = Vec::new();
    for &v in forward {
        temp += graph.memory(v) as f64;
        if is_candidate[v] && temp > b {
            checkpoints.push(v);
            temp = 0.0;
        }
    }
    checkpoints
}

const GREEDY_GRID: usize = 24;

impl Solver for ChenGreedy {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "chen-greedy",
            description: "Chen et al. greedy (Algorithm 3), with the segment budget swept over a grid and \
                          both candidate sets; returns the cheapest schedule within the budget.",
            scope: Scope::Heuristic,
            accepts: "any graph (forward/backward kinds make it Chen's; without kinds every node is forward)",
        }
    }
    fn footprint(&self, instance: &Instance) -> Footprint {
        Footprint::recomputing_once(instance.graph)
    }
    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        let graph = instance.graph;
        let stop = Stop::start(options);
        let forward = forward_nodes(graph);
        let total: f64 = forward.iter().map(|&v| graph.memory(v) as f64).sum();
        let smallest = forward
            .iter()
            .map(|&v| graph.memory(v))
            .filter(|&m| m > 0)
            .min()
            .unwrap_or(1) as f64;
        let sets = candidate_sets(graph);
        // The checkpoint sets tried, by hash (a set may have a node per forward node).
        let mut tried: HashSet<u64> = HashSet::new();
        let mut best: Option<Greedy> = None;
        let mut lowest_peak = u64::MAX;
        let steps = sets.len() * GREEDY_GRID;
        let guard = Guard::new("chen-greedy", graph, &stop, options);
        let mut timed_out = false;
        'sweep: for (set_index, (label, candidates)) in sets.iter().enumerate() {
            for step in 0..GREEDY_GRID {
                let done = set_index * GREEDY_GRID + step;
                options.report(
                    "chen-greedy: sweeping segment budgets",
                    Some(done as f64 / steps as f64),
                );
                let ratio =
                    (total.max(smallest) / smallest).powf(step as f64 / (GREEDY_GRID - 1) as f64);
                let b = smallest * ratio;
                let checkpoints = greedy_checkpoints(graph, &forward, candidates, b);
                let mut hasher = DefaultHasher::new();
                checkpoints.hash(&mut hasher);
                if !tried.insert(hasher.finish()) {
                    continue;
                }
                let schedule = match guard
                    .check(0)
                    .and_then(|()| segment_stages(graph, &checkpoints, &guard))
                    .and_then(|plan| plan.into_schedule(graph, |c| guard.check(c)))
                {
                    Ok(schedule) => schedule,
                    Err(Halt::Stopped(Stopped::TimeLimit)) => {
                        timed_out = true;
                        break 'sweep;
                    }
                    Err(halt) => return halt.outcome("chen-greedy", "while sweeping"),
                };
                let stats = match simulate_polled(graph, &schedule, || stop.poll()) {
                    Ok(replayed) => replayed.map_err(|e| internal("chen-greedy", e))?,
                    Err(Stopped::TimeLimit) => {
                        timed_out = true;
                        break 'sweep;
                    }
                    Err(stopped) => return stopped.outcome("chen-greedy", "while sweeping"),
                };
                lowest_peak = lowest_peak.min(stats.peak_memory);
                let better = best
                    .as_ref()
                    .is_none_or(|g| (stats.total_cost, stats.peak_memory) < (g.cost, g.peak));
                if stats.peak_memory <= instance.budget && better {
                    best = Some(Greedy {
                        cost: stats.total_cost,
                        peak: stats.peak_memory,
                        schedule,
                        checkpoints,
                        label,
                        segment_budget: b,
                    });
                }
            }
        }
        let Some(best) = best else {
            if timed_out {
                return Stopped::TimeLimit.outcome("chen-greedy", "while sweeping segment budgets");
            }
            return Ok(Outcome::Infeasible {
                solver: "chen-greedy",
                proven: None,
                reason: format!(
                    "no segment budget gives a chen-greedy schedule within {} bytes (the lowest peak found is {} bytes)",
                    instance.budget, lowest_peak
                ),
            });
        };
        let details = Details::Chen(ChenDetails {
            candidates: best.label,
            checkpoints: ids(graph, &best.checkpoints),
            segment_budget: Some(best.segment_budget),
        });
        // `best` was replayed within the budget in the sweep.
        Ok(replayed_within_budget(
            "chen-greedy",
            best.schedule,
            Some(details),
        ))
    }
}

/// The cheapest greedy schedule within the budget so far.
struct Greedy {
    cost: f64,
    peak: u64,
    schedule: Schedule,
    checkpoints: Vec<usize>,
    label: &'static str,
    segment_budget: f64,
}

/// The ids of `nodes`, for a result's details.
fn ids(graph: &Graph, nodes: &[usize]) -> Vec<String> {
    nodes.iter().map(|&v| graph.id(v).to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::schedule::simulate;

    #[test]
    fn every_forward_node_of_a_chain_is_an_articulation_point() {
        let g = linear(5);
        assert_eq!(
            articulation_points(&g, &forward_nodes(&g)),
            vec![0, 1, 2, 3, 4]
        );
    }

    #[test]
    fn sqrt_segments_on_linear_16_recompute_each_forward_once() {
        // 16 forward ops, k = 4: checkpoints 3, 7, 11, 15; segments 0-2, 4-6, 8-10, 12-14
        // are each recomputed once: 12 extra forward computes.
        let g = linear(16);
        let stop = Stop::start(&SolveOptions::default());
        let guard = Guard::new("chen-sqrt", &g, &stop, &SolveOptions::default());
        let st = segment_stages(&g, &[3, 7, 11, 15], &guard).unwrap();
        let stats = simulate(&g, &st.into_schedule(&g, |c| guard.check(c)).unwrap()).unwrap();
        assert_eq!(stats.total_cost, 33.0 + 12.0);
    }
}
