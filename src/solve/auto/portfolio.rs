//! The portfolio's bookkeeping: each candidate runs with a share of the time left, its
//! plan is replayed by the simulator, the cheapest verified plan is kept, and every run is
//! recorded for `details.tried`.

use crate::schedule::{simulate, Schedule};
use crate::solve::checkmate::stage_cut_bound;
use crate::solve::details::{AutoDetails, Details, StageCutDetails, Tried, Verdict};
use crate::solve::{
    Bound, BoundMethod, Claim, Instance, Outcome, Plan, Scope, SolveError, SolveOptions, Stop,
};
use std::time::Duration;

/// The candidates run so far and the best verified plan among them.
pub(super) struct Portfolio<'a> {
    instance: &'a Instance<'a>,
    options: &'a SolveOptions,
    stop: Stop,
    best: Option<Best>,
    tried: Vec<Tried>,
    /// A candidate's proof that no schedule at all fits.
    proven_infeasible: Option<Outcome>,
    /// The stage-cut bound on every schedule, when it rose above `Σ_v c_v`.
    stage_cut: Option<StageCutDetails>,
    /// The share of each node the stage-cut bound's LP keeps resident at its cut.
    stage_cut_keep: Option<Vec<f64>>,
}

/// The cheapest verified plan so far.
struct Best {
    plan: Plan,
    cost: f64,
    found_s: f64,
}

