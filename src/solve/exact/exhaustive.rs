//! The exact oracle: A* over every schedule of a small graph (up to 12 nodes as the
//! `exhaustive` solver; [`search`] goes to [`SEARCH_LIMIT`] for tests that can wait).
//!
//! A state is `(resident, computed)`: the outputs in memory and the nodes computed at
//! least once. From a state, `compute(v)` is allowed when `v` is not resident, all its
//! inputs are, and `K + Σ_{u resident} s_u + s_v <= M` (the simulator's rules). `free(v)`
//! of a resident `v` costs nothing. The goal is `computed = V`. Execution order is free
//! (not the solver order), so this is the global optimum of the unified model, against
//! which every other solver is tested.
//!
//! Every schedule pays `Σ_v c_v` for the first computations, so the search prices only the
//! recomputations: `compute(v)` costs `c_v` when `v ∈ computed`, else nothing. That is
//! A* on the whole cost with the heuristic `h = Σ_{v ∉ computed} c_v` (admissible and
//! consistent: a first computation of `v` lowers it by exactly `c_v`), without adding
//! `Σ_v c_v` to every figure, which would round a recomputation of 0.5 away beside a cost
//! of 1e16. The first goal popped is optimal; an empty frontier proves infeasibility.

use crate::schedule::{Event, Schedule};
use crate::solve::details::{Details, ExhaustiveDetails};
use crate::solve::Footprint;
use crate::solve::{
    Bound, BoundMethod, Claim, Instance, Outcome, Plan, Scope, SolveError, SolveOptions, Solver,
    SolverInfo, Stop,
};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

pub struct Exhaustive;

/// The largest graph the `exhaustive` solver accepts.
pub const MAX_NODES: usize = 12;
/// The largest graph [`search`] accepts: a state is two sets of nodes in one `u32`.
pub const SEARCH_LIMIT: usize = 16;
const BITS: u32 = SEARCH_LIMIT as u32;

#[derive(PartialEq)]
struct Entry {
    /// The recomputation cost so far.
    g: f64,
    /// How many nodes are computed.
    depth: u32,
    key: u32,
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Least g first, then the deepest, then the key, for determinism.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .g
            .total_cmp(&self.g)
            .then(self.depth.cmp(&other.depth))
            .then(other.key.cmp(&self.key))
    }
}

impl Solver for Exhaustive {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "exhaustive",
            description:
                "Exact search (A*) over every schedule in any execution order; the oracle the \
                          other solvers are tested against.",
            scope: Scope::GlobalOptimum,
            accepts: "graphs of at most 12 nodes",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        // Beyond MAX_NODES it refuses before searching; within, the search's states are
        // bounded by its own limits.
        Footprint::one_pass(instance.graph)
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        search_within(instance, options, MAX_NODES)
    }
}

/// The A* search on a graph of at most [`SEARCH_LIMIT`] nodes, for callers that accept
/// its cost beyond the solver's [`MAX_NODES`] (`solve::solve_exhaustive_unbounded`).
pub(crate) fn search(instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
    search_within(instance, options, SEARCH_LIMIT)
}

