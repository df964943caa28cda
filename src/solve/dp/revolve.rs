//! Revolve: binomial checkpointing of a homogeneous chain (Griewank & Walther, ACM TOMS
//! 26(1) 2000, Algorithm 799).
//!
//! # The Revolve view
//!
//! A chain of `l` steps maps state `x_{i−1}` to `x_i` (`i = 1..l`). The adjoint (reverse)
//! of step `i` needs `x_{i−1}`: it re-runs step `i` *with recording* and reverses it at
//! once (a *turn*). Every forward step costs 1, whether it only advances or records.
//!
//! **Slot convention.** `s` is the number of snapshots, and **the initial state `x_0`
//! occupies one of them** (as in Revolve, pyrevolve and checkpoint_schedules; pyrevolve
//! issue #19). The working state is not a snapshot. Hence `s = 1` means "only `x_0` is
//! stored" (recompute everything from the start: `t(l, 1) = l(l−1)/2`), and `s = 0` is
//! only possible for `l <= 1`, where the single turn runs from the working state.
//!
//! The minimal number of *extra* forward steps, beyond the `l` steps a run without
//! checkpointing makes, is the closed form
//!
//! ```text
//! t(l, s) = r·l − β(s+1, r−1),   β(s, r) = C(s+r, s),   r minimal with β(s, r) >= l,
//! ```
//!
//! which solves the recurrence `t(1, s) = 0`, `t(n, 1) = n(n−1)/2`,
//! `t(n, s) = min_{1<=i<n} [ i + t(i, s) + t(n−i, s−1) ]` (advance `i` steps, store `x_i`,
//! reverse the right part with one snapshot fewer, then the left part with all of them).
//! [`revolve_steps`] evaluates it in `O(r)` arithmetic operations; a schedule makes
//! exactly `l + t(l, s)` forward steps (advances plus the `l` recorded turn steps).
//!
//! **The split.** Let `Δ_s(m) = t(m, s) − t(m−1, s)`; it equals the `r` with
//! `β(s, r−1) < m <= β(s, r)`, so `t(·, s)` is convex and the cost of advancing `i` steps,
//! `f(i) = i + t(i, s) + t(n−i, s−1)`, is convex in `i` with
//! `f(i+1) − f(i) = 1 + Δ_s(i+1) − Δ_{s−1}(n−i)`; the best `i` is the smallest with
//! `f(i+1) >= f(i)`. For a sub-range of `n` steps with `ρ = Δ_s(n)`, let
//! `i_A = n − β(s−1, ρ)` (the right part as long as `s−1` snapshots reverse with `ρ`
//! repetitions). Then `f(i_A) − f(i_A − 1) < 0` because `i_A <= β(s, ρ−1)`, and
//! `f(i_A + 1) >= f(i_A)` exactly when `i_A >= β(s, ρ−2)`; otherwise the slope changes
//! sign in `(i_A, β(s, ρ−2)]`, where the left part has at most `ρ−1` repetitions, at
//! `min(β(s, ρ−2), n − β(s−1, ρ−1))`. So [`revolve_actions`] advances
//! `i = max(i_A, min(β(s, ρ−2), n − β(s−1, ρ−1)))` steps (clamped to `1..n`). The schedule
//! is built
//! recursively from this closed-form split, without an `O(l·s)` table; the tests replay it
//! and check that it attains `t(l, s)` for every `l <= 300`, `s <= 12` (and spot values up
//! to `l = 10^6`), which proves every split it made optimal.
//!
//! # The graph view
//!
//! [`graph_schedule`] turns the actions into compute/free events of a chain training
//! graph (see [`crate::graph::structure::Chain`]): Revolve state `x_j` (`1 <= j <= L`) is
//! the output of forward stage `j`, `x_0` is the (virtual, size 0) chain input, and step
//! `L + 1` is the loss, so `l = L + 1`. The turn of step `j` computes the loss when
//! `j = L + 1`, then every backward op that reads `x_{j−1}` (or reads no forward value and
//! belongs to stage `j − 1`). Because `x_0` takes no memory, a chain with unit sizes,
//! unit costs and `fixed_memory = 0` runs within `M = s + 2` (`M = s + 3` for Butt's
//! chain, whose input `f_0` occupies one unit) and costs
//! `t(L + 1, s) + L + 1`: the `t` advances are forward computations, and the `L + 1`
//! turns are the loss and the `L` backward ops.

