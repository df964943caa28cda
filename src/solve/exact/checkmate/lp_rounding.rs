//! The LP relaxation of the Checkmate MILP ([`super`]) as a lower bound (`lp-bound`), and
//! Checkmate's two-phase LP rounding (`lp-rounding`; Jain et al., MLSys 2020, §5).
//!
//! Phase 1 solves the relaxation (R, S, FREE in `[0,1]`) and rounds only `S*`:
//! a deterministic threshold sweep (`S = [S* >= τ]` for `τ = 0.05, 0.10, ..., 0.95` and
//! any positive value) and seeded randomized rounding (`S[t,i] ~ Bernoulli(S*[t,i])`).
//! Phase 2 rebuilds the minimal R for each rounded S ([`Stages::from_s`]); every
//! candidate is simulated and the cheapest one **within the budget** is kept.
//!
//! Checkmate's rounding could return schedules over the budget (its scheduler's peak was
//! wrong); here only simulator-verified candidates count, so the result never exceeds the
//! budget. When no rounding fits, the LP is solved again at a lower budget
//! (`K + f·(B − K)` for `f = 0.9, 0.8, ..., 0.5`) and its roundings tried against the real
//! budget; when none fits either, the best baseline that fits is returned. The result's
//! message says which happened.
//!
//! The optimum of the relaxation at the real budget is a lower bound on the MILP optimum
//! (the best frontier-advancing schedule in solver order) and is reported as
//! `lower_bound`: `L(y)` of its duals ([`super::lagrangian`]), lowered by HiGHS's resolution
//! and raised to the next integer where every cost is one ([`super::resolution`]). It is not
//! a bound on schedules in other orders, which the MILP does not cover.
//!
//! `lp-bound` presents that bound together with a schedule, so that its result is as
//! verifiable as any other: the same rounding (else the best baseline that fits). Its
//! scope is `lower_bound`: the number that matters is the bound; the schedule is a
//! by-product. When neither a rounding nor a baseline fits, both answer `infeasible`
//! with `proven: None` (the MILP may still find a schedule; the test suite lists where).

use super::{admit, backend, best_baseline, controls, failed, precheck, Candidate, StageModel};
use crate::schedule::stages::Stages;
use crate::solve::details::{CheckmateDetails, Details};
use crate::solve::Footprint;
use crate::solve::{
    Bound, BoundMethod, Claim, Instance, Outcome, Scope, SolveError, SolveOptions, Solver,
    SolverInfo, Stop, Stopped,
};
use backend::RunStatus;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub struct LpBound;
pub struct LpRounding;

/// Randomized rounds per LP solution.
const RANDOM_ROUNDS: usize = 32;
/// Fractions of the working budget `B − K` the LP is retried at.
const RETRY_FRACTIONS: [f64; 5] = [0.9, 0.8, 0.7, 0.6, 0.5];

impl Solver for LpBound {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "lp-bound",
            description:
                "The LP relaxation of Checkmate's MILP: a lower bound on the optimal cost \
                          of frontier-advancing schedules, with the best rounding of the LP \
                          solution (or a baseline) as the schedule.",
            scope: Scope::LowerBound,
            accepts: "any graph",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        super::footprint(instance.graph)
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        solve_rounding(instance, options, "lp-bound", Scope::LowerBound).map(|r| r.outcome)
    }
}

impl Solver for LpRounding {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "lp-rounding",
            description:
                "Checkmate's two-phase LP rounding: round the LP relaxation's checkpoints \
                          (threshold sweep and randomized), recompute minimally, keep the \
                          cheapest schedule within budget; never over budget.",
            scope: Scope::Heuristic,
            accepts: "any graph",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        super::footprint(instance.graph)
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        solve_rounding(instance, options, "lp-rounding", Scope::Heuristic).map(|r| r.outcome)
    }
}

/// What [`solve_rounding`] found, and the relaxation at the full budget.
pub(crate) struct Rounded {
    pub outcome: Outcome,
    pub relaxation: Relaxation,
}

/// The LP relaxation at the full budget, as HiGHS left it.
#[derive(Default)]
pub(crate) struct Relaxation {
    /// It reached its optimum (its bound may come from a run stopped short:
    /// [`super::lagrangian`]).
    pub optimal: bool,
    /// Its point, in the columns of the MILP's model (the same builder).
    pub columns: Option<Vec<f64>>,
}

