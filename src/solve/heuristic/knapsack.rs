//! `knapsack`: the saved-set knapsack of PyTorch's memory-budget partitioner
//! (`torch._functorch.config.activation_memory_budget`, 2024, in `torch/_functorch/partitioners.py`),
//! replayed with remat's backward pass.
//!
//! The partitioner decides which forward values the backward pass *saves* and recomputes
//! the rest, choosing the saved set as a knapsack: recompute what is cheap per byte. Here
//! the same choice is made, and the schedule is the one it implies:
//!
//! * the forward pass computes every forward node once, in solver order;
//! * a forward value `v` that some backward node reads is *saved* (`v ∈ S`: resident from
//!   its compute to its last read) or *dropped*: freed after its last forward read, and
//!   recomputed just before the first non-forward node that reads it, together with the
//!   forward values its recomputation reads that are neither saved nor recomputed yet;
//! * a recomputed value lives from its recompute to its last read, so each dropped value
//!   is recomputed at most once, and its copy lives only while the backward pass near it
//!   needs it (the partitioner keeps one copy of each recomputed node alive from its first
//!   recompute on, so that its peaks can rise as the budget falls).
//!
//! The candidates `A` are the forward values some non-forward node reads (the others are
//! freed during the forward pass whatever is chosen). Each ranking orders `A` by the cost
//! of recomputing `v` per byte its dropping frees, `c*_v / s_v`, where `c*_v` counts, once
//! as `c_v`, and once as `c_v` plus the costs `c*_u` of its forward inputs outside `A`
//! (which must be recomputed with it). For a ranking, the candidates are dropped in rank
//! order, each unless the simulator finds that it raises the peak (a recomputation keeps
//! its inputs resident until their own last reads, so dropping too much can cost memory),
//! until the schedule fits the budget; then, in reverse rank order, every dropped value
//! whose saving still fits is saved again. The cheaper of the rankings' schedules is the
//! answer, as a compute sequence
//! ([`from_computes`]).
//!
//! `auto` runs one more ranking ([`solve_keeping`]): by the share of each value the
//! stage-cut bound's LP keeps resident at its cut (`crate::solve::exact::checkmate`'s
//! `stage_cut`), least kept first, then by `c_v / s_v`. That LP prices a dropped value with
//! whatever its recomputation needs, which neither per-byte price sees.
//!
//! Scope: a heuristic, with no optimality claim. It recomputes each value at most once, so
//! below the budgets where one recomputation per value suffices it finds nothing.

use crate::graph::{Graph, NodeKind};
use crate::schedule::sequence::{from_computes, push_restored_inputs};
use crate::schedule::{simulate, SimStats};
use crate::solve::details::{Details, KnapsackDetails};
use crate::solve::Footprint;
use crate::solve::{
    fit, internal, Instance, Outcome, Scope, SolveError, SolveOptions, Solver, SolverInfo, Stop,
};

pub struct Knapsack;

impl Solver for Knapsack {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "knapsack",
            description: "The saved-set knapsack of PyTorch's memory-budget partitioner: save the \
                          forward values that are dearest to recompute per byte, recompute the others \
                          once, just before the backward pass reads them, and free them after their \
                          last read.",
            scope: Scope::Heuristic,
            accepts: "graphs with forward/backward kinds (without kinds nothing is dropped)",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        // Each dropped value is recomputed at most once.
        Footprint::recomputing_once(instance.graph)
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        solve_ranked(instance, options, &[Ranking::Own, Ranking::WithInputs])
    }
}

/// `knapsack` with the candidates ranked by `keep[v]`, the share of `v` the stage-cut LP
/// keeps resident, least first (ties: `c_v / s_v`).
pub(crate) fn solve_keeping(
    instance: &Instance,
    options: &SolveOptions,
    keep: &[f64],
) -> Result<Outcome, SolveError> {
    solve_ranked(instance, options, &[Ranking::Kept(keep)])
}

