//! `two-level`: asynchronous multistage checkpointing (Kukreja, Hückelheim, Gorman,
//! "Backpropagation for long sequences: beyond memory constraints with constant
//! overheads", seed 000; digest §1), on a chain training graph with a slow storage tier.
//!
//! # The scheme (SEED L60-L69, L92-L103)
//!
//! In Revolve's view of a chain of `L` stages ([`super::revolve`]), `l = L + 1` steps map
//! `x_{j−1}` to `x_j`, `x_0` is the virtual chain input and step `L + 1` is the loss. With
//! `T_A` the time of one forward step and `T_T` the time to copy one state to the slow
//! tier, the *checkpointing interval* is
//!
//! ```text
//! I = ⌈T_T / T_A⌉                                                        (SEED L92-L94)
//! ```
//!
//! so that one copy finishes while the next `I` steps run. The steps fall into
//! `q = ⌈l / I⌉` intervals: interval `k` runs steps `kI+1 ..= min((k+1)I, l)` from its base
//! `x_{kI}`. The schedule:
//!
//! 1. **Sweep**: advance `x_0 -> x_{(q−1)I}`, keeping only the working state, and `store`
//!    the base of each interval `k = 1..=q−3` as it passes; a stored base is freed at
//!    once and leaves the fast tier when its copy completes. The bases of the last two
//!    intervals stay resident: `x_{(q−1)I}` is where the backward pass starts, and
//!    `x_{(q−2)I}` takes the place of the prefetch buffer the other intervals need.
//! 2. **Intervals in reverse**, `k = q−1 .. 0`: Revolve on the interval's `l_k` steps with
//!    `s` snapshots, the base included (the graph view of [`super::revolve`]). At the
//!    start of interval `k` the base of interval `k − 1` is `load`ed (prefetched in
//!    reverse order) when it was stored, so it has the whole interval to arrive.
//!
//! "In the case where there are very few layers, there might not be time to save a
//! single checkpoint ... this strategy would fall back to classic Revolve" (SEED L103):
//! when no base is stored (`q <= 3`) the solver runs plain Revolve. It also does when
//! plain Revolve is faster (see the model below), and says so.
//!
//! # Memory (digest §1.7 P3)
//!
//! Fast memory holds the `s` snapshots of the current interval (its base included), the
//! working state, the next state or gradient being computed, the incoming gradient, and
//! one prefetch buffer: `K + (s + 4)` states. The sweep needs at most four (working,
//! next, the kept base `x_{(q−2)I}`, and the state being copied, which leaves when its
//! copy is done since `T_T <= I·T_A`). More than `I − 1` snapshots do not shorten an
//! interval (`t(I, s) = I − 1` once `s >= I − 1`). The solver takes the largest
//! `s <= I − 1` whose schedule the simulator finds within the budget (the slot model is
//! exact on uniform chains; sizes that differ are measured, not assumed).
//!
//! # Time (SEED L75-L101)
//!
//! The paper's recompute factor, with `t(l, s)` Revolve's extra forward steps
//! ([`revolve_steps`]) and 1 meaning no recomputation (digest §1.3):
//!
//! ```text
//! R(l, s) = (t(l, s) + 1) / l
//! T_revolve = n·R(n, s)·T_A + n·T_B                                      (SEED L90)
//! T_async   = n·R(I, s)·T_A + n·T_B                                      (SEED L98-L99)
//! ```
//!
//! `T_async` counts, for each interval, the Revolve that re-runs its forward steps from the
//! restored base, but not the sweep that produced the bases: the paper clears all forward
//! activations after the sweep (L60), so that sweep is run too. Counting every compute of
//! the schedule above on the graph (forward ops `T_A`, backward ops `T_B`, the loss `T_ℓ`):
//!
//! ```text
//! T_async (graph) = [(q−1)·I + t(l_{q−1}, s) + (q−1)·t(I, s)]·T_A + L·T_B + T_ℓ
//! T_revolve (graph) = t(L+1, s')·T_A + L·T_B + T_ℓ
//! ```
//!
//! (`s'` = the snapshots plain Revolve gets from the same budget). Copies are free in
//! this model; the simulator's timed replay ([`crate::schedule::timeline`]) reproduces
//! `T_async (graph)` exactly on a uniform chain when no load arrives late, which holds
//! when a load takes at most the time of one interval's reversal,
//! `t(I, s)·T_A + I·T_B`; otherwise each of the stored bases' loads stalls the backward
//! pass by `T_R − (t(I, s)·T_A + I·T_B)` (`T_R` the read time; the paper's choice of `I`
//! ignores this side, digest §1.7 P2), which [`Assessment::predicted_stall`] adds up and
//! the simulator reports stall by stall. Both of the paper's figures are reported next
//! to the simulated makespan. On a chain whose stages differ, `T_A` and `T_B` are the mean
//! stage costs, `T_T` is the time to store the largest state, and the model is an
//! estimate; the simulator's figures are the answer.

