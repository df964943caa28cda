//! `auto`, the default solver: a portfolio that returns the cheapest verified schedule it
//! finds within its effort, says which solver produced it and what ended the search.
//!
//! 1. Graphs of at most [`MAX_NODES`] nodes go to the exhaustive oracle: the global
//!    optimum, nothing else runs.
//! 2. Chains go to the exact dynamic program their structure allows (Revolve on
//!    homogeneous chains, the persistent chain DP on the others). A global optimum ends
//!    the solve; any other plan joins the candidates. Revolve runs first, before the
//!    floor: on a long chain at a tight budget Sethi–Ullman alone can outlast the time
//!    limit (a 1,000,000-node chain at 1,000 bytes: the whole minute, where Revolve's
//!    optimum takes 7 s). The chain DP runs after the floor: its table can take the whole
//!    limit, and the floor's schedule must exist by then.
//! 3. The fast constructive solvers run next ([`FAST`]), so that a schedule exists within
//!    a second or two at any feasible budget. They are the floor: each runs with all the
//!    time left, so the answer is never worse than any of them that finished (on graphs
//!    of thousands of nodes, all of them, in milliseconds to seconds); past the deadline
//!    they do not start, and on graphs too large for them to finish in time they stop
//!    without a schedule: the limit holds.
//! 4. The stage-cut bound ([`checkmate`]'s relaxation around one stage): a bound on every
//!    schedule that, unlike `Σ_v c_v`, prices what the values still needed at a node's
//!    first computation cost to bring back, and adds the second computation of every value
//!    too large to stay resident beside a node that runs between two of its uses; its two
//!    best cuts are solved again with integral choices (branch and bound). A candidate
//!    within the MIP gap of it (HiGHS's 1e-4 unless the caller sets one) is a global optimum
//!    and ends the solve. The LP of its best cut also ranks `knapsack`'s candidates once
//!    more (least kept first), and guides one more run of `dtr-ahead` (a value the LP keeps
//!    is evicted as if twice as dear; after the improvers, see [`steered`]).
//! 5. The Checkmate MILP runs where it fits ([`MILP_MAX_NODES`], [`MILP_MAX_NODES_BY_WORK`]
//!    under [`Effort::Work`], and its model within
//!    `SolveOptions::memory_limit`: a model too large is refused before it is allocated).
//!    A proof that covers only the solver order is a reason to go on, not to stop.
//! 6. FastSA's simulated annealing over compute sequences (which also reorders) searches
//!    from the solver order (under [`Effort::Work`] again with other seeds, [`MAX_SEARCHES`]
//!    searches in all, when the first one's schedule beats every candidate before it), then
//!    polishes the best schedule of all candidates; above the default effort the default's
//!    search and polishing run first, then both lengthened by the effort ([`anneal`]). After
//!    a proof within a scope both get [`IMPROVER_SHARE_AFTER_PROOF`] of their effort.
//! 7. `dtr-ahead` runs again under negotiated weights ([`steered`]): each of its rules
//!    round after round, a value recomputed in one round dearer to evict in the next; then a
//!    local search over the weights of the cheapest negotiated schedule's rule; both once
//!    per whole unit of effort, each time with a seed of its own. Where
//!    the eviction rule is what decides (ResNets at a tenth of the span, whose stems and
//!    first stages every plain rule recomputes three to five times), it is the cheapest
//!    candidate; like the guided run, after the polishing and never its start (under
//!    [`Effort::Time`] before the MILP).
//! 8. Unless the best schedule meets the stage-cut bound, the bound of the sequence of
//!    cuts through the stage cut's moment ([`checkmate`]'s relaxation around several
//!    moments at once: a value the backward pass needs again after each of them is paid
//!    at each), over windows of eight later moments: a few LPs per unit of effort, then
//!    integral programs of a few branch-and-bound nodes where the LPs prove most, within
//!    [`SEQUENCE_TIME`] per unit of effort on a clock of its own. It comes last because it
//!    changes no schedule, only the bound and so the gap the answer states and whether it
//!    converged; where its time ends it first, the bound may differ by machine
//!    (`details.sequence.complete` is then false) and is not one the solve converges on,
//!    so that `ended_by` does not differ. Under [`Effort::Time`] the improvers take the
//!    whole time, so it runs only in what is left.
//!
//! # Effort, and what ends the solve
//! Under [`Effort::Work`] (the default) every candidate's effort is counted in work units
//! the solvers count, scaled by the effort: each of FastSA's searches [`SEARCH_WORK`]
//! iterations, each polishing round [`ROUND_WORK`] iterations (at most [`MAX_ROUNDS`]
//! rounds, each from the best schedule so far with its own seed), the MILP at most
//! [`MILP_NODES`] branch-and-bound nodes, each negotiation of DTR-ahead's weights
//! [`dtr_ahead::NEGOTIATION_ROUNDS`] rounds a rule, the local search after them
//! [`dtr_ahead::CLIMB_ROUNDS`] runs (these two drawn again with other seeds, once per whole
//! unit, then, above the default effort, once lengthened); the others run to their end. Above the
//! default effort FastSA runs the default's work first and then the lengthened work, and the
//! first draw of DTR-ahead's is the default's, so where the MILP (the one candidate before them
//! that more effort lengthens) does not run, more effort's answer is never dearer than the
//! default's, unless the time limit ends a part of the solve. Polishing
//! stops at the first round that finds nothing cheaper by [`STALL_GAIN`] of the cost (the
//! stall window, one round; what it found is kept). HiGHS runs with one thread unless the
//! caller sets `threads`. So the same graph, budget and options give
//! the same schedule on any machine under any load, unless the time limit, here only a
//! safety cap ([`DEFAULT_TIME_LIMIT`] when the caller sets none), ends some part first.
//! Under [`Effort::Time`] the candidates share the time limit instead (the stage-cut
//! bound [`BOUND_SHARE`] of the time left, the knapsack [`KEEP_SHARE`], the MILP
//! [`MILP_SHARE`], FastSA's search [`SEARCH_SHARE`] and its polish the rest): more search
//! on a faster machine, not reproducible. The result's `ended_by` says what ended the
//! solve: `converged`, `stall`, `work_limit` or `time_limit` (any part of the solve ended
//! by a clock, so the answer may depend on the machine).
//!
//! Every candidate's plan is replayed by the simulator before it counts: one that fails,
//! overshoots the budget or produces an invalid schedule is recorded in `details.tried`
//! and skipped, never returned. The answer is the cheapest verified candidate, so it is
//! never worse than any candidate the portfolio computed. A candidate whose cost equals
//! `Σ_v c_v` (no recomputation) is a global optimum and ends the solve at once.