/// The cheapest of the rankings' schedules.
fn solve_ranked(
    instance: &Instance,
    options: &SolveOptions,
    rankings: &[Ranking],
) -> Result<Outcome, SolveError> {
    let graph = instance.graph;
    let stop = Stop::start(options);
    let knapsack = Problem::new(graph);
    let mut best: Option<(f64, Choice)> = None;
    let mut lowest_peak = u64::MAX;
    for &ranking in rankings {
        // Each ranking replays the whole schedule before its first poll (half a second on
        // a million nodes): none starts past the deadline.
        if stop.should_stop() {
            break;
        }
        let order = knapsack.rank(ranking);
        let Some(dropped) = knapsack.choose(&order, instance.budget, &stop, &mut lowest_peak)?
        else {
            continue;
        };
        let cost = knapsack.replay(&dropped)?.total_cost;
        if best.as_ref().is_none_or(|(c, _)| cost < *c) {
            best = Some((cost, Choice { dropped, ranking }));
        }
    }
    let Some((_, choice)) = best else {
        if let Err(stopped) = stop.poll() {
            return stopped.outcome("knapsack", "while choosing the saved set");
        }
        return Ok(Outcome::Infeasible {
            solver: "knapsack",
            proven: None,
            reason: format!(
                "dropping saved values ranked by {} still peaks at {lowest_peak} bytes, over the \
                     budget of {} bytes",
                rankings
                    .iter()
                    .map(|r| r.describe())
                    .collect::<Vec<_>>()
                    .join(" or by "),
                instance.budget
            ),
        });
    };
    let details = Details::Knapsack(KnapsackDetails {
        candidates: knapsack.candidates.len(),
        dropped: choice.dropped.iter().filter(|&&d| d).count(),
        ranking: choice.ranking.as_str(),
    });
    let schedule = from_computes(graph, &knapsack.sequence(&choice.dropped));
    fit(instance, "knapsack", schedule, Some(details))
}

/// How the candidates are ranked for dropping (cheapest per byte first).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ranking<'k> {
    /// `c_v / s_v`.
    Own,
    /// `(c_v + Σ c*_u over forward inputs u ∉ A) / s_v`.
    WithInputs,
    /// The share the stage-cut LP keeps, then `c_v / s_v`.
    Kept(&'k [f64]),
}

impl Ranking<'_> {
    /// The ranking in a message.
    fn describe(self) -> &'static str {
        match self {
            Ranking::Own => "recomputation cost per byte",
            Ranking::WithInputs => "recomputation cost with unsaved inputs per byte",
            Ranking::Kept(_) => "the share the stage-cut LP keeps",
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Ranking::Own => "own_cost",
            Ranking::WithInputs => "with_unsaved_inputs",
            Ranking::Kept(_) => "stage_cut_keep",
        }
    }
}

/// A saved set, as the dropped flags of every node, and the ranking that chose it.
struct Choice<'k> {
    dropped: Vec<bool>,
    ranking: Ranking<'k>,
}

/// The graph's forward part and the candidates `A`.
struct Problem<'g> {
    graph: &'g Graph,
    forward: Vec<bool>,
    candidates: Vec<usize>,
}

