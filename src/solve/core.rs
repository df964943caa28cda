//! The ground floor of `solve`: the types every solver reads and writes, and nothing that
//! names a solver. A [`Solver`] turns an [`Instance`] (graph + budget in bytes) into an
//! [`Outcome`]: a [`Plan`] (a schedule and what the solver claims of it), a statement of
//! infeasibility, or no solution within the time limit. [`Stop`] is the one way a solver
//! learns that its time is up or that the caller cancelled, and it records when a time
//! limit ended part of a solve (so that `auto` can say that its answer depended on the
//! clock).

use super::details::Details;
use super::footprint::Footprint;
use crate::graph::Graph;
use crate::schedule::Schedule;
use serde::Serialize;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What is solved: a graph and a budget in bytes (`fixed_memory` included).
#[derive(Clone, Copy, Debug)]
pub struct Instance<'a> {
    pub graph: &'a Graph,
    pub budget: u64,
}

/// A progress report from a long solve.
#[derive(Clone, Debug)]
pub struct Progress {
    pub message: String,
    /// Done fraction in [0, 1], when the solver can tell.
    pub fraction: Option<f64>,
}

/// Receives progress reports (the CLI draws a bar, the service logs).
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// Options common to every solver; each uses what applies to it.
#[derive(Clone, Default)]
pub struct SolveOptions {
    /// Wall-clock limit for the solve. With a [`SolveOptions::work_limit`], or under
    /// `auto`'s [`Effort::Work`], it is only a safety cap.
    pub time_limit: Option<Duration>,
    /// How much `auto` searches: work units (deterministic) or the whole time limit.
    pub effort: Effort,
    /// The effort of one solver run in the work units that solver counts (FastSA:
    /// annealing iterations; the MILP: HiGHS's branch-and-bound nodes). A run that stops
    /// at it gives the same answer on any machine under any load.
    pub work_limit: Option<u64>,
    /// Relative MIP gap at which a MILP may stop.
    pub mip_gap: Option<f64>,
    /// Seed for randomised steps.
    pub seed: u64,
    /// Threads a solver may use (HiGHS).
    pub threads: Option<u32>,
    /// Bytes a solver may allocate for its model (the MILP/LP's columns, rows and
    /// nonzeros, a DP's table). A solver whose estimate is larger refuses with
    /// [`SolveError::TooLarge`] before allocating; `auto` then tries the next candidate.
    pub memory_limit: Option<u64>,
    /// The instant by which the simulator's judgement of the answer
    /// ([`super::SolveResult::judge`]) must end: the caller's whole deadline (the front
    /// door's: its time limit, a little past it). A judge that reaches it answers `no_solution`
    /// rather than an unjudged schedule. `None`: the judge polls only [`SolveOptions::cancel`].
    pub judge_by: Option<Instant>,
    /// Set from another thread to stop the solve.
    pub cancel: Arc<AtomicBool>,
    /// Raised by [`Stop::poll`] (and by a solver that a time limit stopped in a library,
    /// [`Stop::note_time_limit`]) when a time limit ended part of the solve: its answer
    /// may then depend on the machine's speed and load.
    pub timed_out: Arc<AtomicBool>,
    pub progress: Option<ProgressSink>,
}

/// How much `auto` searches.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effort {
    /// Work units the solvers count, this multiple of `auto`'s default: the same graph,
    /// budget and options give the same schedule on any machine under any load, unless
    /// the time limit (a safety cap) ends the solve first, which the result says.
    Work(f64),
    /// The whole time limit, shared among the candidates: more search on a faster or idle
    /// machine, so not reproducible.
    Time,
}

impl Default for Effort {
    fn default() -> Effort {
        Effort::Work(1.0)
    }
}

/// What ended an `auto` solve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndedBy {
    /// The best schedule meets a bound on every schedule (within the MIP gap), or a
    /// solver proved it globally optimal, or proved that no schedule fits.
    Converged,
    /// The work budget was spent.
    WorkLimit,
    /// The search stopped improving for a stall window (in work units).
    Stall,
    /// A time limit ended part of the solve (the safety cap under [`Effort::Work`], the
    /// time itself under [`Effort::Time`]): the answer may depend on the machine.
    TimeLimit,
}

impl EndedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            EndedBy::Converged => "converged",
            EndedBy::WorkLimit => "work_limit",
            EndedBy::Stall => "stall",
            EndedBy::TimeLimit => "time_limit",
        }
    }
}

impl SolveOptions {
    /// Reports progress to the caller's sink, if any.
    pub fn report(&self, message: impl Into<String>, fraction: Option<f64>) {
        if let Some(p) = &self.progress {
            p(Progress {
                message: message.into(),
                fraction,
            });
        }
    }
}

