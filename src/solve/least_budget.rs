//! The least budget found: where `auto` finds no schedule within the budget `M` and cannot
//! prove that none exists, a budget at which it does find one, so that the caller knows what
//! to ask for.
//!
//! The probes run `sethi-ullman`: Sethi–Ullman's recursive rematerialisation is the first of
//! `auto`'s constructive candidates, the floor every answer beats, so at a budget where it
//! finds a schedule (with the same options) `auto` finds one too (the argument `remat
//! max-batch` brackets with). The first probe is at its `need_budget`, from which its
//! construction never runs out of memory (it may still pass its work cap), where that is
//! below the checkpoint-all peak `P` (checkpoint-all's schedule fits there); then the search
//! bisects between `M` (no candidate fits it) and the least budget found so far. Each probe's
//! schedule is replayed by the simulator; the answer is the least probed budget whose schedule
//! fits, or `P` itself.
//!
//! Scope: a heuristic that fits at `b` need not fit at every budget above `b`, so this is a
//! budget at which a schedule was found, with probes below it having found none; it is not
//! the least budget of any schedule, which lies between the proven minimum
//! (`Graph::min_feasible_budget`) and it.
//!
//! Time: at most [`PROBES`] probes, within [`SEARCH_TIME`] and the solve's own deadline. A
//! probe may take [`PROBE_SHARE`] of the time left: Sethi–Ullman answers quickly where it fits
//! and can spend seconds on its work cap where it does not, so a probe cut short by its share
//! counts as finding nothing (`complete: false`) and the bisection goes on above it. When the
//! search's own time ends, it answers the least budget found so far, `complete: false`.

use super::core::{Instance, SolveOptions, Stop};
use super::driver::solve;
use super::heuristic::sethi_ullman;
use super::result::Status;
use crate::graph::Graph;
use crate::schedule::checkpoint_all_peak_by;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The probes of one search.
const PROBES: u32 = 12;

/// The most time one search may take, besides the solve's own deadline.
const SEARCH_TIME: Duration = Duration::from_secs(5);

/// The share of the search's time left that one probe may take.
const PROBE_SHARE: u32 = 3;

/// The solver that probes.
const PROBE: &str = "sethi-ullman";

/// A budget at which `solver` finds a schedule that the simulator replays within it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeastBudget {
    /// The budget in bytes, `fixed_memory` included.
    pub budget: u64,
    /// `sethi-ullman`, or `checkpoint-all` where no probe found a schedule.
    pub solver: &'static str,
    /// Whether every probe ran to its end: `false` when the time cut a probe short or ended
    /// the search first, or a probe could not run (such as one over the memory limit).
    pub complete: bool,
}

/// The least budget above `failed` at which a probe finds a schedule, searched until the
/// deadline of `stop` (the solve's) or [`SEARCH_TIME`] from now; `None` when `failed` is at or
/// above the checkpoint-all peak, or when the time ends before that peak is known.
pub(crate) fn search(
    graph: &Graph,
    failed: u64,
    options: &SolveOptions,
    stop: &Stop,
) -> Option<LeastBudget> {
    let stop = stop.sooner(SEARCH_TIME);
    let peak = checkpoint_all_peak_by(graph, stop.deadline())?;
    if failed >= peak {
        return None;
    }
    let guaranteed = sethi_ullman::need_budget(graph).filter(|&b| b > failed && b < peak);
    Some(bisect(failed, peak, guaranteed, &stop, |budget, share| {
        fits_at(graph, budget, options, share)
    }))
}

/// The search's steps: from `first` (if any), then halfway between the highest budget whose
/// probe found nothing (from `failed`) and the least whose probe found a schedule (from `peak`),
/// each probe by [`PROBE_SHARE`] of the time left to `stop`.
fn bisect(
    failed: u64,
    peak: u64,
    mut first: Option<u64>,
    stop: &Stop,
    mut probe_at: impl FnMut(u64, &Stop) -> Probe,
) -> LeastBudget {
    let (mut fails, mut fits) = (
        failed,
        LeastBudget {
            budget: peak,
            solver: "checkpoint-all",
            complete: true,
        },
    );
    for _ in 0..PROBES {
        if fits.budget - fails <= 1 {
            break;
        }
        let probe = first.take().unwrap_or(fails + (fits.budget - fails) / 2);
        let share = stop.sooner(time_left(stop) / PROBE_SHARE);
        match probe_at(probe, &share) {
            Probe::Fits => {
                fits.budget = probe;
                fits.solver = PROBE;
            }
            Probe::NotFound => fails = probe,
            Probe::CutShort if !time_left(stop).is_zero() && !stop.cancelled() => {
                fits.complete = false;
                fails = probe;
            }
            Probe::CutShort | Probe::CannotRun => {
                fits.complete = false;
                break;
            }
        }
    }
    fits
}

/// What one probe found.
enum Probe {
    /// A schedule the simulator replays within the budget.
    Fits,
    /// No schedule, or one the simulator rejected or found over the budget.
    NotFound,
    /// The probe's time ran out before it found a schedule.
    CutShort,
    /// The probe could not run: cancelled, no time left, or refused (over the memory limit).
    CannotRun,
}

/// The time until `stop`'s deadline (which the search always has).
fn time_left(stop: &Stop) -> Duration {
    stop.deadline()
        .map_or(SEARCH_TIME, |d| d.saturating_duration_since(Instant::now()))
}