use super::revolve::{revolve_steps, ChainView, Revolve};
use crate::graph::structure::{chain, Chain};
use crate::graph::{Graph, Storage};
use crate::schedule::{simulate, Event, Schedule, SimStats};
use crate::solve::details::{Details, TwoLevelDetails};
use crate::solve::{
    internal, Claim, Instance, Outcome, Plan, Scope, SolveError, SolveOptions, Solver, SolverInfo,
    Stop,
};
use serde::Serialize;

pub struct TwoLevel;

/// The recompute factor `R(l, s) = (t(l, s) + 1) / l` (1 = no recomputation); `None` when
/// no Revolve schedule exists (`s = 0`, `l >= 2`) or `l = 0`.
pub fn recompute_factor(l: u64, s: u64) -> Option<f64> {
    let t = revolve_steps(l, s)?;
    (l > 0).then(|| (t + 1) as f64 / l as f64)
}

/// The checkpointing interval `I = ⌈T_T / T_A⌉`, at least 1; `None` when `T_A = 0` and
/// `T_T > 0` (no amount of compute hides a copy).
pub fn interval(t_t: f64, t_a: f64) -> Option<u64> {
    if t_t <= t_a {
        return Some(1);
    }
    let i = (t_t / t_a).ceil();
    (i.is_finite() && i < u64::MAX as f64).then_some(i as u64)
}

/// The intervals of `l` steps for interval length `I`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Intervals {
    /// Revolve steps `l` (chain stages + the loss).
    pub steps: u64,
    /// The interval `I`.
    pub interval: u64,
    /// `q = ⌈l / I⌉`.
    pub count: u64,
    /// Steps of the last interval, `l − (q−1)·I`.
    pub last: u64,
}

impl Intervals {
    pub fn new(steps: u64, interval: u64) -> Intervals {
        let count = steps.div_ceil(interval.max(1));
        Intervals {
            steps,
            interval,
            count,
            last: steps - (count.saturating_sub(1)) * interval,
        }
    }
    /// Bases copied to the slow tier: those of intervals `1..=q−3`.
    pub fn stored(&self) -> u64 {
        self.count.saturating_sub(3)
    }
    /// Forward steps of the whole scheme with `s` snapshots per interval:
    /// `(q−1)·I + t(l_{q−1}, s) + (q−1)·t(I, s)`.
    pub fn advances(&self, s: u64) -> Option<u64> {
        let q = self.count.checked_sub(1)?;
        let inner = revolve_steps(self.interval, s)?;
        q.checked_mul(self.interval)?
            .checked_add(revolve_steps(self.last, s)?)?
            .checked_add(q.checked_mul(inner)?)
    }
}

/// Per-step times of a chain: the paper's `T_A`, `T_B`, and the loss.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StepTimes {
    /// Mean forward cost `T_A`.
    pub forward: f64,
    /// Mean backward cost `T_B`.
    pub backward: f64,
    pub loss: f64,
}

impl StepTimes {
    pub fn of(chain: &Chain) -> StepTimes {
        let n = chain.len() as f64;
        StepTimes {
            forward: chain.stages.iter().map(|s| s.fw).sum::<f64>() / n,
            backward: chain.stages.iter().map(|s| s.bw).sum::<f64>() / n,
            loss: chain.loss_cost,
        }
    }
    /// The graph-exact time of a schedule making `advances` forward steps on a chain of
    /// `stages` stages, when nothing stalls.
    fn total(&self, advances: u64, stages: usize) -> f64 {
        advances as f64 * self.forward + stages as f64 * self.backward + self.loss
    }
}

/// What the tier does for one chain and budget: the model's figures, before any
/// simulation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Assessment {
    pub times: StepTimes,
    /// `T_T`: the time to store the largest state.
    pub transfer_time: f64,
    /// The time to load it back.
    pub load_time: f64,
    pub intervals: Intervals,
    /// Snapshots per interval (two-level) and for plain Revolve, from the budget.
    pub snapshots: Option<u64>,
    pub revolve_snapshots: Option<u64>,
    /// `R(I, s)` and `R(l, s')` (the paper's factors).
    pub r_interval: Option<f64>,
    pub r_revolve: Option<f64>,
    /// The paper's `T_async` and `T_revolve` with `n = l` (SEED L90, L98-L99).
    pub t_async_paper: Option<f64>,
    pub t_revolve_paper: Option<f64>,
    /// The graph-exact model of both schedules (see the module docs).
    pub t_async: Option<f64>,
    pub t_revolve: Option<f64>,
    /// Whether a load can arrive while one interval is reversed.
    pub loads_hidden: bool,
    /// The stalls the model predicts otherwise: every stored base's load outlasts the
    /// reversal of the interval it is prefetched during by `T_R − (t(I, s)·T_A + I·T_B)`.
    pub predicted_stall: f64,
    /// Whether the two-level schedule is predicted faster than plain Revolve.
    pub helps: bool,
    /// One sentence saying so, and why.
    pub verdict: String,
}