mod portfolio;

use super::dp::structured::exact_solver_for;
use super::exact::checkmate;
use super::exact::exhaustive::{Exhaustive, MAX_NODES};
use super::heuristic::dtr_ahead::{self, Start};
use super::heuristic::fastsa::{self, FastSa};
use super::heuristic::knapsack;
use super::{
    Effort, Footprint, Instance, Outcome, Scope, SolveError, SolveOptions, Solver, SolverInfo,
};
use crate::schedule::Schedule;
use portfolio::Portfolio;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// The time limit when the caller sets none: under [`Effort::Work`] a safety cap, under
/// [`Effort::Time`] the time the candidates share.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(60);

/// The constructive solvers: Sethi–Ullman's recursive rematerialisation first (a schedule
/// at every budget from its need bound, in about a second on 10,000 nodes), then the
/// classic heuristics (DTR with its online eviction rule and with the next use known) and
/// the partitioner's saved-set knapsack.
const FAST: [&str; 6] = [
    "sethi-ullman",
    "dtr",
    "dtr-ahead",
    "knapsack",
    "chen-greedy",
    "checkpoint-all",
];

/// [`Effort::Time`]: the share of the remaining time the stage-cut bound may take (its LPs
/// take 0.1 to 0.3 s in all on the 300- to 900-node exported graphs).
const BOUND_SHARE: f64 = 0.1;

/// [`Effort::Work`]: the most time the sequence of cuts may take per unit of effort, on its
/// own clock (a bound only: its windows' integral programs are HiGHS root nodes, whose time
/// no work limit bounds).
const SEQUENCE_TIME: Duration = Duration::from_secs(5);