/// The LP relaxation at the real budget, rounded; the LP at lower budgets when no
/// rounding fits; then the best baseline. The plan has the given `scope`.
pub(crate) fn solve_rounding(
    instance: &Instance,
    options: &SolveOptions,
    solver: &'static str,
    scope: Scope,
) -> Result<Rounded, SolveError> {
    let mut relaxation = Relaxation::default();
    let outcome = round_relaxation(instance, options, solver, scope, &mut relaxation)?;
    Ok(Rounded {
        outcome,
        relaxation,
    })
}

fn round_relaxation(
    instance: &Instance,
    options: &SolveOptions,
    solver: &'static str,
    scope: Scope,
    relaxation: &mut Relaxation,
) -> Result<Outcome, SolveError> {
    let stop = Stop::start(options);
    if stop.cancelled() {
        return Err(SolveError::Cancelled);
    }
    if let Some(outcome) = precheck(instance, solver) {
        return Ok(outcome);
    }
    admit(instance.graph, options, solver)?;
    let tries = match try_budgets(instance, options, solver, &stop, relaxation)? {
        Ok(tries) => tries,
        Err(proven) => return Ok(proven),
    };
    conclude(instance, options, solver, scope, tries, &stop)
}

/// What the LPs at the budgets tried gave.
#[derive(Default)]
struct Tries {
    details: CheckmateDetails,
    lower_bound: Option<Bound>,
    /// The budgets whose LP was solved.
    tried: Vec<u64>,
    /// The first rounding that fits.
    found: Option<Candidate>,
    /// Why the LP gave no solution to round, when it stopped without a verdict.
    cut_short: Option<String>,
}

impl Tries {
    /// The LP at the real budget: its figures for the details, whether it reached its
    /// optimum, and its bound.
    fn note_full_budget(
        &mut self,
        graph: &crate::graph::Graph,
        model: &StageModel,
        run: &backend::Run,
        relaxation: &mut Relaxation,
    ) {
        self.details = model.details();
        self.details.lp_time_s = Some(run.time.as_secs_f64());
        self.details.lp_status = Some(run.status.to_string());
        relaxation.optimal = run.status == RunStatus::Optimal;
        // Proven by the run's duals whether or not it reached its optimum, within HiGHS's
        // resolution; a run stopped short counts when its bound beats Σ_v c_v, which every
        // schedule pays (the duals of an unfinished run may be far from optimal, and L(y)
        // below 0).
        self.lower_bound = run
            .proves(graph, 0.0, model.cost_scale)
            .filter(|&b| relaxation.optimal || b > graph.total_cost())
            .map(|cost| Bound {
                cost,
                scope: Scope::OptimalForOrder,
                method: BoundMethod::LpRelaxation,
            });
    }
}

/// The LP relaxation at the real budget, then at [`RETRY_FRACTIONS`] of it while no
/// rounding fits the real budget; `Err` the outcome when the LP at the real budget is
/// infeasible (proven).
fn try_budgets(
    instance: &Instance,
    options: &SolveOptions,
    solver: &'static str,
    stop: &Stop,
    relaxation: &mut Relaxation,
) -> Result<Result<Tries, Outcome>, SolveError> {
    const TIME_LIMIT: &str = "the time limit passed while solving the LP relaxation";
    let graph = instance.graph;
    let (min_budget, _) = graph.min_feasible_budget();
    let working = instance.budget - graph.fixed_memory();
    let mut tries = Tries::default();
    for fraction in std::iter::once(1.0).chain(RETRY_FRACTIONS) {
        let lp_budget = graph.fixed_memory() + (working as f64 * fraction).floor() as u64;
        if lp_budget < min_budget {
            break;
        }
        let lp_instance = Instance {
            graph,
            budget: lp_budget,
        };
        let mut model = match StageModel::build_relaxation(&lp_instance, stop) {
            Ok(model) => model,
            Err(Stopped::Cancelled) => return Err(SolveError::Cancelled),
            Err(Stopped::TimeLimit) => {
                tries.cut_short = Some(TIME_LIMIT.into());
                break;
            }
        };
        let run = backend::run(model.take_lp(), None, &controls(options, true, stop))
            .map_err(|e| failed(solver, e))?;
        tries.tried.push(lp_budget);
        if fraction == 1.0 {
            tries.note_full_budget(graph, &model, &run, relaxation);
        }
        match (run.status, run.columns) {
            (RunStatus::Cancelled, _) => return Err(SolveError::Cancelled),
            (RunStatus::Infeasible, _) if fraction == 1.0 => {
                return Ok(Err(Outcome::Infeasible {
                    solver,
                    proven: Some(Scope::OptimalForOrder),
                    reason: format!(
                        "the LP relaxation is infeasible: no frontier-advancing stage schedule in \
                         solver order fits in {} bytes (the trivial lower bound on the minimum \
                         feasible budget is {min_budget} bytes)",
                        instance.budget
                    ),
                }))
            }
            // A point HiGHS left without a verdict is rounded too: the simulator judges.
            (RunStatus::Optimal | RunStatus::Unresolved(_), Some(columns)) => {
                tries.found = round(instance, options, &model, &columns, stop, fraction);
                if fraction == 1.0 {
                    relaxation.columns = Some(columns);
                }
                if tries.found.is_some() {
                    tries.details.lp_budget = Some(lp_budget);
                    break;
                }
            }
            (RunStatus::TimeLimit, _) => {
                tries.cut_short = Some(TIME_LIMIT.into());
                break;
            }
            (status @ RunStatus::Unresolved(_), _) => {
                tries.cut_short = Some(format!(
                    "HiGHS ended the LP relaxation without a verdict (status {status})"
                ));
                break;
            }
            // An infeasible LP at a lowered budget: lower budgets are infeasible too.
            _ => break,
        }
        if stop.cancelled() {
            return Err(SolveError::Cancelled);
        }
    }
    Ok(Ok(tries))
}

