//! `sethi-ullman`: recursive rematerialisation ordered by Sethi–Ullman numbers, a
//! constructive solver that finds a schedule at (nearly) every budget from the graph's
//! lower bound to its checkpoint-all peak, with a budget from which it provably always
//! does.
//!
//! **The need of a node** (Sethi & Ullman, "The generation of optimal code for arithmetic
//! expressions", JACM 1970: the registers an expression tree needs). Computing `v` from
//! nothing, its inputs `u_1 .. u_k` one after another while holding those already computed,
//! in the order `π`, takes
//!
//! ```text
//! need(v) = max( max_i (need(u_π(i)) + Σ_{j<i} s_u_π(j)),  s_v + Σ_i s_u_i )
//! ```
//!
//! bytes beyond `K`, and the order of `need(u) − s_u` descending minimises it (the exchange
//! argument of Sethi–Ullman's labelling). The needs are computed once, in solver order,
//! in `O(E log E)`. On a DAG this is the need of its tree unfolding: shared inputs are
//! counted once per path, so it is an upper bound, never a lower one.
//!
//! **The construction.** The *targets* are the nodes in solver order (each must be computed
//! once). To compute `v`: each input, in the Sethi–Ullman order, is computed recursively if
//! it is not resident, and *pinned* once processed; then room is made for `s_v` and `v` is
//! computed; its inputs are unpinned. Inputs already resident but not yet processed stay
//! evictable, so the pinned bytes never exceed what `need` accounts for, and by induction
//! over the recursion:
//!
//! > **Guarantee.** Every budget `≥ K + max_v need(v)` (`need_budget`) gets a schedule,
//! > given the work (see **Limits**).
//!
//! When the room left allows it (checked against the needs of the missing inputs), the
//! resident inputs are pinned first instead, which spares recomputing them and keeps the
//! guarantee. The memory not pinned is a cache: values stay resident while there is room;
//! when `v`'s output needs room, the unpinned resident value of least
//!
//! ```text
//! c_remat(t) / (s_t · (next(t) − now + 1))
//! ```
//!
//! is evicted. `next(t)` is the first target from the current one on that reads `t`, or
//! that reads an evicted consumer of `t` (whose recomputation will read `t`): the target
//! order is known ahead of time, so this is Belady's farthest-next-use rule rather than
//! DTR's staleness. `c_remat(t)` is DTR's evicted neighbourhood `e*(t)` (Kirisame et al.):
//! the cost of `t`, of the non-resident ancestors its recomputation would run (cut at a
//! neighbourhood of 16 to 64 nodes) and of its evicted consumers with a future reader.
//! Without the consumer term, the inputs of an evicted value look dead, are evicted first,
//! and recomputations unfold the DAG (the figures are in `docs/performance.md`).
//! Candidates are scanned in full when few, else [`SAMPLE`] of them are drawn with the seed
//! (DTR's sampling), so that an eviction costs the same on 10,000 nodes as on 100.
//!
//! No single eviction rule is best on every graph and budget, so [`VARIANTS`] constructions
//! run, differing in the neighbourhood cut and in what a value no target reads again
//! ([`Dead`]) scores, and the cheapest is kept; each after the first is cut off at twice
//! the computes of the cheapest so far, and until one succeeds, those that pass the work
//! cap share twice the cap ([`UNFOLDED_WORK_SHARE`]). The first evicts dead values before
//! any other, so that at the checkpoint-all peak nothing live is evicted and the answer is
//! checkpoint-all.
//!
//! The compute sequence is turned into events by
//! [`crate::schedule::sequence::from_computes`], which frees every value after its last
//! read (never later than the cache evicted it, so the schedule peaks no higher than the
//! construction's own accounting), and simulated by `fit`.
//!
//! **Limits.** Below `need_budget` it is a heuristic: the cache usually carries it to the
//! graph's lower bound, but pinned inputs can fill the budget ([`NotFound::NoRoom`]). The
//! tree unfolding of a DAG can be exponential at tight budgets, so the work is capped at
//! [`WORK_PER_NODE`] computes per node (at least [`MIN_WORK`]) and the caller's deadline
//! and cancel flag are polled: the guarantee is one of memory, and the cap can end a
//! construction at any budget (a 500-node random layered graph at its `need_budget`).
//! Sethi–Ullman's order is optimal for trees only: on a DAG, computing an input first can
//! make another one cheap (a shared ancestor), which the needs do not see. A failure names
//! `need_budget` and the graph's proven lower bound, so the answer says how far from a
//! schedule the budget is.

