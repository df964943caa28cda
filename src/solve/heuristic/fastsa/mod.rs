//! `fastsa`: simulated annealing over the compute sequence (Imanishi, Xu, Takagi, Wang,
//! Castillo, "A fast heuristic to optimize time-space tradeoff for large models", NeurIPS
//! 2023). The paper's code is not public; this is a clean-room implementation of what the
//! paper fixes.
//!
//! * **State.** S is a sequence of T slots, each a nop or the compute of one node; a node
//!   appearing again is a recomputation. The start sequence (checkpoint-all's order
//!   `0..n`, or the computes of any schedule for [`improve`]) is spread evenly over the
//!   slots, the rest nop ([`sequence`]; T = 64 slots per compute, a power of two between
//!   2^10 and 2^22).
//! * **Mutations.** (1) Put a random node `n` into a random nop slot `t`, valid only if
//!   each input of `n` is produced before `t`. (2) Remove the node at a random compute
//!   slot, valid only if the node keeps a production and every read it served is served by
//!   an earlier one. (3) Rotate = (1) + (2) with the node of the removed slot: a compute
//!   moves, the cost stays.
//! * **Memory.** M(S) is the simulator's peak of the schedule
//!   `schedule::sequence::from_computes(S)` emits, kept in a range-add / range-max segment
//!   tree over value lifetimes ([`tree`]): O(log T) per mutation.
//! * **Objective.** `f(S) = max(B, M(S)) × C(S)`, B the budget. C(S) counts each compute at
//!   `c_v + ε`, `ε = 10⁻³ ×` the mean cost (1 when every cost is 0), so that a free
//!   recomputation is not free to the search (as DTR's `unit`).
//! * **Acceptance.** Metropolis: a mutation raising f by Δ > 0 is kept with probability
//!   `exp(−Δ / h)`. The temperature falls exponentially over a phase of N iterations,
//!   `h = h_i · exp(log(h_f / h_i) · i / N)`, from `h_i = 10⁻³ f(S₀)` to `h_f = 10⁻⁴ f(S₀)`.
//! * **Phases.** The grouping pre-pass ([`grouping`]) fuses single-consumer nodes into
//!   their consumer when their inputs are no larger than their output. Phase 1 anneals the
//!   grouped graph from `h_i` until M(S) ≤ B, for at most N₁ = 20 M iterations; its
//!   sequence expands to the original nodes, and phase 2 anneals those for N₂ = 2 M
//!   iterations from phase 1's last temperature down to `h_f`. [`improve`] starts from a
//!   sequence of original nodes and runs phase 2 alone, from `h_i`.
//! * **Effort.** With a work limit W (`SolveOptions::work_limit`, in iterations) phase 1
//!   may run until iteration ⌊10 W / 11⌋ (the paper's 20 M : 2 M) and phase 2 until
//!   iteration W, and `i / N` is the fraction of the phase's iterations; the time limit is
//!   then only a safety cap. Otherwise, with a time limit, the clock replaces the iteration
//!   counts: phase 1 may use 10/11 of the limit, phase 2 the rest, and `i / N` is the
//!   elapsed fraction of the phase. `Stop` is polled every [`POLL_EVERY`] iterations and
//!   after every snapshot of a new best sequence (a copy of the whole sequence),
//!   progress reported about twice a second. A run that no clock stops (a work limit, or
//!   neither limit) is deterministic for a given seed.
//! * **Answer.** The least-cost sequence that fit B by the tree (the grouped bound in
//!   phase 1, never below the expanded sequence's peak), through `from_computes` and
//!   `fit`. The search stops early once that cost is Σ_v c_v, which no schedule beats.

mod grouping;
mod sequence;
mod tree;

#[cfg(test)]
mod tests;

use crate::graph::Graph;
use crate::schedule::sequence::from_computes;
use crate::schedule::{simulate, Event, Schedule};
use crate::solve::details::{Details, FastSaDetails};
use crate::solve::{
    fit, internal, Instance, Outcome, Scope, SolveError, SolveOptions, Solver, SolverInfo, Stop,
    Stopped,
};
use crate::solve::{footprint, Footprint};
use grouping::Groups;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sequence::{Model, Sequence};
use std::time::{Duration, Instant};

pub(crate) const NAME: &str = "fastsa";