/// The one stop check of every solver: the caller's deadline (the time limit counted from
/// [`Stop::start`]) and its cancel flag, polled together.
#[derive(Clone, Debug)]
pub struct Stop {
    started: Instant,
    deadline: Option<Instant>,
    cancel: Arc<AtomicBool>,
    timed_out: Arc<AtomicBool>,
}

/// Why a solve must end now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The caller raised `SolveOptions::cancel` (a client went away, a job was deleted).
    Cancelled,
    /// The time limit passed.
    TimeLimit,
}

impl Stop {
    /// Starts the clock of `options`' time limit now.
    pub fn start(options: &SolveOptions) -> Stop {
        let started = Instant::now();
        Stop {
            started,
            deadline: options.time_limit.and_then(|d| started.checked_add(d)),
            cancel: options.cancel.clone(),
            timed_out: options.timed_out.clone(),
        }
    }

    /// The stop of the judge's replay of the answer: the cancel flag and
    /// [`SolveOptions::judge_by`] (no deadline when it is `None`).
    pub fn judging(options: &SolveOptions) -> Stop {
        Stop {
            started: Instant::now(),
            deadline: options.judge_by,
            cancel: options.cancel.clone(),
            timed_out: options.timed_out.clone(),
        }
    }

    /// `Ok` while the solve may go on; the reason to stop once cancelled or past the
    /// deadline (which is recorded: [`SolveOptions::timed_out`]).
    pub fn poll(&self) -> Result<(), Stopped> {
        if self.cancelled() {
            Err(Stopped::Cancelled)
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.note_time_limit();
            Err(Stopped::TimeLimit)
        } else {
            Ok(())
        }
    }

    /// Records that a time limit ended part of the solve (a library's own timer, such as
    /// HiGHS's `time_limit`, stopped it without a poll).
    pub fn note_time_limit(&self) {
        self.timed_out.store(true, Ordering::Relaxed);
    }

    /// Whether a time limit ended part of the solve so far.
    pub fn timed_out(&self) -> bool {
        self.timed_out.load(Ordering::Relaxed)
    }

    /// Whether [`Stop::poll`] says stop.
    pub fn should_stop(&self) -> bool {
        self.poll().is_err()
    }

    /// Whether the caller cancelled (for work short enough to ignore the deadline).
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// The instant the solve must end by, if it has a time limit.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// This stop with its deadline brought forward to `limit` from now, if that is
    /// sooner; the cancel flag is shared.
    pub fn sooner(&self, limit: Duration) -> Stop {
        let by = Instant::now().checked_add(limit);
        Stop {
            deadline: match (self.deadline, by) {
                (Some(d), Some(b)) => Some(d.min(b)),
                (d, b) => d.or(b),
            },
            ..self.clone()
        }
    }

    /// The time since [`Stop::start`].
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl Stopped {
    /// The answer of `solver` stopped before it found a schedule: cancellation is an error
    /// (nobody waits for the answer), the time limit is [`Outcome::NoSolution`] with the
    /// reason "the time limit passed {during}".
    pub fn outcome(self, solver: &'static str, during: &str) -> Result<Outcome, SolveError> {
        match self {
            Stopped::Cancelled => Err(SolveError::Cancelled),
            Stopped::TimeLimit => Ok(Outcome::NoSolution {
                solver,
                reason: format!("the time limit passed {during}"),
            }),
        }
    }
}

/// How far a solver's answer can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The cheapest schedule of all (any order, any recomputation).
    GlobalOptimum,
    /// Optimal among Checkmate's frontier-advancing stage schedules in the solver order.
    OptimalForOrder,
    /// Optimal among persistent (divide-and-conquer) checkpointing schedules.
    OptimalAmongPersistent,
    /// No optimality claim.
    Heuristic,
    /// The answer is a lower bound on the optimal cost, not a schedule.
    LowerBound,
}

/// The JSON names, written once (a test in `crate::front` checks them against serde's).
impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::GlobalOptimum => "global_optimum",
            Scope::OptimalForOrder => "optimal_for_order",
            Scope::OptimalAmongPersistent => "optimal_among_persistent",
            Scope::Heuristic => "heuristic",
            Scope::LowerBound => "lower_bound",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a solver says of the schedule it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Optimal within the solver's scope.
    Optimal,
    /// Within budget, no optimality proof.
    Feasible,
}

/// A proven lower bound on the cost of every schedule of a set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    pub cost: f64,
    /// The set of schedules it bounds: [`Scope::GlobalOptimum`] for all of them.
    pub scope: Scope,
    pub method: BoundMethod,
}

