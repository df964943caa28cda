//! The dynamic-programming family: exact or structured schedules for graphs whose shape
//! a recurrence can exploit (chains, and joins of chains meeting at the loss).
//!
//! Every member works on a structure detected by [`crate::graph::structure`] (a
//! [`Chain`] or a [`Join`])
//! rather than on the raw graph, turns its recurrence's plan into compute/free events, and
//! leaves the figures to the driver's simulator like every other solver.
//!
//! * [`revolve`]: Griewank & Walther's binomial checkpointing (Revolve) on a homogeneous
//!   chain: the closed form `t(l, s)`, a table-free recursive schedule, and its graph view.
//!   The global optimum on homogeneous chains.
//! * [`chain_dp`]: the persistent chain DP (Butt's precise-cost DP, rotor's recurrence
//!   `C(a, b, m)`) on heterogeneous chains, in memory slots, with its [`chain_dp::Policy`]
//!   restrictions; also Equiv-Chain (a join solved as one chain of levels).
//! * [`bptt`]: Gruslys et al.'s BPTT-HSM / ISM / MSM recurrences, and their graph solvers,
//!   which are the chain DP restricted to each policy.
//! * [`join_dp`]: joins, by the chain DP nested branch by branch (forward phase, turn,
//!   backward phase), with the second turn, over the nesting orders.
//! * [`two_level`]: Kukreja et al.'s asynchronous two-level scheme on a chain with a slow
//!   storage tier: Revolve inside intervals whose bases are copied out and prefetched.
//! * [`block_rotor`]: rotor's recurrence over the blocks between the forward pass's
//!   articulation points (Rockmate's rk-Rotor, one option per block) on general graphs,
//!   fitted to the budget by the simulator.
//! * [`structured`]: which exact DP a graph's structure allows (`auto` asks it), with the
//!   detected chain handed to that DP so that it is not detected again.

pub mod block_rotor;
pub mod bptt;
pub mod chain_dp;
pub mod join_dp;
pub mod revolve;
pub mod structured;
pub mod two_level;

use crate::graph::structure::{self, Chain, Join};
use crate::graph::Graph;
use crate::solve::SolveError;

/// The chain of `graph`, or why `solver`, which needs one, cannot solve it.
pub(crate) fn chain_of(solver: &'static str, graph: &Graph) -> Result<Chain, SolveError> {
    structure::chain(graph).map_err(|e| SolveError::Unsupported {
        solver,
        reason: format!("the graph is not a chain: {e}"),
    })
}

/// The join of `graph`, or why `solver`, which needs one, cannot solve it.
pub(crate) fn join_of(solver: &'static str, graph: &Graph) -> Result<Join, SolveError> {
    structure::join(graph).map_err(|e| SolveError::Unsupported {
        solver,
        reason: format!("the graph is not a join graph: {e}"),
    })
}