/// The paper's `n·R·T_A + n·T_B` with `n = l` steps (SEED L90, L98-L99).
fn paper_time(times: &StepTimes, steps: u64, r: f64) -> f64 {
    let n = steps as f64;
    n * r * times.forward + n * times.backward
}

/// The graph-exact `T_async` of the two-level schedule with `s` snapshots per interval
/// (see the module docs); `None` when it stores nothing.
pub fn t_async(chain: &Chain, intervals: &Intervals, s: u64) -> Option<f64> {
    let advances = intervals.advances(s).filter(|_| intervals.stored() > 0)?;
    Some(StepTimes::of(chain).total(advances, chain.len()))
}

/// Bytes of the largest state a snapshot slot must hold.
fn slot_size(chain: &Chain) -> u64 {
    chain
        .stages
        .iter()
        .flat_map(|s| [s.x, s.delta])
        .chain([chain.loss_size])
        .max()
        .unwrap_or(0)
        .max(1)
}

/// Slots of the largest state that fit beside `fixed_memory` in `budget`.
fn slots(graph: &Graph, chain: &Chain, budget: u64) -> u64 {
    budget.saturating_sub(graph.fixed_memory()) / slot_size(chain)
}

/// Snapshots per interval the slot model allows (`K + (s + 4)` states), at most `I − 1`
/// (more do not shorten an interval's Revolve: `t(I, s) = I − 1` once `s >= I − 1`).
fn two_level_snapshots(slots: u64, interval: u64) -> Option<u64> {
    slots
        .checked_sub(4)
        .filter(|&s| s >= 1)
        .map(|s| s.min(useful_snapshots(interval)))
}

/// The most snapshots an interval of `I` steps can use.
fn useful_snapshots(interval: u64) -> u64 {
    interval.saturating_sub(1).max(1)
}

/// Snapshots plain Revolve gets: `K + (s + 2)` states (the virtual `x_0` is one of the
/// `s`), at most `l`.
fn revolve_snapshots(slots: u64, steps: u64) -> Option<u64> {
    slots
        .checked_sub(2)
        .filter(|&s| s >= 1)
        .map(|s| s.min(steps))
}

/// The model's view of `graph` (a chain with a storage tier) under `budget`.
pub fn assess(graph: &Graph, budget: u64) -> Result<Assessment, SolveError> {
    let (chain, storage) = inputs(graph)?;
    Ok(assess_chain(graph, &chain, &storage, budget))
}

fn assess_chain(graph: &Graph, chain: &Chain, storage: &Storage, budget: u64) -> Assessment {
    let times = StepTimes::of(chain);
    let state = chain.stages.iter().map(|s| s.x).max().unwrap_or(0);
    let transfer_time = storage.write.time(state);
    let load_time = storage.read.time(state);
    let steps = chain.len() as u64 + 1;
    let i = interval(transfer_time, times.forward).unwrap_or(steps);
    let intervals = Intervals::new(steps, i.min(steps));
    let slots = slots(graph, chain, budget);
    let snapshots = two_level_snapshots(slots, intervals.interval);
    let revolve_snapshots = revolve_snapshots(slots, steps);
    let r_interval = snapshots.and_then(|s| recompute_factor(intervals.interval, s));
    let r_revolve = revolve_snapshots.and_then(|s| recompute_factor(steps, s));
    let paper = |r: f64| paper_time(&times, steps, r);
    let t_async = snapshots.and_then(|s| t_async(chain, &intervals, s));
    let t_revolve = revolve_snapshots
        .and_then(|s| revolve_steps(steps, s))
        .map(|a| times.total(a, chain.len()));
    let reversal = snapshots
        .and_then(|s| revolve_steps(intervals.interval, s))
        .map(|t| t as f64 * times.forward + intervals.interval as f64 * times.backward);
    let loads_hidden = reversal.is_some_and(|r| load_time <= r);
    let predicted_stall = reversal.map_or(0.0, |r| {
        intervals.stored() as f64 * (load_time - r).max(0.0)
    });
    let helps = match (t_async, t_revolve) {
        (Some(a), Some(r)) => a + predicted_stall < r,
        (Some(_), None) => true,
        _ => false,
    };
    let verdict = match (t_async, t_revolve) {
        _ if intervals.stored() == 0 => format!(
            "the tier does not help: with I = {} the {} steps make {} interval(s), too few to \
             store a checkpoint (the last two bases stay in fast memory); plain Revolve runs",
            intervals.interval, steps, intervals.count
        ),
        (None, _) => format!(
            "the tier does not help: the budget holds {slots} states of {} bytes, fewer than \
             the 5 an interval needs",
            slot_size(chain)
        ),
        (Some(a), Some(r)) if !helps => format!(
            "the tier does not help: two-level would take {} (its sweep included{}), plain \
             Revolve {r}",
            a + predicted_stall,
            if predicted_stall > 0.0 {
                format!(", {predicted_stall} waiting for loads")
            } else {
                String::new()
            }
        ),
        (Some(a), r) => format!(
            "the tier helps: two-level takes {}{}, storing {} of {} interval bases{}",
            a + predicted_stall,
            r.map_or_else(
                || " where plain Revolve does not fit".to_string(),
                |r| format!(" against {r} for plain Revolve")
            ),
            intervals.stored(),
            intervals.count,
            if loads_hidden {
                String::new()
            } else {
                format!(
                    " ({predicted_stall} of it waiting: loads take {load_time}, longer than \
                     an interval's reversal)"
                )
            }
        ),
    };
    Assessment {
        times,
        transfer_time,
        load_time,
        intervals,
        snapshots,
        revolve_snapshots,
        r_interval,
        r_revolve,
        t_async_paper: r_interval.map(paper),
        t_revolve_paper: r_revolve.map(paper),
        t_async,
        t_revolve,
        loads_hidden,
        predicted_stall,
        helps,
        verdict,
    }
}

