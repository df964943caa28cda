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
//! > **Guarantee.** Every budget `≥ K + max_v need(v)` (`need_budget`) gets a schedule.
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
//! and recomputations unfold the DAG (measured: 97x the compute on Moccasin's 1000-node
//! graph at 90%, 1.17x with it). Candidates are scanned in full when few, else [`SAMPLE`]
//! of them are drawn with the seed (DTR's sampling), so that an eviction costs the same on
//! 10,000 nodes as on 100.
//!
//! No single eviction rule is best on every graph and budget, so [`VARIANTS`] constructions
//! run, differing in the neighbourhood cut and in what a value no target reads again
//! ([`Dead`]) scores, and the cheapest is kept; each after the first is cut off at twice
//! the computes of the cheapest so far. The first evicts dead values before any other, so
//! that at the checkpoint-all peak nothing live is evicted and the answer is checkpoint-all.
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
//! and cancel flag are polled. Sethi–Ullman's order is optimal for trees only: on a DAG,
//! computing an input first can make another one cheap (a shared ancestor), which the
//! needs do not see. A failure names `need_budget` and the graph's proven lower
//! bound, so the answer says how far from a schedule the budget is.

use crate::graph::Graph;
use crate::schedule::sequence::from_computes;
use crate::solve::details::{Details, SethiUllmanDetails};
use crate::solve::{
    fit, Instance, Outcome, Scope, SolveError, SolveOptions, Solver, SolverInfo, Stop, Stopped,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

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

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        match construct(instance, options) {
            Ok(built) => fit(
                instance,
                NAME,
                from_computes(instance.graph, &built.computes),
                Some(Details::SethiUllman(built.details(instance.graph))),
            ),
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
    /// The recomputations passed the work cap while computing `node`.
    Unfolding {
        node: usize,
        computes: usize,
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
                need_budget,
            } => (
                format!(
                    "its recomputations passed {computes} computes (the work cap) at '{}'",
                    graph.id(node)
                ),
                need_budget,
            ),
        };
        let (lower, _) = graph.min_feasible_budget();
        let guaranteed = match need_budget {
            Some(b) => format!(
                "it is guaranteed a schedule from {b} bytes, {} bytes above the budget",
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
/// The most non-resident ancestors `c_remat` visits per candidate.
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

/// Builds the compute sequence of `instance` (see the module doc): one construction per
/// neighbourhood of [`VARIANTS`], the cheapest kept; or says why none was found (the
/// first construction's failure, the most informative).
pub(crate) fn construct(
    instance: &Instance,
    options: &SolveOptions,
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
    let work = WORK_PER_NODE.saturating_mul(graph.len()).max(MIN_WORK);
    let attempt = |variant: usize, work: usize| {
        let mut cache = Cache::new(graph, capacity, options.seed, VARIANTS[variant]);
        let mut run = Run {
            graph,
            needs: &needs,
            cache: &mut cache,
            computes: Vec::with_capacity(graph.len()),
            stop: &stop,
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
    let mut best = attempt(0, work).map_err(|failure| match failure {
        Fail::Stopped(s) => NotFound::Stopped(s),
        Fail::NoRoom { node, needed } => NotFound::NoRoom {
            node,
            needed: needed.saturating_add(graph.fixed_memory()),
            need_budget,
        },
        Fail::Unfolding(node) => NotFound::Unfolding {
            node,
            computes: work,
            need_budget,
        },
    });
    if matches!(best, Err(NotFound::Stopped(_))) {
        return best.map(|(_, built)| built);
    }
    for variant in 1..VARIANTS.len() {
        // A construction that recomputes much more than the cheapest so far will not
        // beat it: its work is capped at twice that one's.
        let work = match &best {
            Ok((_, b)) => work.min(b.computes.len().saturating_mul(2)),
            Err(_) => work,
        };
        match attempt(variant, work) {
            Ok(built) if best.as_ref().is_ok_and(|b| b.0 <= built.0) => {}
            Ok(built) => best = Ok(built),
            Err(Fail::Stopped(_)) => break,
            Err(_) => {}
        }
    }
    best.map(|(_, built)| built)
}

/// The Sethi–Ullman needs and, for each node, its inputs in the order of least need.
struct Needs {
    /// `need(v)` in bytes beyond `K` (saturating at `u64::MAX`).
    need: Vec<u64>,
    /// The inputs of `v` by `need(u) − s_u` descending: `order[start[v]..start[v + 1]]`.
    order: Vec<usize>,
    start: Vec<usize>,
}

impl Needs {
    fn of(graph: &Graph) -> Needs {
        let n = graph.len();
        let mut need = vec![0u64; n];
        let mut order = Vec::with_capacity(graph.edge_count());
        let mut start = Vec::with_capacity(n + 1);
        for v in 0..n {
            start.push(order.len());
            let first = order.len();
            order.extend_from_slice(graph.preds(v));
            let inputs = &mut order[first..];
            // need(u) ≥ s_u, so the difference never underflows.
            inputs.sort_by_key(|&u| (std::cmp::Reverse(need[u] - graph.memory(u)), u));
            let (mut held, mut peak) = (0u64, 0u64);
            for &u in inputs.iter() {
                peak = peak.max(held.saturating_add(need[u]));
                held = held.saturating_add(graph.memory(u));
            }
            need[v] = peak.max(held.saturating_add(graph.memory(v)));
        }
        start.push(order.len());
        Needs { need, order, start }
    }

    fn inputs(&self, v: usize) -> &[usize] {
        &self.order[self.start[v]..self.start[v + 1]]
    }

    /// `K + max_v need(v)`, `None` beyond `u64`.
    fn budget(&self, graph: &Graph) -> Option<u64> {
        let max = self.need.iter().copied().max().unwrap_or(0);
        (max < u64::MAX)
            .then(|| graph.fixed_memory().checked_add(max))
            .flatten()
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

/// The resident values, their pins, and the eviction rule.
struct Cache<'g> {
    graph: &'g Graph,
    /// Bytes available for values: the budget less `K`.
    capacity: u64,
    used: u64,
    /// Bytes of the values pinned by the recursion (each counted once).
    pinned: u64,
    resident: Vec<bool>,
    pins: Vec<u32>,
    /// The resident values, in any order, and each one's position there.
    pool: Vec<usize>,
    slot: Vec<usize>,
    /// `succs(t)[next[t]]` is the first target from the current one on that reads `t`.
    next: Vec<usize>,
    /// The current target.
    now: usize,
    evictions: usize,
    /// A thousandth of the mean op cost, added to every op `c_remat` counts (free ops are
    /// no free recomputation: they cost events and lengthen chains).
    unit: f64,
    /// Stamps of the ancestors `c_remat` visited, per call.
    seen: Vec<u32>,
    stamp: u32,
    /// The stack of `c_remat`'s walk, kept between calls.
    walk: Vec<usize>,
    rng: ChaCha8Rng,
    variant: Variant,
    /// Values that no target reads again, pushed when they become so (some since evicted).
    dead: Vec<usize>,
}

impl<'g> Cache<'g> {
    fn new(graph: &'g Graph, capacity: u64, seed: u64, variant: Variant) -> Cache<'g> {
        let n = graph.len();
        Cache {
            graph,
            capacity,
            used: 0,
            pinned: 0,
            resident: vec![false; n],
            pins: vec![0; n],
            pool: Vec::new(),
            slot: vec![usize::MAX; n],
            next: vec![0; n],
            now: 0,
            evictions: 0,
            unit: match graph.total_cost() / n as f64 * 1e-3 {
                u if u > 0.0 => u,
                _ => 1.0,
            },
            seen: vec![0; n],
            stamp: 0,
            walk: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            variant,
            dead: Vec::new(),
        }
    }

    /// Target `t` is done: its inputs' next uses move past it.
    fn passed(&mut self, t: usize) {
        for &u in self.graph.preds(t) {
            self.next[u] += 1;
            if self.resident[u] && self.next_use(u).is_none() {
                self.dead.push(u);
            }
        }
    }

    fn pin(&mut self, u: usize) {
        if self.pins[u] == 0 {
            self.pinned += self.graph.memory(u);
        }
        self.pins[u] += 1;
    }

    fn unpin(&mut self, u: usize) {
        self.pins[u] -= 1;
        if self.pins[u] == 0 {
            self.pinned -= self.graph.memory(u);
        }
    }

    fn insert(&mut self, v: usize) {
        if self.next_use(v).is_none() {
            self.dead.push(v);
        }
        self.resident[v] = true;
        self.used += self.graph.memory(v);
        self.slot[v] = self.pool.len();
        self.pool.push(v);
    }

    fn evict(&mut self, v: usize) {
        self.resident[v] = false;
        self.used -= self.graph.memory(v);
        let at = self.slot[v];
        self.pool.swap_remove(at);
        if let Some(&moved) = self.pool.get(at) {
            self.slot[moved] = at;
        }
        self.slot[v] = usize::MAX;
        if self.next_use(v).is_some() {
            self.evictions += 1;
        }
    }

    /// The first target from the current one on that reads `t`.
    fn next_use(&self, t: usize) -> Option<usize> {
        self.graph.succs(t).get(self.next[t]).copied()
    }

    /// Evicts values until `extra` more bytes fit, for computing `v`.
    fn make_room(&mut self, extra: u64, v: usize) -> Result<(), Fail> {
        // used + extra > capacity, without overflow.
        while self
            .capacity
            .checked_sub(extra)
            .is_none_or(|c| self.used > c)
        {
            let Some(victim) = self.victim() else {
                return Err(Fail::NoRoom {
                    node: v,
                    needed: self.pinned.saturating_add(extra),
                });
            };
            self.evict(victim);
        }
        Ok(())
    }

    /// The evictable value of least score: among all when few, else among [`SAMPLE`]
    /// drawn (all again if the draw found none evictable).
    fn victim(&mut self) -> Option<usize> {
        if self.variant.dead == Dead::First {
            // Dead values score 0: the first evictable one on the stack is a least one.
            let mut pinned = Vec::new();
            let mut found = None;
            while let Some(d) = self.dead.pop() {
                if !self.resident[d] || self.graph.memory(d) == 0 {
                    continue;
                }
                if self.pins[d] > 0 {
                    pinned.push(d);
                    continue;
                }
                found = Some(d);
                break;
            }
            self.dead.append(&mut pinned);
            if found.is_some() {
                return found;
            }
        }
        let mut best: Option<(f64, u64, usize)> = None;
        if self.pool.len() > SAMPLE {
            for _ in 0..SAMPLE {
                let t = self.pool[self.rng.random_range(0..self.pool.len())];
                self.consider(t, &mut best);
            }
        }
        if best.is_none() {
            for i in 0..self.pool.len() {
                self.consider(self.pool[i], &mut best);
            }
        }
        best.map(|(_, _, t)| t)
    }

    /// Keeps in `best` the evictable value of least (score, −size, index) of `best` and `t`.
    fn consider(&mut self, t: usize, best: &mut Option<(f64, u64, usize)>) {
        let size = self.graph.memory(t);
        if self.pins[t] > 0 || size == 0 {
            return;
        }
        let score = self.score(t);
        let better = best.is_none_or(|(s, m, b)| {
            score
                .total_cmp(&s)
                .then(m.cmp(&size))
                .then(t.cmp(&b))
                .is_lt()
        });
        if better {
            *best = Some((score, size, t));
        }
    }

    /// `c_remat(t) / (s_t · (next(t) − now + 1))`; 0 for a value no target reads again.
    fn score(&mut self, t: usize) -> f64 {
        let graph = self.graph;
        // Evicted consumers with a future reader need `t` to be recomputed: they count in its
        // cost and their next use is one of its own.
        let mut next = self.next_use(t);
        let mut downstream = 0.0;
        for &w in graph.succs(t) {
            if w < self.now && !self.resident[w] {
                if let Some(nw) = self.next_use(w) {
                    next = Some(next.map_or(nw, |x| x.min(nw)));
                    downstream += graph.cost(w) + self.unit;
                }
            }
        }
        let distance = match next {
            Some(next) => next - self.now + 1,
            None if self.variant.dead != Dead::Far => return 0.0,
            // Read by no target again, though maybe by recomputations: past the end.
            None => 2 * graph.len() - self.now + 1,
        };
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.seen.fill(0);
            self.stamp = 1;
        }
        let mut cost = graph.cost(t) + self.unit + downstream;
        let mut stack = std::mem::take(&mut self.walk);
        stack.clear();
        stack.extend_from_slice(graph.preds(t));
        let mut visited = 0;
        while let Some(u) = stack.pop() {
            if self.resident[u] || self.seen[u] == self.stamp {
                continue;
            }
            self.seen[u] = self.stamp;
            cost += graph.cost(u) + self.unit;
            visited += 1;
            if visited == self.variant.neighbourhood {
                break;
            }
            stack.extend_from_slice(graph.preds(u));
        }
        self.walk = stack;
        cost / (graph.memory(t) as f64 * distance as f64)
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
mod tests {
    use super::*;
    use crate::budget::between_min_and_peak;
    use crate::graph::generate::{self, DagShape};
    use crate::schedule::{checkpoint_all_peak, simulate};
    use crate::solve::solve_exhaustive_unbounded;
    use proptest::prelude::*;

    /// The schedule of a construction, checked by the simulator: valid and within budget.
    fn schedule_cost(graph: &Graph, budget: u64) -> Option<(f64, Constructed)> {
        let built = construct(&Instance { graph, budget }, &SolveOptions::default()).ok()?;
        let stats = simulate(graph, &from_computes(graph, &built.computes))
            .unwrap_or_else(|e| panic!("{budget}: {e}"));
        assert!(
            stats.peak_memory <= budget,
            "{budget}: {}",
            stats.peak_memory
        );
        Some((stats.total_cost, built))
    }

    /// On the Fibonacci-like chain (each node reads the two before it) the needs are those
    /// worked out by hand: inputs by need − size descending.
    #[test]
    fn needs_follow_the_sethi_ullman_order() {
        let g = generate::random_dag(&DagShape::dense(1), 0);
        assert_eq!(Needs::of(&g).need, [g.memory(0)]);
        let g = generate::linear(2); // 0 1 | 2 | 3 (2, 1) 4 (3, 0), unit sizes
        let needs = Needs::of(&g);
        assert_eq!(needs.need, [1, 2, 2, 3, 3]);
        // 4 reads 3 (need 3, size 1) and 0 (need 1): 3 first, then 0 beside it.
        assert_eq!(needs.inputs(4), [3, 0]);
        assert_eq!(needs.budget(&g), Some(3));
    }

    /// On small random DAGs, at every budget from the lower bound to the checkpoint-all
    /// peak: each schedule found is valid, fits and costs at least the exhaustive optimum;
    /// from the need budget on, one is always found; at the peak it is checkpoint-all.
    #[test]
    fn small_dags_fit_never_beat_the_oracle_and_keep_the_guarantee() {
        for seed in 0..40 {
            let g = generate::random_dag(&DagShape::sparse(), seed);
            let (lower, _) = g.min_feasible_budget();
            let peak = checkpoint_all_peak(&g);
            let need_budget = Needs::of(&g).budget(&g).unwrap();
            for budget in lower..=peak.max(need_budget) {
                let found = schedule_cost(&g, budget);
                if budget >= need_budget {
                    assert!(found.is_some(), "seed {seed} @ {budget} >= {need_budget}");
                }
                let Some((cost, built)) = found else { continue };
                let instance = Instance { graph: &g, budget };
                let optimum = solve_exhaustive_unbounded(&instance, &SolveOptions::default())
                    .unwrap()
                    .stats
                    .expect("a schedule exists where one was constructed")
                    .total_cost;
                assert!(cost >= optimum - 1e-9, "seed {seed} @ {budget}");
                if budget == peak {
                    assert_eq!(built.computes.len(), g.len(), "seed {seed} at the peak");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Every budget from `K + max need` gets a schedule, on denser DAGs too.
        #[test]
        fn every_budget_from_the_need_bound_gets_a_schedule(
            seed in 0u64..10_000,
            n in 2usize..40,
            slack in 0u64..8,
        ) {
            let g = generate::random_dag(&DagShape::dense(n), seed);
            let need_budget = Needs::of(&g).budget(&g).unwrap();
            prop_assert!(schedule_cost(&g, need_budget + slack).is_some());
        }
    }

    /// 2,000-node generated graphs at 10%, 25% and 50% of the way from the lower bound to
    /// the checkpoint-all peak: a schedule at each, through the solver and the simulator.
    #[test]
    fn large_graphs_get_a_schedule_at_tight_budgets() {
        let transformer = generate::transformer(&generate::TransformerShape {
            layers: 64,
            ..Default::default()
        })
        .unwrap();
        for g in [generate::random_layered(2_000, 1), transformer] {
            for percent in [10, 25, 50] {
                let budget = between_min_and_peak(&g, f64::from(percent) / 100.0);
                let result =
                    crate::solve::solve(&Instance { graph: &g, budget }, NAME, &Default::default())
                        .unwrap();
                let stats = result
                    .stats
                    .unwrap_or_else(|| panic!("{:?} {percent}%: {:?}", g.name(), result.message));
                assert!(stats.peak_memory <= budget);
            }
        }
    }

    /// A failure names the need budget and the proven minimum.
    #[test]
    fn a_failure_says_how_far_the_budget_is() {
        let g = generate::linear(3);
        let (lower, _) = g.min_feasible_budget();
        let instance = Instance {
            graph: &g,
            budget: lower - 1,
        };
        let failure = construct(&instance, &SolveOptions::default()).unwrap_err();
        let reason = failure.reason(&instance);
        assert!(
            reason.contains("guaranteed a schedule from 3 bytes"),
            "{reason}"
        );
        assert!(reason.contains(&format!("below {lower} bytes")), "{reason}");
    }
}
