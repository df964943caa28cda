//! `milp`: the Checkmate MILP of [`super`] solved to optimality (or to the time limit) by
//! HiGHS's branch and bound, started from the cheapest verified schedule we have: the
//! LP rounding ([`super::lp_rounding`]), the best baseline ([`super::best_baseline`], DTR's
//! stages among them) and, when neither already meets the LP bound, the best rounding
//! RENS finds ([`super::rens`]). On the MLSys graphs the LP bound is within a fraction of a
//! percent of the optimum and much of HiGHS's time goes into finding a good incumbent, so
//! this start matters more than any solver setting (measured in `docs/performance.md`).
//!
//! Bounds: the LP's and branch and bound's, each within HiGHS's resolution
//! ([`super::resolution`]: a branch and bound's is lowered by the tolerance within which
//! HiGHS prunes, `PRUNING` of the model's cost unit, and by `RESOLUTION` of itself), over the
//! frontier-advancing stage schedules in solver order.
//!
//! Outcomes: `optimal` when the gap is closed (exactly where every cost is an integer, else to
//! HiGHS's resolution: within twice what the bound was lowered by); `feasible`
//! with the bound as `lower_bound` when HiGHS stops within its relative MIP gap (1e-4 unless
//! the caller asks for another; a note says so) or the time limit stops it with an
//! incumbent; `infeasible` (proven, within the scope of
//! frontier-advancing stage schedules in solver order) when HiGHS proves it; no solution
//! when the time runs out before any incumbent. When the relaxation itself does not finish
//! in its half of the time, branch and bound is not started (its root is that same LP) and
//! the start is returned, `feasible` with the trivial bound Σ_v c_v (every node is computed
//! at least once; ResNet50's start, DTR's schedule, is within 0.4% of it).

use super::lp_rounding::Rounded;
use super::rens::rens;
use super::resolution::{integral_costs, resolution};
use super::{
    backend, best_baseline, controls, extract, failed, precheck, solve_rounding, without_spurious,
    Candidate, StageModel,
};
use crate::graph::Graph;
use crate::solve::details::{CheckmateDetails, Details};
use crate::solve::Footprint;
use crate::solve::{
    Bound, BoundMethod, Claim, Instance, Outcome, Scope, SolveError, SolveOptions, Solver,
    SolverInfo, Stop, Stopped,
};
use backend::{Proof, RunStatus};

pub struct Milp;

const NAME: &str = "milp";

/// HiGHS's default relative gap: below it a solve counts as optimal.
const DEFAULT_GAP: f64 = 1e-4;

impl Solver for Milp {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: NAME,
            description: "Checkmate's MILP over frontier-advancing stage schedules, solved by \
                          HiGHS: the optimal schedule for the solver order, with a proven bound \
                          when stopped early.",
            scope: Scope::OptimalForOrder,
            accepts: "any graph (hundreds of nodes need a time limit)",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        super::footprint(instance.graph)
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        solve_milp(instance, options)
    }
}

/// Solves the MILP: first the LP relaxation and its rounding (at most half of the time
/// limit), which give the lower bound and, with the best baseline, a verified start; then
/// branch and bound from that start for the rest of the time. Returns the cheaper of the
/// start and HiGHS's incumbent. With a work limit, branch and bound (and RENS's sub-MIP)
/// explore at most that many nodes, and the time limit is only a cap on the whole.
pub(crate) fn solve_milp(
    instance: &Instance,
    options: &SolveOptions,
) -> Result<Outcome, SolveError> {
    if let Some(outcome) = precheck(instance, NAME) {
        return Ok(outcome);
    }
    let stop = Stop::start(options);
    // The LP's bound is within HiGHS's resolution already (`lp_rounding`).
    let (relaxed, start) = match relax(instance, options)? {
        Ok(relaxed) => relaxed,
        Err(proven) => return Ok(proven),
    };
    let tolerance = options.mip_gap.unwrap_or(DEFAULT_GAP).min(DEFAULT_GAP);
    let start = improve_start(instance, options, &stop, start, &relaxed, tolerance)?;
    let built = StageModel::build(instance, &stop);
    let mut details = built
        .as_ref()
        .map_or_else(|_| CheckmateDetails::default(), StageModel::details);
    details.lp_bound = Some(relaxed.lp_bound.map(|b| b.cost));
    details.start = Some(start.as_ref().map(|c| (c.source.clone(), c.cost)));
    let model = match built {
        Ok(model) => model,
        Err(stopped) => {
            return stopped_building(
                instance.graph,
                stopped,
                start,
                relaxed.lp_bound,
                tolerance,
                details,
            )
        }
    };
    if !relaxed.lp_solved {
        return Ok(without_branch_and_bound(
            instance.graph,
            start,
            &relaxed,
            &stop,
            tolerance,
            details,
        ));
    }
    if let (true, Some(c)) = (relaxed.closes(&start, tolerance), &start) {
        details.solve_time_s = Some(0.0);
        return Ok(plan(
            instance.graph,
            c.clone(),
            relaxed.lp_bound,
            tolerance,
            None,
            details,
        ));
    }
    let from = Start {
        candidate: start,
        lp_bound: relaxed.lp_bound,
        tolerance,
    };
    branch_and_bound(instance, options, &stop, model, from, details)
}