/// The chain and the storage tier, or why the solver cannot run.
fn inputs(graph: &Graph) -> Result<(Chain, Storage), SolveError> {
    let chain = chain(graph).map_err(|e| SolveError::Unsupported {
        solver: "two-level",
        reason: format!("two-level needs a chain training graph: {e}"),
    })?;
    ChainView::new(&chain).map_err(|e| SolveError::Unsupported {
        solver: "two-level",
        reason: e.to_string(),
    })?;
    let storage = *graph.storage().ok_or_else(|| SolveError::Unsupported {
        solver: "two-level",
        reason: "two-level needs a slow storage tier: add a `storage` object to the graph or \
                 the request (e.g. {\"transfer_time\": 8} or write/read bandwidths)"
            .into(),
    })?;
    Ok((chain, storage))
}

/// The two-level schedule for `intervals` with `s` snapshots per interval.
pub fn two_level_schedule(
    chain: &Chain,
    intervals: &Intervals,
    s: usize,
) -> Result<Schedule, SolveError> {
    let view = ChainView::new(chain).map_err(|e| internal_view(e.to_string()))?;
    let (i, q) = (intervals.interval as usize, intervals.count as usize);
    let node = |j: usize| chain.stages[j - 1].forward;
    // Interval k's base is stored for k in 1..=q−3 and kept for k = q−2, q−1.
    let stored = |k: usize| (1..=q.saturating_sub(3)).contains(&k);
    let mut events = Vec::new();
    // 1. The sweep.
    for j in 1..=(q - 1) * i {
        events.push(Event::Compute(node(j)));
        if j % i == 0 && stored(j / i) {
            events.push(Event::Store(node(j)));
        }
        let previous = j - 1;
        if previous >= 1 && !(previous % i == 0 && previous / i + 2 == q) {
            events.push(Event::Free(node(previous)));
        }
    }
    // 2. The intervals in reverse, each prefetching the base of the one before it.
    let mut grad = None;
    for k in (0..q).rev() {
        if k >= 1 && stored(k - 1) {
            events.push(Event::Load(node((k - 1) * i)));
        }
        let l = if k + 1 == q {
            intervals.last
        } else {
            intervals.interval
        } as usize;
        view.push_range(k * i, l, s, &mut grad, &mut events)
            .map_err(|e| internal_view(e.to_string()))?;
    }
    Ok(Schedule::new(events))
}

fn internal_view(reason: String) -> SolveError {
    SolveError::Failed {
        solver: "two-level",
        reason,
    }
}

/// A schedule from `build(s)` for the largest `s` in `1..=hi` whose simulated peak fits
/// the budget (peaks grow with `s`: bisection, then the answer is simulated again).
fn largest_fitting(
    instance: &Instance,
    options: &SolveOptions,
    hi: u64,
    build: impl Fn(usize) -> Result<Schedule, SolveError>,
) -> Result<Option<(u64, Schedule, SimStats)>, SolveError> {
    let stop = Stop::start(options);
    let fits = |s: u64| -> Result<Option<(Schedule, SimStats)>, SolveError> {
        if stop.cancelled() {
            return Err(SolveError::Cancelled);
        }
        let schedule = build(s as usize)?;
        let stats = simulate(instance.graph, &schedule).map_err(|e| internal("two-level", e))?;
        Ok((stats.peak_memory <= instance.budget).then_some((schedule, stats)))
    };
    if let Some((schedule, stats)) = fits(hi)? {
        return Ok(Some((hi, schedule, stats)));
    }
    let (mut lo, mut hi) = (0u64, hi);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid)?.is_some() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(match lo {
        0 => None,
        s => fits(s)?.map(|(schedule, stats)| (s, schedule, stats)),
    })
}

/// The makespan the simulator measured (the compute time when nothing is copied).
fn makespan(stats: &SimStats) -> f64 {
    stats
        .tiers
        .as_ref()
        .map_or(stats.total_cost, |t| t.makespan)
}

