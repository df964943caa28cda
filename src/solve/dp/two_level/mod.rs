//! `two-level`: asynchronous multistage checkpointing (Kukreja, Hückelheim, Gorman,
//! "Backpropagation for long sequences: beyond memory constraints with constant
//! overheads", arXiv 2018), on a chain training graph with a slow storage tier.
//!
//! # The scheme
//!
//! In Revolve's view of a chain of `L` stages ([`super::revolve`]), `l = L + 1` steps map
//! `x_{j−1}` to `x_j`, `x_0` is the virtual chain input and step `L + 1` is the loss. With
//! `T_A` the time of one forward step and `T_T` the time to copy one state to the slow
//! tier, the *checkpointing interval* is
//!
//! ```text
//! I = ⌈T_T / T_A⌉
//! ```
//!
//! so that one copy finishes while the next `I` steps run. The steps fall into
//! `q = ⌈l / I⌉` intervals: interval `k` runs steps `kI+1 ..= min((k+1)I, l)` from its base
//! `x_{kI}`. The schedule:
//!
//! 1. **Sweep**: advance `x_0 -> x_{(q−1)I}`, keeping only the working state, and `store`
//!    the base of each interval `k = 1..=q−3` as it passes; a stored base is freed at
//!    once and leaves the fast tier when its copy completes. The bases of the last two
//!    intervals stay resident: `x_{(q−1)I}` is where the backward pass starts, and
//!    `x_{(q−2)I}` takes the place of the prefetch buffer the other intervals need.
//! 2. **Intervals in reverse**, `k = q−1 .. 0`: Revolve on the interval's `l_k` steps with
//!    `s` snapshots, the base included (the graph view of [`super::revolve`]). At the
//!    start of interval `k` the base of interval `k − 1` is `load`ed (prefetched in
//!    reverse order) when it was stored, so it has the whole interval to arrive.
//!
//! "In the case where there are very few layers, there might not be time to save a
//! single checkpoint ... this strategy would fall back to classic Revolve" (the paper):
//! when no base is stored (`q <= 3`) the solver runs plain Revolve. It also does when
//! plain Revolve is faster (see the model below), and says so.
//!
//! # Memory
//!
//! Fast memory holds the `s` snapshots of the current interval (its base included), the
//! working state, the next state or gradient being computed, the incoming gradient, and
//! one prefetch buffer: `K + (s + 4)` states. The sweep needs at most four (working,
//! next, the kept base `x_{(q−2)I}`, and the state being copied, which leaves when its
//! copy is done since `T_T <= I·T_A`). More than `I − 1` snapshots do not shorten an
//! interval (`t(I, s) = I − 1` once `s >= I − 1`). The solver takes the largest
//! `s <= I − 1` whose schedule the simulator finds within the budget (the slot model is
//! exact on uniform chains; sizes that differ are measured, not assumed).
//!
//! # Time
//!
//! The paper's recompute factor, with `t(l, s)` Revolve's extra forward steps
//! ([`super::revolve::revolve_steps`]) and 1 meaning no recomputation:
//!
//! ```text
//! R(l, s) = (t(l, s) + 1) / l
//! T_revolve = n·R(n, s)·T_A + n·T_B
//! T_async   = n·R(I, s)·T_A + n·T_B
//! ```
//!
//! `T_async` counts, for each interval, the Revolve that re-runs its forward steps from the
//! restored base, but not the sweep that produced the bases: the paper clears all forward
//! activations after the sweep (L60), so that sweep is run too. Counting every compute of
//! the schedule above on the graph (forward ops `T_A`, backward ops `T_B`, the loss `T_ℓ`):
//!
//! ```text
//! T_async (graph) = [(q−1)·I + t(l_{q−1}, s) + (q−1)·t(I, s)]·T_A + L·T_B + T_ℓ
//! T_revolve (graph) = t(L+1, s')·T_A + L·T_B + T_ℓ
//! ```
//!
//! (`s'` = the snapshots plain Revolve gets from the same budget). Copies are free in
//! this model; the simulator's timed replay ([`crate::schedule::timeline`]) reproduces
//! `T_async (graph)` exactly on a uniform chain when no load arrives late, which holds
//! when a load takes at most the time of one interval's reversal,
//! `t(I, s)·T_A + I·T_B`; otherwise each of the stored bases' loads stalls the backward
//! pass by `T_R − (t(I, s)·T_A + I·T_B)` (`T_R` the read time; the paper's choice of `I`
//! ignores this side), which [`Assessment::predicted_stall`](crate::solve::details::Assessment::predicted_stall) adds up and
//! the simulator reports stall by stall. Both of the paper's figures are reported next
//! to the simulated makespan. On a chain whose stages differ, `T_A` and `T_B` are the mean
//! stage costs, `T_T` is the time to store the largest state, and the model is an
//! estimate; the simulator's figures are the answer.
//!
//! # Where things are
//!
//! * `model.rs`: the model above: `R(l, s)`, `I`, [`Intervals`](crate::solve::details::Intervals), [`StepTimes`](crate::solve::details::StepTimes), `T_async`,
//!   the slot model of the snapshots, and [`assess`] ([`Assessment`](crate::solve::details::Assessment)).
//! * `schedule.rs`: `two_level_schedule`, the events of the scheme.
//! * `solver.rs`: [`TwoLevel`], which searches the snapshot count in the simulator and
//!   compares with plain Revolve ([`super::revolve::Revolve::fit`]).
//! * `figure3.rs`: the Figure 3 table ([`figure3()`]) and the simulated factor.

mod figure3;
mod model;
mod schedule;
mod solver;
#[cfg(test)]
mod tests;

pub use figure3::{figure3, simulated_factor, FactorRow};
pub use model::{assess, least_budget};
pub use solver::TwoLevel;
