//! `block-rotor`: rotor's persistent checkpointing DP (Beaumont, Eyraud-Dubois, Herrmann,
//! Joly, Shilova, "Optimal checkpointing for heterogeneous chains: how to train deep neural
//! networks with limited memory", 2019; "Efficient combination of rematerialization and
//! offloading for training DNNs", NeurIPS 2021) run over the graph's *blocks*, the stretches
//! of the forward pass between its cuts (`blocks.rs`), as Rockmate (Zhao, Le Pape,
//! Dabrowski et al., "Rockmate: an Efficient, Fast, Automatic and Generic Tool for
//! Re-materialization in PyTorch", ICML 2023) runs rk-Rotor over the blocks of a PyTorch
//! model with several options per block: a block's forward `F_j` either keeps only its
//! output `x_j`, or keeps the tape of one of its options `k` (`options.rs`: the whole tape,
//! the values its backward `B_j` reads, or less of it, the rest recomputed inside `B_j` at
//! an extra cost `e(j, k)`; with a small tape, `B_j` may also be rematerialized under a cap
//! on its own memory, `nested.rs`, recomputing a value again for a later reader).
//!
//! With `u_f(j)`, `u_b(j)` the forward and backward costs of block `j`, `ω_x(j)` the size
//! of `x_j`, `ω_δ(j)` that of its gradient `δ_j` held outside the block (`ω_x(j)`, but
//! `ω_δ(L) = 0`: the last block's backward starts the gradient), `ω_x̄(j, k)` the size of
//! option `k`'s tape, and Rockmate's transient peaks of the block's own values
//! (`transient.rs`): `p_f(j, k)` of `F_j` keeping option `k`'s tape, `p_f(j)` of `F_j`
//! keeping only `x_j`, `p_b(j, k)` of `B_j` from option `k`'s tape (the gradients it hands
//! on included), all in memory slots, `C(s, t, m)` is the cheapest way to run
//! `B_t, …, B_s` when `x_{s−1}` is stored and `δ_t` held, with `m` slots left besides them:
//!
//! ```text
//! C(s, s, m) = min_k u_f(s) + u_b(s) + e(s, k)
//!                over k with ω_x̄(s, k) + ω_δ(s−1) ≤ m, p_f(s, k) ≤ m, p_b(s, k) ≤ m
//! C(s, t, m) = min( min_k u_f(s) + C(s+1, t, m − ω_x̄(s, k)) + u_b(s) + e(s, k)
//!                     over k with p_f(s, k) ≤ m, p_b(s, k) ≤ m + ω_δ(t) − ω_δ(s)  (tape k),
//!                   min_{s < s' ≤ t} Σ_{k=s}^{s'−1} u_f(k)
//!                        + C(s', t, m − ω_x(s'−1))                        (x_{s'−1} kept)
//!                        + C(s, s'−1, m + ω_δ(t) − ω_δ(s'−1))
//!                     over s' with p_f(k) + ω_x(k−1) [k > s] ≤ m for s ≤ k < s' )
//! ```
//!
//! (after `B_{s'}` the gradient `δ_t` is gone and `δ_{s'−1}` held; `B_s` runs beside
//! `δ_s`, which took `δ_t`'s place). The plan is a compute sequence (each block's ops in
//! solver order; every free implied, see [`from_computes`]), so values inside a block
//! live exactly as long as the sequence needs them. The block model is an approximation
//! of the graph (a backward op may read values of other blocks, which the DP does not
//! count), so its budget is the real budget less `fixed_memory` at first, then lowered by
//! the simulator's excess while the replayed schedule does not fit and raised by half the
//! slack while it does (`ATTEMPTS` tries). The table is filled twice over: with the
//! transient peaks, and with sizes only, as rotor's chain (`p_f = p_b = 0`), whose plans
//! overshoot more and are fitted the same way; the cheapest schedule that fits of either
//! is the answer.
//!
//! Scope: a heuristic on general graphs (the DP is optimal only for its block model and
//! its options); it needs forward/backward kinds and at least two cuts, and graphs whose
//! backward ops feed the backward ops of later blocks are declined. A graph out of that
//! scope is an error, [`SolveError::Unsupported`] (exit 2, HTTP 422), as a graph that is not
//! a chain is for the chain solvers: no schedule was searched for, so `infeasible` would
//! claim too much (`auto` does not run it). Recomputation inside
//! `B_j` is searched only as its options are (a ladder of caps from the least tapes,
//! each with DTR's eviction rule restricted to the block: no optimum within the block),
//! and a block's backward still holds the gradients it reads and hands on, which no
//! recomputation lowers: where those exceed the budget beside `x_{j−1}` and `δ_j`, the
//! block gets no plan. The plan's message says how many blocks run a nested option.