use crate::graph::Graph;
use crate::schedule::sequence::from_computes;
use crate::solve::details::{Details, SethiUllmanDetails};
use crate::solve::{
    fit, Instance, Outcome, Scope, SolveError, SolveOptions, Solver, SolverInfo, Stop, Stopped,
};
use crate::solve::{footprint, Footprint};
use std::time::{Duration, Instant};
mod cache;
mod needs;

use cache::Cache;
use needs::Needs;

pub struct SethiUllman;

const NAME: &str = "sethi-ullman";

impl Solver for SethiUllman {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: NAME,
            description: "Recursive rematerialisation in Sethi-Ullman order: each op's inputs \
                          computed, recomputed from scratch when evicted, in the order of least \
                          memory, with the free memory a cache evicting the value of least \
                          recompute cost / (size x distance to next use); a schedule at every \
                          budget from the graph's need bound, in seconds.",
            scope: Scope::Heuristic,
            accepts: "any graph",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        // A construction stops at the memory limit (its work cap); the estimate is a
        // schedule that recomputes about every node once.
        Footprint::recomputing_once(instance.graph)
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        let graph = instance.graph;
        // Each new best is emitted and replayed as it is found, so that the answer is ready
        // when the constructions stop (see [`construct`]).
        let mut answer = None;
        let built = construct(instance, options, |built| {
            answer = Some(fit(
                instance,
                NAME,
                from_computes(graph, &built.computes),
                Some(Details::SethiUllman(built.details(graph))),
            ));
        });
        match built {
            Ok(_) => answer.expect("the best construction was emitted"),
            Err(NotFound::Stopped(stopped)) => stopped.outcome(NAME, "during the construction"),
            Err(failure) => Ok(Outcome::Infeasible {
                solver: NAME,
                proven: None,
                reason: failure.reason(instance),
            }),
        }
    }
}

/// A compute sequence built by [`construct`] and its figures.
#[derive(Clone, Debug)]
pub(crate) struct Constructed {
    /// The nodes in the order computed; repeats are recomputations.
    pub computes: Vec<usize>,
    /// Live values evicted to make room.
    pub evictions: usize,
    /// `K + max_v need(v)`, from which a schedule is guaranteed (`None`: beyond `u64`).
    pub need_budget: Option<u64>,
}

impl Constructed {
    fn details(&self, graph: &Graph) -> SethiUllmanDetails {
        SethiUllmanDetails {
            evictions: self.evictions,
            need_budget: self.need_budget,
            recomputations: self.computes.len() - graph.len(),
        }
    }
}

/// Why [`construct`] found no sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NotFound {
    /// The caller's deadline passed or it cancelled.
    Stopped(Stopped),
    /// Computing `node` needed `needed` bytes (`K`, the pinned inputs of the recursion and
    /// its output), more than the budget.
    NoRoom {
        node: usize,
        needed: u64,
        need_budget: Option<u64>,
    },
    /// The recomputations passed the work cap while computing `node`; `tried` constructions
    /// ran, none succeeded.
    Unfolding {
        node: usize,
        computes: usize,
        tried: usize,
        need_budget: Option<u64>,
    },
}

impl NotFound {
    /// The message of an unproven infeasibility: what failed, the budget from which the
    /// construction is guaranteed, and the proven lower bound.
    pub(crate) fn reason(&self, instance: &Instance) -> String {
        let graph = instance.graph;
        let (what, need_budget) = match *self {
            NotFound::Stopped(Stopped::Cancelled) => return "the solve was cancelled".into(),
            NotFound::Stopped(Stopped::TimeLimit) => {
                return "the time limit passed during the construction".into()
            }
            NotFound::NoRoom {
                node,
                needed,
                need_budget,
            } => (
                format!(
                    "computing '{}' needed {needed} bytes with the inputs its recursion holds",
                    graph.id(node)
                ),
                need_budget,
            ),
            NotFound::Unfolding {
                node,
                computes,
                tried,
                need_budget,
            } => (
                format!(
                    "its recomputations passed {computes} computes (the work cap) at '{}' \
                     ({tried} of its {} eviction rules tried: until one succeeds, those that \
                     pass the cap share {UNFOLDED_WORK_SHARE} caps)",
                    graph.id(node),
                    VARIANTS.len()
                ),
                need_budget,
            ),
        };
        let (lower, _) = graph.min_feasible_budget();
        let guaranteed = match need_budget {
            Some(b) => format!(
                "from {b} bytes, {} bytes above the budget, its construction never runs out \
                 of memory (only its work cap can end it there)",
                b.saturating_sub(instance.budget)
            ),
            None => "its need bound exceeds 2^64 bytes".into(),
        };
        format!(
            "{NAME} found no schedule within {} bytes: {what}; {guaranteed}; no schedule at all \
             fits below {lower} bytes (the proven minimum, {} bytes below the budget)",
            instance.budget,
            instance.budget.saturating_sub(lower)
        )
    }
}

