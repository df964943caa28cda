//! The only place that touches HiGHS (the `highs` crate and `highs-sys`).
//!
//! [`Lp`] is a plain sparse (MI)LP in row form, built by the Checkmate model builder with
//! column ids of its own; [`run`] hands it to HiGHS and reads back what the solvers need:
//! the status, whether an incumbent exists, the proven bound, the gap and the
//! column values.
//!
//! Three HiGHS facts shape this module:
//! * a `highs::Model` is `!Send`, and HiGHS's task scheduler is a thread-local global that
//!   refuses a second, different `threads` value on the same OS thread. Every run therefore
//!   happens on a fresh scoped thread, which also resets that scheduler on exit, so callers
//!   may use any `threads` value in any order;
//! * duplicate `(row, col)` entries make HiGHS reject a model: [`Lp::add_row`] merges them;
//! * cancellation and deadlines are enforced through the C callback API
//!   (`Highs_setCallback` with the MIP, simplex and IPM interrupt callbacks), on top of the
//!   `time_limit` option; an interrupted MIP keeps its incumbent. Some phases check
//!   neither (the root LP of a large MIP, and PDLP, which calls no callback). So [`run`] waits for HiGHS only until
//!   the deadline, or the caller's cancellation, plus [`GRACE`]; past it, the run is
//!   abandoned (reported as a time limit, or a cancellation, without a solution) and its
//!   thread, whose interrupt flag stays raised, ends on its own at HiGHS's next check (PDLP:
//!   at its tolerance or its time limit). Until then it holds its memory; [`abandoned_bytes`] counts it, and admission adds it
//!   to a new model's.

use super::lagrangian::Lagrangian;
use crate::solve::Stop;
use highs::{ColProblem, HighsModelStatus, HighsSolutionStatus, Sense};
use std::ffi::c_void;
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A sparse linear program with optional integer columns, built row by row.
#[derive(Clone, Debug, Default)]
pub(crate) struct Lp {
    cost: Vec<f64>,
    lower: Vec<f64>,
    upper: Vec<f64>,
    integer: Vec<bool>,
    row_lower: Vec<f64>,
    row_upper: Vec<f64>,
    row_start: Vec<usize>,
    index: Vec<usize>,
    value: Vec<f64>,
}

impl Lp {
    pub(crate) fn new() -> Lp {
        Lp {
            row_start: vec![0],
            ..Lp::default()
        }
    }

    /// Adds a column with objective coefficient `cost` and bounds `[lower, upper]`;
    /// returns its id.
    pub(crate) fn add_col(&mut self, cost: f64, lower: f64, upper: f64, integer: bool) -> usize {
        self.cost.push(cost);
        self.lower.push(lower);
        self.upper.push(upper);
        self.integer.push(integer);
        self.cost.len() - 1
    }

    /// Adds the row `lower <= Σ coef·x[col] <= upper`. Repeated columns are merged and
    /// zero coefficients dropped.
    pub(crate) fn add_row(&mut self, lower: f64, upper: f64, terms: &mut Vec<(usize, f64)>) {
        terms.sort_unstable_by_key(|&(c, _)| c);
        let mut last: Option<usize> = None;
        for &(col, coef) in terms.iter() {
            if last == Some(col) {
                *self.value.last_mut().expect("a previous entry") += coef;
            } else {
                self.index.push(col);
                self.value.push(coef);
                last = Some(col);
            }
        }
        let start = *self.row_start.last().expect("row_start starts with 0");
        let mut write = start;
        for read in start..self.index.len() {
            if self.value[read] != 0.0 {
                self.index[write] = self.index[read];
                self.value[write] = self.value[read];
                write += 1;
            }
        }
        self.index.truncate(write);
        self.value.truncate(write);
        self.row_start.push(write);
        self.row_lower.push(lower);
        self.row_upper.push(upper);
        terms.clear();
    }

    pub(crate) fn num_cols(&self) -> usize {
        self.cost.len()
    }

    pub(crate) fn is_integer(&self, col: usize) -> bool {
        self.integer[col]
    }

    /// Fixes column `col` at `value` (both bounds).
    pub(crate) fn fix(&mut self, col: usize, value: f64) {
        self.lower[col] = value;
        self.upper[col] = value;
    }
    pub(crate) fn num_rows(&self) -> usize {
        self.row_lower.len()
    }
    pub(crate) fn num_integer(&self) -> usize {
        self.integer.iter().filter(|&&b| b).count()
    }

    pub(crate) fn num_nonzeros(&self) -> usize {
        self.index.len()
    }