use super::chain_of;
use crate::graph::structure::Chain;
use crate::graph::Graph;
use crate::schedule::{simulate, Event, Schedule, SimStats};
use crate::solve::details::{Details, RevolveDetails};
use crate::solve::footprint::Halt;
use crate::solve::Footprint;
use crate::solve::{
    internal, Claim, Instance, Outcome, Plan, Scope, SolveError, SolveOptions, Solver, SolverInfo,
    Stop,
};
use serde::Serialize;

/// `(r, β(s, r))` for the smallest `r` with `β(s, r) >= l`; `s >= 1`, `l >= 1`.
fn repetitions(l: u64, s: u64) -> (u64, u64) {
    if s == 1 {
        // β(1, r) = r + 1.
        return (l - 1, l);
    }
    let (mut r, mut b) = (0u64, 1u128);
    while b < u128::from(l) {
        r += 1;
        b = b * u128::from(s + r) / u128::from(r);
    }
    (r, b.min(u128::from(u64::MAX)) as u64)
}

/// The minimal number of extra forward steps `t(l, s)` to reverse `l` steps with `s`
/// snapshots, the initial state included (see the module docs). `t(0, s) = t(1, s) = 0`
/// for every `s`; `None` when `s = 0` and `l >= 2` (no snapshot can hold `x_0`, so only
/// one turn is possible) or when the count overflows `u64`.
pub fn revolve_steps(l: u64, s: u64) -> Option<u64> {
    if l <= 1 {
        return Some(0);
    }
    if s == 0 {
        return None;
    }
    if s == 1 {
        return (u128::from(l) * u128::from(l - 1) / 2).try_into().ok();
    }
    let (r, b) = repetitions(l, s);
    // β(s+1, r−1) = C(s+r, r−1) = β(s, r)·r/(s+1).
    let below = u128::from(b) * u128::from(r) / u128::from(s + 1);
    (u128::from(r) * u128::from(l) - below).try_into().ok()
}

/// The fewest snapshots whose Revolve schedule for `l` steps fits `options.memory_limit`
/// in `graph` (its `l + t(l, s)` computes, [`Footprint::linear`]), and the footprint of one
/// fewer when that is above 1 (what was ruled out).
fn fewest_snapshots(graph: &Graph, l: usize, options: &SolveOptions) -> (usize, Option<Footprint>) {
    let footprint = |s: usize| {
        let computes =
            (l as u64).saturating_add(revolve_steps(l as u64, s as u64).unwrap_or(u64::MAX));
        Footprint::linear(
            graph,
            computes,
            format!("Revolve's schedule with {s} snapshots, {computes} compute events"),
        )
    };
    let fits = |s: usize| footprint(s).admit("revolve", options).is_ok();
    // t(l, s) falls as s grows: bisect for the first s that fits.
    let (mut lo, mut hi) = (1usize, l.max(1));
    if fits(lo) {
        return (1, None);
    }
    if !fits(hi) {
        return (hi + 1, Some(footprint(hi)));
    }
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    (hi, Some(footprint(hi - 1)))
}

/// One action of a Revolve schedule (Griewank & Walther's vocabulary, with the end of a
/// snapshot's life made explicit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum RevolveAction {
    /// Run steps `from+1..=to` without recording, the working state going from `x_from`
    /// to `x_to`.
    Advance { from: usize, to: usize },
    /// Store the working state `x_state` in a snapshot.
    Takeshot { state: usize },
    /// Make the snapshot of `x_state` the working state (the snapshot stays).
    Restore { state: usize },
    /// The first turn: record step `step` (from the working state `x_{step−1}`) and
    /// reverse it. Always `step = l`.
    Firsturn { step: usize },
    /// A later turn: record step `step` from the working state `x_{step−1}` and reverse it.
    Youturn { step: usize },
    /// The snapshot of `x_state` is no longer needed (Revolve reuses its slot).
    Release { state: usize },
}

/// The Revolve schedule for `l` steps and `s` snapshots (`x_0` included), built by the
/// binomial split without a table. Empty when `l = 0`; `None` when
/// [`revolve_steps`] is `None`.
pub fn revolve_actions(l: usize, s: usize) -> Option<Vec<RevolveAction>> {
    revolve_steps(l as u64, s as u64)?;
    let mut actions = Vec::new();
    match l {
        0 => {}
        1 => actions.push(RevolveAction::Firsturn { step: 1 }),
        _ => {
            actions.push(RevolveAction::Takeshot { state: 0 });
            reverse(&mut actions, 0, l, s, l);
            actions.push(RevolveAction::Release { state: 0 });
        }
    }
    Some(actions)
}