/// [`Effort::Time`]: the share of the remaining time the knapsack ranked by the stage-cut
/// LP may take (not a floor candidate: on 10,000 nodes a knapsack takes 3 to 15 s).
const KEEP_SHARE: f64 = 0.25;

/// Graphs up to this size try the MILP (larger ones: its LP relaxation alone outlasts a
/// minute on two cores, issue 9's measurements at 250-1000 nodes).
const MILP_MAX_NODES: usize = 200;

/// [`Effort::Work`]: graphs up to this size try the MILP. HiGHS's node limit bounds its
/// branch and bound but not the work at its root (cuts, heuristics) nor the LP rounding
/// before it: on `graphs/resnet18.json` (63 nodes) a quarter of the way from the minimum
/// budget to the peak, the MILP with a limit of 100 nodes ran past a 60 s cap, on a loaded
/// machine, without beating DTR's start.
const MILP_MAX_NODES_BY_WORK: usize = 40;

/// [`Effort::Time`]: the share of the remaining time the MILP may take.
const MILP_SHARE: f64 = 0.5;

/// [`Effort::Work`]: the branch-and-bound nodes the MILP (and its RENS sub-MIP) may
/// explore.
const MILP_NODES: u64 = 5_000;

/// [`Effort::Time`]: the share of the time left for FastSA's search from the solver order
/// (both phases); the rest polishes the best schedule of all candidates
/// (`fastsa::improve`, phase 2). From the solver order the search lowers memory at the
/// least cost; polishing a poor start at phase 2's low temperature does not recover
/// (random layered n1000 at 90%: a Chen greedy start at 24x stays above 20x).
const SEARCH_SHARE: f64 = 0.75;

/// [`Effort::Work`]: FastSA's iterations from the solver order (both phases).
const SEARCH_WORK: u64 = 4_000_000;

/// [`Effort::Work`]: the searches from the solver order (each [`SEARCH_WORK`] iterations)
/// when the first one's schedule is the best of all candidates ([`Pass::search`]).
const MAX_SEARCHES: u64 = 4;

/// [`Effort::Work`]: FastSA's iterations in one polishing round; a round that saves less
/// than [`STALL_GAIN`] ends the polishing (the stall window).
const ROUND_WORK: u64 = 1_000_000;

/// [`Effort::Work`]: the least share of the cost a polishing round must save for another
/// round to run (HiGHS's default relative MIP gap: rounds that each shave a few
/// millionths, as on ResNet-50 at a tenth of the span from DTR-ahead's start, stop).
const STALL_GAIN: f64 = 1e-4;

/// [`Effort::Work`]: the most polishing rounds.
const MAX_ROUNDS: u64 = 8;

/// The share of the effort FastSA takes when the best schedule is already proven optimal
/// within its solver's scope (it looks for cheaper schedules outside it, in other orders,
/// without making the caller wait the whole limit).
const IMPROVER_SHARE_AFTER_PROOF: f64 = 0.1;

pub struct Auto;