/// What the LP relaxation told: whether it reached its optimum, its bound, why not
/// (`lp_note`), and its point.
struct Relaxed {
    /// The relaxation at the full budget reached its optimum (a plan without a bound, or
    /// no solution, means the time limit or HiGHS stopped it, as `lp_note` says).
    lp_solved: bool,
    lp_bound: Option<Bound>,
    lp_note: String,
    columns: Option<Vec<f64>>,
}

impl Relaxed {
    /// `start` is within `tolerance` of the LP bound.
    fn closes(&self, start: &Option<Candidate>, tolerance: f64) -> bool {
        match (start, self.lp_bound) {
            (Some(c), Some(lb)) => relative_gap(c.cost, lb.cost) <= tolerance,
            _ => false,
        }
    }
}

/// The LP relaxation and its rounding, in half of the time limit (under a work limit the
/// time limit is a safety cap, not a share to split): the relaxation and the rounding as
/// the first start, or `Err` the outcome when infeasibility is proven.
fn relax(
    instance: &Instance,
    options: &SolveOptions,
) -> Result<Result<(Relaxed, Option<Candidate>), Outcome>, SolveError> {
    let mut rounding_options = options.clone();
    if options.work_limit.is_none() {
        rounding_options.time_limit = options.time_limit.map(|d| d / 2);
    }
    let Rounded {
        outcome,
        relaxation,
    } = solve_rounding(instance, &rounding_options, NAME, Scope::OptimalForOrder)?;
    let (start, lp_bound, lp_note) = match outcome {
        Outcome::Plan(plan) => (
            Candidate::from_plan(instance.graph, &plan),
            plan.lower_bound,
            plan.message.unwrap_or_default(),
        ),
        proven @ Outcome::Infeasible {
            proven: Some(_), ..
        } => return Ok(Err(proven)),
        Outcome::NoSolution { reason, .. } | Outcome::Infeasible { reason, .. } => {
            (None, None, reason)
        }
    };
    let relaxed = Relaxed {
        lp_solved: relaxation.optimal,
        lp_bound,
        lp_note,
        columns: relaxation.columns,
    };
    Ok(Ok((relaxed, start)))
}

/// The start made cheaper by the best baseline (DTR's stages among them: on linear-32 at
/// 11 DTR's schedule is the optimum, 88, the rounding's 94) and, when the LP was solved
/// and its bound is not met yet, by RENS's best rounding; before the MILP's model is
/// built, so that one model lives at a time.
fn improve_start(
    instance: &Instance,
    options: &SolveOptions,
    stop: &Stop,
    mut start: Option<Candidate>,
    relaxed: &Relaxed,
    tolerance: f64,
) -> Result<Option<Candidate>, SolveError> {
    if let Some(found) = best_baseline(instance, options)? {
        found.keep_if_cheaper(&mut start);
    }
    if let (true, false, Some(columns)) = (
        relaxed.lp_solved,
        relaxed.closes(&start, tolerance),
        relaxed.columns.as_deref(),
    ) {
        if let Some(found) = rens(instance, options, stop, columns)? {
            found.keep_if_cheaper(&mut start);
        }
    }
    Ok(start)
}

