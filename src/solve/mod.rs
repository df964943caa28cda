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
//!   builds the [`SolveResult`] from the simulator's numbers (`result`).
//! * The solvers, one file or folder per algorithm, grouped by family: `exact` (the
//!   oracle and the Checkmate MILP), `heuristic` (baselines, Chen, DTR), the dynamic
//!   programs, and `auto`, the portfolio that picks among them.
//!
//! This module knows nothing of HTTP or the CLI; HiGHS stays inside the MILP solvers.

mod auto;
pub mod core;
pub mod details;
pub mod dp;
mod driver;
mod exact;
pub mod footprint;
mod heuristic;
mod result;

use dp::{block_rotor, bptt, join_dp};
use exact::{checkmate, exhaustive};
use heuristic::{baseline, chen, dtr, dtr_ahead, fastsa, knapsack, sethi_ullman};

pub use self::core::{
    Bound, BoundMethod, Claim, Effort, EndedBy, Instance, Outcome, Plan, Progress, ProgressSink,
    Scope, SolveError, SolveOptions, Solver, SolverInfo, Stop, Stopped,
};
pub use details::Details;
use dp::{chain_dp, revolve, two_level};
pub(crate) use driver::{admitted, fit, internal};
pub use driver::{find, registry, solve, solve_exhaustive_unbounded};
pub use exact::checkmate::{model_size, ModelSize};
pub use footprint::Footprint;
pub use result::{SolveResult, Status};
