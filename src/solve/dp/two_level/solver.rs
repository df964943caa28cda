//! The `two-level` solver: the largest snapshot count whose two-level schedule the
//! simulator finds within the budget, against plain Revolve's schedule, whichever makes
//! the shorter simulated makespan; the model's figures and the simulated ones in its
//! details.

use super::model::{
    assess_chain, inputs, paper_time, recompute_factor, slot_size, slots, t_async, useful_snapshots,
};
use super::schedule::{makespan, two_level_schedule};
use crate::schedule::{simulate_polled, Schedule, SimStats};
use crate::solve::details::{Details, TwoLevelDetails};
use crate::solve::dp::revolve::Revolve;
use crate::solve::footprint::Halt;
use crate::solve::{
    internal, Claim, Instance, Outcome, Plan, Scope, SolveError, SolveOptions, Solver, SolverInfo,
    Stop,
};
use crate::solve::{Footprint, Stopped};

pub struct TwoLevel;

/// A snapshot count, its schedule and the simulator's figures for it.
type Fitting = (u64, Schedule, SimStats);

/// A schedule from `build(s)` for the largest `s` in `1..=hi` whose simulated peak fits
/// the budget (peaks grow with `s`: bisection), and whether the time limit ended the
/// search first (then the largest found so far, if any). Each step builds and replays a
/// whole schedule, so each is polled.
fn largest_fitting(
    instance: &Instance,
    options: &SolveOptions,
    hi: u64,
    build: impl Fn(usize, &Stop) -> Result<Schedule, Halt>,
) -> Result<(Option<Fitting>, bool), SolveError> {
    let stop = Stop::start(options);
    let fits = |s: u64| -> Result<Option<(Schedule, SimStats)>, Halt> {
        let schedule = build(s as usize, &stop)?;
        let stats = simulate_polled(instance.graph, &schedule, || stop.poll())?
            .map_err(|e| Halt::Refused(internal("two-level", e)))?;
        Ok((stats.peak_memory <= instance.budget).then_some((schedule, stats)))
    };
    let mut best = None;
    let mut search = || -> Result<(), Halt> {
        if let Some((schedule, stats)) = fits(hi)? {
            best = Some((hi, schedule, stats));
            return Ok(());
        }
        let (mut lo, mut hi) = (0u64, hi);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            match fits(mid)? {
                Some((schedule, stats)) => {
                    lo = mid;
                    best = Some((mid, schedule, stats));
                }
                None => hi = mid,
            }
        }
        Ok(())
    };
    match search() {
        Ok(()) => Ok((best, false)),
        Err(Halt::Stopped(Stopped::TimeLimit)) => Ok((best, true)),
        Err(Halt::Stopped(Stopped::Cancelled)) => Err(SolveError::Cancelled),
        Err(Halt::Refused(e)) => Err(e),
    }
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

    fn footprint(&self, instance: &Instance) -> Footprint {
        Footprint::recomputing_once(instance.graph)
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        let graph = instance.graph;
        let (chain, storage) = inputs(graph)?;
        let assessment = assess_chain(graph, &chain, &storage, instance.budget);
        let intervals = assessment.intervals;
        // The slot model is exact for uniform chains; search every s it might miss.
        let hi = slots(graph, &chain, instance.budget).min(useful_snapshots(intervals.interval));
        let (two_level, mut timed_out) = if intervals.stored() > 0 && hi >= 1 {
            largest_fitting(instance, options, hi, |s, stop| {
                two_level_schedule(&chain, &intervals, s, || stop.poll())
            })?
        } else {
            (None, false)
        };
        // Without a Revolve schedule (stopped, or over the memory limit) two-level stands
        // alone; a cancellation ends the solve.
        let revolve = match Revolve::fit(&chain, instance, options) {
            Ok(fit) => fit,
            Err(Halt::Stopped(Stopped::Cancelled)) => return Err(SolveError::Cancelled),
            Err(Halt::Stopped(Stopped::TimeLimit)) => {
                timed_out = true;
                None
            }
            Err(Halt::Refused(_)) => None,
        }
        .map(|fit| (fit.snapshots as u64, fit.schedule, fit.stats));
        let pick_two_level = match (&two_level, &revolve) {
            (Some((_, _, a)), Some((_, _, r))) => makespan(a) < makespan(r),
            (Some(_), None) => true,
            _ => false,
        };

        let (mode, (s, schedule, stats)) = match (pick_two_level, two_level, revolve) {
            (true, Some(chosen), _) => ("two-level", chosen),
            (false, _, Some(chosen)) => ("revolve", chosen),
            _ if timed_out => {
                return Stopped::TimeLimit.outcome("two-level", "before a schedule that fits")
            }
            _ => {
                return Ok(Outcome::Infeasible {
                    solver: "two-level",
                    proven: None,
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