impl Solver for Auto {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "auto",
            description: "A portfolio: exhaustive search up to 12 nodes, the constructive \
                          solvers (Sethi-Ullman, DTR and DTR-ahead, knapsack, Chen greedy, \
                          checkpoint-all), \
                          the exact chain DP on chains, the stage-cut bound (a bound on every \
                          schedule; its LP also ranks one more knapsack and guides one more \
                          DTR-ahead), DTR-ahead again under negotiated weights, the MILP where its \
                          model fits (graphs up to 40 nodes, 200 with effort 'time') and \
                          local search until it \
                          converges, stalls or spends its work budget (deterministic; the time \
                          limit, 60 s by default, is a safety cap); returns the cheapest \
                          verified schedule, names the solver that produced it and says what \
                          ended the search.",
            scope: Scope::Heuristic,
            accepts: "any graph",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        // The best schedule and the candidate being judged; each candidate is admitted on
        // its own footprint before it runs.
        let computes = 4 * instance.graph.len() as u64;
        Footprint::linear(
            instance.graph,
            computes,
            format!("two schedules of about {computes} compute events in all"),
        )
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        if instance.graph.len() <= MAX_NODES {
            return Exhaustive.solve(instance, options);
        }
        let mut options = options.clone();
        options.time_limit = Some(options.time_limit.unwrap_or(DEFAULT_TIME_LIMIT));
        // This solve's own record of a time limit ending any part of it.
        options.timed_out = Arc::new(AtomicBool::new(false));
        if let Effort::Work(_) = options.effort {
            options.threads.get_or_insert(1);
        }
        let mut portfolio = Portfolio::new(instance, &options);
        // On a homogeneous chain Revolve first: its global optimum (seconds on a million
        // nodes) skips the floor, which at a tight budget can outlast the time limit on a
        // long chain (Sethi–Ullman recomputes each forward value from scratch). The chain
        // DP of other chains after the floor: its table can take the whole limit.
        let (first, after_floor) = match exact_solver_for(instance.graph) {
            Some(dp) if dp.scope() == Scope::GlobalOptimum => (Some(dp), None),
            other => (None, other),
        };
        if let Some(dp) = first {
            portfolio.run(dp.info().name, 1.0, None, |i, o| dp.solve(i, o))?;
        }
        for name in FAST {
            let solver = super::find(name)?;
            portfolio.run_floor(name, |i, o| super::admitted(solver, i, o))?;
        }
        if let Some(dp) = after_floor {
            portfolio.run(dp.info().name, 1.0, None, |i, o| dp.solve(i, o))?;
        }
        portfolio.prove_bound(BOUND_SHARE)?;
        if let Some(keep) = portfolio.stage_cut_keep().map(|(_, keep)| keep.to_vec()) {
            portfolio.run("knapsack", KEEP_SHARE, None, |i, o| {
                knapsack::solve_keeping(i, o, &keep)
            })?;
        }
        if options.effort == Effort::Time {
            steered(&mut portfolio, options.seed)?;
        }
        let milp_max_nodes = match options.effort {
            Effort::Work(_) => MILP_MAX_NODES_BY_WORK,
            Effort::Time => MILP_MAX_NODES,
        };
        if !portfolio.done() && instance.graph.len() <= milp_max_nodes {
            portfolio.run("milp", MILP_SHARE, Some(MILP_NODES), checkmate::solve_milp)?;
        }
        let share = if portfolio.best_is_optimal_in_scope() {
            IMPROVER_SHARE_AFTER_PROOF
        } else {
            1.0
        };
        let scaled = |work: u64| (work as f64 * share) as u64;
        match options.effort {
            Effort::Time => {
                portfolio.run("fastsa", share * SEARCH_SHARE, None, |i, o| {
                    FastSa.solve(i, o)
                })?;
                if let Some(start) = portfolio.best_schedule() {
                    portfolio.run("fastsa", share, None, |i, o| fastsa::improve(i, o, &start))?;
                }
            }
            Effort::Work(_) => {
                anneal(
                    &mut portfolio,
                    scaled(SEARCH_WORK),
                    scaled(ROUND_WORK),
                    options.seed,
                )?;
                steered(&mut portfolio, options.seed)?;
            }
        }
        portfolio.prove_sequence(SEQUENCE_TIME)?;
        Ok(portfolio.finish())
    }
}