/// Reverses steps `c+1..=c+n` (of `l`) with `s` snapshots, one of which holds `x_c`, the
/// working state on entry; the left parts restore it first. The right parts nest as deep
/// as there are snapshots, so they are frames on an explicit stack, not calls.
fn reverse(actions: &mut Vec<RevolveAction>, c: usize, n: usize, s: usize, l: usize) {
    /// Steps `c+1..=c+n` left to reverse with `s` snapshots; `working`: `x_c` is the
    /// working state (else it is restored from its snapshot first).
    struct Part {
        c: usize,
        n: usize,
        s: usize,
        working: bool,
    }
    let mut stack = vec![Part {
        c,
        n,
        s,
        working: true,
    }];
    while let Some(part) = stack.last_mut() {
        if part.n == 0 {
            // Done: a nested part releases the snapshot of its start.
            let start = part.c;
            stack.pop();
            if !stack.is_empty() {
                actions.push(RevolveAction::Release { state: start });
            }
            continue;
        }
        if !part.working {
            actions.push(RevolveAction::Restore { state: part.c });
        }
        part.working = false;
        if part.n == 1 {
            push_turn(actions, part.c + 1, l);
            part.n = 0;
            continue;
        }
        let (c, n, s) = (part.c, part.n, part.s);
        let i = split(n, s);
        actions.push(RevolveAction::Advance { from: c, to: c + i });
        // The left part, steps c+1..=c+i, comes after the right one.
        part.n = i;
        if n - i == 1 {
            push_turn(actions, c + i + 1, l);
        } else {
            actions.push(RevolveAction::Takeshot { state: c + i });
            stack.push(Part {
                c: c + i,
                n: n - i,
                s: s - 1,
                working: true,
            });
        }
    }
}

/// The optimal number of steps to advance before the next snapshot, for `n >= 2` steps
/// and `s >= 1` snapshots (module docs, "The split").
fn split(n: usize, s: usize) -> usize {
    let (r, b) = repetitions(n as u64, s as u64);
    let s = s as u128;
    // β(s−1, r) = β(s, r)·s/(s+r); β(s−1, r−1) = β(s−1, r)·r/(s−1+r); β(s, r−2) by its product.
    let b_right = u128::from(b) * s / (s + u128::from(r));
    let b_right_less = if r == 0 {
        0
    } else {
        b_right * u128::from(r) / (s - 1 + u128::from(r))
    };
    let b_left_less = if r < 2 {
        0
    } else {
        (1..=u128::from(r) - 2).fold(1u128, |acc, q| acc * (s + q) / q)
    };
    let n128 = n as u128;
    let i_a = n128.saturating_sub(b_right);
    let i = i_a.max(b_left_less.min(n128.saturating_sub(b_right_less)));
    (i as usize).clamp(1, n - 1)
}

/// The first turn is the one of the last step; every other turn is a youturn.
fn push_turn(actions: &mut Vec<RevolveAction>, step: usize, l: usize) {
    actions.push(if step == l {
        RevolveAction::Firsturn { step }
    } else {
        RevolveAction::Youturn { step }
    });
}

/// Why the graph view cannot be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GraphViewError {
    #[error("the backward op of stage {stage} reads both its input and its output; Revolve's turn reads one state")]
    TwoStates { stage: usize },
    #[error("the backward op of stage {stage} reads the next stage's output; Revolve's turn reads one state")]
    NextOutput { stage: usize },
    #[error("no Revolve schedule reverses {steps} steps with {snapshots} snapshots")]
    NoSchedule { steps: usize, snapshots: usize },
}

/// The state (index `j` of `x_j`) the backward op of stage `j` reads in Revolve's view:
/// `x_{j−1}` when it reads its input, else `x_j`.
fn turn_state(chain: &Chain) -> Result<Vec<usize>, GraphViewError> {
    chain
        .stages
        .iter()
        .enumerate()
        .map(|(i, st)| match (st.reads_input, st.reads_output) {
            _ if st.reads_next_output => Err(GraphViewError::NextOutput { stage: i + 1 }),
            (true, true) => Err(GraphViewError::TwoStates { stage: i + 1 }),
            (true, false) => Ok(i),
            _ => Ok(i + 1),
        })
        .collect()
}

/// The graph view of Revolve schedules on a chain (see the module docs for the mapping),
/// for the whole chain ([`graph_schedule`]) or for a range of its steps
/// ([`Self::push_range`], which the two-level scheme runs on each interval).
pub struct ChainView<'a> {
    chain: &'a Chain,
    /// Backward ops (stage indices), by the state they read, in descending stage order.
    by_state: Vec<Vec<usize>>,
}

