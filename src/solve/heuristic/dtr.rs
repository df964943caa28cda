//! `dtr`: Dynamic Tensor Rematerialization (Kirisame, Lyubomirsky, Haan, Brennan, He,
//! Roesch, Chen, Tatlock, "Dynamic Tensor Rematerialization", ICLR 2021), run ahead of time on the
//! graph instead of at run time in the framework.
//!
//! DTR is online and greedy. The ops run in solver order; before an op runs, each input
//! that is not resident is *rematerialised* (recomputed, recursively, from whatever of its
//! own inputs is resident); before any output is allocated, resident tensors are *evicted*
//! until the output fits. The victim is the unpinned resident tensor `t` of least
//!
//! ```text
//! h_DTR(t) = (c_0(t) + Σ_{t' ∈ e*(t)} c_0(t')) / (m(t) · s(t))
//! ```
//!
//! where `c_0` is an op's cost, `m(t)` the tensor's size, `s(t)` its staleness (ops since
//! its last use, plus one) and `e*(t)` the evicted neighbourhood that a rematerialisation
//! of `t` would also have to recompute. Here `e*(t)` is taken upstream only: the
//! non-resident ancestors reachable from `t` through non-resident tensors (the paper's
//! `e*` also counts evicted descendants, whose recomputation would need `t`). The inputs
//! of the op being computed are pinned; a tensor whose consumers have all run once is
//! freed as in checkpoint-all.
//!
//! Scope: a heuristic, in milliseconds on graphs of thousands of nodes (each eviction
//! scans the resident tensors, each score visits at most [`NEIGHBOURHOOD`] ancestors; the
//! state is linear in the graph, the resident tensors a list, and the caller's `Stop` is
//! polled at every eviction and every [`POLL_EVERY`] ops, so on large graphs it ends at the
//! time limit without a schedule). On the MLSys networks it lands within
//! 0.5% of `Σ c_v` at 80% of the checkpoint-all peak (ResNet50: 407,030 against 405,670).
//! Theorem 3.2 of the paper shows that any such deterministic heuristic can be forced to
//! `Ω(N/B)` times the optimal number of operations; here, on tight budgets of the random
//! layered graphs, rematerialising one input evicts the ancestors of the next and the
//! run cascades, so it gives up past [`EVENTS_PER_NODE`] events per node. Its resident sets
//! at the start of each op also give a Checkmate stage schedule ([`stages`]), one of the
//! MIP starts of [`crate::solve::exact::checkmate`].

use super::dtr_ahead::Lookahead;
use super::walk::Walk;
use crate::graph::Graph;
use crate::schedule::stages::{Keep, StagePlan, Stages};
use crate::schedule::{Event, Schedule};
use crate::solve::details::{Details, DtrDetails};
use crate::solve::{
    fit, Footprint, Instance, Outcome, Scope, SolveError, SolveOptions, Solver, SolverInfo, Stop,
    Stopped,
};

pub struct Dtr;

impl Solver for Dtr {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "dtr",
            description: "Dynamic Tensor Rematerialization (Kirisame et al.) run ahead of time: \
                          ops in order, inputs rematerialised on demand, the tensor of least \
                          cost / (size x staleness) evicted when memory runs out.",
            scope: Scope::Heuristic,
            accepts: "any graph",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        // At most EVENTS_PER_NODE events per node, half of them computes, and the stage
        // intervals of its resident sets (one per compute at most).
        let computes = (EVENTS_PER_NODE / 2 * instance.graph.len()) as u64;
        Footprint::linear(
            instance.graph,
            computes,
            format!("a DTR run of at most {computes} compute events"),
        )
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        let graph = instance.graph;
        let stop = Stop::start(options);
        match run(graph, instance.budget, &stop, None) {
            Ok(run) => fit(
                instance,
                "dtr",
                Schedule::new(run.events),
                Some(Details::Dtr(DtrDetails {
                    evictions: run.evictions,
                })),
            ),
            Err(Stuck::NoRoom(v)) => Ok(Outcome::Infeasible {
                solver: "dtr",
                proven: None,
                reason: format!(
                    "DTR could not make room for '{}': its pinned inputs and the other tensors it \
                     cannot evict fill the budget of {} bytes",
                    graph.id(v),
                    instance.budget
                ),
            }),
            Err(Stuck::Stopped(stopped)) => stopped.outcome("dtr", "while running DTR"),
            Err(Stuck::Thrashing(v)) => Ok(Outcome::Infeasible {
                solver: "dtr",
                proven: None,
                reason: format!(
                    "DTR gave up at '{}': its rematerialisations cascade past {EVENTS_PER_NODE} \
                     events per node in {} bytes",
                    graph.id(v),
                    instance.budget
                ),
            }),
        }
    }
}

