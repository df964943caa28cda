//! Solvers, their registry, and the driver that makes every answer go through the
//! simulator.
//!
//! * [`core`] is the ground floor: the types every solver reads and writes
//!   ([`Instance`], [`SolveOptions`], [`Stop`], [`Plan`], [`Outcome`], [`Scope`]) and
//!   [`details`] the typed figures solvers report beside a schedule.
//! * [`footprint`] estimates what a solve holds before it allocates it and admits it
//!   against the memory limit.
//! * `driver` names every solver ([`registry`], [`find`]) and runs one
//!   ([`solve`]): it replays every plan in the simulator, checks it against the budget and
//!   builds the [`SolveResult`] from the simulator's numbers (`result`). Where `auto` finds
//!   no schedule and cannot prove that none exists, `least_budget` searches for a budget at
//!   which it does ([`LeastBudget`]).
//! * The solvers, one file or folder per algorithm, grouped by family: `exact` (the
//!   oracle and the Checkmate MILP), `heuristic` (baselines, Chen, DTR), the dynamic
//!   programs, and `auto`, the portfolio that picks among them.
//!
//! This module knows nothing of HTTP or the CLI; HiGHS stays inside the MILP solvers.

mod auto;
pub mod core;
pub mod details;
mod dp;
mod driver;
mod exact;
pub mod footprint;
mod heuristic;
mod least_budget;
mod result;

pub use self::core::{
    Bound, BoundMethod, Claim, Effort, EndedBy, Instance, Outcome, Plan, Progress, ProgressSink,
    Scope, SolveError, SolveOptions, Solver, SolverInfo, Stop, Stopped,
};
pub use details::Details;
pub(crate) use driver::{admitted, fit, internal, replayed_within_budget};
pub use driver::{find, registry, solve, solve_exhaustive_unbounded};
pub use exact::checkmate::{model_size, ModelSize};
pub use footprint::Footprint;
pub use least_budget::LeastBudget;
pub use result::{SolveResult, Status};

// What callers outside the solvers use of the dynamic programs, each by this one path: the
// storage-tier model (`remat inspect`, `remat bench-tiers`), the chain DP and Revolve for
// `examples/dp_bench.rs`, and the structure-based choice of the exact DP.
pub use dp::chain_dp::{solve_chain, ChainAnswer, Policy};
pub use dp::revolve::{revolve_actions, revolve_steps, RevolveAction};
pub use dp::structured::exact_solver_for;
pub use dp::two_level::{assess, figure3, least_budget, simulated_factor, FactorRow};