impl<'a> ChainView<'a> {
    pub fn new(chain: &'a Chain) -> Result<ChainView<'a>, GraphViewError> {
        let mut by_state: Vec<Vec<usize>> = vec![Vec::new(); chain.len() + 1];
        for (i, &j) in turn_state(chain)?.iter().enumerate().rev() {
            by_state[j].push(i);
        }
        Ok(ChainView { chain, by_state })
    }

    /// Node of state `x_j`, `j >= 1` (`x_0` is virtual).
    fn node(&self, j: usize) -> usize {
        self.chain.stages[j - 1].forward
    }

    /// Appends the events of Revolve on steps `base+1 ..= base+l` with `s` snapshots, the
    /// base `x_base` included. On entry `x_base` is resident (or virtual, `base = 0`) and
    /// `grad` is the resident gradient δ (`None` before the loss turn); on exit `x_base`
    /// is freed and `grad` is the gradient the last turn produced.
    pub fn push_range(
        &self,
        base: usize,
        l: usize,
        s: usize,
        grad: &mut Option<usize>,
        events: &mut Vec<Event>,
    ) -> Result<(), GraphViewError> {
        let last_step = self.chain.len() + 1;
        let actions = revolve_actions(l, s).ok_or(GraphViewError::NoSchedule {
            steps: l,
            snapshots: s,
        })?;
        // Local state j is x_{base + j}.
        let mut snapshot = vec![false; l + 1];
        let mut working: Option<usize> = Some(0);
        // Frees x_{base + j} unless it is virtual or a snapshot.
        let drop_state = |events: &mut Vec<Event>, snapshot: &[bool], j: usize| {
            if base + j >= 1 && !snapshot[j] {
                events.push(Event::Free(self.node(base + j)));
            }
        };
        for action in actions {
            match action {
                RevolveAction::Advance { from, to } => {
                    for j in from + 1..=to {
                        events.push(Event::Compute(self.node(base + j)));
                        drop_state(events, &snapshot, j - 1);
                    }
                    working = Some(to);
                }
                RevolveAction::Takeshot { state } => snapshot[state] = true,
                RevolveAction::Restore { state } => working = Some(state),
                RevolveAction::Release { state } => {
                    snapshot[state] = false;
                    if working != Some(state) {
                        drop_state(events, &snapshot, state);
                    }
                }
                RevolveAction::Firsturn { step } | RevolveAction::Youturn { step } => {
                    let j = step - 1;
                    debug_assert_eq!(working, Some(j));
                    if base + step == last_step {
                        events.push(Event::Compute(self.chain.loss));
                        *grad = Some(self.chain.loss);
                    }
                    for &i in &self.by_state[base + j] {
                        let g = self.chain.stages[i].backward;
                        events.push(Event::Compute(g));
                        if let Some(prev) = grad.replace(g) {
                            events.push(Event::Free(prev));
                        }
                    }
                    drop_state(events, &snapshot, j);
                    working = None;
                }
            }
        }
        Ok(())
    }
}

/// The graph view of the Revolve schedule for `chain` with `s` snapshots (`x_0` included):
/// compute/free events for the chain's nodes (see the module docs for the mapping).
pub fn graph_schedule(chain: &Chain, s: usize) -> Result<Schedule, GraphViewError> {
    let l = chain.len() + 1;
    let mut events = Vec::with_capacity(
        2 * (l + revolve_steps(l as u64, s as u64).unwrap_or(0) as usize) + 4 * l,
    );
    ChainView::new(chain)?.push_range(0, l, s, &mut None, &mut events)?;
    Ok(Schedule::new(events))
}

/// The `revolve` solver: the Revolve schedule (graph view) with the most snapshots that
/// fits the budget. Optimal (verified against the exhaustive oracle) on homogeneous chains:
/// equal forward costs, equal backward costs, every output of one size, every backward op
/// reading one state; elsewhere a heuristic.
pub struct Revolve;

/// Whether Revolve's optimality applies to `chain`.
pub(crate) fn homogeneous(chain: &Chain) -> bool {
    let first = &chain.stages[0];
    let w = first.x;
    chain
        .stages
        .iter()
        .all(|st| st.fw == first.fw && st.bw == first.bw && st.x == w && st.delta == w)
        && chain.loss_size == w
        && chain
            .stages
            .iter()
            .all(|st| !(st.reads_next_output || st.reads_input && st.reads_output))
}

impl Solver for Revolve {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "revolve",
            description:
                "Griewank & Walther's binomial checkpointing (Revolve) with the most snapshots \
                          that fit; optimal on homogeneous chains.",
            scope: Scope::GlobalOptimum,
            accepts: "chain graphs whose backward ops each read one forward value",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        // The fit skips snapshot counts whose schedules would outgrow the memory limit.
        Footprint::recomputing_once(instance.graph)
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        Revolve::on_chain(&chain_of("revolve", instance.graph)?, instance, options)
    }
}