impl Solver for TwoLevel {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "two-level",
            description: "Kukreja et al.'s asynchronous two-level checkpointing: store every I-th state \
                          to the slow tier (I = ceil(T_T/T_A)), prefetch in reverse, Revolve inside \
                          intervals; plain Revolve when the tier does not help.",
            scope: Scope::Heuristic,
            accepts: "chain training graphs with a `storage` tier",
        }
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        let graph = instance.graph;
        let (chain, storage) = inputs(graph)?;
        let assessment = assess_chain(graph, &chain, &storage, instance.budget);
        let intervals = assessment.intervals;
        // The slot model is exact for uniform chains; search every s it might miss.
        let hi = slots(graph, &chain, instance.budget).min(useful_snapshots(intervals.interval));
        let two_level = if intervals.stored() > 0 && hi >= 1 {
            largest_fitting(instance, options, hi, |s| {
                two_level_schedule(&chain, &intervals, s)
            })?
        } else {
            None
        };
        let revolve = Revolve::fit(&chain, instance, options)?
            .map(|fit| (fit.snapshots as u64, fit.schedule, fit.stats));
        let pick_two_level = match (&two_level, &revolve) {
            (Some((_, _, a)), Some((_, _, r))) => makespan(a) < makespan(r),
            (Some(_), None) => true,
            _ => false,
        };

        let (mode, (s, schedule, stats)) = match (pick_two_level, two_level, revolve) {
            (true, Some(chosen), _) => ("two-level", chosen),
            (false, _, Some(chosen)) => ("revolve", chosen),
            _ => {
                return Ok(Outcome::Infeasible {
                    solver: "two-level",
                    proven: false,
                    reason: format!(
                        "neither two-level nor plain Revolve fits {} bytes: the budget holds {} \
                         states of {} bytes beside fixed_memory",
                        instance.budget,
                        slots(graph, &chain, instance.budget),
                        slot_size(&chain)
                    ),
                })
            }
        };
        let model = t_async(&chain, &intervals, s);
        let paper = recompute_factor(intervals.interval, s)
            .map(|r| paper_time(&assessment.times, intervals.steps, r));
        let two_level = mode == "two-level";
        let details = TwoLevelDetails {
            assessment: assessment.clone(),
            mode,
            simulated_makespan: makespan(&stats),
            snapshots: s,
            stall_time: stats.tiers.as_ref().map(|t| t.stall_time),
            stalls: stats.tiers.as_ref().map(|t| t.stalls.len()),
            t_async: two_level.then_some(model),
            t_async_paper: two_level.then_some(paper),
        };
        let message = match mode {
            "two-level" => format!(
                "two-level: I = {}, {} intervals, {} bases stored, s = {s}; simulated makespan {} \
                 (model T_async {}, the paper's n·R(I,s)·T_A + n·T_B = {}){}",
                intervals.interval,
                intervals.count,
                intervals.stored(),
                makespan(&stats),
                fmt(model),
                fmt(paper),
                stats
                    .tiers
                    .as_ref()
                    .filter(|t| !t.stalls.is_empty())
                    .map(|t| format!(
                        "; {} load(s) arrived late, stalling {}",
                        t.stalls.len(),
                        t.stall_time
                    ))
                    .unwrap_or_default(),
            ),
            _ => format!(
                "plain Revolve with s = {s} (makespan {}): {}",
                makespan(&stats),
                assessment.verdict
            ),
        };
        Ok(Outcome::Plan(Plan {
            schedule,
            claim: Claim::Feasible,
            solver: "two-level",
            scope: Scope::Heuristic,
            lower_bound: None,
            message: Some(message),
            details: Some(Details::TwoLevel(Box::new(details))),
        }))
    }
}

fn fmt(x: Option<f64>) -> String {
    x.map_or_else(|| "n/a".into(), |x| format!("{x}"))
}

/// One row of the table behind the paper's Figure 3: recompute factors at sequence
/// length `n` with `s` snapshots.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FactorRow {
    pub n: u64,
    /// `R(n, s)`: plain Revolve.
    pub revolve: f64,
    /// Per interval `I`: the paper's `R(min(I, n), s)`, constant in `n` once `n >= I`.
    pub paper: Vec<f64>,
    /// Per interval `I`: `(forward steps of the two-level schedule + 1) / n`, its sweep
    /// included; `None` when it stores nothing (`q <= 3`) and plain Revolve runs instead.
    pub scheme: Vec<Option<f64>>,
}

/// The Figure 3 table for `s` snapshots, the given intervals and sequence lengths.
pub fn figure3(s: u64, intervals: &[u64], lengths: &[u64]) -> Option<Vec<FactorRow>> {
    lengths
        .iter()
        .map(|&n| {
            let paper = intervals
                .iter()
                .map(|&i| recompute_factor(i.min(n), s))
                .collect::<Option<Vec<f64>>>()?;
            let scheme = intervals
                .iter()
                .map(|&i| {
                    let shape = Intervals::new(n, i);
                    (shape.stored() > 0)
                        .then(|| shape.advances(s).map(|a| (a + 1) as f64 / n as f64))
                        .flatten()
                })
                .collect();
            Some(FactorRow {
                n,
                revolve: recompute_factor(n, s)?,
                paper,
                scheme,
            })
        })
        .collect()
}

