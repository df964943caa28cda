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
//! Time: at most [`PROBES`] probes, within [`SEARCH_TIME`] and the solve's own deadline. When
//! either ends a probe, the search answers the least budget found so far, `complete: false`.

use super::core::{Instance, SolveOptions, Stop};
use super::driver::solve;
use super::heuristic::sethi_ullman;
use super::result::Status;
use crate::graph::Graph;
use crate::schedule::checkpoint_all_peak_by;
use serde::Serialize;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The probes of one search.
const PROBES: u32 = 12;

/// The most time one search may take, besides the solve's own deadline.
const SEARCH_TIME: Duration = Duration::from_secs(5);

/// The solver that probes.
const PROBE: &str = "sethi-ullman";

/// A budget at which `solver` finds a schedule that the simulator replays within it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeastBudget {
    /// The budget in bytes, `fixed_memory` included.
    pub budget: u64,
    /// `sethi-ullman`, or `checkpoint-all` where no probe found a schedule.
    pub solver: &'static str,
    /// Whether every probe ran: `false` when the time (or a probe that could not run, such as
    /// one over the memory limit) ended the search first.
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
    let (mut fails, mut fits) = (
        failed,
        LeastBudget {
            budget: peak,
            solver: "checkpoint-all",
            complete: true,
        },
    );
    let mut guaranteed = sethi_ullman::need_budget(graph).filter(|&b| b > failed && b < peak);
    for _ in 0..PROBES {
        if fits.budget - fails <= 1 {
            break;
        }
        let probe = guaranteed
            .take()
            .unwrap_or(fails + (fits.budget - fails) / 2);
        match fits_at(graph, probe, options, &stop) {
            Some(true) => {
                fits.budget = probe;
                fits.solver = PROBE;
            }
            Some(false) => fails = probe,
            None => {
                fits.complete = false;
                break;
            }
        }
    }
    Some(fits)
}

/// Whether the probe, solved and judged as any solve is ([`solve`]), finds a schedule within
/// `budget`; `None` when `stop`'s deadline passes first, the caller cancels, or the probe
/// cannot run.
fn fits_at(graph: &Graph, budget: u64, options: &SolveOptions, stop: &Stop) -> Option<bool> {
    let left = stop
        .deadline()
        .map(|d| d.saturating_duration_since(Instant::now()));
    if left.is_some_and(|l| l.is_zero()) || stop.cancelled() {
        return None;
    }
    // The caller's cancel flag, a time limit of the probe's own, and a time-out flag of its
    // own: a probe cut short says nothing of the solve that came before it.
    let probe = SolveOptions {
        time_limit: left,
        timed_out: Arc::new(AtomicBool::new(false)),
        progress: None,
        ..options.clone()
    };
    let judged = solve(&Instance { graph, budget }, PROBE, &probe).ok()?;
    match judged.status {
        _ if judged.stats.is_some() => Some(true),
        // no schedule, or one the simulator rejected or found over the budget
        Status::Infeasible | Status::Error => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::random_layered;
    use crate::schedule::checkpoint_all_peak;
    use crate::solve::SolveResult;
    use std::sync::atomic::Ordering;

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