/// The paper's iteration counts: phase 1 (grouped, at most, until the budget is met) and
/// phase 2 (ungrouped).
const PHASE1_ITERATIONS: u64 = 20_000_000;
const PHASE2_ITERATIONS: u64 = 2_000_000;
/// Iterations between two polls of `Stop` (and of the clock).
const POLL_EVERY: u64 = 4096;
/// The time between two progress reports.
const REPORT_EVERY: Duration = Duration::from_millis(500);
/// `h_i` and `h_f` as fractions of the start's objective.
const INITIAL_TEMPERATURE: f64 = 1e-3;
const FINAL_TEMPERATURE: f64 = 1e-4;

pub struct FastSa;

impl Solver for FastSa {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: NAME,
            description: "FastSA (Imanishi et al., NeurIPS 2023): simulated annealing over the \
                          compute sequence, recomputing and reordering, with the peak kept in a \
                          segment tree; grouped nodes first, then the original ones.",
            scope: Scope::Heuristic,
            accepts: "any graph",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        let graph = instance.graph;
        let needed = Sequence::bytes_for(graph.len(), graph.edge_count(), graph.len());
        Footprint {
            bytes: footprint::linear_bytes(graph).saturating_add(needed),
            what: format!(
                "a sequence of {} slots over {} nodes",
                Sequence::slots_for(graph.len()),
                graph.len()
            ),
        }
    }
    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        let graph = instance.graph;
        let course = Course::of(options, true);
        let run = search(
            instance,
            options,
            course,
            &(0..graph.len()).collect::<Vec<_>>(),
        )?;
        finish(instance, run, None)
    }
}

/// Anneals from the compute sequence of `start`, a valid schedule of `instance.graph`
/// (phase 2 alone), and returns the cheapest schedule within budget it finds, or `start`
/// itself when `start` fits and nothing cheaper was found: never worse than `start`.
pub(crate) fn improve(
    instance: &Instance,
    options: &SolveOptions,
    start: &Schedule,
) -> Result<Outcome, SolveError> {
    let order: Vec<usize> = start
        .events
        .iter()
        .filter_map(|e| match *e {
            Event::Compute(v) => Some(v),
            _ => None,
        })
        .collect();
    let mut computed = vec![false; instance.graph.len()];
    for &v in &order {
        if let Some(c) = computed.get_mut(v) {
            *c = true;
        }
    }
    if let Some(v) = computed.iter().position(|&c| !c) {
        return Err(SolveError::Failed {
            solver: NAME,
            reason: format!(
                "its start schedule never computes '{}'",
                instance.graph.id(v)
            ),
        });
    }
    let run = search(instance, options, Course::of(options, false), &order)?;
    finish(instance, run, Some(start))
}

/// How long a phase may run.
#[derive(Clone, Copy, Debug)]
enum Span {
    Iterations(u64),
    /// Until the run's iteration count (all phases) reaches this.
    UntilIteration(u64),
    /// Until this time since the solve started.
    Until(Duration),
}

/// The phases of a search: phase 1 on the grouped graph (when it runs), phase 2 on the
/// original nodes.
#[derive(Clone, Copy, Debug)]
struct Course {
    grouped: Option<Span>,
    ungrouped: Span,
}

impl Course {
    /// The work limit split 10 : 1, else the time limit split 10 : 1, else the paper's
    /// iteration counts.
    fn of(options: &SolveOptions, grouped: bool) -> Course {
        if let Some(work) = options.work_limit {
            return Course {
                grouped: grouped.then_some(Span::UntilIteration(work / 11 * 10)),
                ungrouped: Span::UntilIteration(work),
            };
        }
        match options.time_limit {
            Some(limit) => Course {
                grouped: grouped.then(|| Span::Until(limit.mul_f64(10.0 / 11.0))),
                ungrouped: Span::Until(limit),
            },
            None => Course {
                grouped: grouped.then_some(Span::Iterations(PHASE1_ITERATIONS)),
                ungrouped: Span::Iterations(PHASE2_ITERATIONS),
            },
        }
    }
}

/// The best sequence found that fits the budget, in original nodes.
struct Best {
    order: Vec<usize>,
    weight: f64,
    iteration: u64,
    seconds: f64,
}

/// A sequence that fit, as the (slot, node) pairs of its computes: cheap to take, sorted
/// and expanded only at the end of its phase.
struct Snapshot {
    computes: Vec<(u32, u32)>,
    weight: f64,
    iteration: u64,
    seconds: f64,
}