/// The answer when the relaxation did not finish in half of the time limit, or HiGHS
/// ended it without a verdict. Branch and bound must solve the same LP at its root before
/// anything else, so it cannot finish either (ResNet50: the root LP alone outlasts a 60 s
/// limit); keep the start.
fn without_branch_and_bound(
    graph: &crate::graph::Graph,
    start: Option<Candidate>,
    relaxed: &Relaxed,
    stop: &Stop,
    tolerance: f64,
    mut details: CheckmateDetails,
) -> Outcome {
    details.solve_time_s = Some(0.0);
    let Some(start) = start else {
        return Outcome::NoSolution {
            solver: NAME,
            reason: format!(
                "the LP relaxation did not reach its optimum ({:.1} s elapsed): {}",
                stop.elapsed().as_secs_f64(),
                relaxed.lp_note
            ),
        };
    };
    // Every node is computed at least once, so Σ_v c_v bounds every schedule's cost
    // (the LP's own bound is never below it: R[t,t] = 1 in every stage); the bound the
    // unfinished LP's duals prove may be higher.
    let trivial = Bound::sum_of_costs(graph);
    let (bound, which) = match relaxed.lp_bound {
        Some(lb) if lb.cost > trivial.cost => (lb, "its duals' bound"),
        _ => {
            details.trivial_bound = Some(trivial.cost);
            (trivial, "the sum of the node costs")
        }
    };
    let unproven = format!(
        "the LP relaxation did not reach its optimum ({}); \
         branch and bound, whose root is that LP, was not started; the bound is {which}",
        relaxed.lp_note
    );
    plan(
        graph,
        start,
        Some(bound),
        tolerance,
        Some(unproven),
        details,
    )
}

/// Where branch and bound starts: the verified start, the LP bound, the relative gap
/// that counts as closed.
struct Start {
    candidate: Option<Candidate>,
    lp_bound: Option<Bound>,
    tolerance: f64,
}

/// Branch and bound from the start for the rest of the time; the cheaper of the start
/// and HiGHS's incumbent, with the better of the LP's and branch and bound's bounds.
fn branch_and_bound(
    instance: &Instance,
    options: &SolveOptions,
    stop: &Stop,
    mut model: StageModel,
    start: Start,
    mut details: CheckmateDetails,
) -> Result<Outcome, SolveError> {
    let graph = instance.graph;
    options.report(
        format!(
            "milp: {} variables, {} constraints",
            model.num_variables(),
            model.num_constraints()
        ),
        None,
    );
    let point = start.candidate.as_ref().and_then(|c| {
        let stages = without_spurious(graph, c.stages().clone());
        model.point(graph, &stages)
    });
    details.mip_start_accepted = Some(point.is_some());
    let run = backend::run(
        model.take_lp(),
        point.as_deref(),
        &controls(options, false, stop),
    )
    .map_err(|e| failed(NAME, e))?;
    details.solve_time_s = Some(run.time.as_secs_f64());
    let branch_and_bound = run.proves(graph, 0.0, model.cost_scale).map(|cost| Bound {
        cost,
        scope: Scope::OptimalForOrder,
        method: BoundMethod::BranchAndBound,
    });
    let lower_bound = [branch_and_bound, start.lp_bound]
        .into_iter()
        .flatten()
        .max_by(|a, b| a.cost.total_cmp(&b.cost));
    if run.status == RunStatus::Cancelled {
        return Err(SolveError::Cancelled);
    }
    if run.status == RunStatus::Infeasible {
        return Ok(proven_infeasible(instance));
    }
    let found = match run.columns {
        Some(columns) => match extract(graph, &model, &columns, instance.budget)? {
            Ok(fits) => Some(fits),
            Err(peak) => {
                drop(model);
                let candidate = start.candidate.as_ref();
                let repaired = repair(instance, options, stop, candidate, peak)?;
                details.repair = Some(repaired.1.clone());
                repaired.0
            }
        },
        None => None,
    };
    let best = match (found, start.candidate) {
        (Some(f), Some(s)) if s.cost < f.cost => Some(s),
        (Some(f), _) => Some(f),
        (None, s) => s,
    };
    let Some(best) = best else {
        return Ok(no_schedule(&run.status, stop));
    };
    let stopped = stopped_because(&run.status, options);
    Ok(plan(
        graph,
        best,
        lower_bound,
        start.tolerance,
        Some(stopped),
        details,
    ))
}