    /// The rows that `x` misses by more than `tolerance`.
    #[cfg(test)]
    pub(crate) fn violated_rows(&self, x: &[f64], tolerance: f64) -> Vec<usize> {
        (0..self.num_rows())
            .filter(|&r| {
                let span = self.row_start[r]..self.row_start[r + 1];
                let sum: f64 = self.index[span.clone()]
                    .iter()
                    .zip(&self.value[span])
                    .map(|(&c, &v)| v * x[c])
                    .sum();
                sum < self.row_lower[r] - tolerance || sum > self.row_upper[r] + tolerance
            })
            .collect()
    }

    /// The problem as HiGHS reads it, column-wise, consuming `self`: the rows are
    /// transposed into columns (12 bytes a nonzero) and this row-wise copy is dropped
    /// before HiGHS's column-wise problem is filled, so that at most two copies of the
    /// matrix live at once (the `highs` crate's `RowProblem` keeps two small vectors per
    /// column, several times the size of the matrix on Checkmate's models). With `relax`,
    /// the column-wise copy is kept as the data of the [`Lagrangian`] bound.
    fn into_highs(self, relax: bool) -> (ColProblem, Option<Lagrangian>) {
        let Lp {
            cost,
            lower,
            upper,
            integer,
            row_lower,
            row_upper,
            row_start,
            index,
            value,
        } = self;
        let cols = cost.len();
        // Counting sort of the entries by column: `start[j]..start[j + 1]` are column j's.
        let mut start = vec![0u32; cols + 1];
        for &c in &index {
            start[c + 1] += 1;
        }
        for j in 0..cols {
            start[j + 1] += start[j];
        }
        let mut next = start.clone();
        let mut rows_of = vec![0u32; index.len()];
        let mut values = vec![0f64; index.len()];
        for r in 0..row_lower.len() {
            for e in row_start[r]..row_start[r + 1] {
                let slot = &mut next[index[e]];
                rows_of[*slot as usize] = r as u32;
                values[*slot as usize] = value[e];
                *slot += 1;
            }
        }
        drop((next, index, value, row_start));
        let mut pb = ColProblem::new();
        // HiGHS reads ±inf as "no bound".
        let rows: Vec<highs::Row> = row_lower
            .iter()
            .zip(&row_upper)
            .map(|(&l, &u)| pb.add_row(l..=u))
            .collect();
        for j in 0..cols {
            let entries = start[j] as usize..start[j + 1] as usize;
            let factors = rows_of[entries.clone()]
                .iter()
                .zip(&values[entries])
                .map(|(&r, &v)| (rows[r as usize], v));
            pb.add_column_with_integrality(
                cost[j],
                lower[j]..=upper[j],
                factors,
                integer[j] && !relax,
            );
        }
        let lagrangian = relax.then_some(Lagrangian {
            cost,
            lower,
            upper,
            row_lower,
            row_upper,
            start,
            rows_of,
            values,
        });
        (pb, lagrangian)
    }
}

/// Columns above which an LP is solved by the first-order method (PDLP).
pub(crate) const FIRST_ORDER_MIN_COLS: usize = 50_000;

/// Whether a relaxation of `columns` columns goes to the first-order method, when its
/// [`Controls::first_order`] allows it.
pub(crate) fn first_order(columns: u64) -> bool {
    columns > FIRST_ORDER_MIN_COLS as u64
}

/// The relative tolerances PDLP stops at (primal and dual feasibility, duality gap). The
/// bound taken is `L(y)` of its duals, whatever the tolerance.
const FIRST_ORDER_TOLERANCE: f64 = 1e-5;