/// The most computes per node before the construction counts as unfolding the DAG
/// exponentially (at least [`MIN_WORK`] in all).
const WORK_PER_NODE: usize = 256;
/// The work cap of small graphs, whose unfolding may repeat a node far more than
/// [`WORK_PER_NODE`] times at their tightest budgets and still be quick.
const MIN_WORK: usize = 1 << 20;
/// Until a construction succeeds, those that pass their work cap share this many caps: on
/// a graph that unfolds, the other eviction rules unfold too.
const UNFOLDED_WORK_SHARE: usize = 2;
/// What one construction's eviction rule makes of a value no target reads again (it may
/// still be read by the recomputation of a descendant).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dead {
    /// Evicted before any other: the construction is checkpoint-all at its peak.
    First,
    /// Scored 0, so evicted first when drawn.
    Zero,
    /// Scored as read just past the last target.
    Far,
}

/// One construction's eviction rule: how many non-resident ancestors `c_remat` visits
/// per candidate, and what dead values score.
#[derive(Clone, Copy, Debug)]
struct Variant {
    neighbourhood: usize,
    dead: Dead,
}

/// The constructions tried, the cheapest kept (none dominates on every graph and budget).
const VARIANTS: [Variant; 7] = [
    Variant {
        neighbourhood: 32,
        dead: Dead::First,
    },
    Variant {
        neighbourhood: 32,
        dead: Dead::Zero,
    },
    Variant {
        neighbourhood: 16,
        dead: Dead::Zero,
    },
    Variant {
        neighbourhood: 64,
        dead: Dead::Zero,
    },
    Variant {
        neighbourhood: 32,
        dead: Dead::Far,
    },
    Variant {
        neighbourhood: 16,
        dead: Dead::Far,
    },
    Variant {
        neighbourhood: 64,
        dead: Dead::Far,
    },
];
/// The candidates drawn per eviction when more are resident.
const SAMPLE: usize = 64;
/// Computes between two polls of the deadline.
const POLL_EVERY: usize = 1024;
/// The constructions after a schedule is found stop this many times the time its answer
/// took to emit and replay before the deadline: time for the answer of a later one (at
/// most twice as many computes, [`construct_within`]'s cap) and for the caller's replay and
/// writing of it (about four times more on a 15x recomputing chain: `docs/performance.md`).
const ANSWER_TIMES: u32 = 6;

/// `need_budget`: the budget from which the construction never runs out of memory (the module
/// doc's **Guarantee**; its work cap can still end it), `None` beyond `u64`.
pub(crate) fn need_budget(graph: &Graph) -> Option<u64> {
    Needs::of(graph).budget(graph)
}

/// Builds the compute sequence of `instance` (see the module doc): one construction per
/// neighbourhood of [`VARIANTS`], the cheapest kept; or says why none was found (the
/// first construction's failure, the most informative).
///
/// `emit` is called with each construction that becomes the best (the first success, then
/// any cheaper one), so that the solver builds and replays its answer then,
/// not after the deadline: a 15x recomputing chain's answer of three million events takes
/// a fifth of a second to emit and replay, once the constructions have used the time
/// limit. The time `emit` takes is measured, and the constructions after it stop
/// [`ANSWER_TIMES`] that time before the deadline.
pub(crate) fn construct(
    instance: &Instance,
    options: &SolveOptions,
    emit: impl FnMut(&Constructed),
) -> Result<Constructed, NotFound> {
    let graph = instance.graph;
    // The work cap, and at most the computes whose schedule fits the memory limit.
    let fits = options.memory_limit.map_or(usize::MAX, |limit| {
        let room = limit.saturating_sub(footprint::linear_bytes(graph));
        usize::try_from(room / footprint::bytes_per_compute(graph)).unwrap_or(usize::MAX)
    });
    let work = WORK_PER_NODE
        .saturating_mul(graph.len())
        .max(MIN_WORK)
        .min(fits);
    construct_within(instance, options, work, emit)
}

