//! The heterogeneous chain DP: optimal persistent checkpointing of a chain with per-stage
//! costs and sizes (Butt's precise-cost generalisation of Gruslys' DP: S. Butt, "Precise
//! Optimal Checkpointing for Memory-Efficient Deep Learning", MEng thesis, Imperial
//! College London, 2019, §3.1; rotor's persistent DP with its forward kinds F∅ / F_ck /
//! F_all: Beaumont, Eyraud-Dubois, Herrmann, Joly, Shilova, "Optimal checkpointing for
//! heterogeneous chains: how to train deep architectures with limited memory", ACM TOMS
//! 2024), stated directly in the one memory model of the simulator
//! ([`crate::schedule::simulate()`]) so that its predicted cost and peak are the
//! simulator's.
//!
//! # Model
//!
//! A chain ([`crate::graph::structure::Chain`]) has stages `j = 1..L`: `F_j` computes
//! `x_j` from `x_{j−1}` (`x_0` is nothing), `G_j` computes `δ_j` from `δ_{j+1}` and reads
//! `x_{j−1}` and/or `x_j`. The loss is stage `L + 1`: `F_{L+1}` computes it from `x_L`, and
//! its output is `δ_{L+1}`; `δ_{L+2}` is nothing. Sizes are in *slots* of `q` bytes:
//! `X_j = ⌈|x_j|/q⌉`, `D_j = ⌈|δ_j|/q⌉` (rounded up) and the budget `m = ⌊(M − K)/q⌋`
//! (rounded down), so a schedule within `m` slots is within the true budget `M`. `q` is
//! `⌈(M − K)/500⌉` (larger for long chains, whose table is capped), or the sizes' gcd `g`
//! when `g ≥ q`: then nothing is rounded and the table's optimum is the policy's. Where
//! `q` does not divide every size, the optimum is the policy's for the rounded sizes
//! only: the plan is claimed feasible, not optimal, and says so. Whenever the
//! checkpoint-all schedule fits `M` it is the answer (`Σ c`, a global optimum, and a
//! persistent schedule): rounded up, its sizes can overflow `m` (at `M` = its peak, always).
//!
//! # Next-output reads (Checkmate's Keras rule)
//!
//! Chains extracted by Checkmate's Keras rule (Jain et al., MLSys 2020) have `G_j` also read
//! `x_{j+1}` ([`crate::graph::structure::Stage::reads_next_output`]), which `G_{j+1}` reads
//! too, so `G_j` needs `δ_{j+1}`, `x_{j+1}` and `x_j` together. The DP keeps `x_{j+1}`
//! resident from `G_{j+1}` to `G_j`: the gradient passed from `G_{j+1}` to the rest is the
//! *held gradient* `δ'_{j+1} = (δ_{j+1}, x_{j+1})` of `D'_{j+1} = D_{j+1} + X_{j+1}` slots
//! (`D'_j = D_j` for a stage whose `x_j` is not kept), freed together after `G_j`; `G_{j+1}`
//! is treated as reading `x_{j+1}` so that it is resident there. Every formula below reads
//! `D'` for a gradient that is held (`δ_{b+1}`, `δ_{a+2}`, `δ_{k+1}`) and `D` for the output
//! `G_j` writes. This is exact in the simulator's model; the restriction (never freeing
//! `x_{j+1}` after `G_{j+1}` to recompute it from `x_j` before `G_j`) is one more way the DP's
//! optimum can lie above the global one, listed with the rest in
//! `tests/fixtures/chain_dp_next_output_above_exhaustive.json`.
//!
//! # Sub-problems
//!
//! `C(a, b, m)`, `0 <= a < b <= L+1`: the cheapest way to compute `δ_{a+1}`, given that
//! `x_a` is resident and owned by the caller (outside `m`), and that `δ_{b+1}` is resident
//! (held, `δ'_{b+1}`) inside `m` and owned by us (Butt's ownership fix), never using
//! more than `m` slots, and leaving only `δ'_{a+1}` behind. `C(a, a, m) = 0`. Options:
//!
//! * **Base**, `b = a + 1 = j`: `F_j` (only when `G_j` reads `x_j`) then `G_j`, then free
//!   `x_j` (unless kept) and `δ'_{j+1}`. Needs `D'_{j+1} + X_j + D_j` (or `D'_{j+1} + D_j`)
//!   slots; for the loss stage, `X_{L+1}`. Cost `fw_j + bw_j` (or `bw_j`).
//! * **F_all at `a + 1`** (rotor's `F_all`, Gruslys' internal-state memorisation):
//!   compute `x_{a+1}`, keep it for its own backward, solve `C(a+1, b, m − X_{a+1})`, then
//!   run `G_{a+1}`. Needs `D'_{b+1} + X_{a+1} <= m` and `X_{a+1} + D'_{a+2} + D_{a+1} <= m`.
//! * **F_ck at `k`**, `a < k < b` (rotor's leaf checkpoint; Butt's eq. 3.1 and 3.3): run
//!   `F_{a+1}, …, F_k` as F∅ (each `x_{l−1}` freed once `x_l` exists, except `x_a`), keep
//!   `x_k`, solve `C(k, b, m − X_k)`, free `x_k`, solve `C(a, k, m)`. The sweep needs
//!   `D'_{b+1} + max_l ([l−1 > a]·X_{l−1} + X_l) <= m`. Cost
//!   `Σ_{l=a+1..k} fw_l + C(k, b, m − X_k) + C(a, k, m)`.
//! * **F_ck at `k` kept for `G_k`**, `a + 1 < k <= min(b, L)`, when `G_k` does not read
//!   `x_{k−1}` (Revolve's turn, which reverses a step from the state it reached): as
//!   F_ck, but after the right part (none when `k = b`) run `G_k` from the kept `x_k`
//!   (`X_k + D'_{k+1} + D_k <= m`) and solve `C(a, k−1, m)`. With `k = b` this is the
//!   sweep that recomputes `x_b` from `x_a` without holding `x_{b−1}`, which the base case
//!   (holding `x_{b−1}` as its caller's checkpoint) cannot do.
//!
//! `C(a, b, ·)` is non-increasing in `m`. The answer is `C(0, L+1, m)`; its peak is
//! `K + P(0, L+1)`, with `P` the maximum of the terms above along the chosen plan.
//!
//! Optimal **among persistent schedules** (a checkpoint lives until its left part is
//! done): for heterogeneous sizes a non-persistent schedule can be cheaper (a three-stage
//! chain at budget 10 costs 28 here, 25 at the exhaustive optimum), and the tests list
//! every such case found (`tests/fixtures/chain_dp_above_exhaustive.json`). Besides recomputing a tensor early
//! and dropping its checkpoint, the cases there show a second source: a
//! sub-problem holds its input checkpoint `x_a` until it returns, even when, as when
//! `G_{a+1}` does not read `x_a`, nothing after `F_{a+1}` needs it; a schedule that frees
//! it at once can fit a budget the DP declares infeasible.
//!
//! # Complexity
//!
//! `O(L³·m)` time. Each row `C(a, b, ·)` is stored only between its first feasible `m`
//! and the `m` from which it is constant, and the inner loop over `m` is a shifted
//! element-wise minimum the compiler vectorises. Every row, every option's value and the
//! running minimum are non-increasing in `m`, so an option goes by chunks of 32 budgets
//! and stops at the first chunk where the running minimum is not above the option's least
//! value (its `floor`, read from the rows' headers); a chunk where the option's value at
//! its end is not below the running minimum at its start is skipped; where both rows are
//! constant the sum is written over the prefix it lowers. Budgets at which a row already
//! equals its no-recomputation cost (a lower bound) are skipped. The table is filled by
//! end `b` and, for each, by start `a` descending: the options of `(a, b)` read
//! `C(k, b, ·)`, `k > a`, just filled and still in the caches, and `C(a, k, ·)`, `k < b`.
//! Two threads fill consecutive ends, the second a step behind the first (it waits only
//! for `C(a, b, ·)` of the same `a`).
//! No choice table is kept: the plan is rebuilt by re-evaluating the options of the
//! `O(L)` sub-problems it visits. A row whose values are all exactly single-precision numbers
//! (integer costs below 2^24) is stored as such, half the bytes; the slot cap counts 4
//! bytes a value when the chain's costs prove that of every row ([`DpChain`]'s
//! `entry_bytes`), else 8, and then the fill also sums and keeps its running minimum in
//! single precision, twice the budgets a vector instruction handles.
//!
//! The fill waits on memory more than it computes: each option reads two rows that lie
//! far apart, and most of what it reads it only compares. The options loop asks the CPU
//! for the rows of the option a few `k` ahead (a prefetch). The fill order and the
//! prefetch were measured against the alternatives: `docs/performance.md`.
//!
//! # Where things are
//!
//! * `model.rs`: [`DpChain`] (the stages with `fw_j`, `bw_j`, `X_j`, `D_j`, the reads and
//!   the nodes), [`Mem`] (an amount in slots and bytes), [`Policy`], the slot arithmetic.
//! * `recurrence.rs`: the options above, each defined once (when it applies, its need,
//!   its cost, its sub-problems and its events); the fill, the choice and the emitter
//!   all iterate that one list.
//! * `row.rs`: the slot kernel (compressed rows, the shifted element-wise minimum).
//! * `table.rs`: [`Table`]: the fill, the answer, the plan and its events.
//! * `nest.rs`: [`Nest`], [`SecondTurn`], [`Resweep`]: the places the join DP
//!   ([`crate::solve::dp::join_dp`]) gives a branch's table.
//! * `solvers.rs`: `chain-dp`, `equiv-chain`, and [`solve_chain`] / `solve_graph`.

mod model;
mod nest;
mod recurrence;
mod row;
mod solvers;
mod table;

pub use model::{slot_size, DpChain, Mem, Policy, DEFAULT_SLOTS};
pub use nest::{Nest, Resweep, SecondTurn};
pub(crate) use solvers::solve_graph;
pub use solvers::{
    outlasts, solve_chain, stages_footprint, table_footprint, ChainAnswer, ChainDp, EquivChain,
};
pub use table::Table;

#[cfg(test)]
mod tests;