/// How a run is controlled.
#[derive(Clone)]
pub(crate) struct Controls {
    /// Solve the LP relaxation (integer columns become continuous).
    pub relax: bool,
    /// The caller's deadline and cancel flag, polled by HiGHS's interrupt callback.
    pub stop: Stop,
    pub mip_rel_gap: Option<f64>,
    /// The most branch-and-bound nodes a MIP may explore (HiGHS's `mip_max_nodes`): a
    /// limit in work, so that where it ends the search is the same on every machine.
    pub max_nodes: Option<u64>,
    pub threads: Option<u32>,
    pub seed: u64,
    /// Use HiGHS's first-order method (PDLP, without presolve, to the relative tolerance
    /// [`FIRST_ORDER_TOLERANCE`]) for an LP of more than [`FIRST_ORDER_MIN_COLS`] columns.
    /// On the large Checkmate relaxations the exact methods stall: an exported ResNet-18
    /// (193,045 columns) is not solved in 300 s by dual simplex nor in 400 s by the
    /// interior-point method (it ended "Unknown" once), where PDLP stops at its tolerance
    /// in 78 s, optimal; on MobileNet at 0.9 the interior-point method took 20 s, PDLP
    /// 22 s with a bound 1.4e-5 lower. Smaller LPs use dual simplex, whose vertex optimum
    /// is exact.
    pub first_order: bool,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunStatus {
    /// Solved to optimality (for a MIP: within `mip_rel_gap`).
    Optimal,
    /// Proved infeasible.
    Infeasible,
    /// Stopped by the time limit or the deadline.
    TimeLimit,
    /// Stopped because the caller cancelled.
    Cancelled,
    /// Ended without a verdict (HiGHS's `Unknown`, as on a badly conditioned LP, or an
    /// iteration, solution or objective limit): a solution it has may be used, its
    /// objective proves nothing.
    Unresolved(HighsModelStatus),
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunStatus::Optimal => f.write_str("optimal"),
            RunStatus::Infeasible => f.write_str("infeasible"),
            RunStatus::TimeLimit => f.write_str("time limit"),
            RunStatus::Cancelled => f.write_str("cancelled"),
            RunStatus::Unresolved(status) => write!(f, "{status:?}"),
        }
    }
}

/// How a run with HiGHS's model `status` ended (`cancelled`: the caller's stop was a
/// cancellation); statuses that say the model or HiGHS failed are errors.
fn run_status(status: HighsModelStatus, cancelled: bool) -> Result<RunStatus, HighsError> {
    Ok(match status {
        HighsModelStatus::Optimal => RunStatus::Optimal,
        HighsModelStatus::Infeasible => RunStatus::Infeasible,
        HighsModelStatus::ReachedTimeLimit | HighsModelStatus::ReachedInterrupt if cancelled => {
            RunStatus::Cancelled
        }
        HighsModelStatus::ReachedTimeLimit | HighsModelStatus::ReachedInterrupt => {
            RunStatus::TimeLimit
        }
        HighsModelStatus::Unknown
        | HighsModelStatus::ReachedIterationLimit
        | HighsModelStatus::ReachedSolutionLimit
        | HighsModelStatus::ObjectiveBound
        | HighsModelStatus::ObjectiveTarget => RunStatus::Unresolved(status),
        other => return Err(HighsError::Status(other)),
    })
}

/// What a run found.
#[derive(Clone, Debug)]
pub(crate) struct Run {
    pub status: RunStatus,
    /// Column values of the best solution, when one exists.
    pub columns: Option<Vec<f64>>,
    /// Best proven lower bound on the objective (minimisation), in the program's units: a
    /// MIP's dual bound; a relaxation's `L(y)` from its row duals, whatever its status
    /// ([`Lagrangian`]). A cost only through [`Run::proves`], within HiGHS's resolution.
    pub bound: Option<f64>,
    /// Which of the two `bound` is.
    pub proof: Proof,
    pub time: Duration,
}

/// How a run's bound was proven, which says how far it may be off
/// ([`super::resolution`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Proof {
    /// `L(y)` of a relaxation's row duals ([`Lagrangian`]).
    Duals,
    /// HiGHS's dual bound after branch and bound (`mip_dual_bound`).
    BranchAndBound,
}

/// Why HiGHS could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HighsError {
    #[error("HiGHS rejected the model ({0:?})")]
    Model(highs::HighsStatus),
    #[error("HiGHS rejected option '{0}'")]
    Option(&'static str),
    #[error("HiGHS failed during the solve ({0:?})")]
    Solve(highs::HighsStatus),
    #[error("HiGHS ended with status {0:?}")]
    Status(HighsModelStatus),
    #[error("cannot run HiGHS: {0}")]
    Thread(String),
}

unsafe extern "C" fn interrupt_callback(
    _kind: c_int,
    _message: *const c_char,
    _out: *const highs_sys::HighsCallbackDataOut,
    data_in: *mut highs_sys::HighsCallbackDataIn,
    user: *mut c_void,
) {
    // SAFETY: `user` points to the `Stop` that `solve_here` keeps alive across
    // `Highs_run`; `data_in` is provided by HiGHS for interrupt callbacks.
    let stop = unsafe { &*(user as *const Stop) };
    if stop.should_stop() && !data_in.is_null() {
        unsafe { (*data_in).user_interrupt = 1 };
    }
}

/// The estimated bytes of the HiGHS runs abandoned by [`run`] and still running.
static ABANDONED_BYTES: AtomicU64 = AtomicU64::new(0);

/// The estimated bytes still held by abandoned HiGHS runs (0 when none runs on).
pub(crate) fn abandoned_bytes() -> u64 {
    ABANDONED_BYTES.load(Ordering::SeqCst)
}