fn search_within(
    instance: &Instance,
    options: &SolveOptions,
    limit: usize,
) -> Result<Outcome, SolveError> {
    let graph = instance.graph;
    let n = graph.len();
    if n > limit {
        return Err(SolveError::Unsupported {
            solver: "exhaustive",
            reason: format!(
                "the graph has {n} nodes and exhaustive search is limited to {limit}; \
                 use another solver (e.g. auto)"
            ),
        });
    }
    let stop = Stop::start(options);
    let all: u32 = (1u32 << n) - 1;
    let preds: Vec<u32> = (0..n)
        .map(|v| graph.preds(v).iter().fold(0u32, |m, &u| m | 1 << u))
        .collect();
    let mem_of = |set: u32| -> u64 {
        (0..n)
            .filter(|&v| set >> v & 1 == 1)
            .map(|v| graph.memory(v))
            .sum()
    };
    let key = |resident: u32, computed: u32| resident | computed << BITS;
    let mask = (1u32 << BITS) - 1;

    let mut best: HashMap<u32, f64> = HashMap::new();
    let mut parent: HashMap<u32, (u32, Event)> = HashMap::new();
    let mut heap = BinaryHeap::new();
    let start_key = key(0, 0);
    best.insert(start_key, 0.0);
    heap.push(Entry {
        g: 0.0,
        depth: 0,
        key: start_key,
    });
    let mut pops = 0u64;
    while let Some(Entry { g, key: k, .. }) = heap.pop() {
        if g > best[&k] {
            continue;
        }
        pops += 1;
        if pops % 4096 == 0 {
            if let Err(stopped) = stop.poll() {
                return stopped.outcome("exhaustive", &format!("after {pops} states"));
            }
        }
        let (resident, computed) = (k & mask, k >> BITS);
        if computed == all {
            return Ok(optimal_plan(&parent, k, graph.total_cost() + g, pops));
        }
        let in_use = graph.fixed_memory() + mem_of(resident);
        for (v, &needs) in preds.iter().enumerate() {
            let bit = 1u32 << v;
            let (next, event, cost) = if resident & bit != 0 {
                (key(resident & !bit, computed), Event::Free(v), 0.0)
            } else if needs & !resident == 0 && in_use + graph.memory(v) <= instance.budget {
                let again = if computed & bit != 0 {
                    graph.cost(v)
                } else {
                    0.0
                };
                (
                    key(resident | bit, computed | bit),
                    Event::Compute(v),
                    again,
                )
            } else {
                continue;
            };
            let g2 = g + cost;
            if best.get(&next).is_none_or(|&b| g2 < b) {
                best.insert(next, g2);
                parent.insert(next, (k, event));
                heap.push(Entry {
                    g: g2,
                    depth: (next >> BITS).count_ones(),
                    key: next,
                });
            }
        }
    }
    Ok(Outcome::Infeasible {
        solver: "exhaustive",
        proven: Some(Scope::GlobalOptimum),
        reason: format!(
            "no schedule in any order fits in {} bytes ({pops} states searched)",
            instance.budget
        ),
    })
}

/// The plan of the goal state `k`, reached at cost `g` (the whole cost) after `pops` expansions: its
/// events read back along `parent`.
fn optimal_plan(parent: &HashMap<u32, (u32, Event)>, k: u32, g: f64, pops: u64) -> Outcome {
    let mut events = Vec::new();
    let mut at = k;
    while let Some(&(prev, event)) = parent.get(&at) {
        events.push(event);
        at = prev;
    }
    events.reverse();
    Outcome::Plan(Plan {
        schedule: Schedule::new(events),
        claim: Claim::Optimal,
        solver: "exhaustive",
        scope: Scope::GlobalOptimum,
        lower_bound: Some(Bound {
            cost: g,
            scope: Scope::GlobalOptimum,
            method: BoundMethod::Search,
        }),
        message: None,
        details: Some(Details::Exhaustive(ExhaustiveDetails {
            states_expanded: pops,
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;

    fn optimum(layers: usize, budget: u64) -> Option<f64> {
        let g = linear(layers);
        match Exhaustive
            .solve(&Instance { graph: &g, budget }, &SolveOptions::default())
            .unwrap()
        {
            Outcome::Plan(p) => Some(
                crate::schedule::simulate(&g, &p.schedule)
                    .unwrap()
                    .total_cost,
            ),
            _ => None,
        }
    }

    #[test]
    fn linear_chain_optima() {
        // linear-4 (9 nodes): no recomputation from the checkpoint-all peak (6) on; nothing
        // fits below 3 (a backward op reads two values and writes a third); in between
        // the optimum falls with each unit of budget.
        let optima: Vec<_> = (2..=7).map(|budget| optimum(4, budget)).collect();
        assert_eq!(
            optima,
            [
                None,
                Some(15.0),
                Some(11.0),
                Some(10.0),
                Some(9.0),
                Some(9.0)
            ]
        );
    }
}