/// The plan from the first rounding that fits, else from the best baseline, saying
/// which and why; no plan when neither fits.
fn conclude(
    instance: &Instance,
    options: &SolveOptions,
    solver: &'static str,
    scope: Scope,
    tries: Tries,
    stop: &Stop,
) -> Result<Outcome, SolveError> {
    let Tries {
        mut details,
        lower_bound,
        tried,
        found,
        cut_short,
    } = tries;
    let rounded = found.is_some();
    let candidate = match found {
        Some(c) => Some(c),
        None => best_baseline(instance, options)?,
    };
    let Some(candidate) = candidate else {
        return Ok(if let Some(why) = cut_short {
            Outcome::NoSolution {
                solver,
                reason: format!("{why}, and no baseline fits the budget"),
            }
        } else {
            Outcome::Infeasible {
                solver,
                proven: None,
                reason: format!(
                    "no rounding of the LP relaxation (solved at budgets {tried:?}) and no \
                     baseline fits in {} bytes{}",
                    instance.budget,
                    lower_bound.map_or(String::new(), |lb| format!(
                        "; the LP relaxation bounds the optimal cost below by {}",
                        lb.cost
                    ))
                ),
            }
        });
    };
    let message = if rounded {
        format!("{} of the LP relaxation", candidate.source)
    } else if let Some(why) = cut_short {
        format!(
            "{why}; returned the best baseline that fits ({})",
            candidate.source
        )
    } else {
        format!(
            "no rounding of the LP relaxation fits (LP solved at budgets {tried:?}); returned the \
             best baseline that fits ({})",
            candidate.source
        )
    };
    details.source = Some(candidate.source.clone());
    details.solve_time_s = Some(stop.elapsed().as_secs_f64());
    let mut plan = candidate.into_plan(solver, Claim::Feasible, scope);
    plan.lower_bound = lower_bound;
    plan.message = Some(message);
    plan.details = Some(Details::Checkmate(Box::new(details)));
    Ok(Outcome::Plan(plan))
}

/// The cheapest rounding of the LP solution `columns` that fits the real budget.
fn round(
    instance: &Instance,
    options: &SolveOptions,
    model: &StageModel,
    columns: &[f64],
    stop: &Stop,
    fraction: f64,
) -> Option<Candidate> {
    let graph = instance.graph;
    let at = if fraction == 1.0 {
        String::new()
    } else {
        format!(" (LP at {:.0}% of the working budget)", fraction * 100.0)
    };
    let mut best: Option<Candidate> = None;
    let mut consider = |s, source: String| {
        let stages = Stages::from_s(graph, s);
        if let Some(c) = Candidate::check(graph, stages, instance.budget, source) {
            c.keep_if_cheaper(&mut best);
        }
    };
    let thresholds = std::iter::once(1e-6).chain((1..20).map(|k| k as f64 * 0.05));
    for tau in thresholds {
        consider(
            model.s_at(columns, tau),
            format!("threshold rounding at {tau:.2}{at}"),
        );
    }
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let n = graph.len();
    for round in 0..RANDOM_ROUNDS {
        if stop.should_stop() {
            break;
        }
        let mut s = crate::schedule::stages::empty_s(n);
        for (t, row) in s.iter_mut().enumerate() {
            for i in 0..t {
                let p = model.s_value(columns, t, i);
                if p > 0.0 && rng.random::<f64>() < p {
                    row.insert(i);
                }
            }
        }
        consider(s, format!("randomized rounding #{round}{at}"));
    }
    best
}
