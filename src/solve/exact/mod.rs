//! Exact solvers: answers proven within a stated scope.
//!
//! * [`exhaustive`]: A* over every schedule in any order, the oracle (global optimum, at
//!   most 12 nodes as a solver, 16 for tests).
//! * [`checkmate`]: Checkmate's MILP (Jain et al.) on HiGHS, optimal among
//!   frontier-advancing stage schedules in solver order, with its LP relaxation (a lower
//!   bound) and two-phase LP rounding.

pub mod checkmate;
pub mod exhaustive;
