//! The portfolio's bookkeeping: each candidate runs with its allotment (work units under
//! [`Effort::Work`], with the time left as a safety cap; a share of the time left under
//! [`Effort::Time`]), its plan is replayed by the simulator, the cheapest verified plan is
//! kept, and every run is recorded for `details.tried`. At the end it says what ended the
//! solve ([`EndedBy`]).

use crate::schedule::{simulate, Schedule};
use crate::solve::details::{
    AutoDetails, Details, SequenceDetails, StageCutDetails, Tried, Verdict,
};
use crate::solve::exact::checkmate::{sequence_bound, stage_cut_bound};
use crate::solve::{
    Bound, BoundMethod, Claim, Effort, EndedBy, Instance, Outcome, Plan, Scope, SolveError,
    SolveOptions, Stop,
};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// The relative gap to a bound on every schedule within which the best plan counts as
/// converged, when the caller sets no MIP gap (HiGHS's default `mip_rel_gap`).
const DEFAULT_GAP: f64 = 1e-4;

/// The candidates run so far and the best verified plan among them.
pub(super) struct Portfolio<'a> {
    instance: &'a Instance<'a>,
    options: &'a SolveOptions,
    stop: Stop,
    /// The improvers stopped for a stall window without a cheaper plan.
    stalled: bool,
    best: Option<Best>,
    tried: Vec<Tried>,
    /// A candidate's proof that no schedule at all fits.
    proven_infeasible: Option<Outcome>,
    /// The stage-cut bound on every schedule, when it rose above `Σ_v c_v`.
    stage_cut: Option<StageCutDetails>,
    /// The node of the stage-cut bound's cut and the share of each node its LP keeps
    /// resident there.
    stage_cut_keep: Option<(usize, Vec<f64>)>,
    /// The bound of the sequence of cuts, when it rose above the stage-cut bound.
    sequence: Option<SequenceDetails>,
}

/// The cheapest verified plan so far.
struct Best {
    plan: Plan,
    cost: f64,
    /// Its simulated `recompute_cost`.
    recompute: f64,
    found_s: f64,
}