mod blocks;
mod nested;
mod options;
mod transient;

use crate::graph::Graph;
use crate::schedule::sequence::from_computes;
use crate::schedule::{simulate_polled, Schedule};
use crate::solve::Footprint;
use crate::solve::{
    internal, replayed_within_budget, Instance, Outcome, Scope, SolveError, SolveOptions, Solver,
    SolverInfo, Stop, Stopped,
};
use blocks::{blocks, Block, NotBlocks};
use options::TapeOption;
use std::ops::ControlFlow;

pub struct BlockRotor;

/// Blocks beyond this are merged into neighbours (the table is `O(L² · S)` and its fill
/// `O(L³ · S)`).
const MAX_BLOCKS: usize = 64;
/// Memory slots `S` the DP's budget is cut into.
const SLOTS: usize = 400;
/// DP budgets tried, each lowered by the previous replay's excess over the budget.
const ATTEMPTS: usize = 12;

impl Solver for BlockRotor {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "block-rotor",
            description: "Rotor's persistent checkpointing DP over the blocks between the forward \
                          pass's articulation points (Rockmate's rk-Rotor: per block, keep only its \
                          output or one of several tapes, with each option's transient peak), \
                          replayed and fitted to the budget by the simulator.",
            scope: Scope::Heuristic,
            accepts: "graphs with forward/backward kinds and at least two articulation points",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        // Its DP has at most MAX_BLOCKS blocks and SLOTS slots; the schedule recomputes
        // about each block's forward once.
        Footprint::recomputing_once(instance.graph)
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        let stop = Stop::start(options);
        let chain = match cut(instance.graph, &stop) {
            ControlFlow::Continue(chain) => chain,
            ControlFlow::Break(answer) => return answer,
        };
        let mut fit = Fit {
            lowest_peak: u64::MAX,
            best: None,
        };
        for model in [Model::Transient, Model::Rotor] {
            if let ControlFlow::Break(answer) = fit.search(instance, &chain, model, &stop) {
                return answer;
            }
        }
        fit.answer(instance, chain.len())
    }
}

/// What [`BlockRotor`] answers: an outcome, or the error of a cancelled or broken solve.
type Answer = Result<Outcome, SolveError>;

/// The graph cut into its chain of blocks, or the answer where it cannot be: out of scope
/// (no kinds or cuts, a backward op crossing blocks: [`SolveError::Unsupported`]), or
/// stopped.
fn cut(graph: &Graph, stop: &Stop) -> ControlFlow<Answer, Vec<Block>> {
    let declined = |reason: String| {
        ControlFlow::Break(Err(SolveError::Unsupported {
            solver: "block-rotor",
            reason,
        }))
    };
    let during = "while cutting the graph into blocks";
    let chain = match blocks(graph, MAX_BLOCKS, &|| stop.poll()) {
        Ok(chain) => chain,
        Err(NotBlocks::Stopped(stopped)) => {
            return ControlFlow::Break(stopped.outcome("block-rotor", during))
        }
        Err(NotBlocks::NoCut) => {
            return declined(
                "the graph has no forward/backward kinds or fewer than two articulation \
                 points in its forward pass"
                    .to_string(),
            );
        }
        Err(NotBlocks::Crossing { node }) => {
            return declined(format!(
                "backward op `{}` reads the backward pass of a later block than its own",
                graph.id(node)
            ));
        }
    };
    match stop.poll() {
        Ok(()) => ControlFlow::Continue(chain),
        Err(stopped) => ControlFlow::Break(stopped.outcome("block-rotor", during)),
    }
}