impl<'g> Problem<'g> {
    fn new(graph: &'g Graph) -> Problem<'g> {
        // Asked once: on a graph without kinds each call reads every node.
        let kinds = graph.has_kinds();
        let forward: Vec<bool> = (0..graph.len())
            .map(|v| !kinds || graph.node(v).kind == Some(NodeKind::Forward))
            .collect();
        let candidates = (0..graph.len())
            .filter(|&v| forward[v] && graph.succs(v).iter().any(|&w| !forward[w]))
            .collect();
        Problem {
            graph,
            forward,
            candidates,
        }
    }

    /// The candidates, cheapest to recompute per byte first (ties: solver order).
    fn rank(&self, ranking: Ranking) -> Vec<usize> {
        let g = self.graph;
        let mut candidate = vec![false; g.len()];
        for &v in &self.candidates {
            candidate[v] = true;
        }
        // c*_v in solver order (a topological order): inputs come first.
        let mut with_inputs = vec![0.0; g.len()];
        for v in (0..g.len()).filter(|&v| self.forward[v]) {
            let unsaved_inputs: f64 = g
                .preds(v)
                .iter()
                .filter(|&&u| self.forward[u] && !candidate[u])
                .map(|&u| with_inputs[u])
                .sum();
            with_inputs[v] = g.cost(v) + unsaved_inputs;
        }
        // (the share kept, the price per byte)
        let key = |v: usize| {
            let (kept, c) = match ranking {
                Ranking::Own => (0.0, g.cost(v)),
                Ranking::WithInputs => (0.0, with_inputs[v]),
                Ranking::Kept(keep) => (keep[v], g.cost(v)),
            };
            (kept, c / g.memory(v).max(1) as f64)
        };
        let mut order = self.candidates.clone();
        order.sort_by(|&a, &b| {
            let (ka, pa) = key(a);
            let (kb, pb) = key(b);
            ka.total_cmp(&kb).then(pa.total_cmp(&pb)).then(a.cmp(&b))
        });
        order
    }

    /// The dropped flags: walking `order`, each candidate is dropped unless that raises
    /// the peak, until the schedule fits; then, in reverse, each dropped value is saved
    /// again while the schedule still fits. `None` when the walk ends over the budget.
    fn choose(
        &self,
        order: &[usize],
        budget: u64,
        stop: &Stop,
        lowest_peak: &mut u64,
    ) -> Result<Option<Vec<bool>>, SolveError> {
        let mut dropped = vec![false; self.graph.len()];
        let mut peak = self.replay(&dropped)?.peak_memory;
        for &v in order {
            if peak <= budget || stop.should_stop() {
                break;
            }
            dropped[v] = true;
            let after = self.replay(&dropped)?.peak_memory;
            if after <= peak {
                peak = after;
            } else {
                dropped[v] = false;
            }
        }
        *lowest_peak = (*lowest_peak).min(peak);
        if peak > budget {
            return Ok(None);
        }
        let walked: Vec<usize> = order.iter().copied().filter(|&v| dropped[v]).collect();
        for &v in walked.iter().rev() {
            if stop.should_stop() {
                break;
            }
            dropped[v] = false;
            if self.replay(&dropped)?.peak_memory > budget {
                dropped[v] = true;
            }
        }
        Ok(Some(dropped))
    }

    /// The simulator's figures for the schedule that drops `dropped`.
    fn replay(&self, dropped: &[bool]) -> Result<SimStats, SolveError> {
        let schedule = from_computes(self.graph, &self.sequence(dropped));
        simulate(self.graph, &schedule).map_err(|e| internal("knapsack", e))
    }

    /// The compute sequence: every node once in solver order, and before each non-forward
    /// node the recomputation of the forward values it reads that are not resident: the
    /// dropped ones and, for their recomputation, the non-candidates (post-order, so each
    /// value's inputs come first), each at most once.
    fn sequence(&self, dropped: &[bool]) -> Vec<usize> {
        let g = self.graph;
        let mut is_candidate = vec![false; g.len()];
        for &v in &self.candidates {
            is_candidate[v] = true;
        }
        let absent = |u: usize| self.forward[u] && (dropped[u] || !is_candidate[u]);
        let mut again = vec![false; g.len()];
        let mut computes = Vec::with_capacity(2 * g.len());
        for v in 0..g.len() {
            if !self.forward[v] {
                push_restored_inputs(g, v, absent, &mut again, &mut computes);
            }
            computes.push(v);
        }
        computes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::{linear, random_layered};
    use crate::schedule::checkpoint_all_peak;
    use crate::solve::{solve, Status};

    /// The simulator's (cost, peak) of `solver`'s schedule, or `None` without one.
    fn at(graph: &Graph, budget: u64, solver: &str) -> (Status, Option<(f64, u64)>) {
        let instance = Instance { graph, budget };
        let r = solve(&instance, solver, &SolveOptions::default()).unwrap();
        (r.status, r.stats.map(|s| (s.total_cost, s.peak_memory)))
    }

    #[test]
    fn at_the_checkpoint_all_peak_nothing_is_recomputed() {
        let g = random_layered(60, 3);
        let (status, figures) = at(&g, checkpoint_all_peak(&g), "knapsack");
        assert_eq!(status, Status::Optimal);
        assert_eq!(figures.unwrap().0, g.total_cost());
    }

    #[test]
    fn never_below_the_exhaustive_optimum_and_always_within_budget() {
        let mut found = 0;
        for (g, name) in [(linear(4), "linear-4"), (random_layered(9, 5), "random-9")] {
            let peak = checkpoint_all_peak(&g);
            let (low, _) = g.min_feasible_budget();
            for step in 0..=6 {
                let budget = low + (peak - low) * step / 6;
                let Some((cost, used)) = at(&g, budget, "knapsack").1 else {
                    continue;
                };
                found += 1;
                let (best, _) = at(&g, budget, "exhaustive").1.expect("the oracle fits");
                assert!(used <= budget, "{name} at {budget}: peak {used}");
                assert!(
                    cost >= best - 1e-9,
                    "{name} at {budget}: {cost} < optimum {best}"
                );
            }
        }
        assert!(found >= 6, "only {found} budgets got a schedule");
    }

    #[test]
    fn a_chain_at_half_the_span_recomputes_some_forward_values_once() {
        let g = linear(8);
        let (low, _) = g.min_feasible_budget();
        let budget = low + (checkpoint_all_peak(&g) - low) / 2;
        let (cost, _) = at(&g, budget, "knapsack")
            .1
            .expect("a schedule at half the span");
        let forward: f64 = (0..8).map(|v| g.cost(v)).sum();
        assert!(cost > g.total_cost() && cost <= g.total_cost() + forward);
    }

    /// Where no saved set fits, the reason names the rankings tried: `auto` runs two knapsacks,
    /// and their reasons differ only there (each gives its own lowest peak).
    #[test]
    fn a_saved_set_that_never_fits_names_its_rankings() {
        let g = random_layered(10, 11);
        let instance = Instance {
            graph: &g,
            budget: g.min_feasible_budget().0,
        };
        let reason = |outcome| match outcome {
            Outcome::Infeasible { reason, .. } => reason,
            _ => panic!("a saved set fits at the least feasible budget"),
        };
        let options = SolveOptions::default();
        let own = reason(Knapsack.solve(&instance, &options).unwrap());
        assert!(
            own.starts_with(
                "dropping saved values ranked by recomputation cost per byte or by recomputation \
                 cost with unsaved inputs per byte still peaks at "
            ),
            "{own}"
        );
        let kept = reason(solve_keeping(&instance, &options, &[0.5; 10]).unwrap());
        assert!(
            kept.starts_with(
                "dropping saved values ranked by the share the stage-cut LP keeps still peaks at "
            ),
            "{kept}"
        );
    }

    /// Ranked by the stage-cut LP's keep shares: within budget, never below the oracle nor
    /// below the bound that LP proves.
    #[test]
    fn the_stage_cut_ranking_is_within_budget_and_above_both_bounds() {
        let mut found = 0;
        for (g, name) in [
            (linear(5), "linear-5"),
            (random_layered(10, 11), "random-10"),
        ] {
            let peak = checkpoint_all_peak(&g);
            let (low, _) = g.min_feasible_budget();
            for step in 0..=6 {
                let budget = low + (peak - low) * step / 6;
                let options = SolveOptions::default();
                let Some(cut) =
                    crate::solve::exact::checkmate::stage_cut_bound(&g, budget, &options).unwrap()
                else {
                    continue;
                };
                let instance = Instance { graph: &g, budget };
                let Outcome::Plan(plan) = solve_keeping(&instance, &options, &cut.keep).unwrap()
                else {
                    continue;
                };
                found += 1;
                let stats = simulate(&g, &plan.schedule).unwrap();
                let (best, _) = at(&g, budget, "exhaustive").1.expect("the oracle fits");
                assert!(stats.peak_memory <= budget, "{name} at {budget}");
                assert!(stats.total_cost >= best - 1e-9, "{name} at {budget}");
                assert!(best >= cut.cost * (1.0 - 1e-9), "{name} at {budget}");
            }
        }
        assert!(found >= 2, "only {found} budgets got a schedule");
    }
}
