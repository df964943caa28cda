//! RENS, the relaxation enforced neighbourhood search (Berthold, "RENS: the optimal
//! rounding", Math. Prog. Comp. 6, 2014), as a start for the MILP's branch and bound.
//!
//! Let `x̄` be the optimum of the LP relaxation and `F = {j integer : x̄_j ∉ ℤ}` its
//! fractional integer columns. The RENS sub-MIP is the MILP with every other integer
//! column fixed, `x_j = x̄_j` for `j ∉ F`; for binaries that is all it restricts, so its
//! points are exactly the roundings of `x̄` (with the continuous columns, FREE and U,
//! free), and its optimum is the best of them. It is small when `|F|` is: on FCN8 at 90%
//! of its checkpoint-all peak the relaxation leaves 19 of 5,329 integer columns
//! fractional, and the sub-MIP's optimum is within 1e-6 of the MILP's, which the full
//! branch and bound then only has to prove.
//!
//! The sub-MIP runs only when at least half of the integer columns are fixed
//! ([`MIN_FIXED`], Berthold's minimal fixing rate), for at most a share of the time that
//! is left ([`TIME_SHARE`], [`TIME_CAP`]), or, under a work limit, for at most that many
//! branch-and-bound nodes. Its solution is a schedule like any other: extracted from S
//! and checked by the simulator.

use super::{backend, controls, extract, failed, Candidate, StageModel};
use crate::solve::{Instance, SolveError, SolveOptions, Stop, Stopped};
use backend::RunStatus;
use std::time::Duration;

/// The least share of the integer columns the relaxation must leave integral.
const MIN_FIXED: f64 = 0.5;
/// The share of the time left the sub-MIP may take.
const TIME_SHARE: u32 = 10;
/// The longest the sub-MIP may take, with or without a time limit.
const TIME_CAP: Duration = Duration::from_secs(5);
/// A column within this of an integer counts as integral (HiGHS's
/// `mip_feasibility_tolerance`).
const INTEGRAL: f64 = 1e-6;

/// The best rounding of the relaxation's point `x̄` (`relaxation`, in the columns of
/// [`StageModel::build`]'s model of `instance`) that the RENS sub-MIP finds in its time,
/// verified within the budget; `None` when too few columns are integral, the time runs
/// out first, or its schedule does not fit.
pub(super) fn rens(
    instance: &Instance,
    options: &SolveOptions,
    stop: &Stop,
    relaxation: &[f64],
) -> Result<Option<Candidate>, SolveError> {
    let left = stop
        .deadline()
        .map_or(TIME_CAP, |d| {
            d.saturating_duration_since(std::time::Instant::now()) / TIME_SHARE
        })
        .min(TIME_CAP);
    let stop = match options.work_limit {
        Some(_) => stop.clone(),
        None => stop.sooner(left),
    };
    let mut model = match StageModel::build(instance, &stop) {
        Ok(model) => model,
        Err(Stopped::Cancelled) => return Err(SolveError::Cancelled),
        Err(Stopped::TimeLimit) => return Ok(None),
    };
    let mut lp = model.take_lp();
    if relaxation.len() != lp.num_cols() {
        debug_assert!(false, "the relaxation's model has other columns");
        return Ok(None);
    }
    let (mut fixed, mut integer) = (0usize, 0usize);
    for (j, &x) in relaxation.iter().enumerate() {
        if lp.is_integer(j) {
            integer += 1;
            if (x - x.round()).abs() <= INTEGRAL {
                lp.fix(j, x.round());
                fixed += 1;
            }
        }
    }
    if (fixed as f64) < MIN_FIXED * integer as f64 {
        return Ok(None);
    }
    let run =
        backend::run(lp, None, &controls(options, false, &stop)).map_err(|e| failed("milp", e))?;
    if run.status == RunStatus::Cancelled {
        return Err(SolveError::Cancelled);
    }
    let Some(columns) = run.columns else {
        return Ok(None);
    };
    Ok(extract(instance.graph, &model, &columns, instance.budget)?
        .ok()
        .map(|c| Candidate {
            source: format!(
                "RENS ({} of {integer} integer columns fractional in the LP)",
                integer - fixed
            ),
            ..c
        }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::schedule::simulate;
    use crate::solve::exact::checkmate::lp_rounding::solve_rounding;
    use crate::solve::Scope;

    #[test]
    fn the_best_rounding_fits_and_is_no_cheaper_than_the_optimum() {
        // linear-8 at budget 4: the MILP's optimum (and Checkmate's) is 26.
        let g = linear(8);
        let instance = Instance {
            graph: &g,
            budget: 4,
        };
        let options = SolveOptions::default();
        let stop = Stop::start(&options);
        let relaxed = solve_rounding(&instance, &options, "milp", Scope::OptimalForOrder)
            .unwrap()
            .relaxation;
        assert!(relaxed.optimal);
        let columns = relaxed.columns.expect("the relaxation's point");
        let found = rens(&instance, &options, &stop, &columns)
            .unwrap()
            .expect("a rounding");
        let stats = simulate(&g, &found.schedule).unwrap();
        assert!(stats.peak_memory <= 4);
        assert_eq!(stats.total_cost, found.cost);
        assert!(found.cost >= 26.0, "{}", found.cost);
        assert!(found.source.starts_with("RENS"), "{}", found.source);
        // A point with every integer column fractional fixes nothing: no sub-MIP.
        let halves = vec![0.5; columns.len()];
        assert!(rens(&instance, &options, &stop, &halves).unwrap().is_none());
    }
}