/// What a search did, and the best it found.
struct Run {
    best: Option<Best>,
    iterations: u64,
    accepted: u64,
    lowest_peak: i64,
    first_fit: Option<f64>,
    phase: u8,
    grouped_nodes: Option<usize>,
    slots: usize,
    seconds: f64,
}

/// The annealer: its random source, temperatures and counters, over one phase at a time.
struct Annealer<'a> {
    options: &'a SolveOptions,
    stop: Stop,
    rng: ChaCha8Rng,
    budget: i64,
    /// `h_i` and `h_f`, set from the first phase's start.
    initial: f64,
    last: f64,
    /// Σ_v (c_v + ε): no sequence weighs less.
    floor: f64,
    iterations: u64,
    accepted: u64,
    lowest_peak: i64,
    /// The seconds at which a sequence first fit.
    first_fit: Option<f64>,
    phase: u8,
    reported: Duration,
    /// The best weight that fit so far, across phases.
    best_weight: f64,
}

/// How a phase ended.
enum Ended {
    /// Its span ran out, the budget was met (phase 1) or the cost reached Σ c_v.
    Done,
    /// The time limit passed.
    TimeLimit,
}

/// Runs the course from `start` (original nodes) and returns the best it found.
fn search(
    instance: &Instance,
    options: &SolveOptions,
    course: Course,
    start: &[usize],
) -> Result<Run, SolveError> {
    let graph = instance.graph;
    let epsilon = match graph.total_cost() / graph.len() as f64 * 1e-3 {
        e if e > 0.0 && e.is_finite() => e,
        _ => 1.0,
    };
    let mut annealer = Annealer::new(instance, options);
    let mut best = None;
    let mut order = start.to_vec();
    let mut temperature = None;
    let mut slots = 0;
    // The set-up (the groups, the models and the sequences) is linear in the graph and
    // its groups, about a second on a million nodes: the models' and the sequences'
    // builds poll the stop.
    let ungrouped = Groups::singletons(graph);
    let Some(plain) = checked_model(graph, &ungrouped, epsilon, options, start.len(), &annealer)?
    else {
        return Ok(annealer.run(None, None, slots));
    };
    annealer.floor = (0..graph.len()).map(|v| plain.weight(v)).sum();
    let grouped = course.grouped.map(|_| Groups::find(graph));
    if let (Some(groups), Some(span)) = (&grouped, course.grouped) {
        let Some(model) = checked_model(graph, groups, epsilon, options, groups.len(), &annealer)?
        else {
            return Ok(annealer.run(None, Some(groups.len()), slots));
        };
        let identity: Vec<usize> = (0..groups.len()).collect();
        let mut s = match Sequence::new_polled(&model, &identity, || annealer.stop.poll()) {
            Ok(built) => {
                built.map_err(|e| unordered(graph, groups.expand(&[e.node]).first(), e.position))?
            }
            Err(stopped) => return annealer.stopped(stopped, None, Some(groups.len()), slots),
        };
        annealer.set_temperatures(&s);
        slots = s.slots();
        // Phase 2 builds a sequence of the same slots over the original nodes, about as
        // long as this one took to build: it starts only if that much time is left.
        let build = annealer.stop.elapsed();
        let (ended, found, h) = annealer.anneal(&mut s, span, annealer.initial, true)?;
        order = groups.expand(&s.order());
        best = found.map(|f| f.expanded(groups));
        temperature = Some(h);
        let left = annealer
            .stop
            .deadline()
            .map(|d| d.saturating_duration_since(Instant::now()));
        if matches!(ended, Ended::TimeLimit) || left.is_some_and(|left| left < build) {
            return Ok(annealer.run(best, grouped.as_ref().map(Groups::len), slots));
        }
        annealer.phase = 2;
    } else {
        annealer.phase = 2;
    }
    if best.as_ref().is_some_and(|b| annealer.at_floor(b.weight)) {
        return Ok(annealer.run(best, grouped.as_ref().map(Groups::len), slots));
    }
    let groups = grouped.as_ref().map(Groups::len);
    let mut s = match Sequence::new_polled(&plain, &order, || annealer.stop.poll()) {
        Ok(built) => built.map_err(|e| unordered(graph, order.get(e.position), e.position))?,
        Err(stopped) => return annealer.stopped(stopped, best, groups, slots),
    };
    if temperature.is_none() {
        annealer.set_temperatures(&s);
    }
    slots = s.slots();
    let (_, found, _) = annealer.anneal(
        &mut s,
        course.ungrouped,
        temperature.unwrap_or(annealer.initial),
        false,
    )?;
    if let Some(f) = found {
        best = Some(f.expanded(&ungrouped));
    }
    Ok(annealer.run(best, grouped.as_ref().map(Groups::len), slots))
}