/// `dtr-ahead` steered three ways, each run a candidate like the others:
///
/// * **Guided** by the stage-cut LP's keep shares, once the bound has a cut
///   (`dtr_ahead::solve_guided`).
/// * **Negotiated**: each rule for [`dtr_ahead::NEGOTIATION_ROUNDS`] rounds (the work units;
///   a round whose run computes many eviction scores, on graphs of thousands of nodes,
///   counts as several), a value recomputed in one round weighed dearer to evict in the
///   next; from weights of 1, then, once the bound has a cut, from each of the two guides.
/// * **Climbed**: from the cheapest negotiated schedule of the three, a local search over
///   its rule's weights, [`dtr_ahead::CLIMB_ROUNDS`] runs (`dtr_ahead::climb`).
///
/// More effort draws the negotiations and the climb again: one draw per whole unit of effort
/// ([`Portfolio::draws`]), each with the default effort's work (a fraction of a unit adds
/// no draw, and no work to the draws) and a seed of its own, the first the caller's
/// ([`draw_seed`]). So the default effort's candidates come first and more
/// effort is never dearer here. Where the two are chaotic (the rounds' draws decide which of
/// many near-equal schedules a negotiation ends at, and the climb's steps which local
/// optimum it reaches), fresh draws find more than longer ones: on the MLSys set's ResNet50
/// at a tenth of the span, 32 climbs of 3,000 runs from one start reached +7.12% to +7.39%,
/// three of 30,000 runs +7.24%. A negotiation twice as long draws other weights for every
/// rule after the first, so alone it could end dearer than the default's (the exported
/// ResNet-50 at a tenth of the span: +15.29% at effort 4, +14.47% at effort 1). But where
/// the negotiation is what works, one long negotiation finds what short ones miss (a random
/// layered graph of 400 nodes at a tenth of the span: +16.90% against four draws' +17.21%),
/// so above the default effort the negotiations and the climb run once more after the
/// draws, lengthened by the whole effort, with the caller's seed.
///
/// Under [`Effort::Work`] they run after the improvers, never as the polishing's start: a
/// cheaper start can end the polishing at a dearer local optimum (on the MLSys set's
/// ResNet50 at a tenth of the span, rounds from the guided schedule, +8.40%, stall at once
/// where those from Sethi–Ullman's, +8.44%, reach +7.74%; from the negotiated one they end
/// at +7.86%). Under [`Effort::Time`], where the polishing takes all the time left, they run
/// before the MILP.
fn steered(portfolio: &mut Portfolio, seed: u64) -> Result<(), SolveError> {
    let stage_cut = portfolio
        .stage_cut_keep()
        .map(|(cut, keep)| (cut, keep.to_vec()));
    let mut starts = vec![Start::Plain];
    if let Some((cut, keep)) = &stage_cut {
        portfolio.run("dtr-ahead", KEEP_SHARE, None, |i, o| {
            dtr_ahead::solve_guided(i, o, keep, *cut)
        })?;
        starts.extend([Start::Weigh(keep), Start::Retain(keep, *cut)]);
    }
    let effort = portfolio.work_scale();
    // Each draw with the default's work, or less below the default effort.
    let per_draw = effort.map(|effort| effort.min(1.0));
    for draw in 0..portfolio.draws() {
        // Past the deadline or done, no draw would run: the loop ends, whatever the effort.
        if portfolio.stopped() || portfolio.done() {
            break;
        }
        let seed = draw_seed(seed, STEERED_STREAMS, draw);
        negotiate_and_climb(portfolio, &starts, seed, per_draw)?;
    }
    if effort.is_some_and(|effort| effort > 1.0) {
        // Then once lengthened by the whole effort, with the caller's seed.
        negotiate_and_climb(portfolio, &starts, seed, effort)?;
    }
    Ok(())
}

/// One draw of [`steered`]: DTR-ahead negotiated from each of `starts` with `seed`, then the
/// climb from the cheapest negotiated schedule with it, each with its default work scaled
/// by `scale` ([`Portfolio::run_seeded`]).
fn negotiate_and_climb(
    portfolio: &mut Portfolio,
    starts: &[Start],
    seed: u64,
    scale: Option<f64>,
) -> Result<(), SolveError> {
    let mut cheapest: Option<dtr_ahead::Negotiated> = None;
    for &start in starts {
        portfolio.run_seeded(
            "dtr-ahead",
            KEEP_SHARE,
            dtr_ahead::NEGOTIATION_ROUNDS,
            scale,
            seed,
            |i, o| {
                let (outcome, negotiated) = dtr_ahead::negotiate(i, o, start)?;
                if let Some(n) = negotiated {
                    if cheapest.as_ref().is_none_or(|c| n.cost() < c.cost()) {
                        cheapest = Some(n);
                    }
                }
                Ok(outcome)
            },
        )?;
    }
    if let Some(from) = &cheapest {
        portfolio.run_seeded(
            "dtr-ahead",
            KEEP_SHARE,
            dtr_ahead::CLIMB_ROUNDS,
            scale,
            seed,
            |i, o| dtr_ahead::climb(i, o, from),
        )?;
    }
    Ok(())
}