/// The Revolve schedule with the most snapshots that fits a budget ([`Revolve::fit`]).
pub struct Fitted {
    /// Snapshots `s`, the initial state `x_0` included.
    pub snapshots: usize,
    pub schedule: Schedule,
    /// The simulator's figures for the schedule.
    pub stats: SimStats,
    /// Whether the bisection ended (else the stop cut it short: more snapshots may fit).
    pub complete: bool,
}

impl Revolve {
    /// The graph view of Revolve on `chain` (detected in `instance.graph`) with the most
    /// snapshots whose simulated peak fits the budget, `None` when even one snapshot does
    /// not fit. Peaks grow with `s`: a bisection over `1..=l`, from the fewest snapshots
    /// whose schedule (`l + t(l, s)` computes) fits the memory limit; when the stop comes
    /// first, the most snapshots found to fit so far. A halt when the stop comes before
    /// any fits, or when only schedules over the memory limit could.
    pub fn fit(
        chain: &Chain,
        instance: &Instance,
        options: &SolveOptions,
    ) -> Result<Option<Fitted>, Halt> {
        let stop = Stop::start(options);
        let l = chain.len() + 1;
        let run = |s: usize| -> Result<(Schedule, SimStats), SolveError> {
            let schedule = graph_schedule(chain, s).map_err(|e| SolveError::Unsupported {
                solver: "revolve",
                reason: e.to_string(),
            })?;
            let stats = simulate(instance.graph, &schedule).map_err(|e| internal("revolve", e))?;
            Ok((schedule, stats))
        };
        let (fewest, footprint) = fewest_snapshots(instance.graph, l, options);
        let (mut lo, mut hi) = (fewest - 1, l);
        let mut best = None;
        while lo < hi {
            if let Err(stopped) = stop.poll() {
                return match best {
                    Some(fitted) => Ok(Some(Fitted {
                        complete: false,
                        ..fitted
                    })),
                    None => Err(stopped.into()),
                };
            }
            let mid = (lo + hi).div_ceil(2);
            let (schedule, stats) = run(mid).map_err(Halt::Refused)?;
            if stats.peak_memory <= instance.budget {
                best = Some(Fitted {
                    snapshots: mid,
                    schedule,
                    stats,
                    complete: true,
                });
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        match (best, footprint) {
            (None, Some(footprint)) if fewest > 1 => Err(Halt::Refused(SolveError::TooLarge {
                solver: "revolve",
                what: footprint.what,
                needed: footprint.bytes,
                limit: options.memory_limit.unwrap_or(0),
            })),
            (best, _) => Ok(best),
        }
    }

    /// The `revolve` solver on `chain`, already detected in `instance.graph`
    /// (`structured::exact_solver_for` hands it over).
    pub fn on_chain(
        chain: &Chain,
        instance: &Instance,
        options: &SolveOptions,
    ) -> Result<Outcome, SolveError> {
        let l = chain.len() + 1;
        let fitted = match Revolve::fit(chain, instance, options) {
            Ok(fitted) => fitted,
            Err(halt) => return halt.outcome("revolve", "before any snapshot count was tried"),
        };
        let Some(Fitted {
            snapshots: s,
            schedule,
            complete,
            ..
        }) = fitted
        else {
            return Ok(Outcome::Infeasible {
                solver: "revolve",
                proven: None,
                reason: format!(
                    "even Revolve's schedule with one snapshot peaks above the budget of {} bytes",
                    instance.budget
                ),
            });
        };
        let exact = homogeneous(chain) && complete;
        Ok(Outcome::Plan(Plan {
            schedule,
            claim: if exact {
                Claim::Optimal
            } else {
                Claim::Feasible
            },
            solver: "revolve",
            scope: if exact {
                Scope::GlobalOptimum
            } else {
                Scope::Heuristic
            },
            lower_bound: None,
            message: None,
            details: Some(Details::Revolve(RevolveDetails {
                extra_forward_steps: revolve_steps(l as u64, s as u64),
                slot_convention:
                    "snapshots include the initial state x_0 (virtual, size 0 in the graph view)",
                snapshots: s,
                steps: l,
            })),
        }))
    }
}

#[cfg(test)]
mod tests;