impl<'a> Portfolio<'a> {
    /// An empty portfolio; the clock of `options.time_limit` starts now.
    pub(super) fn new(instance: &'a Instance<'a>, options: &'a SolveOptions) -> Portfolio<'a> {
        Portfolio {
            instance,
            options,
            stop: Stop::start(options),
            stalled: false,
            best: None,
            tried: Vec::new(),
            proven_infeasible: None,
            stage_cut: None,
            stage_cut_keep: None,
            sequence: None,
        }
    }

    /// The node of the stage-cut bound's cut and the share of each node its LP keeps
    /// resident there, once the bound is proven.
    pub(super) fn stage_cut_keep(&self) -> Option<(usize, &[f64])> {
        self.stage_cut_keep
            .as_ref()
            .map(|(cut, keep)| (*cut, keep.as_slice()))
    }

    /// The best proven bound on every schedule: the sequence of cuts', else the stage-cut
    /// bound, else `Σ_v c_v` (each is recorded only when it rose above the one after it).
    fn global_bound(&self) -> Bound {
        self.bound_with(true)
    }

    /// The bound whether the solve converged rests on: [`Portfolio::global_bound`] without a
    /// sequence of cuts whose time share ended it (its value may differ on another machine;
    /// `ended_by` should not).
    fn settled_bound(&self) -> Bound {
        self.bound_with(false)
    }

    /// [`Portfolio::global_bound`], with an incomplete sequence of cuts only if `incomplete`.
    fn bound_with(&self, incomplete: bool) -> Bound {
        let bound = |cost: f64, method: BoundMethod| Bound {
            cost,
            scope: Scope::GlobalOptimum,
            method,
        };
        match (&self.sequence, &self.stage_cut) {
            (Some(sequence), _) if incomplete || sequence.complete => {
                bound(sequence.bound, BoundMethod::SequenceOfCuts)
            }
            (_, Some(cut)) => bound(cut.bound, BoundMethod::StageCut),
            _ => Bound::sum_of_costs(self.instance.graph),
        }
    }

    /// Proves the stage-cut bound with `share` of the time left (under [`Effort::Work`]:
    /// every cut, within the time left). It is no candidate: a failure of HiGHS is reported
    /// as progress and leaves `Σ_v c_v` as the bound.
    pub(super) fn prove_bound(&mut self, share: f64) -> Result<(), SolveError> {
        if self.done() || self.stop.should_stop() {
            return Ok(());
        }
        let options = self.allot(share, None);
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
                        "auto: stage-cut bound {} at '{}' ({} cuts, {} forced, integral: {}, \
                         {time_s:.1} s)",
                        cut.cost,
                        self.instance.graph.id(cut.node),
                        cut.cuts,
                        cut.forced.len(),
                        cut.integral
                    ),
                    None,
                );
                self.stage_cut = Some(StageCutDetails {
                    bound: cut.cost,
                    cut: self.instance.graph.id(cut.node).to_string(),
                    cuts: cut.cuts,
                    forced: cut
                        .forced
                        .iter()
                        .map(|&(v, _)| self.instance.graph.id(v).to_string())
                        .collect(),
                    integral: cut.integral,
                    time_s,
                });
                self.stage_cut_keep = Some((cut.node, cut.keep));
            }
        }
        Ok(())
    }

    /// Proves the bound of the sequence of cuts through the stage cut's moment, within the
    /// effort's windows and the time left, once a schedule is found that does not meet the
    /// bounds so far; like the stage-cut bound it is no candidate, and kept only where it
    /// rises above it.
    ///
    /// Under [`Effort::Work`] it gets at most `share` (scaled by the effort) of the time
    /// left, on a clock of its own: its windows' integral programs are HiGHS's root nodes,
    /// whose time no work limit bounds. A share that ends it is not the solve's time limit
    /// (the schedule is the same on every machine); `details.sequence.complete` says so.
    pub(super) fn prove_sequence(&mut self, share: Duration) -> Result<(), SolveError> {
        if self.best.is_none() || self.done() || self.stop.should_stop() {
            return Ok(());
        }
        let Some((anchor, _)) = self.stage_cut_keep() else {
            return Ok(());
        };
        let graph = self.instance.graph;
        let mut options = self.allot(1.0, None);
        if let Effort::Work(scale) = self.options.effort {
            let share = share.mul_f64(scale);
            if options.time_limit.is_none_or(|left| share < left) {
                options.time_limit = Some(share);
                options.timed_out = Arc::new(AtomicBool::new(false));
            }
        }
        let started = self.stop.elapsed();
        match sequence_bound(graph, self.instance.budget, anchor, &options) {
            Err(SolveError::Cancelled) => return Err(SolveError::Cancelled),
            Err(e) => self
                .options
                .report(format!("auto: no sequence-of-cuts bound: {e}"), None),
            Ok(None) => {}
            Ok(Some(sequence)) if sequence.cost > self.global_bound().cost => {
                let time_s = (self.stop.elapsed() - started).as_secs_f64();
                let moments: Vec<String> = sequence
                    .moments
                    .iter()
                    .map(|&l| graph.id(l).to_string())
                    .collect();
                self.options.report(
                    format!(
                        "auto: sequence-of-cuts bound {} over {} moments from '{}' to '{}' \
                         ({} windows, integral: {}, {time_s:.1} s)",
                        sequence.cost,
                        moments.len(),
                        moments[0],
                        moments[moments.len() - 1],
                        sequence.windows,
                        sequence.integral
                    ),
                    None,
                );
                self.sequence = Some(SequenceDetails {
                    bound: sequence.cost,
                    moments,
                    integral: sequence.integral,
                    windows: sequence.windows,
                    complete: sequence.complete,
                    time_s,
                });
            }
            Ok(Some(_)) => {}
        }
        Ok(())
    }

    /// Whether the solve is over: cancelled, or converged ([`Portfolio::converged`]). The
    /// deadline is not checked here: see [`Portfolio::run`].
    pub(super) fn done(&self) -> bool {
        self.stop.cancelled() || self.converged()
    }

    /// Whether no search can do better: no schedule can exist, or the best plan is a
    /// global optimum (proven so, or within the MIP gap of a bound on every schedule:
    /// `Σ_v c_v`, the stage-cut bound or a complete sequence of cuts: the
    /// [`Portfolio::settled_bound`]).
    fn converged(&self) -> bool {
        let gap = self.options.mip_gap.unwrap_or(DEFAULT_GAP);
        self.proven_exact()
            || self
                .best
                .as_ref()
                .is_some_and(|b| b.cost - self.settled_bound().cost <= gap * b.cost)
    }

    /// Whether nothing can do better at all: no schedule can exist, or the best plan is a
    /// global optimum proven so or meeting a bound on every schedule (no gap allowed).
    fn proven_exact(&self) -> bool {
        self.proven_infeasible.is_some()
            || self.best.as_ref().is_some_and(|b| {
                (b.plan.claim == Claim::Optimal && b.plan.scope == Scope::GlobalOptimum)
                    || self
                        .settled_bound()
                        .met_by(b.recompute, self.instance.graph.total_cost())
            })
    }

    /// The cost of the best verified plan so far.
    pub(super) fn best_cost(&self) -> Option<f64> {
        self.best.as_ref().map(|b| b.cost)
    }

    /// Records that the improvers ran a stall window without finding a cheaper plan.
    pub(super) fn stall(&mut self) {
        self.stalled = true;
    }

    /// Whether the solve must end now: cancelled or past the time limit.
    pub(super) fn stopped(&self) -> bool {
        self.stop.should_stop()
    }

    /// What ended the solve: a time limit that ended any part of it first (the answer may
    /// then depend on the machine), then convergence, then the improvers' stall; else
    /// the work budget (under [`Effort::Time`]: the time).
    fn ended_by(&self) -> EndedBy {
        if self.stop.timed_out() {
            EndedBy::TimeLimit
        } else if self.converged() {
            EndedBy::Converged
        } else if self.stalled {
            EndedBy::Stall
        } else if self.options.effort == Effort::Time {
            EndedBy::TimeLimit
        } else {
            EndedBy::WorkLimit
        }
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

    /// Runs the candidate `name` with its allotment ([`Portfolio::allot`]) and records
    /// what it found; past the deadline it does not run. Only a cancellation ends the
    /// portfolio; any other error is recorded and skipped.
    pub(super) fn run(
        &mut self,
        name: &'static str,
        share: f64,
        work: Option<u64>,
        solve: impl FnOnce(&Instance, &SolveOptions) -> Result<Outcome, SolveError>,
    ) -> Result<(), SolveError> {
        if self.stop.should_stop() || self.done() {
            return Ok(());
        }
        let options = self.allot(share, work);
        self.run_with(name, options, solve).map(drop)
    }

    /// How many draws a search drawn again with other seeds makes (`auto`'s `steered`):
    /// under [`Effort::Work`] one per whole unit of effort (at least one), under
    /// [`Effort::Time`] one.
    pub(super) fn draws(&self) -> u64 {
        self.work_scale()
            .map_or(1, |scale| (scale.floor() as u64).max(1))
    }

    /// The effort's multiple of the default work under [`Effort::Work`]; `None` under
    /// [`Effort::Time`].
    pub(super) fn work_scale(&self) -> Option<f64> {
        match self.options.effort {
            Effort::Work(scale) => Some(scale),
            Effort::Time => None,
        }
    }

    /// [`Portfolio::run`] with `seed`, and under [`Effort::Work`] `work` scaled by `scale`
    /// (the effort's own where `None`) rather than by the effort; the verified cost of its
    /// plan when it fits the budget (`None` too where it did not run).
    pub(super) fn run_seeded(
        &mut self,
        name: &'static str,
        share: f64,
        work: u64,
        scale: Option<f64>,
        seed: u64,
        solve: impl FnOnce(&Instance, &SolveOptions) -> Result<Outcome, SolveError>,
    ) -> Result<Option<f64>, SolveError> {
        if self.stop.should_stop() || self.done() {
            return Ok(None);
        }
        let mut options = self.allot_scaled(share, Some(work), scale);
        options.seed = seed;
        self.run_with(name, options, solve)
    }

    /// A candidate's options. Under [`Effort::Work`]: `work` (scaled by the effort) as its
    /// work limit, the time left as its safety cap; a candidate that counts no work runs to
    /// its end within that cap. Under [`Effort::Time`]: `share` of the time left.
    fn allot(&self, share: f64, work: Option<u64>) -> SolveOptions {
        self.allot_scaled(share, work, None)
    }

    /// [`Portfolio::allot`] with `work` scaled by `scale` rather than by the effort (where
    /// `Some`).
    fn allot_scaled(&self, share: f64, work: Option<u64>, scale: Option<f64>) -> SolveOptions {
        let mut options = self.options.clone();
        match self.options.effort {
            Effort::Work(effort) => {
                let scale = scale.unwrap_or(effort);
                options.time_limit = self.time_left();
                options.work_limit = work.map(|w| (w as f64 * scale).ceil().max(1.0) as u64);
            }
            Effort::Time => {
                options.time_limit = self.time_left().map(|t| t.mul_f64(share));
                options.work_limit = None;
            }
        }
        options
    }

    /// Runs a floor candidate, one every answer must be at least as good as: with all the
    /// time left, and not past the deadline (on graphs too large for it to finish in time
    /// it stops without a schedule; the limit holds). A best plan within the MIP gap of the
    /// bound does not skip it (only an exact proof does), so the answer is never costlier
    /// than a floor candidate that finished.
    pub(super) fn run_floor(
        &mut self,
        name: &'static str,
        solve: impl FnOnce(&Instance, &SolveOptions) -> Result<Outcome, SolveError>,
    ) -> Result<(), SolveError> {
        if self.stop.should_stop() || self.stop.cancelled() || self.proven_exact() {
            return Ok(());
        }
        let options = self.allot(1.0, None);
        self.run_with(name, options, solve).map(drop)
    }

    /// Runs a candidate with `options` and records it; the verified cost of its plan when it
    /// fits the budget.
    fn run_with(
        &mut self,
        name: &'static str,
        options: SolveOptions,
        solve: impl FnOnce(&Instance, &SolveOptions) -> Result<Outcome, SolveError>,
    ) -> Result<Option<f64>, SolveError> {
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
        let fits = (tried.verdict == Verdict::Schedule)
            .then_some(tried.cost)
            .flatten();
        self.tried.push(tried);
        Ok(fits)
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
                self.global_bound().cost
            ),
            None,
        );
        self.best = Some(Best {
            plan,
            cost: stats.total_cost,
            recompute: stats.recompute_cost,
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
        let ended_by = self.ended_by();
        let Some(best) = self.best else {
            if let Some(proof) = self.proven_infeasible {
                return proof;
            }
            let said = what_they_said(&self.tried);
            let (min_budget, _) = graph.min_feasible_budget();
            return Outcome::Infeasible {
                solver: "auto",
                proven: None,
                reason: format!(
                    "no candidate found a schedule within {} bytes; the proven minimum is at \
                     least {min_budget} bytes, {} below the budget ({})",
                    self.instance.budget,
                    self.instance.budget.saturating_sub(min_budget),
                    said
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
        self.options.report(
            format!(
                "auto: ended by {} after {:.1} s",
                ended_by.as_str(),
                self.stop.elapsed().as_secs_f64()
            ),
            None,
        );
        plan.details = Some(Details::Auto(Box::new(AutoDetails {
            best_found_s: best.found_s,
            ended_by,
            first_found_s,
            solver_details: plan.details.take(),
            stage_cut: self.stage_cut,
            sequence: self.sequence,
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

/// Each candidate's `solver: message`, solvers in the order they first ran and each
/// solver's messages together; a message several candidates gave word for word (a solver run
/// again under another guide or weight) once, with how many gave it.
fn what_they_said(tried: &[Tried]) -> String {
    let mut said: Vec<(&str, String, usize)> = Vec::new();
    for t in tried {
        let message = t.message.as_deref().unwrap_or(t.verdict.as_str());
        match said
            .iter()
            .position(|(solver, m, _)| *solver == t.solver && m == message)
        {
            Some(at) => said[at].2 += 1,
            None => {
                let after = said.iter().rposition(|(solver, ..)| *solver == t.solver);
                let at = after.map_or(said.len(), |at| at + 1);
                said.insert(at, (t.solver, message.to_string(), 1));
            }
        }
    }
    said.into_iter()
        .map(|(solver, message, times)| match times {
            1 => format!("{solver}: {message}"),
            _ => format!("{solver}: {message} ({times} candidates)"),
        })
        .collect::<Vec<_>>()
        .join("; ")
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
        portfolio.run("checkpoint-all", 1.0, None, over).unwrap();
        let fail = |_: &Instance, _: &SolveOptions| {
            Err(SolveError::Failed {
                solver: "milp",
                reason: "HiGHS failed".into(),
            })
        };
        portfolio.run("milp", 1.0, None, fail).unwrap();
        let dtr = find("dtr").unwrap();
        portfolio
            .run("dtr", 1.0, None, |i, o| dtr.solve(i, o))
            .unwrap();
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

    /// What ended the solve: a time limit as soon as one stopped any part of it, else
    /// convergence (a plan meets `Σ_v c_v`), else a stall, else the work budget (under
    /// `Effort::Time`, the time).
    #[test]
    fn the_portfolio_says_what_ended_it() {
        let g = linear(6);
        let instance = Instance {
            graph: &g,
            budget: checkpoint_all_peak(&g),
        };
        let all = find("checkpoint-all").unwrap();
        let options = SolveOptions::default();
        let mut portfolio = Portfolio::new(&instance, &options);
        assert_eq!(portfolio.ended_by(), EndedBy::WorkLimit);
        portfolio.stall();
        assert_eq!(portfolio.ended_by(), EndedBy::Stall);
        portfolio
            .run("checkpoint-all", 1.0, None, |i, o| all.solve(i, o))
            .unwrap();
        assert_eq!(portfolio.ended_by(), EndedBy::Converged);
        let timed = SolveOptions {
            effort: Effort::Time,
            ..SolveOptions::default()
        };
        assert_eq!(
            Portfolio::new(&instance, &timed).ended_by(),
            EndedBy::TimeLimit
        );
        let past = SolveOptions {
            time_limit: Some(Duration::ZERO),
            ..SolveOptions::default()
        };
        let mut portfolio = Portfolio::new(&instance, &past);
        portfolio
            .run("checkpoint-all", 1.0, None, |i, o| all.solve(i, o))
            .unwrap();
        assert!(
            portfolio.best_cost().is_none(),
            "past the deadline nothing runs"
        );
        assert_eq!(portfolio.ended_by(), EndedBy::TimeLimit);
    }

    /// What a portfolio at the least budget of a 6-layer chain says after `runs` when no
    /// candidate fits.
    fn what_is_said(runs: impl FnOnce(&mut Portfolio)) -> String {
        let g = linear(6);
        let (least, _) = g.min_feasible_budget();
        let instance = Instance {
            graph: &g,
            budget: least,
        };
        let options = SolveOptions::default();
        let mut portfolio = Portfolio::new(&instance, &options);
        runs(&mut portfolio);
        let Outcome::Infeasible { reason, .. } = portfolio.finish() else {
            panic!("nothing fits at the least budget")
        };
        reason
    }

    /// When no candidate finds a schedule, the answer says what each said, once per distinct
    /// message: a solver run again with the same failure is counted, not repeated.
    #[test]
    fn the_same_failure_is_said_once_with_its_count() {
        let knapsack = find("knapsack").unwrap();
        let all = find("checkpoint-all").unwrap();
        let reason = what_is_said(|portfolio| {
            for _ in 0..2 {
                portfolio
                    .run("knapsack", 1.0, None, |i, o| knapsack.solve(i, o))
                    .unwrap();
            }
            portfolio
                .run("checkpoint-all", 1.0, None, |i, o| all.solve(i, o))
                .unwrap();
        });
        assert_eq!(reason.matches("knapsack:").count(), 1, "{reason}");
        assert!(reason.contains("(2 candidates)"), "{reason}");
        assert_eq!(reason.matches("checkpoint-all:").count(), 1, "{reason}");
    }

    /// A solver's different failures (its runs under different guides) are said side by side,
    /// whatever ran between them.
    #[test]
    fn a_solvers_failures_are_said_together() {
        let all = find("checkpoint-all").unwrap();
        let said = |what: &'static str| {
            move |_: &Instance, _: &SolveOptions| {
                Ok(Outcome::Infeasible {
                    solver: "dtr-ahead",
                    proven: None,
                    reason: what.into(),
                })
            }
        };
        let reason = what_is_said(|portfolio| {
            for what in ["plain", "", "guided", "plain"] {
                let run = match what {
                    "" => portfolio.run("checkpoint-all", 1.0, None, |i, o| all.solve(i, o)),
                    _ => portfolio.run("dtr-ahead", 1.0, None, said(what)),
                };
                run.unwrap();
            }
        });
        let dtr = reason.find("dtr-ahead: plain (2 candidates); dtr-ahead: guided;");
        let all = reason.find("checkpoint-all:");
        assert!(dtr.is_some() && dtr < all, "{reason}");
    }
}