/// What the probe, solved and judged as any solve is ([`solve`]), finds within `budget` by
/// `stop`'s deadline.
fn fits_at(graph: &Graph, budget: u64, options: &SolveOptions, stop: &Stop) -> Probe {
    let left = time_left(stop);
    if left.is_zero() || stop.cancelled() {
        return Probe::CannotRun;
    }
    // The caller's cancel flag, a time limit of the probe's own, and a time-out flag of its
    // own: a probe cut short says nothing of the solve that came before it.
    let timed_out = Arc::new(AtomicBool::new(false));
    let probe = SolveOptions {
        time_limit: Some(left),
        timed_out: timed_out.clone(),
        progress: None,
        ..options.clone()
    };
    match solve(&Instance { graph, budget }, PROBE, &probe) {
        Ok(judged) if judged.stats.is_some() => Probe::Fits,
        // Sethi–Ullman's constructions past its work cap answer `infeasible` even where the
        // clock ended the last of them: the flag says so.
        Ok(_) if timed_out.load(Ordering::Relaxed) => Probe::CutShort,
        Ok(judged) => match judged.status {
            Status::Infeasible | Status::Error => Probe::NotFound,
            _ => Probe::CutShort,
        },
        Err(_) => Probe::CannotRun,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::random_layered;
    use crate::schedule::checkpoint_all_peak;
    use crate::solve::SolveResult;

    /// A 41-node random layered graph at its proven minimum budget: `auto` finds no schedule
    /// and cannot prove that none exists.
    fn unproven() -> (Graph, u64) {
        let graph = random_layered(41, 4);
        let (min, _) = graph.min_feasible_budget();
        (graph, min)
    }

    fn solved(graph: &Graph, budget: u64, solver: &str) -> SolveResult {
        solve(
            &Instance { graph, budget },
            solver,
            &SolveOptions::default(),
        )
        .unwrap()
    }

    /// Where `auto` answers infeasible without a proof, its answer has the least budget found,
    /// above the budget and at most the checkpoint-all peak, and said in its message; `auto`
    /// and Sethi–Ullman at that budget each find a schedule within it (the simulator's replay).
    #[test]
    fn an_unproven_infeasible_answer_has_a_budget_auto_fits() {
        let (graph, budget) = unproven();
        let r = solved(&graph, budget, "auto");
        assert_eq!((r.status, r.proven), (Status::Infeasible, Some(false)));
        let least = r.least_budget_found.clone().expect("a least budget found");
        let peak = checkpoint_all_peak(&graph);
        assert!(least.budget > budget && least.budget <= peak, "{least:?}");
        assert!(least.complete, "{least:?}");
        assert_eq!(least.solver, PROBE);
        let message = r.message.unwrap();
        assert!(
            message.contains(&format!("{} bytes", least.budget)),
            "{message}"
        );

        let at = solved(&graph, least.budget, "auto");
        assert!(matches!(
            at.status,
            Status::Feasible | Status::Optimal | Status::OptimalInScope
        ));
        let stats = at.stats.unwrap();
        assert!(stats.peak_memory <= least.budget);

        let su = solved(&graph, least.budget, PROBE);
        assert!(su.stats.is_some_and(|s| s.peak_memory <= least.budget));
    }

    /// A proven answer, a schedule, and another solver's failure carry none.
    #[test]
    fn only_auto_s_unproven_failures_carry_one() {
        let (graph, budget) = unproven();
        for (solver, at) in [
            ("auto", budget - 1),
            ("auto", checkpoint_all_peak(&graph)),
            ("dtr", budget),
        ] {
            let r = solved(&graph, at, solver);
            assert_eq!(
                r.least_budget_found, None,
                "{solver} at {at}: {:?}",
                r.status
            );
        }
    }

    /// A probe cut short by its share of the time counts as finding nothing: the bisection
    /// goes on above it (here to the least budget the fake probe fits, 700), and the answer
    /// says it is incomplete. Each probe gets a third of the time left.
    #[test]
    fn a_probe_cut_short_by_its_share_is_passed_over() {
        let options = SolveOptions {
            time_limit: Some(Duration::from_secs(3600)),
            ..SolveOptions::default()
        };
        let stop = Stop::start(&options);
        let mut probed = Vec::new();
        let least = bisect(0, 1024, Some(100), &stop, |budget, share| {
            let left = time_left(share).as_secs_f64();
            assert!(left <= time_left(&stop).as_secs_f64() / 3.0 + 1.0, "{left}");
            probed.push(budget);
            match budget {
                0..=299 => Probe::CutShort,
                300..=699 => Probe::NotFound,
                _ => Probe::Fits,
            }
        });
        assert_eq!(probed[..3], [100, 562, 793]);
        assert_eq!(
            least,
            LeastBudget {
                budget: 700,
                solver: PROBE,
                complete: false
            }
        );
        let no_cut = bisect(299, 1024, None, &stop, |budget, _| match budget {
            0..=699 => Probe::NotFound,
            _ => Probe::Fits,
        });
        assert!(no_cut.complete, "{no_cut:?}");
    }

    /// A search stopped before its first probe (here by the caller's cancel flag) answers the
    /// checkpoint-all peak, incomplete; one whose time is up before that peak is known, nothing.
    #[test]
    fn a_search_stopped_at_once_answers_the_peak_incomplete() {
        let (graph, budget) = unproven();
        let no_time = SolveOptions {
            time_limit: Some(Duration::ZERO),
            ..SolveOptions::default()
        };
        assert_eq!(
            search(&graph, budget, &no_time, &Stop::start(&no_time)),
            None
        );
        let cancelled = SolveOptions::default();
        cancelled.cancel.store(true, Ordering::Relaxed);
        let least = search(&graph, budget, &cancelled, &Stop::start(&cancelled)).unwrap();
        assert_eq!(
            least,
            LeastBudget {
                budget: checkpoint_all_peak(&graph),
                solver: "checkpoint-all",
                complete: false
            }
        );
    }
}
