//! The search of [`super`]'s module docs: gallop up from the no-recomputation batch until a
//! probe fails, then bisect; with `auto`, a fast constructive solver brackets first.

use super::{AtBatch, BatchModel, Bounds, MaxBatchError, MaxBatchRequest, MaxBatchResult, Probe};
use crate::graph::{BatchSource, Graph};
use crate::schedule::{checkpoint_all, simulate};
use crate::solve::{self, Instance, SolveError, SolveOptions, SolveResult};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The solver that brackets for `auto`: one of the constructive solvers `auto` runs as its
/// floor, so every batch it fits, `auto` fits.
const BRACKET: &str = "sethi-ullman";

/// The whole search's time limit when the caller gives none: each probe of a portfolio
/// solver would otherwise take that solver's own default (a minute for `auto`).
pub const DEFAULT_SEARCH_TIME: Duration = Duration::from_secs(120);

/// Finds the largest batch of `graph` that fits `request` (see the module docs);
/// `options.time_limit` (else `DEFAULT_SEARCH_TIME`) applies to the whole search,
/// `options.progress` hears of each probe.
pub fn search(
    graph: &Graph,
    request: &MaxBatchRequest,
    options: &SolveOptions,
) -> Result<MaxBatchResult, MaxBatchError> {
    let started = Instant::now();
    let batch = graph.batch().expect("validated: a batch model");
    let bounds = Bounds::new(graph, request.memory);
    options.report(
        format!(
            "no recomputation up to batch {}; no schedule fits above batch {} (footprint bound)",
            bounds.no_recompute, bounds.upper_bound
        ),
        None,
    );
    // The answer's figures at the end (the graph at the answer's batch and at the
    // no-recompute batch, each replayed) take about what the bounds took (two graphs, two
    // replays): that much is kept from the probes, so the search ends by its time limit.
    let reserve = started.elapsed();
    let mut s = Search {
        started,
        graph,
        request,
        options,
        deadline: started
            .checked_add(options.time_limit.unwrap_or(DEFAULT_SEARCH_TIME))
            .map(|end| end.checked_sub(reserve).unwrap_or(started)),
        probes: Vec::new(),
        best: None,
        lo: bounds.no_recompute,
        hi: bounds.upper_bound + 1,
        complete: true,
    };
    if request.solver == "auto" {
        s.gallop_and_bisect(BRACKET)?;
    }
    s.gallop_and_bisect(&request.solver)?;
    let result = s.result_at_lo(bounds.no_recompute)?;
    let no_recompute = match &result {
        // The answer is checkpoint-all's at the same batch: its figures, not a second replay.
        Some(r) if s.lo == bounds.no_recompute && r.solver == "checkpoint-all" => {
            r.stats.as_ref().map(|stats| AtBatch::new(s.lo, stats))
        }
        _ => at_no_recompute(graph, bounds.no_recompute)?,
    };
    let with_remat = result
        .as_ref()
        .and_then(|r| Some(AtBatch::new(s.lo, r.stats.as_ref()?)));
    let gain = (bounds.no_recompute > 0).then(|| s.lo as f64 / bounds.no_recompute as f64);
    Ok(MaxBatchResult {
        batch: s.lo,
        memory: request.memory,
        solver: request.solver.clone(),
        cap: request.cap.clone(),
        batch_model: BatchModel {
            batch_size: batch.size,
            source: batch.source,
            assumption: match batch.source {
                BatchSource::Declared => {
                    "sizes affine in the batch as the graph declares; costs proportional"
                }
                BatchSource::InferredLinear => {
                    "inferred: every node's output linear in the batch (activations), \
                     parameters fixed; costs proportional"
                }
            },
        },
        with_remat,
        no_recompute,
        gain,
        upper_bound: bounds.upper_bound,
        model_limit: bounds.model_limit,
        complete: s.complete,
        monotone_on_probes: s.monotone_on_probes(),
        probes: s.probes,
        result,
        search_time_s: started.elapsed().as_secs_f64(),
    })
}

/// The checkpoint-all figures at the no-recomputation batch `b` (none when `b` is 0).
fn at_no_recompute(graph: &Graph, b: u64) -> Result<Option<AtBatch>, MaxBatchError> {
    if b == 0 {
        return Ok(None);
    }
    let g = graph.at_batch(b)?;
    let stats = simulate(&g, &checkpoint_all(&g)).expect("checkpoint-all is a valid schedule");
    Ok(Some(AtBatch::new(b, &stats)))
}

struct Search<'a> {
    started: Instant,
    graph: &'a Graph,
    request: &'a MaxBatchRequest,
    options: &'a SolveOptions,
    deadline: Option<Instant>,
    probes: Vec<Probe>,
    /// The verified result at `lo`, when a probe produced it.
    best: Option<(u64, SolveResult)>,
    /// The largest batch known to fit (0: none).
    lo: u64,
    /// The smallest batch known not to fit for the confirming solver.
    hi: u64,
    complete: bool,
}