/// The Checkmate stages of DTR's schedule: `S[t]` is what is resident when op `t` runs for
/// the first time; R is rebuilt as the minimal recomputation for that S, so its cost is at
/// most DTR's, though its peak may differ (values are kept to their last use in a stage).
/// `None` when DTR finds no schedule or `stop` ends it first.
pub(crate) fn stages(graph: &Graph, budget: u64, stop: &Stop) -> Option<Stages> {
    let run = run(graph, budget, stop, None).ok()?;
    let plan = StagePlan::new(graph, run.entering, |_| stop.poll()).ok()?;
    Some(plan.to_dense())
}

/// The events of a run of DTR that evicts by `ahead`'s rule instead of `h_DTR`'s staleness
/// ([`super::dtr_ahead`]), and the eviction scores it computed (its work: each visits at most
/// [`NEIGHBOURHOOD`] tensors); `Ok(None)` when it finds no schedule.
pub(super) fn run_ahead(
    graph: &Graph,
    budget: u64,
    stop: &Stop,
    ahead: &Lookahead,
) -> Result<Option<(Vec<Event>, u64)>, Stopped> {
    match run(graph, budget, stop, Some(ahead)) {
        Ok(run) => Ok(Some((run.events, run.scored))),
        Err(Stuck::Stopped(stopped)) => Err(stopped),
        Err(Stuck::NoRoom(_) | Stuck::Thrashing(_)) => Ok(None),
    }
}

/// What a run of DTR produced.
struct Run {
    events: Vec<Event>,
    /// The resident sets entering each op's first computation (the Checkmate `S[t]`), as
    /// intervals.
    entering: Vec<Keep>,
    evictions: usize,
    /// The eviction scores computed.
    scored: u64,
}

/// The state of one run: what is resident and pinned, and what the solver order still
/// needs.
struct State<'g> {
    graph: &'g Graph,
    /// Bytes available for outputs: the budget less `fixed_memory`.
    capacity: u64,
    used: u64,
    resident: Vec<bool>,
    /// The resident tensors, in no order, and each one's place in it.
    residents: Vec<usize>,
    place: Vec<usize>,
    /// The op whose first computation comes next (the stage being run).
    stage: usize,
    /// The stage from which each resident tensor has been resident at every stage entry.
    since: Vec<usize>,
    entering: Vec<Keep>,
    stop: &'g Stop,
    pins: Vec<u32>,
    /// Consumers of each node not yet computed for the first time.
    pending: Vec<usize>,
    computed: Vec<bool>,
    last_use: Vec<u64>,
    clock: u64,
    events: Vec<Event>,
    evictions: usize,
    /// The eviction scores computed so far.
    scored: u64,
    /// The eviction rule's distance to the next use, in place of the staleness.
    ahead: Option<&'g Lookahead<'g>>,
    /// `ε` ([`unit()`]), added to every op that `h_DTR` counts.
    unit: f64,
    /// The scores' walks through the evicted neighbourhoods.
    walk: Walk,
}

/// An op being materialised: its inputs that were not resident when it started, and how
/// many of them have been made resident since.
struct Materializing {
    op: usize,
    missing: Vec<usize>,
    next: usize,
}

/// Why a run of DTR stopped without a schedule, at which op.
#[derive(Debug)]
enum Stuck {
    /// Its pinned inputs and the tensors that cannot be evicted fill the budget.
    NoRoom(usize),
    /// Rematerialisations cascade: more than [`EVENTS_PER_NODE`] events per node.
    Thrashing(usize),
    /// The caller's stop.
    Stopped(Stopped),
}

/// Ops run between two polls of the caller's stop (evictions poll it each).
const POLL_EVERY: usize = 1024;