/// [`Effort::Work`]'s annealing: FastSA's search from the solver order with `search_work`
/// iterations ([`Pass::search`]), then its polishing in rounds of `round_work`
/// ([`Pass::polish`]), both scaled by the effort.
///
/// Above the default effort the default's annealing runs first, with the default's work:
/// searches and rounds lengthened end elsewhere, and may end dearer (on `remat gen
/// random-layered --nodes 50 --seed 0` a tenth of the way from the minimum budget to the
/// peak, effort 2's lengthened annealing ends at a cost of 447 where the default's ends at
/// 446), so its schedules are found again and more effort is never dearer here. Then the
/// lengthened annealing, not drawn again as [`steered`] is: where the annealing is what
/// works, one longer anneal finds more than several short ones (on `remat gen random-layered
/// --nodes 400 --seed 2` a quarter of the way, +11.64% at effort 4 against +12.11% from four
/// draws of the default's). Each pass starts from the best schedule before either
/// ([`Lead`]) with the caller's seed, so each runs as it would alone: the lengthened one as
/// the same effort ran before the default's came first.
fn anneal(
    portfolio: &mut Portfolio,
    search_work: u64,
    round_work: u64,
    seed: u64,
) -> Result<(), SolveError> {
    let start = portfolio
        .best_schedule()
        .zip(portfolio.best_cost())
        .map(|(schedule, cost)| Lead { schedule, cost });
    let effort = portfolio.work_scale();
    let mut passes = vec![effort];
    if effort.is_some_and(|effort| effort > 1.0) {
        passes.insert(0, Some(1.0));
    }
    for scale in passes {
        let mut pass = Pass {
            scale,
            seed,
            lead: start.clone(),
        };
        pass.search(portfolio, search_work)?;
        pass.polish(portfolio, round_work)?;
    }
    Ok(())
}

/// One pass of [`anneal`]: its work scale ([`Portfolio::run_seeded`]), the caller's seed, and
/// its lead.
struct Pass {
    scale: Option<f64>,
    seed: u64,
    lead: Option<Lead>,
}

/// The schedule an annealing pass polishes: the cheapest of the one it started from and
/// those it found.
#[derive(Clone)]
struct Lead {
    schedule: Schedule,
    cost: f64,
}

impl Pass {
    /// The search from the solver order: FastSA with `work` iterations. When its schedule is
    /// cheaper than the pass's lead (the constructive solvers found nothing cheaper, so the
    /// annealing is what works on this graph), it runs again with seeds of its own,
    /// [`MAX_SEARCHES`] searches in all: where one search is the answer, its outcome depends
    /// on the seed (on the MLSys set's random layered n250 a quarter of the way from the
    /// minimum budget to the peak, one search with its polishing ends anywhere from +0.9% to
    /// +3.4%), and polishing starts from the best of them.
    fn search(&mut self, portfolio: &mut Portfolio, work: u64) -> Result<(), SolveError> {
        let seed = self.seed;
        let mut search_with = |pass: &mut Pass, k: u64| {
            let seed = draw_seed(seed, SEARCH_STREAMS, k);
            pass.run(portfolio, work, seed, |i, o| FastSa.solve(i, o))
        };
        if search_with(self, 0)? {
            for k in 1..MAX_SEARCHES {
                search_with(self, k)?;
            }
        }
        Ok(())
    }

    /// The polishing: rounds of `fastsa::improve` from the pass's lead, `work` iterations
    /// each with a seed of its own, until a round saves less than [`STALL_GAIN`] of the cost
    /// (a stall), the solve converges or stops, or [`MAX_ROUNDS`] rounds have run.
    fn polish(&mut self, portfolio: &mut Portfolio, work: u64) -> Result<(), SolveError> {
        for round in 1..=MAX_ROUNDS {
            if portfolio.done() || portfolio.stopped() {
                return Ok(());
            }
            let Some(Lead {
                schedule: start,
                cost: before,
            }) = self.lead.clone()
            else {
                return Ok(());
            };
            let seed = round_seed(self.seed, round);
            self.run(portfolio, work, seed, |i, o| fastsa::improve(i, o, &start))?;
            if self
                .lead
                .as_ref()
                .is_some_and(|after| after.cost > before * (1.0 - STALL_GAIN))
            {
                portfolio.stall();
                return Ok(());
            }
        }
        Ok(())
    }