/// How a lower bound was proven.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundMethod {
    /// Every node is computed at least once: `Σ_v c_v` bounds every schedule.
    SumOfCosts,
    /// The exhaustive search's closed open list.
    Search,
    /// The optimum of Checkmate's LP relaxation.
    LpRelaxation,
    /// HiGHS's branch-and-bound dual bound on Checkmate's MILP.
    BranchAndBound,
    /// Checkmate's relaxation aggregated around one stage (the stage-cut bound): what the
    /// values still needed at a node's first computation cost to bring back.
    StageCut,
    /// The same relaxation around a sequence of moments (the sequence of cuts): a value
    /// dropped before one moment and needed after a later one is paid again at each.
    SequenceOfCuts,
}

impl BoundMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            BoundMethod::SumOfCosts => "sum_of_costs",
            BoundMethod::Search => "search",
            BoundMethod::LpRelaxation => "lp_relaxation",
            BoundMethod::BranchAndBound => "branch_and_bound",
            BoundMethod::StageCut => "stage_cut",
            BoundMethod::SequenceOfCuts => "sequence_of_cuts",
        }
    }
}

impl Bound {
    /// Whether a schedule that recomputes `recompute` (its `recompute_cost`) on a graph of
    /// `Σ_v c_v = base` meets the bound: nothing in the bound's scope is cheaper. Only the
    /// bound's share above `base` is compared, up to rounding of that share, so that a
    /// graph whose one large cost dwarfs the rest (a loss of 1e12 beside ops of 1) does not
    /// turn a recomputation into rounding: `Σ_v c_v` is met by no recomputation at all.
    pub fn met_by(&self, recompute: f64, base: f64) -> bool {
        recompute <= (self.cost - base).max(0.0) * (1.0 + 1e-9)
    }

    /// `Σ_v c_v`, the bound on every schedule of `graph`.
    pub fn sum_of_costs(graph: &Graph) -> Bound {
        Bound {
            cost: graph.total_cost(),
            scope: Scope::GlobalOptimum,
            method: BoundMethod::SumOfCosts,
        }
    }
}

/// A schedule and what its solver claims of it.
#[derive(Clone, Debug)]
pub struct Plan {
    pub schedule: Schedule,
    pub claim: Claim,
    /// The solver that produced it (differs from the one asked for under `auto`).
    pub solver: &'static str,
    pub scope: Scope,
    /// A proven lower bound on the optimal cost, when the solver has one (its scope may
    /// differ from the plan's: the LP rounding's schedule is a heuristic, its bound covers
    /// the frontier-advancing schedules).
    pub lower_bound: Option<Bound>,
    pub message: Option<String>,
    /// Solver-specific figures (model sizes, thresholds, slot sizes, ...).
    pub details: Option<Details>,
}

/// A solver's answer.
#[derive(Clone, Debug)]
pub enum Outcome {
    Plan(Plan),
    /// No schedule within the budget. `proven` names the set of schedules none of which
    /// fits, when the solver proved it ([`Scope::GlobalOptimum`]: no schedule at all; a
    /// narrower scope: none of that family, though others may fit); `None` when only this
    /// solver's method failed.
    Infeasible {
        solver: &'static str,
        proven: Option<Scope>,
        reason: String,
    },
    /// The time limit passed before any schedule was found.
    NoSolution {
        solver: &'static str,
        reason: String,
    },
}

/// Why a solve could not run.
#[derive(Debug, thiserror::Error)]
pub enum SolveError {
    #[error("unknown solver '{name}': available solvers are {available}")]
    UnknownSolver { name: String, available: String },
    #[error("solver '{solver}' cannot solve this graph: {reason}")]
    Unsupported {
        solver: &'static str,
        reason: String,
    },
    #[error("the solve was cancelled")]
    Cancelled,
    /// The solver's model would not fit the memory a solve may use: refused before
    /// allocating it.
    #[error(
        "solver '{solver}' would need about {needed} bytes for {what}, over the memory limit of \
         {limit} bytes per solve"
    )]
    TooLarge {
        solver: &'static str,
        /// What would be allocated ("a model of 4.1 M columns and 8.8 M rows").
        what: String,
        needed: u64,
        limit: u64,
    },
    #[error("solver '{solver}' failed: {reason}")]
    Failed {
        solver: &'static str,
        reason: String,
    },
}

/// Describes a solver for `remat solvers` and `GET /v1/solvers`.
#[derive(Clone, Debug, Serialize)]
pub struct SolverInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub scope: Scope,
    /// Which graphs it accepts.
    pub accepts: &'static str,
}

/// A rematerialization algorithm.
pub trait Solver: Sync {
    fn info(&self) -> SolverInfo;
    /// The memory a solve of `instance` would take, estimated before anything of that size
    /// is allocated; the driver refuses the solve when it exceeds
    /// [`SolveOptions::memory_limit`] ([`Footprint::admit`]).
    fn footprint(&self, instance: &Instance) -> Footprint;
    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError>;
}

/// The greatest common divisor (`gcd(0, b) = b`): sizes in units of theirs lose nothing.
pub(crate) fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}