/// The most events a run may emit per node before it counts as thrashing (on tight
/// budgets, rematerialising one tensor can evict the ancestors of the next, and so on).
const EVENTS_PER_NODE: usize = 16;

/// The most non-resident ancestors `h_DTR` visits per candidate: beyond it the evicted
/// neighbourhood is cut short (its cost only grows, so the cut favours deep tensors). Also
/// the most evicted descendants DTR-ahead's `next(t)` visits.
pub(crate) const NEIGHBOURHOOD: usize = 64;

/// `ε`, added to the cost of every op an eviction score counts: a thousandth of the mean op
/// cost (1 where every op is free). Free ops (inputs, reshapes) still cost events, and a
/// neighbourhood of them is no free eviction (without it, zero-cost tensors are evicted and
/// rematerialised in cascades); DTR-ahead's distances in cost are never zero.
pub(crate) fn unit(graph: &Graph) -> f64 {
    match graph.total_cost() / graph.len().max(1) as f64 * 1e-3 {
        u if u > 0.0 => u,
        _ => 1.0,
    }
}

/// Runs DTR; with `ahead`, its eviction rule divides by the distance to the next use
/// instead of the staleness.
fn run(graph: &Graph, budget: u64, stop: &Stop, ahead: Option<&Lookahead>) -> Result<Run, Stuck> {
    let n = graph.len();
    let capacity = budget
        .checked_sub(graph.fixed_memory())
        .ok_or(Stuck::NoRoom(0))?;
    let mut state = State {
        graph,
        capacity,
        used: 0,
        resident: vec![false; n],
        residents: Vec::new(),
        place: vec![usize::MAX; n],
        stage: 0,
        since: vec![0; n],
        entering: Vec::new(),
        stop,
        pins: vec![0; n],
        pending: (0..n).map(|v| graph.succs(v).len()).collect(),
        computed: vec![false; n],
        last_use: vec![0; n],
        clock: 0,
        events: Vec::new(),
        evictions: 0,
        scored: 0,
        ahead,
        unit: unit(graph),
        walk: Walk::new(n),
    };
    for v in 0..n {
        if v % POLL_EVERY == 0 {
            stop.poll().map_err(Stuck::Stopped)?;
        }
        state.stage = v;
        state.materialize(v)?;
        state.release_if_done(v);
    }
    state.stage = n;
    for u in std::mem::take(&mut state.residents) {
        state.close(u);
    }
    Ok(Run {
        events: state.events,
        entering: state.entering,
        evictions: state.evictions,
        scored: state.scored,
    })
}

