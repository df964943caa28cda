//! MIP starts from other solvers' schedules: any schedule whose first computations follow
//! the solver order is a frontier-advancing stage schedule in disguise. Stage `t` begins
//! right after node `t − 1` is computed for the first time, so `S[t]` is the set of values
//! resident at the first computation after that; the minimal `R` for that `S` ([`Stages::from_s`]) recomputes
//! no more than the schedule did. The start is the cheapest of these that the simulator
//! finds within the budget: on a chain the exact DP's plan (Revolve or the chain DP),
//! on any graph Sethi–Ullman's recursive rematerialisation.

use super::Candidate;
use crate::graph::Graph;
use crate::schedule::stages::{empty_s, Stages};
use crate::schedule::{Event, Schedule};
use crate::solve::dp::structured::exact_solver_for;
use crate::solve::heuristic::sethi_ullman::SethiUllman;
use crate::solve::{Instance, Outcome, SolveOptions, Solver};
use fixedbitset::FixedBitSet;

/// The stage form of `schedule`: `S[t]` the values resident at the first computation of
/// stage `t` (the first after node `t − 1`'s first computation). `None` when the first computations do not follow the solver order (or the
/// schedule moves values between memory tiers).
pub(super) fn stages_of(graph: &Graph, schedule: &Schedule) -> Option<Stages> {
    let n = graph.len();
    let mut s = empty_s(n);
    let mut resident = FixedBitSet::with_capacity(n);
    let mut frontier = 0;
    // Stage `frontier` has begun and not yet computed anything: its first computation
    // (a recomputation or node `frontier` itself) reads its S.
    let mut begun = true;
    for event in &schedule.events {
        match *event {
            Event::Compute(v) => {
                if v > frontier {
                    return None;
                }
                if begun {
                    s[frontier] = resident.clone();
                    begun = false;
                }
                if v == frontier {
                    frontier += 1;
                    begun = true;
                }
                resident.insert(v);
            }
            Event::Free(v) => resident.set(v, false),
            _ => return None,
        }
    }
    (frontier == n).then(|| Stages::from_s(graph, s))
}

/// The cheapest verified stage schedule among `start` and the stage forms of the exact
/// DP's plan (on a chain) and of Sethi–Ullman's schedule.
pub(super) fn best_start(
    instance: &Instance,
    options: &SolveOptions,
    start: Option<Candidate>,
) -> Option<Candidate> {
    let graph = instance.graph;
    let mut plans = Vec::new();
    if let Some(dp) = exact_solver_for(graph) {
        plans.push((dp.info().name, dp.solve(instance, options)));
    }
    plans.push(("sethi-ullman", SethiUllman.solve(instance, options)));
    plans
        .into_iter()
        .filter_map(|(name, outcome)| match outcome {
            Ok(Outcome::Plan(plan)) => {
                let stages = stages_of(graph, &plan.schedule)?;
                Candidate::check(graph, stages, instance.budget, name.to_string())
            }
            _ => None,
        })
        .chain(start)
        .min_by(|a, b| a.cost.total_cmp(&b.cost))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::schedule::simulate;
    use crate::solve::Instance;

    /// Revolve's schedule on `linear(8)` becomes a stage schedule of the same cost within
    /// the same budget, and a schedule that computes a node before its turn has none.
    #[test]
    fn a_dp_plan_becomes_a_stage_schedule() {
        let g = linear(8);
        let instance = Instance {
            graph: &g,
            budget: 4,
        };
        let options = SolveOptions::default();
        let Ok(Outcome::Plan(plan)) = crate::solve::dp::revolve::Revolve.solve(&instance, &options)
        else {
            panic!("revolve fits linear(8) in 4")
        };
        let cost = simulate(&g, &plan.schedule).unwrap().total_cost;
        let stages = stages_of(&g, &plan.schedule).expect("first computations in order");
        let stats = simulate(&g, &stages.into_schedule(&g)).unwrap();
        assert_eq!(stats.total_cost, cost);
        assert!(stats.peak_memory <= 4);
        let out_of_order = Schedule::new(vec![Event::Compute(1), Event::Compute(0)]);
        assert!(stages_of(&g, &out_of_order).is_none());
    }
}