/// The search for the DP budget whose plan replays within the instance's budget: the
/// lowest peak replayed, and the cheapest schedule within the budget with how many blocks of
/// its plan run a nested option.
struct Fit {
    lowest_peak: u64,
    best: Option<(f64, Schedule, usize)>,
}

impl Fit {
    /// Up to [`ATTEMPTS`] DP budgets under `model`, from the instance's less `K`, each plan
    /// replayed: over the budget, the next DP budget is lowered by the excess; under it,
    /// raised by half the slack. `Break` holds the answer when the solve stops before any
    /// schedule, or a replay fails.
    fn search(
        &mut self,
        instance: &Instance,
        chain: &[Block],
        model: Model,
        stop: &Stop,
    ) -> ControlFlow<Answer> {
        let graph = instance.graph;
        let stopped = |s: Stopped| {
            ControlFlow::Break(s.outcome("block-rotor", "while fitting the DP's budget"))
        };
        let mut dp_budget = instance.budget.saturating_sub(graph.fixed_memory());
        let mut tried = Vec::with_capacity(ATTEMPTS);
        for _ in 0..ATTEMPTS {
            if let Err(s) = stop.poll() {
                return if self.best.is_some() {
                    ControlFlow::Continue(())
                } else {
                    stopped(s)
                };
            }
            if tried.contains(&dp_budget) {
                break;
            }
            tried.push(dp_budget);
            let Some(plan) = Table::fill(chain, dp_budget, model).sequence(chain) else {
                break;
            };
            let schedule = from_computes(graph, &plan.computes);
            let stats = match simulate_polled(graph, &schedule, || stop.poll()) {
                Ok(Ok(stats)) => stats,
                Ok(Err(e)) => return ControlFlow::Break(Err(internal("block-rotor", e))),
                Err(_) if self.best.is_some() => break,
                Err(s) => return stopped(s),
            };
            self.lowest_peak = self.lowest_peak.min(stats.peak_memory);
            if stats.peak_memory <= instance.budget {
                if self
                    .best
                    .as_ref()
                    .is_none_or(|(c, ..)| stats.total_cost < *c)
                {
                    self.best = Some((stats.total_cost, schedule, plan.nested));
                }
                dp_budget = dp_budget.saturating_add((instance.budget - stats.peak_memory) / 2);
            } else {
                dp_budget = dp_budget.saturating_sub(stats.peak_memory - instance.budget);
            }
        }
        ControlFlow::Continue(())
    }

    /// The best schedule (replayed within the budget by [`Fit::search`]), else why none.
    fn answer(self, instance: &Instance, blocks: usize) -> Answer {
        if let Some((_, schedule, nested)) = self.best {
            let mut outcome = replayed_within_budget("block-rotor", schedule, None);
            if let Outcome::Plan(plan) = &mut outcome {
                plan.message = (nested > 0).then(|| {
                    format!(
                        "{nested} of {blocks} blocks run their backward rematerialized under a cap"
                    )
                });
            }
            return Ok(outcome);
        }
        let lowest = if self.lowest_peak == u64::MAX {
            "none: the DP found no plan".to_string()
        } else {
            format!("{} bytes", self.lowest_peak)
        };
        Ok(Outcome::Infeasible {
            solver: "block-rotor",
            proven: None,
            reason: format!(
                "no DP budget gave a schedule within {} bytes ({blocks} blocks; the lowest peak replayed is {lowest})",
                instance.budget,
            ),
        })
    }
}

/// A plan of the DP: its compute sequence and how many of its blocks' backwards run a
/// nested option (each block's backward runs once in the plan).
#[derive(Default)]
struct ChainPlan {
    computes: Vec<usize>,
    nested: usize,
}