    /// Runs FastSA's `solve` with `work` iterations at the pass's scale and `seed`; whether
    /// its schedule is cheaper than the pass's lead (it then is the lead).
    fn run(
        &mut self,
        portfolio: &mut Portfolio,
        work: u64,
        seed: u64,
        solve: impl FnOnce(&Instance, &SolveOptions) -> Result<Outcome, SolveError>,
    ) -> Result<bool, SolveError> {
        let mut schedule = None;
        let cost = portfolio.run_seeded(fastsa::NAME, 1.0, work, self.scale, seed, |i, o| {
            let outcome = solve(i, o)?;
            if let Outcome::Plan(plan) = &outcome {
                schedule = Some(plan.schedule.clone());
            }
            Ok(outcome)
        })?;
        let (Some(schedule), Some(cost)) = (schedule, cost) else {
            return Ok(false);
        };
        if self.lead.as_ref().is_some_and(|lead| lead.cost <= cost) {
            return Ok(false);
        }
        self.lead = Some(Lead { schedule, cost });
        Ok(true)
    }
}

/// The seed of draw `k` of several from `streams` ([`Pass::search`], [`steered`]): the caller's
/// seed for the first; the others draw streams apart from every polishing round's
/// ([`round_seed`]) and from the other searches'.
fn draw_seed(seed: u64, streams: u64, k: u64) -> u64 {
    match k {
        0 => seed,
        k => round_seed(seed, streams + k),
    }
}

/// The first stream of FastSA's searches after the first, beyond any polishing round.
const SEARCH_STREAMS: u64 = 1 << 32;

/// The first stream of [`steered`]'s draws after the first, beyond FastSA's searches.
const STEERED_STREAMS: u64 = 2 << 32;