/// [`construct`] with the work cap `work` per construction.
fn construct_within(
    instance: &Instance,
    options: &SolveOptions,
    work: usize,
    mut emit: impl FnMut(&Constructed),
) -> Result<Constructed, NotFound> {
    let graph = instance.graph;
    let needs = Needs::of(graph);
    let need_budget = needs.budget(graph);
    let Some(capacity) = instance.budget.checked_sub(graph.fixed_memory()) else {
        return Err(NotFound::NoRoom {
            node: 0,
            needed: graph.fixed_memory(),
            need_budget,
        });
    };
    let stop = Stop::start(options);
    let attempt = |variant: usize, work: usize, stop: &Stop| {
        let mut cache = Cache::new(graph, capacity, options.seed, VARIANTS[variant]);
        let mut run = Run {
            graph,
            needs: &needs,
            cache: &mut cache,
            computes: Vec::with_capacity(graph.len()),
            stop,
            work,
        };
        run.all_targets(options, variant)?;
        let cost: f64 = run.computes.iter().map(|&v| graph.cost(v)).sum();
        let built = Constructed {
            computes: run.computes,
            evictions: cache.evictions,
            need_budget,
        };
        Ok::<_, Fail>((cost, built))
    };
    let mut best =
        attempt(0, work, &stop).map_err(|failure| failure.first(graph, work, need_budget));
    if matches!(best, Err(NotFound::Stopped(_))) {
        return best.map(|(_, built)| built);
    }
    // The time the best's answer took to emit.
    let mut emit_timed = |built: &Constructed| {
        let started = Instant::now();
        emit(built);
        started.elapsed()
    };
    let mut emitted = match &best {
        Ok((_, built)) => emit_timed(built),
        Err(_) => Duration::ZERO,
    };
    // The work of the constructions that unfold past their cap, while none has succeeded.
    let mut unfolded = if matches!(best, Err(NotFound::Unfolding { .. })) {
        work
    } else {
        0
    };
    for variant in 1..VARIANTS.len() {
        // A construction that recomputes much more than the cheapest so far will not
        // beat it: its work is capped at twice that one's. Until one succeeds, those that
        // unfold share one cap of twice the work.
        let work = match &best {
            Ok((_, b)) => work.min(b.computes.len().saturating_mul(2)),
            Err(_) => work.min(
                UNFOLDED_WORK_SHARE
                    .saturating_mul(work)
                    .saturating_sub(unfolded),
            ),
        };
        if work == 0 {
            break;
        }
        let stop = clear_of_answer(&stop, emitted);
        if stop.poll().is_err() {
            break;
        }
        if let Err(NotFound::Unfolding { tried, .. }) = &mut best {
            *tried += 1;
        }
        match attempt(variant, work, &stop) {
            Ok(built) if best.as_ref().is_ok_and(|b| b.0 <= built.0) => {}
            Ok(built) => {
                emitted = emit_timed(&built.1);
                best = Ok(built);
            }
            Err(Fail::Stopped(_)) => break,
            Err(Fail::Unfolding(_)) => unfolded = unfolded.saturating_add(work),
            Err(Fail::NoRoom { .. }) => {}
        }
    }
    best.map(|(_, built)| built)
}

/// `stop` with its deadline brought forward by [`ANSWER_TIMES`] the time the best answer
/// took to emit (`emitted`; zero before one is found), so that a later answer, its replay
/// and its writing are done by the deadline.
fn clear_of_answer(stop: &Stop, emitted: Duration) -> Stop {
    match stop.deadline() {
        Some(deadline) => stop.sooner(
            deadline
                .saturating_duration_since(Instant::now())
                .saturating_sub(emitted * ANSWER_TIMES),
        ),
        None => stop.clone(),
    }
}

/// Why a recursion stopped.
enum Fail {
    Stopped(Stopped),
    /// `needed` bytes beyond `K` to compute `node`.
    NoRoom {
        node: usize,
        needed: u64,
    },
    Unfolding(usize),
}