impl State<'_> {
    /// Makes `w` resident: its inputs first (each pinned once resident), then room for its
    /// output, then the computation. Depth-first over the missing ancestors, on a stack of
    /// its own: a chain evicted back to its start is rematerialised as deep as it is long.
    fn materialize(&mut self, w: usize) -> Result<(), Stuck> {
        let Some(first) = self.enter(w)? else {
            return Ok(());
        };
        let mut pending = vec![first];
        while let Some(top) = pending.last_mut() {
            if let Some(&u) = top.missing.get(top.next) {
                top.next += 1;
                match self.enter(u)? {
                    Some(frame) => pending.push(frame),
                    None => self.pins[u] += 1,
                }
                continue;
            }
            let done = top.op;
            pending.pop();
            self.compute(done)?;
            if !pending.is_empty() {
                // an input of the op below on the stack: pinned until that op has run
                self.pins[done] += 1;
            }
        }
        Ok(())
    }

    /// Starts materialising `w`: `None` when it is resident; else its resident inputs pinned
    /// (so that rematerialising the others cannot evict them) and the others still to make
    /// resident.
    fn enter(&mut self, w: usize) -> Result<Option<Materializing>, Stuck> {
        if self.resident[w] {
            return Ok(None);
        }
        if self.events.len() > EVENTS_PER_NODE * self.graph.len() {
            return Err(Stuck::Thrashing(w));
        }
        let preds = self.graph.preds(w);
        let missing: Vec<usize> = preds
            .iter()
            .copied()
            .filter(|&u| !self.resident[u])
            .collect();
        for &u in preds {
            if self.resident[u] {
                self.pins[u] += 1;
            }
        }
        Ok(Some(Materializing {
            op: w,
            missing,
            next: 0,
        }))
    }

    /// Computes `w`, whose inputs are resident and pinned: room for its output, the
    /// computation, then its inputs unpinned (and freed when nothing else reads them).
    fn compute(&mut self, w: usize) -> Result<(), Stuck> {
        let graph = self.graph;
        for &u in graph.preds(w) {
            self.last_use[u] = self.clock;
        }
        self.make_room(graph.memory(w), w)?;
        self.events.push(Event::Compute(w));
        self.resident[w] = true;
        self.place[w] = self.residents.len();
        self.residents.push(w);
        // Resident from the next stage entry on (unless freed before it).
        self.since[w] = self.stage + 1;
        self.used += graph.memory(w);
        self.last_use[w] = self.clock;
        self.clock += 1;
        let first = !self.computed[w];
        self.computed[w] = true;
        for &u in graph.preds(w) {
            self.pins[u] -= 1;
            if first {
                self.pending[u] -= 1;
            }
            self.release_if_done(u);
        }
        Ok(())
    }

    /// Frees `u` when the solver order no longer reads it and nothing pins it, unless the
    /// eviction rule retains it (then only an eviction frees it).
    fn release_if_done(&mut self, u: usize) {
        let retained = self.ahead.is_some_and(|a| a.retains(u));
        if self.resident[u] && self.pending[u] == 0 && self.pins[u] == 0 && !retained {
            self.free(u);
        }
    }

    fn free(&mut self, u: usize) {
        self.events.push(Event::Free(u));
        self.resident[u] = false;
        self.used -= self.graph.memory(u);
        let at = self.place[u];
        self.residents.swap_remove(at);
        if let Some(&moved) = self.residents.get(at) {
            self.place[moved] = at;
        }
        self.close(u);
    }

    /// Records the stage entries `u` has been resident at, now that it leaves (entries
    /// `since[u]..=stage`, none when it came after the current stage's entry).
    fn close(&mut self, u: usize) {
        if self.since[u] <= self.stage {
            self.entering.push(Keep {
                node: u,
                first: self.since[u],
                last: self.stage.min(self.graph.len() - 1),
            });
        }
    }

    /// Evicts by least `h_DTR` until `need` more bytes fit, for op `w`.
    fn make_room(&mut self, need: u64, w: usize) -> Result<(), Stuck> {
        while self.used + need > self.capacity {
            self.stop.poll().map_err(Stuck::Stopped)?;
            // The least score, the lowest index among equals.
            let mut scored = 0;
            let mut walk = std::mem::take(&mut self.walk);
            let victim = self
                .residents
                .iter()
                .copied()
                .filter(|&t| self.pins[t] == 0 && self.graph.memory(t) > 0)
                .map(|t| {
                    scored += 1;
                    (self.score(t, &mut walk), t)
                })
                .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            self.walk = walk;
            let victim = victim.ok_or(Stuck::NoRoom(w))?.1;
            self.free(victim);
            self.evictions += 1;
            self.scored += scored;
        }
        Ok(())
    }

    /// `h_DTR(t)`: the cost of rematerialising `t` (its op and the non-resident ancestors
    /// that would be recomputed with it) over its size times its staleness (with `ahead`:
    /// its distance to the next use).
    fn score(&self, t: usize, walk: &mut Walk) -> f64 {
        let graph = self.graph;
        let own = graph.cost(t) + self.unit;
        let cost = walk.evicted_ancestors(graph, t, &self.resident, self.unit, NEIGHBOURHOOD, own);
        let (spacing, weight) = match self.ahead {
            Some(ahead) => (
                ahead.distance(graph, t, self.stage, &self.computed, &self.resident, walk),
                ahead.weight(t, self.stage),
            ),
            None => ((self.clock - self.last_use[t] + 1) as f64, 1.0),
        };
        weight * cost / (graph.memory(t) as f64 * spacing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate;
    use crate::schedule::simulate;
    use crate::solve::exact::exhaustive::Exhaustive;

    /// A stop that never comes.
    fn never() -> Stop {
        Stop::start(&SolveOptions::default())
    }

    fn stop_never() -> Result<(), Stopped> {
        never().poll()
    }

    /// On Checkmate's linear graphs, at every budget from the least feasible to the
    /// checkpoint-all peak: every DTR schedule passes the simulator within the budget, costs
    /// at least the exhaustive optimum, and its stage form costs no more than itself.
    #[test]
    fn linear_graphs_fit_and_never_beat_the_optimum() {
        for layers in 1..=5 {
            let g = generate::linear(layers);
            let (min_budget, _) = g.min_feasible_budget();
            let peak = crate::schedule::checkpoint_all_peak(&g);
            let mut misses = 0;
            for budget in min_budget..=peak {
                let instance = Instance { graph: &g, budget };
                let optimum = match Exhaustive.solve(&instance, &SolveOptions::default()) {
                    Ok(Outcome::Plan(p)) => simulate(&g, &p.schedule).unwrap().total_cost,
                    other => panic!("linear-{layers} @ {budget}: {other:?}"),
                };
                let Ok(run) = run(&g, budget, &never(), None) else {
                    assert!(budget < peak, "linear-{layers}: no schedule at the peak");
                    misses += 1;
                    continue;
                };
                let stats = simulate(&g, &Schedule::new(run.events)).unwrap();
                assert!(stats.peak_memory <= budget, "linear-{layers} @ {budget}");
                assert!(
                    stats.total_cost >= optimum - 1e-9,
                    "linear-{layers} @ {budget}"
                );
                let staged = StagePlan::new(&g, run.entering, |_| stop_never())
                    .unwrap()
                    .to_dense()
                    .cost(&g);
                assert!(
                    staged <= stats.total_cost + 1e-9,
                    "linear-{layers} @ {budget}"
                );
            }
            // DTR pins a whole rematerialisation chain: at the tightest budgets it may find
            // nothing.
            eprintln!("linear-{layers}: no DTR schedule at {misses} budgets from {min_budget}");
            assert!(
                misses <= 2,
                "linear-{layers}: {misses} budgets without a schedule"
            );
        }
    }

    /// A chain evicted back to its start is rematerialised as deep as it is long, on the
    /// solve's own stack: here one of 64 KiB (the service's workers have 2 MiB) holds a
    /// chain of 4,001 nodes whose backward rebuilds its forward from the start.
    #[test]
    fn a_chain_rematerialised_from_its_start_needs_no_deep_stack() {
        let g = generate::linear(2000);
        let budget = g.fixed_memory() + 64;
        let run = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || {
                let run = run(&g, budget, &never(), None).map_err(|e| format!("{e:?}"));
                (g, run)
            })
            .unwrap()
            .join()
            .unwrap();
        let (g, run) = run;
        let run = run.unwrap();
        let stats = simulate(&g, &Schedule::new(run.events)).unwrap();
        assert!(stats.peak_memory <= budget);
        assert!(stats.total_cost > g.total_cost(), "nothing was recomputed");
    }

    /// With the whole checkpoint-all peak, DTR never evicts and is checkpoint-all.
    #[test]
    fn at_the_checkpoint_all_peak_nothing_is_evicted() {
        let g = generate::random_layered(60, 7);
        let peak = crate::schedule::checkpoint_all_peak(&g);
        let run = run(&g, peak, &never(), None).unwrap();
        assert_eq!(run.evictions, 0);
        let stats = simulate(&g, &Schedule::new(run.events)).unwrap();
        assert_eq!(stats.total_cost, g.total_cost());
        assert_eq!(stats.peak_memory, peak);
    }

    /// Below the checkpoint-all peak DTR recomputes, stays within the budget, and finds
    /// schedules down to well under it on a random training graph.
    #[test]
    fn random_graphs_fit_below_the_peak() {
        let g = generate::random_layered(100, 3);
        let peak = crate::schedule::checkpoint_all_peak(&g);
        for percent in [90, 80, 70, 60] {
            let budget = peak * percent / 100;
            let run =
                run(&g, budget, &never(), None).unwrap_or_else(|e| panic!("{percent}%: {e:?}"));
            // Ops run in solver order: computed once each, they would peak at the
            // checkpoint-all peak, so DTR must evict and recompute.
            assert!(run.evictions > 0, "{percent}%");
            let stats = simulate(&g, &Schedule::new(run.events)).unwrap();
            assert!(stats.peak_memory <= budget, "{percent}%");
            assert!(stats.total_cost > g.total_cost(), "{percent}%");
        }
    }
}