/// The seed of polishing round `round` (SplitMix64's finaliser of the caller's seed and
/// the round: distinct rounds draw unrelated streams).
fn round_seed(seed: u64, round: u64) -> u64 {
    let mut z = seed ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::between_min_and_peak;
    use crate::graph::generate::random_layered;
    use crate::solve::details::Details;
    use crate::solve::Outcome;

    /// The costs of a portfolio's candidates in the order they ran (`None`: no schedule).
    type Costs = Vec<Option<f64>>;

    /// The costs of the DTR-ahead runs of [`steered`] (the guided run, then each draw's
    /// negotiations and climb) at `effort`, after the stage-cut bound whose LP guides them.
    fn steered_costs(instance: &Instance, effort: f64) -> Costs {
        costs_of(instance, effort, |portfolio| {
            portfolio.prove_bound(BOUND_SHARE).unwrap();
            steered(portfolio, 0).unwrap();
        })
    }

    /// The costs of the candidates `runs` adds to an empty portfolio at `effort`, in order.
    fn costs_of(instance: &Instance, effort: f64, runs: impl FnOnce(&mut Portfolio)) -> Costs {
        let options = SolveOptions {
            effort: Effort::Work(effort),
            threads: Some(1),
            ..SolveOptions::default()
        };
        let mut portfolio = Portfolio::new(instance, &options);
        runs(&mut portfolio);
        let Outcome::Plan(plan) = portfolio.finish() else {
            panic!("no schedule");
        };
        let Some(Details::Auto(details)) = plan.details else {
            panic!("no portfolio details");
        };
        details.tried.iter().map(|t| t.cost).collect()
    }

    /// An effort no front door admits (unbounded: as many draws as a `u64` counts) still ends
    /// at the time limit, the draws with it.
    #[test]
    fn an_unbounded_effort_ends_at_the_time_limit() {
        let graph = random_layered(45, 0);
        let instance = Instance {
            graph: &graph,
            budget: between_min_and_peak(&graph, 0.1),
        };
        let options = SolveOptions {
            effort: Effort::Work(f64::INFINITY),
            time_limit: Some(Duration::from_secs(1)),
            threads: Some(1),
            ..SolveOptions::default()
        };
        let started = std::time::Instant::now();
        let result = crate::solve::solve(&instance, "auto", &options).unwrap();
        assert!(result.stats.is_some(), "{:?}", result.message);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }

    /// At an effort `k` above the default the steered search makes `⌊k⌋` draws of the default
    /// effort's work, the first of them the default effort's own, then once more lengthened by
    /// `k`: every schedule the default effort's steered search finds is found again, first and
    /// in the same order, so more effort is never dearer there, whole or not (a negotiation
    /// twice as long drew other weights for every rule after the first and could end dearer:
    /// on the exported ResNet-50 a tenth of the way from the minimum budget to the peak,
    /// 15.29% at effort 4 against 14.47% at effort 1, and so did effort 1.5's one draw 1.5
    /// times as long).
    #[test]
    fn more_effort_draws_the_default_steered_search_again_with_other_seeds() {
        let cases = [(45, 0), (45, 3), (60, 0)];
        // The guided run, then per draw three negotiations and the climb, then as many
        // lengthened: at effort 1.5 one draw, at effort 3 three.
        for (effort, draws) in [(1.5, 1), (3.0, 3)] {
            for (case, one, more) in default_and_more(&cases, 0.1, effort, steered_costs) {
                assert_eq!(one.len(), 1 + 4, "{case}: {one:?}");
                assert_eq!(more.len(), 1 + draws * 4 + 4, "{case}, {effort}: {more:?}");
                assert_default_first(&case, &one, &more);
            }
        }
    }

    /// For each random layered graph of `(nodes, seed)` at `fraction` of the way from the
    /// minimum budget to the peak: its name, then `costs` at the default effort and at
    /// `effort`.
    fn default_and_more(
        cases: &[(usize, u64)],
        fraction: f64,
        effort: f64,
        costs: impl Fn(&Instance, f64) -> Costs,
    ) -> Vec<(String, Costs, Costs)> {
        let at = |&(nodes, seed): &(usize, u64)| {
            let graph = random_layered(nodes, seed);
            let instance = Instance {
                graph: &graph,
                budget: between_min_and_peak(&graph, fraction),
            };
            let case = format!("{nodes} nodes, seed {seed}");
            (case, costs(&instance, 1.0), costs(&instance, effort))
        };
        cases.iter().map(at).collect()
    }

    /// `more`, the costs of a part of `auto` at more effort, starts with `one`, the default
    /// effort's, so that its cheapest is never dearer.
    fn assert_default_first(case: &str, one: &[Option<f64>], more: &[Option<f64>]) {
        assert_eq!(more[..one.len()], one[..], "{case}");
        let cheapest = |costs: &[Option<f64>]| costs.iter().flatten().copied().reduce(f64::min);
        assert!(cheapest(one).is_some(), "{case}: {one:?}");
        assert!(cheapest(more) <= cheapest(one), "{case}");
    }

    /// Above the default effort FastSA's annealing runs the default's first: its searches
    /// and polishing rounds come again first, in the same order, then the lengthened ones, so
    /// more effort is never dearer there.
    #[test]
    fn more_effort_runs_the_default_annealing_first() {
        // A tenth of the default's work: the debug build's iterations are slow.
        let anneal_costs = |instance: &Instance, effort: f64| {
            costs_of(instance, effort, |portfolio| {
                anneal(portfolio, SEARCH_WORK / 10, ROUND_WORK / 10, 0).unwrap();
            })
        };
        for (case, one, two) in default_and_more(&[(45, 0), (50, 1)], 0.5, 2.0, anneal_costs) {
            // Four searches (the annealing is the only candidate), then at least one round;
            // at effort 2 as many again, lengthened.
            assert!(one.len() > MAX_SEARCHES as usize, "{case}: {one:?}");
            assert!(
                two.len() > one.len() + MAX_SEARCHES as usize,
                "{case}: {two:?}"
            );
            assert_default_first(&case, &one, &two);
        }
    }
}