impl Search<'_> {
    /// Gallops up from `lo` with `solver` until a probe fails, then bisects below it.
    /// Only the confirming solver's failures lower `hi`.
    fn gallop_and_bisect(&mut self, solver: &str) -> Result<(), MaxBatchError> {
        let confirms = solver == self.request.solver;
        let mut hi = self.hi;
        let mut step = 1;
        while self.lo + step < hi {
            match self.probe(solver, self.lo + step, hi)? {
                None => return Ok(()),
                Some(true) => step *= 2,
                Some(false) => hi = self.lo + step,
            }
            if hi != self.hi {
                break;
            }
        }
        while hi - self.lo > 1 {
            let mid = self.lo + (hi - self.lo) / 2;
            match self.probe(solver, mid, hi)? {
                None => return Ok(()),
                Some(true) => {}
                Some(false) => hi = mid,
            }
        }
        if confirms {
            self.hi = hi;
        }
        Ok(())
    }

    /// Solves at batch `b` with `solver`: `Some(fits)`, or `None` when the time is up. A
    /// batch that fits raises `lo` and keeps its result.
    fn probe(&mut self, solver: &str, b: u64, hi: u64) -> Result<Option<bool>, MaxBatchError> {
        if self.options.cancel.load(Ordering::Relaxed) {
            return Err(SolveError::Cancelled.into());
        }
        let mut options = self.options.clone();
        options.progress = None;
        if let Some(deadline) = self.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.complete = false;
                return Ok(None);
            }
            let probes_left = u64::BITS - (hi - self.lo).leading_zeros() + 1;
            options.time_limit = Some(left / probes_left.max(1));
        }
        let g = self.graph.at_batch(b)?;
        let instance = Instance {
            graph: &g,
            budget: self.request.memory,
        };
        let result = solve::solve(&instance, solver, &options)?;
        let overhead = result.stats.as_ref().map(|s| s.overhead);
        let fits = overhead.is_some_and(|o| self.request.cap.admits(o));
        self.probes.push(Probe {
            batch: b,
            solver: solver.to_string(),
            fits,
            overhead,
            solve_time_s: result.solve_time_s,
        });
        if fits {
            self.lo = b;
            self.best = Some((b, result));
        }
        self.options.report(
            format!(
                "batch {b} {} with {solver}{}; largest so far {}, {:.1} s",
                if fits { "fits" } else { "does not fit" },
                overhead
                    .map(|o| format!(" (overhead {o:.3})"))
                    .unwrap_or_default(),
                self.lo,
                self.started.elapsed().as_secs_f64(),
            ),
            None,
        );
        Ok(Some(fits))
    }

    /// The verified result at `lo`: the confirming solver's when it fits there, else the
    /// bracketing solver's, else checkpoint-all's. The confirming solver is asked again at
    /// `lo` only while time is left and `lo` is above `no_recompute` (at or below it
    /// checkpoint-all recomputes nothing, which no schedule beats).
    fn result_at_lo(&mut self, no_recompute: u64) -> Result<Option<SolveResult>, MaxBatchError> {
        if self.lo == 0 {
            return Ok(None);
        }
        let best = self
            .best
            .take()
            .filter(|(b, _)| *b == self.lo)
            .map(|(_, r)| r);
        let confirmed = best
            .as_ref()
            .is_some_and(|r| requested(r) == self.request.solver);
        if confirmed {
            return Ok(best);
        }
        let left = self
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()));
        let mut options = self.options.clone();
        options.progress = None;
        options.time_limit = left.map(|left| left.max(Duration::from_millis(1)));
        let g = self.graph.at_batch(self.lo)?;
        let instance = Instance {
            graph: &g,
            budget: self.request.memory,
        };
        if self.lo <= no_recompute || left.is_some_and(|left| left.is_zero()) {
            return Ok(Some(match best {
                Some(b) => b,
                None => solve::solve(&instance, "checkpoint-all", &options)?,
            }));
        }
        let mine = solve::solve(&instance, &self.request.solver, &options)?;
        let cost = |r: &SolveResult| {
            r.stats
                .as_ref()
                .filter(|s| self.request.cap.admits(s.overhead))
                .map(|s| s.total_cost)
        };
        Ok(match (best, cost(&mine)) {
            (Some(b), Some(c)) if cost(&b).is_some_and(|d| d < c) => Some(b),
            (_, Some(_)) => Some(mine),
            (Some(b), None) => Some(b),
            (None, None) => Some(solve::solve(&instance, "checkpoint-all", &options)?),
        })
    }

    /// Whether every batch that fitted lies below every batch the confirming solver refused.
    fn monotone_on_probes(&self) -> bool {
        let fitted = self.probes.iter().filter(|p| p.fits).map(|p| p.batch).max();
        let refused = self
            .probes
            .iter()
            .filter(|p| !p.fits && p.solver == self.request.solver)
            .map(|p| p.batch)
            .min();
        match (fitted, refused) {
            (Some(f), Some(r)) => f < r,
            _ => true,
        }
    }
}

/// The solver a result was asked of (`auto` when it chose another).
fn requested(r: &SolveResult) -> &str {
    r.requested_solver.as_deref().unwrap_or(&r.solver)
}