/// HiGHS proved that no stage schedule in solver order fits.
fn proven_infeasible(instance: &Instance) -> Outcome {
    let (min_budget, _) = instance.graph.min_feasible_budget();
    Outcome::Infeasible {
        solver: NAME,
        proven: Some(Scope::OptimalForOrder),
        reason: format!(
            "HiGHS proved that no frontier-advancing stage schedule in solver order fits in \
             {} bytes (the trivial lower bound on the minimum feasible budget is {} bytes)",
            instance.budget, min_budget
        ),
    }
}

/// Branch and bound ended (`status`) without a schedule within the budget, and there was
/// no start.
fn no_schedule(status: &RunStatus, stop: &Stop) -> Outcome {
    let why = match status {
        RunStatus::Unresolved(_) => format!("HiGHS ended with status {status}"),
        _ => "the time limit passed".into(),
    };
    Outcome::NoSolution {
        solver: NAME,
        reason: format!(
            "{why} after {:.1} s without a schedule within the budget",
            stop.elapsed().as_secs_f64()
        ),
    }
}

/// Why branch and bound stopped, for the plan's message.
fn stopped_because(status: &RunStatus, options: &SolveOptions) -> String {
    match status {
        RunStatus::Optimal => format!(
            "stopped at the requested relative gap {}",
            options.mip_gap.unwrap_or(DEFAULT_GAP)
        ),
        RunStatus::Unresolved(_) => {
            format!("HiGHS ended with status {status} before optimality was proved")
        }
        _ => "the time limit passed before optimality was proved".to_string(),
    }
}

/// HiGHS's default integrality tolerance (`mip_feasibility_tolerance`): a binary within it
/// of 0 or 1 counts as integral.
const INTEGRALITY_TOLERANCE: f64 = 1e-6;
/// HiGHS's default `primal_feasibility_tolerance` on each row.
const ROW_TOLERANCE: f64 = 1e-7;

/// How far a MILP solution's `U` may exceed the exact memory of its rounded point, in
/// memory units: every binary within [`INTEGRALITY_TOLERANCE`] of integral moves `U[t,k]`
/// by at most that times its coefficient (each size `m_i` in a stage's `S`, `R` and the
/// FREE of each of its readers), and each of the `n` rows (e), (f) of a stage may be off
/// by [`ROW_TOLERANCE`] of the rows' units, which are the budget's memory units divided by
/// the model's divisor.
fn tolerance_margin(instance: &Instance) -> u64 {
    let graph = instance.graph;
    let g = super::memory_scale(graph);
    let coefficients: f64 = (0..graph.len())
        .map(|i| (graph.memory(i) / g) as f64 * (2 + graph.succs(i).len()) as f64)
        .sum();
    let units = instance.budget.saturating_sub(graph.fixed_memory()) / g;
    let divisor = super::model::memory_divisor(units, false);
    (INTEGRALITY_TOLERANCE * coefficients + ROW_TOLERANCE * divisor * graph.len() as f64).ceil()
        as u64
}