/// A run's thread is still running, has ended, or was abandoned (and still runs).
const RUNNING: u8 = 0;
const ENDED: u8 = 1;
const ABANDONED: u8 = 2;

/// How long [`run`] waits past the deadline for HiGHS to return before abandoning it.
pub(crate) const GRACE: Duration = Duration::from_secs(1);

/// How often [`run`] looks at the caller's cancel flag while HiGHS runs: PDLP never calls
/// the interrupt callback.
const POLL: Duration = Duration::from_millis(100);

/// HiGHS's answer, or `Timeout` once the deadline or the caller's cancellation is
/// [`GRACE`] old and HiGHS has not returned.
fn wait<T>(
    receiver: &std::sync::mpsc::Receiver<T>,
    stop: &Stop,
) -> Result<T, std::sync::mpsc::RecvTimeoutError> {
    let mut cancelled_at = None;
    loop {
        match receiver.recv_timeout(POLL) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                let cancelled = stop.cancelled() && *cancelled_at.get_or_insert(now) + GRACE <= now;
                if cancelled || stop.deadline().is_some_and(|d| d + GRACE <= now) {
                    return Err(std::sync::mpsc::RecvTimeoutError::Timeout);
                }
            }
            answer => return answer,
        }
    }
}

/// Solves `lp` (minimising; it is consumed, so that its memory is freed before HiGHS copies
/// the problem), starting from `start` when given (a complete column vector,
/// used by HiGHS as the first incumbent if it is feasible). Returns by the deadline, or
/// the caller's cancellation, plus [`GRACE`] whatever HiGHS does.
pub(crate) fn run(lp: Lp, start: Option<&[f64]>, controls: &Controls) -> Result<Run, HighsError> {
    let began = Instant::now();
    let bytes = super::ModelSize::of_counts(
        lp.num_cols() as u64,
        lp.num_integer() as u64,
        lp.num_rows() as u64,
        lp.num_nonzeros() as u64,
    )
    .bytes;
    let state = Arc::new(AtomicU8::new(RUNNING));
    let thread_state = state.clone();
    let integral = !controls.relax && lp.integer.iter().any(|&b| b);
    let first_order = controls.first_order && first_order(lp.num_cols() as u64);
    let (problem, lagrangian) = lp.into_highs(controls.relax);
    let job = Job {
        problem,
        lagrangian,
        integral,
        first_order,
        start: start.map(<[f64]>::to_vec),
        controls: controls.clone(),
    };
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("highs".into())
        .spawn(move || {
            let result = solve_here(job);
            // SAFETY: shuts down this thread's HiGHS scheduler (if any) before the thread
            // ends; no HiGHS object is alive on this thread any more.
            unsafe { highs_sys::Highs_resetGlobalScheduler(1) };
            if thread_state.swap(ENDED, Ordering::SeqCst) == ABANDONED {
                ABANDONED_BYTES.fetch_sub(bytes, Ordering::SeqCst);
            }
            // The receiver is gone when the run was abandoned.
            let _ = sender.send(result);
        })
        .map_err(|e| HighsError::Thread(e.to_string()))?;
    match wait(&receiver, &controls.stop) {
        Ok(result) => result,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            ABANDONED_BYTES.fetch_add(bytes, Ordering::SeqCst);
            if state
                .compare_exchange(RUNNING, ABANDONED, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                // It ended meanwhile.
                ABANDONED_BYTES.fetch_sub(bytes, Ordering::SeqCst);
            }
            tracing::warn!(
                overrun_s = began.elapsed().as_secs_f64(),
                "HiGHS did not stop at the deadline; its run is abandoned"
            );
            Ok(Run {
                status: if controls.stop.cancelled() {
                    RunStatus::Cancelled
                } else {
                    controls.stop.note_time_limit();
                    RunStatus::TimeLimit
                },
                columns: None,
                bound: None,
                proof: if integral {
                    Proof::BranchAndBound
                } else {
                    Proof::Duals
                },
                time: began.elapsed(),
            })
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            Err(HighsError::Thread("the HiGHS thread panicked".into()))
        }
    }
}

/// One HiGHS run, owned by the thread that performs it.
struct Job {
    problem: ColProblem,
    /// A relaxation's data for its bound from HiGHS's row duals.
    lagrangian: Option<Lagrangian>,
    integral: bool,
    /// Solve the (relaxed) LP by PDLP.
    first_order: bool,
    start: Option<Vec<f64>>,
    controls: Controls,
}