impl<'a> Portfolio<'a> {
    /// An empty portfolio; the clock of `options.time_limit` starts now.
    pub(super) fn new(instance: &'a Instance<'a>, options: &'a SolveOptions) -> Portfolio<'a> {
        Portfolio {
            instance,
            options,
            stop: Stop::start(options),
            best: None,
            tried: Vec::new(),
            proven_infeasible: None,
            stage_cut: None,
            stage_cut_keep: None,
        }
    }

    /// The share of each node the stage-cut bound's LP keeps resident at its cut, once
    /// the bound is proven.
    pub(super) fn stage_cut_keep(&self) -> Option<&[f64]> {
        self.stage_cut_keep.as_deref()
    }

    /// The best proven bound on every schedule: the stage-cut bound, else `Σ_v c_v`.
    fn global_bound(&self) -> Bound {
        self.stage_cut
            .as_ref()
            .map_or(Bound::sum_of_costs(self.instance.graph), |cut| Bound {
                cost: cut.bound,
                scope: Scope::GlobalOptimum,
                method: BoundMethod::StageCut,
            })
    }

    /// Proves the stage-cut bound with `share` of the time left. It is no candidate: a
    /// failure of HiGHS is reported as progress and leaves `Σ_v c_v` as the bound.
    pub(super) fn prove_bound(&mut self, share: f64) -> Result<(), SolveError> {
        if self.done() || self.stop.should_stop() {
            return Ok(());
        }
        let mut options = self.options.clone();
        options.time_limit = self.time_left().map(|t| t.mul_f64(share));
        let started = self.stop.elapsed();
        match stage_cut_bound(self.instance.graph, self.instance.budget, &options) {
            Err(SolveError::Cancelled) => return Err(SolveError::Cancelled),
            Err(e) => self
                .options
                .report(format!("auto: no stage-cut bound: {e}"), None),
            Ok(None) => {}
            Ok(Some(cut)) => {
                let time_s = (self.stop.elapsed() - started).as_secs_f64();
                self.options.report(
                    format!(
                        "auto: stage-cut bound {} at '{}' ({} cuts, {time_s:.1} s)",
                        cut.cost,
                        self.instance.graph.id(cut.node),
                        cut.cuts
                    ),
                    None,
                );
                self.stage_cut = Some(StageCutDetails {
                    bound: cut.cost,
                    cut: self.instance.graph.id(cut.node).to_string(),
                    cuts: cut.cuts,
                    time_s,
                });
                self.stage_cut_keep = Some(cut.keep);
            }
        }
        Ok(())
    }

    /// Whether the solve is over: cancelled, no schedule can exist, or the best plan is a
    /// global optimum (proven so, or meeting a bound on every schedule: `Σ_v c_v` or the
    /// stage-cut bound). The deadline is not checked here: see [`Portfolio::run`].
    pub(super) fn done(&self) -> bool {
        self.stop.cancelled()
            || self.proven_infeasible.is_some()
            || self.best.as_ref().is_some_and(|b| {
                (b.plan.claim == Claim::Optimal && b.plan.scope == Scope::GlobalOptimum)
                    || self.global_bound().met_by(b.cost)
            })
    }

    /// The schedule of the best verified plan so far.
    pub(super) fn best_schedule(&self) -> Option<Schedule> {
        self.best.as_ref().map(|b| b.plan.schedule.clone())
    }

    /// Whether the best plan is proven optimal within a scope narrower than all schedules.
    pub(super) fn best_is_optimal_in_scope(&self) -> bool {
        self.best
            .as_ref()
            .is_some_and(|b| b.plan.claim == Claim::Optimal && b.plan.scope != Scope::GlobalOptimum)
    }

    /// Runs the candidate `name` with `share` of the time left and records what it found;
    /// past the deadline it does not run. Only a cancellation ends the portfolio; any other
    /// error is recorded and skipped.
    pub(super) fn run(
        &mut self,
        name: &'static str,
        share: f64,
        solve: impl FnOnce(&Instance, &SolveOptions) -> Result<Outcome, SolveError>,
    ) -> Result<(), SolveError> {
        if self.stop.should_stop() {
            return Ok(());
        }
        self.run_for(name, self.time_left().map(|t| t.mul_f64(share)), solve)
    }

    /// Runs a floor candidate, one every answer must be at least as good as: with all the
    /// time left, and not past the deadline (on graphs too large for it to finish in time
    /// it stops without a schedule; the limit holds).
    pub(super) fn run_floor(
        &mut self,
        name: &'static str,
        solve: impl FnOnce(&Instance, &SolveOptions) -> Result<Outcome, SolveError>,
    ) -> Result<(), SolveError> {
        self.run(name, 1.0, solve)
    }

    fn run_for(
        &mut self,
        name: &'static str,
        time_limit: Option<Duration>,
        solve: impl FnOnce(&Instance, &SolveOptions) -> Result<Outcome, SolveError>,
    ) -> Result<(), SolveError> {
        if self.done() {
            return Ok(());
        }
        let mut options = self.options.clone();
        options.time_limit = time_limit;
        let started = self.stop.elapsed();
        let outcome = solve(self.instance, &options);
        let mut tried = Tried {
            cost: None,
            finished_s: 0.0,
            message: None,
            peak_memory: None,
            solver: name,
            time_s: (self.stop.elapsed() - started).as_secs_f64(),
            verdict: Verdict::Schedule,
        };
        match outcome {
            Err(SolveError::Cancelled) => return Err(SolveError::Cancelled),
            Err(e) => {
                tried.verdict = Verdict::Failed;
                tried.message = Some(e.to_string());
            }
            Ok(Outcome::Plan(plan)) => {
                tried.solver = plan.solver;
                self.judge(plan, &mut tried);
            }
            Ok(Outcome::NoSolution { reason, .. }) => {
                tried.verdict = Verdict::NoSolution;
                tried.message = Some(reason);
            }
            Ok(Outcome::Infeasible {
                solver,
                proven,
                reason,
            }) => {
                tried.verdict = Verdict::Infeasible;
                tried.message = Some(reason.clone());
                if proven == Some(Scope::GlobalOptimum) {
                    self.proven_infeasible = Some(Outcome::Infeasible {
                        solver,
                        proven,
                        reason,
                    });
                }
            }
        }
        tried.finished_s = self.stop.elapsed().as_secs_f64();
        self.tried.push(tried);
        Ok(())
    }

    /// Replays `plan` and keeps it when it fits and is the cheapest so far.
    fn judge(&mut self, plan: Plan, tried: &mut Tried) {
        let stats = match simulate(self.instance.graph, &plan.schedule) {
            Ok(stats) => stats,
            Err(e) => {
                tried.verdict = Verdict::Invalid;
                tried.message = Some(format!("{} produced an invalid schedule: {e}", plan.solver));
                return;
            }
        };
        tried.cost = Some(stats.total_cost);
        tried.peak_memory = Some(stats.peak_memory);
        if stats.peak_memory > self.instance.budget {
            tried.verdict = Verdict::OverBudget;
            tried.message = Some(format!(
                "its schedule peaks at {} bytes, over the budget of {} bytes",
                stats.peak_memory, self.instance.budget
            ));
            return;
        }
        // Cheaper wins; at equal cost, a plan with an optimality proof (within its scope)
        // replaces one without.
        let proven = |p: &Plan| p.claim == Claim::Optimal;
        if self.best.as_ref().is_some_and(|b| {
            b.cost < stats.total_cost
                || (b.cost == stats.total_cost && (proven(&b.plan) || !proven(&plan)))
        }) {
            return;
        }
        let found_s = self.stop.elapsed().as_secs_f64();
        self.options.report(
            format!(
                "auto: best {} by {} (bound {}), {found_s:.1} s",
                stats.total_cost,
                plan.solver,
                self.instance.graph.total_cost()
            ),
            None,
        );
        self.best = Some(Best {
            plan,
            cost: stats.total_cost,
            found_s,
        });
    }

    /// The time to the deadline, when there is one.
    fn time_left(&self) -> Option<Duration> {
        self.stop
            .deadline()
            .map(|deadline| deadline.saturating_duration_since(std::time::Instant::now()))
    }

    /// The answer: the best verified plan with the portfolio's record, a proof that no
    /// schedule fits, or what every candidate said.
    pub(super) fn finish(self) -> Outcome {
        let graph = self.instance.graph;
        let first_found_s = self.first_found_s();
        let global_bound = self.global_bound();
        let Some(best) = self.best else {
            if let Some(proof) = self.proven_infeasible {
                return proof;
            }
            let said: Vec<String> = self
                .tried
                .iter()
                .map(|t| {
                    format!(
                        "{}: {}",
                        t.solver,
                        t.message.as_deref().unwrap_or(t.verdict.as_str())
                    )
                })
                .collect();
            let (min_budget, _) = graph.min_feasible_budget();
            return Outcome::Infeasible {
                solver: "auto",
                proven: None,
                reason: format!(
                    "no candidate found a schedule within {} bytes; the proven minimum is at \
                     least {min_budget} bytes, {} below the budget ({})",
                    self.instance.budget,
                    self.instance.budget.saturating_sub(min_budget),
                    said.join("; ")
                ),
            };
        };
        let mut plan = best.plan;
        // A plan's own bound covers its solver's scope; without one, or when its bound on
        // every schedule is lower, the portfolio's bound on every schedule (a plan proven
        // globally optimal needs none).
        let proven_optimal = plan.claim == Claim::Optimal && plan.scope == Scope::GlobalOptimum;
        let weaker = plan
            .lower_bound
            .is_none_or(|own| own.scope == Scope::GlobalOptimum && own.cost < global_bound.cost);
        if weaker && !proven_optimal {
            plan.lower_bound = Some(global_bound);
        }
        let ran = self.tried.len();
        plan.message = Some(format!(
            "the cheapest of {ran} candidate{} ({}){}",
            if ran == 1 { "" } else { "s" },
            self.tried
                .iter()
                .map(|t| t.solver)
                .fold(Vec::new(), |mut names, name| {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                    names
                })
                .join(", "),
            plan.message
                .take()
                .map_or(String::new(), |m| format!("; {}: {m}", plan.solver))
        ));
        plan.details = Some(Details::Auto(Box::new(AutoDetails {
            best_found_s: best.found_s,
            first_found_s,
            solver_details: plan.details.take(),
            stage_cut: self.stage_cut,
            tried: self.tried,
        })));
        Outcome::Plan(plan)
    }

    /// When the first verified schedule was found.
    fn first_found_s(&self) -> Option<f64> {
        self.tried
            .iter()
            .find(|t| t.verdict == Verdict::Schedule)
            .map(|t| t.finished_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::schedule::{checkpoint_all, checkpoint_all_peak};
    use crate::solve::find;

    /// A candidate that claims an optimum over the budget, and one that fails, are
    /// recorded and skipped: the answer is the verified schedule of a third (issue 15,
    /// item 5: a solver's failure is never the answer).
    #[test]
    fn failing_and_over_budget_candidates_are_recorded_and_skipped() {
        let g = linear(6);
        let instance = Instance {
            graph: &g,
            budget: checkpoint_all_peak(&g) - 1,
        };
        let options = SolveOptions::default();
        let mut portfolio = Portfolio::new(&instance, &options);
        let over = |_: &Instance, _: &SolveOptions| {
            Ok(Outcome::Plan(Plan {
                schedule: checkpoint_all(&g),
                claim: Claim::Optimal,
                solver: "checkpoint-all",
                scope: Scope::GlobalOptimum,
                lower_bound: None,
                message: None,
                details: None,
            }))
        };
        portfolio.run("checkpoint-all", 1.0, over).unwrap();
        let fail = |_: &Instance, _: &SolveOptions| {
            Err(SolveError::Failed {
                solver: "milp",
                reason: "HiGHS failed".into(),
            })
        };
        portfolio.run("milp", 1.0, fail).unwrap();
        let dtr = find("dtr").unwrap();
        portfolio.run("dtr", 1.0, |i, o| dtr.solve(i, o)).unwrap();
        let Outcome::Plan(plan) = portfolio.finish() else {
            panic!("dtr's schedule fits")
        };
        assert_eq!(plan.solver, "dtr");
        let Some(Details::Auto(details)) = &plan.details else {
            panic!("the portfolio's details")
        };
        let verdicts: Vec<Verdict> = details.tried.iter().map(|t| t.verdict).collect();
        assert_eq!(
            verdicts,
            [Verdict::OverBudget, Verdict::Failed, Verdict::Schedule]
        );
        let peak = simulate(&g, &plan.schedule).unwrap().peak_memory;
        assert!(peak <= instance.budget);
    }
}