/// The model of `groups`, refused when its memory figures could overflow or the sequence
/// would not fit the solve's memory limit; `None` when the time limit passed while it was
/// built (the annealer's stop is polled throughout).
fn checked_model(
    graph: &Graph,
    groups: &Groups,
    epsilon: f64,
    options: &SolveOptions,
    computes: usize,
    annealer: &Annealer,
) -> Result<Option<Model>, SolveError> {
    let model = match groups.model_polled(graph, epsilon, || annealer.stop.poll()) {
        Ok(model) => model,
        Err(Stopped::Cancelled) => return Err(SolveError::Cancelled),
        Err(Stopped::TimeLimit) => return Ok(None),
    };
    if !model.fits_i64() || u32::try_from(graph.len()).is_err() {
        return Err(SolveError::Unsupported {
            solver: NAME,
            reason: "the graph's sizes or node count exceed what its sequence can hold \
                     (Σ sizes below 2^62 bytes, fewer than 2^32 nodes)"
                .into(),
        });
    }
    let needed = Sequence::bytes(&model, computes);
    if let Some(limit) = options.memory_limit.filter(|&l| needed > l) {
        return Err(SolveError::TooLarge {
            solver: NAME,
            what: format!(
                "a sequence of {} slots over {} nodes",
                Sequence::slots_for(computes),
                model.len()
            ),
            needed,
            limit,
        });
    }
    Ok(Some(model))
}

/// A start sequence that computes `node`, at `position`, before one of its inputs.
fn unordered(graph: &Graph, node: Option<&usize>, position: usize) -> SolveError {
    SolveError::Failed {
        solver: NAME,
        reason: format!(
            "its start sequence computes '{}' at position {position} before one of its inputs",
            node.filter(|&&v| v < graph.len())
                .map_or("?", |&v| graph.id(v))
        ),
    }
}

impl Snapshot {
    /// The snapshot as a sequence of original nodes.
    fn expanded(self, groups: &Groups) -> Best {
        let mut computes = self.computes;
        computes.sort_unstable();
        let order: Vec<usize> = computes.iter().map(|&(_, g)| g as usize).collect();
        Best {
            order: groups.expand(&order),
            weight: self.weight,
            iteration: self.iteration,
            seconds: self.seconds,
        }
    }
}