/// The block model the DP fills its table with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Model {
    /// Each option's transient peaks bound where it runs (Rockmate's).
    Transient,
    /// Sizes only, as rotor's chain (`p_f = p_b = 0`): looser, so its plans overshoot the
    /// budget more, and the fitting lowers its budget instead.
    Rotor,
}

/// What the DP chose for `C(s, t, m)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// No plan within `m`.
    None,
    /// `F_s` keeping the tape of option `k`, then the rest, then `B_s` as that option runs it.
    Tape(u8),
    /// Run `F_s … F_{s'−1}`, keep `x_{s'−1}`.
    Keep(u32),
}

/// `C(s, t, m)` and its choices for `1 ≤ s ≤ t ≤ L`, `0 ≤ m ≤ S`, with the block sizes
/// in slots.
struct Table {
    l: usize,
    /// The budget in slots: `⌊budget / q⌋ ≤ S`.
    cap: usize,
    cost: Vec<f64>,
    step: Vec<Step>,
    /// `ω_x(j)` for `j = 0..=L` (`ω_x(0) = 0`: the inputs are fixed memory).
    out: Vec<usize>,
    /// The size of the gradient `δ_j` held outside the slots: `ω_x(j)`, but none at the
    /// loss (`δ_L = 0`: the last block's backward starts the gradient, and its transient
    /// peak counts what it holds).
    grad: Vec<usize>,
    /// `ω_x̄(j, k)` for `j = 1..=L` (index 0 unused) and option `k`.
    tape: Vec<Vec<usize>>,
    /// The cost option `k` adds to `B_j`.
    extra: Vec<Vec<f64>>,
    /// The transient peaks of `F_j` keeping option `k`'s tape, and of `B_j` from it.
    forward_peak: Vec<Vec<usize>>,
    backward_peak: Vec<Vec<usize>>,
    /// The transient peak of `F_j` keeping only `x_j` (index 0 unused).
    bare: Vec<usize>,
}

impl Table {
    fn at(&self, s: usize, t: usize, m: usize) -> usize {
        ((s - 1) * self.l + (t - 1)) * (SLOTS + 1) + m
    }

    fn fill(chain: &[Block], budget: u64, model: Model) -> Table {
        let l = chain.len();
        let q = budget.div_ceil(SLOTS as u64).max(1);
        let slots = |bytes: u64| bytes.div_ceil(q).min(SLOTS as u64 + 1) as usize;
        let mut out = vec![0];
        out.extend(chain.iter().map(|b| slots(b.output)));
        let mut grad = out.clone();
        grad[l] = 0;
        let mut tape = vec![Vec::new()];
        tape.extend(
            chain
                .iter()
                .map(|b| b.options.iter().map(|o| slots(o.tape)).collect()),
        );
        let mut extra = vec![Vec::new()];
        extra.extend(
            chain
                .iter()
                .map(|b| b.options.iter().map(|o| o.extra).collect()),
        );
        let per_option = |peak: &dyn Fn(&TapeOption) -> u64| {
            let mut all = vec![Vec::new()];
            all.extend(
                chain
                    .iter()
                    .map(|b| b.options.iter().map(|o| slots(peak(o))).collect()),
            );
            all
        };
        let transient = model == Model::Transient;
        let forward_peak = per_option(&|o| if transient { o.forward_peak } else { 0 });
        let backward_peak = per_option(&|o| if transient { o.backward_peak } else { 0 });
        let mut bare = vec![0];
        bare.extend(
            chain
                .iter()
                .map(|b| if transient { slots(b.forward_peak) } else { 0 }),
        );
        let size = l * l * (SLOTS + 1);
        let cap = (budget / q).min(SLOTS as u64) as usize;
        let mut table = Table {
            l,
            cap,
            cost: vec![f64::INFINITY; size],
            step: vec![Step::None; size],
            out,
            grad,
            tape,
            extra,
            forward_peak,
            backward_peak,
            bare,
        };
        let (fw, bw): (Vec<f64>, Vec<f64>) = std::iter::once((0.0, 0.0))
            .chain(chain.iter().map(|b| (b.forward_cost, b.backward_cost)))
            .unzip();
        for len in 0..l {
            for s in 1..=l - len {
                let t = s + len;
                for m in 0..=cap {
                    let best = table.best(s, t, m, &fw, &bw);
                    let i = table.at(s, t, m);
                    (table.cost[i], table.step[i]) = best;
                }
            }
        }
        table
    }