/// The least budget two-level can run in: `K` and five states of the largest size (one
/// snapshot, the working state, the next state or gradient, the incoming gradient, the
/// prefetch buffer); `K` when `graph` is not a chain.
pub fn least_budget(graph: &Graph) -> u64 {
    chain(graph).map_or(0, |c| 5 * slot_size(&c)) + graph.fixed_memory()
}

/// The two-level schedule's recompute factor measured by the simulator on Checkmate's
/// linear graph of `n − 1` stages (`n` steps, unit costs), with copies of `I` time units
/// so that `I = ⌈T_T / T_A⌉ = interval`, and `s` snapshots per interval: `(forward
/// computes + 1) / n` and the makespan; `None` when it stores nothing.
pub fn simulated_factor(n: u64, interval: u64, s: u64) -> Option<(f64, f64)> {
    let intervals = Intervals::new(n, interval);
    if intervals.stored() == 0 || n < 2 {
        return None;
    }
    let graph = crate::graph::generate::linear(n as usize - 1)
        .with_storage(Some(Storage::per_copy(interval as f64).ok()?));
    let chain = chain(&graph).ok()?;
    let s = s.min(useful_snapshots(interval)) as usize;
    let schedule = two_level_schedule(&chain, &intervals, s).ok()?;
    let stats = simulate(&graph, &schedule).ok()?;
    let forward: u32 = chain
        .stages
        .iter()
        .map(|st| stats.computes[st.forward])
        .sum();
    Some(((forward + 1) as f64 / n as f64, makespan(&stats)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::graph::{GraphError, GraphSpec, NodeKind};
    use crate::solve::{find, solve, SolveResult, Status};
    use proptest::prelude::*;

    /// Checkmate's linear graph of `layers` stages with forward cost `t_a`, backward cost
    /// `t_b`, loss cost 1, unit sizes, and `storage`.
    fn chain_graph(layers: usize, t_a: f64, t_b: f64, storage: &str) -> Result<Graph, GraphError> {
        let mut spec: GraphSpec = linear(layers).to_spec();
        for node in &mut spec.nodes {
            node.cost = match node.kind {
                Some(NodeKind::Forward) => t_a,
                Some(NodeKind::Backward) => t_b,
                _ => 1.0,
            };
        }
        Ok(Graph::new(spec)?.with_storage(Some(serde_json::from_str(storage).unwrap())))
    }

    fn run(graph: &Graph, budget: u64, solver: &str) -> SolveResult {
        solve(
            &Instance { graph, budget },
            solver,
            &SolveOptions::default(),
        )
        .unwrap()
    }

    fn detail(r: &SolveResult, key: &str) -> serde_json::Value {
        serde_json::to_value(r.details.as_ref().unwrap()).unwrap()[key].clone()
    }

    #[test]
    fn without_stalls_the_simulated_makespan_is_the_model() {
        // T_A = 2, T_B = 3, T_T = 7: I = 4; 300 stages + the loss = 301 steps make 76
        // intervals, 73 bases stored. Budget 9 states: s = 5 capped to I − 1 = 3.
        let g = chain_graph(300, 2.0, 3.0, r#"{"transfer_time": 7}"#).unwrap();
        let r = run(&g, 9, "two-level");
        assert_eq!(r.status, Status::Feasible);
        assert_eq!(detail(&r, "mode"), "two-level");
        let stats = r.stats.as_ref().unwrap();
        let tiers = stats.tiers.as_ref().unwrap();
        assert!(tiers.stalls.is_empty());
        assert!(stats.peak_memory <= 9);
        assert_eq!((tiers.stores, tiers.loads), (73, 73));
        let intervals = Intervals::new(301, 4);
        // Forward steps: the sweep 75·4, the last interval t(1, 3) = 0, 75 intervals of
        // t(4, 3) = 3: 525 forward ops at 2, 300 backward at 3, the loss at 1.
        assert_eq!(intervals.advances(3), Some(525));
        let model = 525.0 * 2.0 + 300.0 * 3.0 + 1.0;
        assert_eq!(detail(&r, "t_async"), model);
        assert_eq!(tiers.makespan, model);
        assert_eq!(stats.total_cost, model);
        // The paper's figure leaves out the sweep: n·R(4, 3)·T_A + n·T_B, R = 1.
        assert_eq!(detail(&r, "t_async_paper"), 301.0 * 2.0 + 301.0 * 3.0);
    }

    #[test]
    fn slow_reads_stall_and_the_makespan_exceeds_the_model() {
        // Same chain, reads take 25 > one interval's reversal 3·2 + 4·3 = 18: each of the
        // 73 loads, issued as the interval after its own starts, arrives 7 late. Still
        // faster than plain Revolve: 1951 + 73·7 = 2462 < 1039·2 + 901 = 2979.
        let g = chain_graph(300, 2.0, 3.0, r#"{"write_time": 7, "read_time": 25}"#).unwrap();
        let r = run(&g, 9, "two-level");
        assert_eq!(detail(&r, "mode"), "two-level");
        let stats = r.stats.as_ref().unwrap();
        let tiers = stats.tiers.as_ref().unwrap();
        let model = detail(&r, "t_async").as_f64().unwrap();
        assert!(tiers.makespan > model);
        assert_eq!(tiers.compute_time, model);
        assert_eq!(tiers.makespan, model + tiers.stall_time);
        assert_eq!(tiers.stalls.len(), 73);
        assert!(tiers.stalls.iter().all(|s| s.time == 7.0));
        assert_eq!(tiers.makespan, 2462.0);
        assert!(r
            .message
            .as_ref()
            .unwrap()
            .contains("73 load(s) arrived late"));
        let a = assess(&g, 9).unwrap();
        assert!(!a.loads_hidden);
        assert_eq!(a.predicted_stall, tiers.stall_time);
        // Reads of 40 stall 22 per interval: 1951 + 73·22 = 3557, slower than plain
        // Revolve, which the solver then runs.
        let g = chain_graph(300, 2.0, 3.0, r#"{"write_time": 7, "read_time": 40}"#).unwrap();
        let r = run(&g, 9, "two-level");
        assert_eq!(detail(&r, "mode"), "revolve");
        assert_eq!(r.stats.unwrap().total_cost, 2979.0);
    }

    #[test]
    fn short_chains_fall_back_to_revolve() {
        // 10 stages, I = 4: 3 intervals, nothing to store (SEED L103).
        let g = chain_graph(10, 1.0, 1.0, r#"{"transfer_time": 4}"#).unwrap();
        let a = assess(&g, 8).unwrap();
        assert_eq!(a.intervals.stored(), 0);
        assert!(
            !a.helps && a.verdict.contains("too few to store"),
            "{}",
            a.verdict
        );
        let r = run(&g, 8, "two-level");
        assert_eq!(detail(&r, "mode"), "revolve");
        let revolve = run(&g, 8, "revolve");
        assert_eq!(
            r.stats.unwrap().total_cost,
            revolve.stats.unwrap().total_cost
        );
    }

    #[test]
    fn the_schedule_makes_the_forward_steps_the_closed_form_counts() {
        // Independent of the solver: build the schedule for n = 200 steps, s = 100 and
        // count its forward computes in the simulator against Intervals::advances (the
        // figure-3 "scheme" column), for the table's three intervals.
        let g = chain_graph(199, 1.0, 1.0, r#"{"transfer_time": 1}"#).unwrap();
        let chain = chain(&g).unwrap();
        for i in [8, 64, 30] {
            let intervals = Intervals::new(200, i);
            let s = 100.min(useful_snapshots(i));
            let schedule = two_level_schedule(&chain, &intervals, s as usize).unwrap();
            let stats = simulate(&g, &schedule).unwrap();
            let forward: u32 = chain
                .stages
                .iter()
                .map(|st| stats.computes[st.forward])
                .sum();
            assert_eq!(Some(forward as u64), intervals.advances(s), "I = {i}");
        }
    }

    #[test]
    fn backward_ops_that_read_their_input_work_too() {
        // Rewire linear(120) so that G_j reads x_{j−1} (its stage's input) instead of x_j:
        // the turn of step j then computes G_j, from the same base states.
        let mut spec = linear(120).to_spec();
        // Forward ops are nodes 0..120 (x_j is node j − 1), the loss 120, then G_120..G_1.
        for node in spec
            .nodes
            .iter_mut()
            .filter(|n| n.kind == Some(NodeKind::Backward))
        {
            let (forward, grad): (Vec<String>, Vec<String>) = node
                .inputs
                .drain(..)
                .partition(|u| u.parse::<usize>().unwrap() < 120);
            let i: usize = forward[0].parse().unwrap();
            node.inputs = grad;
            if i >= 1 {
                node.inputs.push((i - 1).to_string());
            }
        }
        let g = Graph::new(spec)
            .unwrap()
            .with_storage(Some(Storage::per_copy(3.0).unwrap()));
        assert!(chain(&g).unwrap().stages[5].reads_input);
        let r = run(&g, 8, "two-level");
        assert_eq!(detail(&r, "mode"), "two-level");
        let stats = r.stats.as_ref().unwrap();
        assert!(stats.peak_memory <= 8);
        assert_eq!(
            stats.tiers.as_ref().unwrap().makespan,
            detail(&r, "t_async")
        );
    }

    #[test]
    fn figure_3_anchor_values() {
        // Digest §1.3: R(1024, 100) = 1947/1024, R(I, 100) = 1 for I <= 101.
        assert_eq!(recompute_factor(1024, 100), Some(1947.0 / 1024.0));
        assert_eq!(recompute_factor(8, 100), Some(1.0));
        assert_eq!(recompute_factor(101, 100), Some(1.0));
        let rows = figure3(100, &[8, 64, 1024], &[10, 1_000, 10_000]).unwrap();
        // Revolve grows with n; the paper's two-level factor does not.
        assert_eq!(rows[0].revolve, 1.0);
        assert_eq!(rows[2].revolve, 24_748.0 / 10_000.0);
        assert_eq!(rows[2].paper, vec![1.0, 1.0, 1947.0 / 1024.0]);
        assert_eq!(rows[1].paper[..2], [1.0, 1.0]);
        // The scheme with its sweep: I = 8 at n = 10^4 makes 9992 + 7 + 1249·7 = 18742.
        assert_eq!(rows[2].scheme[0], Some(18_743.0 / 10_000.0));
        assert_eq!(rows[0].scheme, vec![None, None, None]);
    }

    #[test]
    fn unsupported_graphs_say_why() {
        let no_tier = linear(20);
        let e = assess(&no_tier, 10).unwrap_err().to_string();
        assert!(e.contains("storage"), "{e}");
        let mut spec = linear(3).to_spec();
        spec.nodes[2].inputs.push("0".into());
        let branched = Graph::new(spec)
            .unwrap()
            .with_storage(Some(Storage::per_copy(1.0).unwrap()));
        let e = find("two-level")
            .unwrap()
            .solve(
                &Instance {
                    graph: &branched,
                    budget: 100,
                },
                &SolveOptions::default(),
            )
            .unwrap_err();
        assert!(matches!(e, SolveError::Unsupported { .. }), "{e}");
        // Backward ops reading both their input and their output: no Revolve turn.
        let mut spec = linear(6).to_spec();
        for node in spec.nodes.iter_mut().skip(8) {
            let i: usize = node
                .inputs
                .iter()
                .map(|u| u.parse::<usize>().unwrap())
                .min()
                .unwrap();
            if (1..6).contains(&i) {
                node.inputs.push((i - 1).to_string());
            }
        }
        let g = Graph::new(spec)
            .unwrap()
            .with_storage(Some(Storage::per_copy(1.0).unwrap()));
        let e = assess(&g, 10).unwrap_err();
        assert!(
            matches!(e, SolveError::Unsupported { .. }) && e.to_string().contains("reads both"),
            "{e}"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// The paper's claim (SEED L101): R(I, s) <= R(n, s) for every n >= I, so
        /// T_async <= T_revolve in its model.
        #[test]
        fn paper_t_async_never_exceeds_t_revolve(
            s in 1u64..200, i in 1u64..3000, extra in 0u64..1_000_000,
            t_a in 0.1f64..10.0, t_b in 0.1f64..10.0,
        ) {
            let n = i + extra;
            let times = StepTimes { forward: t_a, backward: t_b, loss: 0.0 };
            let (ri, rn) = (recompute_factor(i, s).unwrap(), recompute_factor(n, s).unwrap());
            prop_assert!(ri <= rn);
            prop_assert!(paper_time(&times, n, ri) <= paper_time(&times, n, rn));
        }

        /// On uniform chains: the peak fits the fast budget, the solver is never slower
        /// than plain Revolve, and when it runs two-level the simulated makespan is the
        /// model's T_async plus the stalls, which happen exactly when a load outlasts an
        /// interval's reversal.
        #[test]
        fn two_level_fits_and_matches_its_model(
            layers in 30usize..400, t_a in 1u32..4, t_b in 1u32..6,
            t_t in 1u32..60, budget in 5u64..24,
        ) {
            let storage = format!(r#"{{"transfer_time": {t_t}}}"#);
            let g = chain_graph(layers, t_a as f64, t_b as f64, &storage).unwrap();
            let r = run(&g, budget, "two-level");
            let revolve = run(&g, budget, "revolve");
            prop_assert_eq!(r.status == Status::Feasible, revolve.status == Status::Optimal);
            let Some(stats) = r.stats.as_ref() else { return Ok(()) };
            prop_assert!(stats.peak_memory <= budget);
            let makespan = detail(&r, "simulated_makespan").as_f64().unwrap();
            prop_assert_eq!(detail(&r, "mode") == "two-level", assess(&g, budget).unwrap().helps);
            prop_assert!(makespan <= revolve.stats.as_ref().unwrap().total_cost);
            if detail(&r, "mode") == "two-level" {
                let tiers = stats.tiers.as_ref().unwrap();
                let a = assess(&g, budget).unwrap();
                prop_assert_eq!(tiers.stalls.is_empty(), a.loads_hidden);
                prop_assert_eq!(tiers.stall_time, a.predicted_stall);
                let model = detail(&r, "t_async").as_f64().unwrap();
                prop_assert_eq!(makespan, model + tiers.stall_time);
            }
        }
    }
}