/// Sets HiGHS option `name`; an option HiGHS refuses is an error that names it.
fn set(
    model: &mut highs::Model,
    name: &'static str,
    value: impl highs::HighsOptionValue,
) -> Result<(), HighsError> {
    model
        .try_set_option(name, value)
        .map_err(|_| HighsError::Option(name))
}

/// HiGHS's options for a run: the time left, the gap, the node limit (MIPs), the threads,
/// the seed and, for a relaxation solved by PDLP, its solver, presolve and tolerances.
fn configure(
    model: &mut highs::Model,
    controls: &Controls,
    integral: bool,
    first_order: bool,
) -> Result<(), HighsError> {
    if let Some(deadline) = controls.stop.deadline() {
        let left = deadline.saturating_duration_since(Instant::now());
        set(model, "time_limit", left.as_secs_f64())?;
    }
    if let Some(gap) = controls.mip_rel_gap {
        set(model, "mip_rel_gap", gap)?;
    }
    if let (Some(nodes), true) = (controls.max_nodes, integral) {
        set(
            model,
            "mip_max_nodes",
            i32::try_from(nodes).unwrap_or(i32::MAX),
        )?;
    }
    if let Some(threads) = controls.threads {
        set(model, "threads", threads as i32)?;
    }
    set(
        model,
        "random_seed",
        (controls.seed % i32::MAX as u64) as i32,
    )?;
    if first_order && !integral {
        set(model, "solver", "pdlp")?;
        // With presolve, the duals of a run stopped short came back unusable (ResNet-18:
        // L(y) = −8e12 against an optimum of 3.4e11).
        set(model, "presolve", "off")?;
        for name in [
            "primal_feasibility_tolerance",
            "dual_feasibility_tolerance",
            "pdlp_optimality_tolerance",
        ] {
            set(model, name, FIRST_ORDER_TOLERANCE)?;
        }
    }
    Ok(())
}

fn solve_here(job: Job) -> Result<Run, HighsError> {
    let Job {
        problem,
        lagrangian,
        integral,
        first_order,
        start,
        controls,
    } = job;
    let began = Instant::now();
    let cols = problem.num_cols();
    let mut model = problem
        .try_optimise(Sense::Minimise)
        .map_err(HighsError::Model)?;
    configure(&mut model, &controls, integral, first_order)?;
    if let (Some(start), true) = (start.as_deref(), integral) {
        // A start HiGHS finds infeasible is ignored by HiGHS; a wrong length is a bug.
        model
            .try_set_solution(Some(start), None, None, None)
            .map_err(HighsError::Model)?;
    }
    let interrupt = Box::new(controls.stop.clone());
    let ptr = model.as_mut_ptr();
    // SAFETY: `interrupt` outlives the solve (it is dropped at the end of this function,
    // after `try_solve` returned), and the callback only reads it.
    unsafe {
        highs_sys::Highs_setCallback(
            ptr,
            Some(interrupt_callback),
            &*interrupt as *const Stop as *mut c_void,
        );
        for kind in [
            highs_sys::kHighsCallbackMipInterrupt,
            highs_sys::kHighsCallbackSimplexInterrupt,
            highs_sys::kHighsCallbackIpmInterrupt,
        ] {
            highs_sys::Highs_startCallback(ptr, kind);
        }
    }
    let solved = model.try_solve().map_err(HighsError::Solve)?;
    let status = solved.status();
    let has_solution = solved.primal_solution_status() == HighsSolutionStatus::Feasible;
    let run_status = run_status(status, controls.stop.cancelled())?;
    if run_status == RunStatus::TimeLimit {
        controls.stop.note_time_limit();
    }
    let solution = solved.get_solution();
    let (bound, proof) = match lagrangian {
        // Whatever HiGHS's status and tolerances, its row duals prove L(y).
        Some(lagrangian) => (lagrangian.bound(solution.dual_rows()), Proof::Duals),
        None if integral => (
            solved
                .double_info_value(c"mip_dual_bound")
                .ok()
                .filter(|b| b.is_finite()),
            Proof::BranchAndBound,
        ),
        None => (None, Proof::BranchAndBound),
    };
    // A relaxation's point is read whatever HiGHS thinks of its feasibility (PDLP's, at
    // its tolerance, is often "infeasible"): only its rounding is used, and checked.
    let columns = (has_solution
        || !integral
            && solution.columns().len() == cols
            && solution.columns().iter().all(|v| v.is_finite()))
    .then(|| solution.columns().to_vec());
    drop(solution);
    drop(solved);
    drop(interrupt);
    Ok(Run {
        status: run_status,
        columns,
        bound,
        proof,
        time: began.elapsed(),
    })
}

#[cfg(test)]
mod tests;