    /// The recurrence for `C(s, t, m)`, the shorter spans already filled.
    fn best(&self, s: usize, t: usize, m: usize, fw: &[f64], bw: &[f64]) -> (f64, Step) {
        let c = |s: usize, t: usize, m: usize| self.cost[self.at(s, t, m)];
        let mut best = (f64::INFINITY, Step::None);
        for (k, (&tape, &extra)) in self.tape[s].iter().zip(&self.extra[s]).enumerate() {
            // F_s runs beside x_{s−1} with m slots; B_s beside δ_s, which took δ_t's place.
            let backward_room = if s == t {
                Some(m)
            } else {
                (m + self.grad[t]).checked_sub(self.grad[s])
            };
            if self.forward_peak[s][k] > m
                || backward_room.is_none_or(|room| self.backward_peak[s][k] > room)
            {
                continue;
            }
            let rest = if s == t {
                (tape + self.out[s - 1] <= m).then_some(0.0)
            } else {
                m.checked_sub(tape).map(|left| c(s + 1, t, left))
            };
            if let Some(rest) = rest {
                let total = fw[s] + rest + bw[s] + extra;
                if total < best.0 {
                    best = (total, Step::Tape(k as u8));
                }
            }
        }
        if s == t {
            return best;
        }
        let mut forward = 0.0;
        for next in s + 1..=t {
            // F_{next−1} runs keeping only its output, beside x_{next−2} (the DP holds x_{s−1}).
            let beside = if next - 1 > s { self.out[next - 2] } else { 0 };
            if self.bare[next - 1] + beside > m {
                break;
            }
            forward += fw[next - 1];
            let held = self.out[next - 1];
            let Some(rest) = m.checked_sub(held) else {
                continue;
            };
            let Some(after) = (m + self.grad[t]).checked_sub(held) else {
                continue;
            };
            let total = forward + c(next, t, rest) + c(s, next - 1, after.min(self.cap));
            if total < best.0 {
                best = (total, Step::Keep(next as u32));
            }
        }
        best
    }

    /// The plan for the whole chain with every slot, or `None` when the DP has none.
    fn sequence(&self, chain: &[Block]) -> Option<ChainPlan> {
        let m = self.cap.checked_sub(self.grad[self.l])?;
        let mut plan = ChainPlan::default();
        self.emit(chain, 1, self.l, m, &mut plan)?;
        Some(plan)
    }

    /// Appends the plan of `C(s, t, m)`; `None` where the table has no plan.
    fn emit(
        &self,
        chain: &[Block],
        s: usize,
        t: usize,
        m: usize,
        plan: &mut ChainPlan,
    ) -> Option<()> {
        match self.step[self.at(s, t, m)] {
            Step::None => return None,
            Step::Tape(k) => {
                let option = &chain[s - 1].options[k as usize];
                plan.computes.extend_from_slice(&chain[s - 1].forward);
                if s < t {
                    self.emit(
                        chain,
                        s + 1,
                        t,
                        m.checked_sub(self.tape[s][k as usize])?,
                        plan,
                    )?;
                }
                plan.computes.extend_from_slice(&option.backward);
                plan.nested += usize::from(option.nested);
            }
            Step::Keep(next) => {
                let next = next as usize;
                for block in &chain[s - 1..next - 1] {
                    plan.computes.extend_from_slice(&block.forward);
                }
                let held = self.out[next - 1];
                self.emit(chain, next, t, m.checked_sub(held)?, plan)?;
                let after = (m + self.grad[t]).checked_sub(held)?.min(self.cap);
                self.emit(chain, s, next - 1, after, plan)?;
            }
        }
        Some(())
    }
}

#[cfg(test)]
mod tests;