/// A MILP solution whose schedule peaked at `peak`, over the budget: HiGHS met the memory
/// rows only within its tolerances. The MILP is solved again, from `start`, with every
/// budget row tightened by [`tolerance_margin`] (at least the overshoot), and its
/// solution kept only if the simulator finds it within the budget. Returns the candidate
/// (`None`: the start stays the answer) and what happened, for the details. The first
/// run's bound stays valid: it is over the untightened model.
fn repair(
    instance: &Instance,
    options: &SolveOptions,
    stop: &Stop,
    start: Option<&Candidate>,
    peak: u64,
) -> Result<(Option<Candidate>, String), SolveError> {
    let graph = instance.graph;
    let g = super::memory_scale(graph);
    let over = peak - instance.budget;
    let margin = tolerance_margin(instance).max(over.div_ceil(g));
    let what = format!(
        "HiGHS's solution peaked {over} bytes over the budget (its memory rows are met within \
         its tolerance); solved again with the budget rows {} bytes tighter",
        margin.saturating_mul(g)
    );
    let mut model = match StageModel::build_within(instance, margin, stop) {
        Ok(model) => model,
        Err(Stopped::Cancelled) => return Err(SolveError::Cancelled),
        Err(Stopped::TimeLimit) => return Ok((None, format!("{what}: no time left"))),
    };
    let point = start.and_then(|c| {
        let stages = without_spurious(graph, c.stages().clone());
        model.point(graph, &stages)
    });
    let run = backend::run(
        model.take_lp(),
        point.as_deref(),
        &controls(options, false, stop),
    )
    .map_err(|e| failed(NAME, e))?;
    if run.status == RunStatus::Cancelled {
        return Err(SolveError::Cancelled);
    }
    let Some(columns) = run.columns else {
        return Ok((None, format!("{what}: no solution; the start is kept")));
    };
    Ok(match extract(graph, &model, &columns, instance.budget)? {
        Ok(fits) => (Some(fits), what),
        Err(peak) => (
            None,
            format!(
                "{what}: still {} bytes over; the start is kept",
                peak - instance.budget
            ),
        ),
    })
}

/// The answer when the deadline or a cancel stopped the MILP's build: the start (the LP
/// rounding or a baseline) with the LP bound when the time ran out and there is one.
fn stopped_building(
    graph: &Graph,
    stopped: Stopped,
    start: Option<Candidate>,
    lp_bound: Option<Bound>,
    tolerance: f64,
    details: CheckmateDetails,
) -> Result<Outcome, SolveError> {
    match (stopped, start) {
        (Stopped::TimeLimit, Some(start)) => {
            let unproven = "the time limit passed while building the MILP; returned its start \
                            with the LP bound";
            Ok(plan(
                graph,
                start,
                lp_bound,
                tolerance,
                Some(unproven.into()),
                details,
            ))
        }
        (stopped, _) => stopped.outcome(NAME, "while building the MILP"),
    }
}

/// `(cost − bound) / cost`, 0 for a zero cost.
fn relative_gap(cost: f64, bound: f64) -> f64 {
    if cost > 0.0 {
        ((cost - bound) / cost).max(0.0)
    } else {
        0.0
    }
}

/// The plan for `best`: optimal when the proven `lower_bound` meets it (exactly where every
/// cost is an integer, else within twice the [`resolution`] of a branch and bound's bound, so
/// within it of the bound before it was lowered); else feasible, with a message that says
/// when the search stopped within the MIP gap `tolerance` and otherwise `unproven`.
fn plan(
    graph: &Graph,
    best: Candidate,
    lower_bound: Option<Bound>,
    tolerance: f64,
    unproven: Option<String>,
    mut details: CheckmateDetails,
) -> Outcome {
    let gap = lower_bound.map(|lb| relative_gap(best.cost, lb.cost));
    let closed = match lower_bound {
        Some(lb) if integral_costs(graph) => best.cost <= lb.cost,
        Some(lb) => {
            let unit = super::model::cost_scale(graph);
            best.cost - lb.cost <= 2.0 * resolution(lb.cost / unit, unit, Proof::BranchAndBound)
        }
        None => false,
    };
    details.source = Some(best.source.clone());
    let claim = if closed {
        Claim::Optimal
    } else {
        Claim::Feasible
    };
    let mut plan = best.into_plan(NAME, claim, Scope::OptimalForOrder);
    plan.lower_bound = lower_bound;
    plan.message = match gap {
        _ if closed => None,
        Some(g) if g <= tolerance => Some(format!(
            "within the relative MIP gap of {tolerance} of its bound (gap {g:.1e}), not proven \
             optimal: a MIP gap of 0 (--mip-gap 0, mip_gap: 0) closes it"
        )),
        _ => unproven,
    };
    plan.details = Some(Details::Checkmate(Box::new(details)));
    Outcome::Plan(plan)
}