impl Fail {
    /// The failure of the first construction (of work cap `work`), as [`construct`] says it.
    fn first(self, graph: &Graph, work: usize, need_budget: Option<u64>) -> NotFound {
        match self {
            Fail::Stopped(s) => NotFound::Stopped(s),
            Fail::NoRoom { node, needed } => NotFound::NoRoom {
                node,
                needed: needed.saturating_add(graph.fixed_memory()),
                need_budget,
            },
            Fail::Unfolding(node) => NotFound::Unfolding {
                node,
                computes: work,
                tried: 1,
                need_budget,
            },
        }
    }
}

/// One node being computed: its inputs in the order processed, and how many are done.
struct Frame {
    v: usize,
    inputs: Vec<usize>,
    done: usize,
}

/// One construction: the recursion over the cache.
struct Run<'a, 'g> {
    graph: &'g Graph,
    needs: &'a Needs,
    cache: &'a mut Cache<'g>,
    computes: Vec<usize>,
    stop: &'a Stop,
    work: usize,
}

impl Run<'_, '_> {
    /// Computes every target in solver order; `variant` numbers the construction in the
    /// progress reports.
    fn all_targets(&mut self, options: &SolveOptions, variant: usize) -> Result<(), Fail> {
        let n = self.graph.len();
        let report_every = (n / 10).max(1);
        for target in 0..n {
            self.cache.now = target;
            self.materialise(target)?;
            self.cache.passed(target);
            if target % report_every == 0 {
                options.report(
                    format!(
                        "{NAME} (construction {}/{}): {} of {n} ops, {} computes",
                        variant + 1,
                        VARIANTS.len(),
                        target + 1,
                        self.computes.len()
                    ),
                    Some(target as f64 / n as f64),
                );
            }
        }
        Ok(())
    }

    /// Makes `target` resident: the recursion of the module doc, on an explicit stack
    /// (the recursion is as deep as the graph).
    fn materialise(&mut self, target: usize) -> Result<(), Fail> {
        let mut stack = vec![self.frame(target)];
        while let Some(top) = stack.last_mut() {
            if let Some(&u) = top.inputs.get(top.done) {
                if self.cache.resident[u] {
                    self.cache.pin(u);
                    top.done += 1;
                } else {
                    let child = self.frame(u);
                    stack.push(child);
                }
                continue;
            }
            let v = top.v;
            self.compute(v)?;
            stack.pop();
            if let Some(parent) = stack.last_mut() {
                self.cache.pin(v);
                parent.done += 1;
            }
        }
        Ok(())
    }

    /// The frame of `v`, its inputs ordered: the resident ones first when the room left
    /// holds them and the needs of the others, else all in the Sethi–Ullman order.
    fn frame(&self, v: usize) -> Frame {
        let cache = &*self.cache;
        let graph = self.graph;
        let order = self.needs.inputs(v);
        let room = cache.capacity.saturating_sub(cache.pinned);
        // The bytes the resident inputs would add to the pinned ones.
        let mut held: u64 = order
            .iter()
            .filter(|&&u| cache.resident[u] && cache.pins[u] == 0)
            .map(|&u| graph.memory(u))
            .sum();
        let mut required = held;
        for &u in order.iter().filter(|&&u| !cache.resident[u]) {
            required = required.max(held.saturating_add(self.needs.need[u]));
            held = held.saturating_add(graph.memory(u));
        }
        required = required.max(held.saturating_add(graph.memory(v)));
        let inputs = if required <= room {
            let (mut first, rest): (Vec<usize>, Vec<usize>) =
                order.iter().partition(|&&u| cache.resident[u]);
            first.extend(rest);
            first
        } else {
            order.to_vec()
        };
        Frame { v, inputs, done: 0 }
    }

    /// Computes `v`, whose inputs are resident and pinned, then unpins them.
    fn compute(&mut self, v: usize) -> Result<(), Fail> {
        if self.computes.len() >= self.work {
            return Err(Fail::Unfolding(v));
        }
        if self.computes.len() % POLL_EVERY == POLL_EVERY - 1 {
            self.stop.poll().map_err(Fail::Stopped)?;
        }
        self.cache.make_room(self.graph.memory(v), v)?;
        self.cache.insert(v);
        self.computes.push(v);
        for &u in self.graph.preds(v) {
            self.cache.unpin(u);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