impl<'a> Annealer<'a> {
    /// An annealer at phase 1, its clock started now; its floor is set once the model of
    /// the original nodes is built.
    fn new(instance: &Instance, options: &'a SolveOptions) -> Annealer<'a> {
        Annealer {
            options,
            stop: Stop::start(options),
            rng: ChaCha8Rng::seed_from_u64(options.seed),
            budget: i64::try_from(instance.budget).unwrap_or(i64::MAX),
            initial: 0.0,
            last: 0.0,
            floor: 0.0,
            iterations: 0,
            accepted: 0,
            lowest_peak: i64::MAX,
            first_fit: None,
            phase: 1,
            reported: Duration::ZERO,
            best_weight: f64::INFINITY,
        }
    }

    /// `h_i` and `h_f` from the objective of the first phase's start S₀.
    fn set_temperatures(&mut self, s: &Sequence) {
        let f0 = self.objective(s);
        self.initial = INITIAL_TEMPERATURE * f0;
        self.last = FINAL_TEMPERATURE * f0;
    }

    /// Whether `weight` is Σ_v (c_v + ε) (up to rounding): every node once, no cheaper
    /// sequence exists.
    fn at_floor(&self, weight: f64) -> bool {
        weight <= self.floor * (1.0 + 1e-12)
    }

    /// `f(S) = max(B, M(S)) × C(S)`.
    fn objective(&self, s: &Sequence) -> f64 {
        s.peak().max(self.budget) as f64 * s.weight()
    }

    /// One phase: Metropolis over `s` for `span`, the temperature falling from `from` to
    /// `h_f`; with `until_fit`, the phase ends when M(S) ≤ B. Returns how it ended, the
    /// best sequence of the phase that fit (when it beats the earlier phases') and the
    /// last temperature.
    fn anneal(
        &mut self,
        s: &mut Sequence,
        span: Span,
        from: f64,
        until_fit: bool,
    ) -> Result<(Ended, Option<Snapshot>, f64), SolveError> {
        let began = self.stop.elapsed();
        let first = self.iterations;
        // h falls by `step` per iteration (iteration spans) or is set from the clock at
        // every poll (time spans).
        let cooling = if self.last > 0.0 && from > 0.0 {
            (self.last / from).ln()
        } else {
            0.0
        };
        let iterations = match span {
            Span::Iterations(n) => Some(n),
            Span::UntilIteration(end) => Some(end.saturating_sub(first)),
            Span::Until(_) => None,
        };
        let step = iterations.map_or(1.0, |n| (cooling / n.max(1) as f64).exp());
        let mut h = from;
        let mut f = self.objective(s);
        let mut found = None;
        self.observe(s, &mut found);
        if (until_fit && s.peak() <= self.budget) || self.at_floor(self.best_weight) {
            return Ok((Ended::Done, found, h));
        }
        // A snapshot copies the whole sequence: the stop is polled after each as well
        // (only the stop: the course of a run without a time limit stays as it was).
        let mut snapshot_taken = false;
        let ended = loop {
            let i = self.iterations - first;
            if std::mem::take(&mut snapshot_taken) && self.timed_out()? {
                break Ended::TimeLimit;
            }
            if i % POLL_EVERY == 0 {
                if self.timed_out()? {
                    break Ended::TimeLimit;
                }
                let elapsed = self.stop.elapsed();
                let progress = match span {
                    Span::Until(end) => {
                        (elapsed - began).as_secs_f64()
                            / end.saturating_sub(began).as_secs_f64().max(1e-9)
                    }
                    _ => i as f64 / iterations.unwrap_or(0).max(1) as f64,
                };
                if progress >= 1.0 {
                    break Ended::Done;
                }
                if let Span::Until(_) = span {
                    h = from * (cooling * progress).exp();
                }
                self.report(s, elapsed);
            }
            self.iterations += 1;
            h *= step;
            let Some(m) = s.propose(&mut self.rng) else {
                continue;
            };
            s.apply(m);
            let next = self.objective(s);
            let delta = next - f;
            if delta <= 0.0 || (h > 0.0 && self.rng.random::<f64>() < (-delta / h).exp()) {
                f = next;
                self.accepted += 1;
                let best_before = self.best_weight;
                if self.observe(s, &mut found) && (until_fit || self.at_floor(self.best_weight)) {
                    break Ended::Done;
                }
                snapshot_taken = self.best_weight < best_before;
            } else {
                s.undo(m);
            }
        };
        Ok((ended, found, h))
    }

    /// Whether the time limit has passed; the cancellation as an error.
    /// The run a stop during a sequence's build ends with: the best found before it
    /// (time limit), or the cancellation.
    fn stopped(
        &self,
        stopped: Stopped,
        best: Option<Best>,
        groups: Option<usize>,
        slots: usize,
    ) -> Result<Run, SolveError> {
        match stopped {
            Stopped::Cancelled => Err(SolveError::Cancelled),
            Stopped::TimeLimit => Ok(self.run(best, groups, slots)),
        }
    }

    fn timed_out(&self) -> Result<bool, SolveError> {
        match self.stop.poll() {
            Err(Stopped::Cancelled) => Err(SolveError::Cancelled),
            Err(Stopped::TimeLimit) => Ok(true),
            Ok(()) => Ok(false),
        }
    }

    /// Notes the peak of `s` and takes a snapshot of it when it fits the budget and weighs
    /// less than every sequence before; whether it fits.
    fn observe(&mut self, s: &Sequence, found: &mut Option<Snapshot>) -> bool {
        let peak = s.peak();
        self.lowest_peak = self.lowest_peak.min(peak);
        if peak > self.budget {
            return false;
        }
        if self.first_fit.is_none() {
            self.first_fit = Some(self.stop.elapsed().as_secs_f64());
        }
        if s.weight() < self.best_weight {
            self.best_weight = s.weight();
            let snapshot = found.get_or_insert_with(|| Snapshot {
                computes: Vec::new(),
                weight: 0.0,
                iteration: 0,
                seconds: 0.0,
            });
            s.computes_into(&mut snapshot.computes);
            snapshot.weight = s.weight();
            snapshot.iteration = self.iterations;
            snapshot.seconds = self.stop.elapsed().as_secs_f64();
        }
        true
    }

    /// A progress report, at most every [`REPORT_EVERY`].
    fn report(&mut self, s: &Sequence, elapsed: Duration) {
        if elapsed < self.reported + REPORT_EVERY {
            return;
        }
        self.reported = elapsed;
        let best = if self.best_weight.is_finite() {
            format!("best weight {:.6e} within budget", self.best_weight)
        } else {
            format!("lowest peak {} bytes", self.lowest_peak)
        };
        self.options.report(
            format!(
                "fastsa phase {}: {} iterations, {best}; now cost {} at peak {} of budget {} \
                 bytes, {:.1} s",
                self.phase,
                self.iterations,
                s.cost(),
                s.peak(),
                self.budget,
                elapsed.as_secs_f64()
            ),
            match (self.options.work_limit, self.options.time_limit) {
                (Some(w), _) => Some((self.iterations as f64 / w.max(1) as f64).min(1.0)),
                (None, l) => {
                    l.map(|l| (elapsed.as_secs_f64() / l.as_secs_f64().max(1e-9)).min(1.0))
                }
            },
        );
    }

    fn run(&self, best: Option<Best>, grouped_nodes: Option<usize>, slots: usize) -> Run {
        Run {
            best,
            iterations: self.iterations,
            accepted: self.accepted,
            lowest_peak: self.lowest_peak,
            first_fit: self.first_fit,
            phase: self.phase,
            grouped_nodes,
            slots,
            seconds: self.stop.elapsed().as_secs_f64(),
        }
    }
}

/// The answer of a run: its best sequence as a schedule, or `start` when `start` fits and
/// costs no more; an unproven infeasibility naming the lowest peak reached when neither
/// fits, or no solution when the time limit passed before a sequence was built.
fn finish(instance: &Instance, run: Run, start: Option<&Schedule>) -> Result<Outcome, SolveError> {
    let graph = instance.graph;
    let found = match &run.best {
        Some(best) => {
            let schedule = from_computes(graph, &best.order);
            let stats = simulate(graph, &schedule).map_err(|e| internal(NAME, e))?;
            Some((schedule, stats.total_cost))
        }
        None => None,
    };
    let start_cost = start
        .and_then(|s| simulate(graph, s).ok())
        .filter(|stats| stats.peak_memory <= instance.budget)
        .map(|stats| stats.total_cost);
    let details = |source: &'static str, best: Option<&Best>| {
        Some(Details::FastSa(Box::new(FastSaDetails {
            accepted: run.accepted,
            best_found_at_iteration: best.map(|b| b.iteration),
            best_found_at_s: best.map(|b| b.seconds),
            first_fit_s: run.first_fit,
            grouped_nodes: run.grouped_nodes,
            iterations: run.iterations,
            lowest_peak: u64::try_from(run.lowest_peak).unwrap_or(0),
            phase_reached: run.phase,
            slots: run.slots,
            source,
        })))
    };
    match (found, start_cost, start) {
        (Some((_, cost)), Some(start_cost), Some(start)) if start_cost <= cost => {
            fit(instance, NAME, start.clone(), details("start", None))
        }
        (None, Some(_), Some(start)) => fit(instance, NAME, start.clone(), details("start", None)),
        (Some((schedule, _)), _, _) => fit(
            instance,
            NAME,
            schedule,
            details("annealing", run.best.as_ref()),
        ),
        // No sequence was built (and so no peak seen): only the time limit ends a run so.
        (None, _, _) if run.lowest_peak == i64::MAX => Ok(Outcome::NoSolution {
            solver: NAME,
            reason: format!(
                "the time limit passed while FastSA set up its search ({:.1} s), before its \
                 first iteration",
                run.seconds
            ),
        }),
        (None, _, _) => Ok(Outcome::Infeasible {
            solver: NAME,
            proven: None,
            reason: format!(
                "FastSA found no sequence within the budget of {} bytes in {} iterations \
                 ({:.1} s); the lowest peak it reached was {} bytes",
                instance.budget, run.iterations, run.seconds, run.lowest_peak
            ),
        }),
    }
}
