//! The front door: everything the command line (`crate::cli`) and the HTTP service
//! (`crate::service`) do around `solve::solve`, written once so that the two shells
//! cannot drift apart.
//!
//! - [`options`]: the solver options a caller may set (time limit, MIP gap, seed,
//!   threads), validated into a `SolveOptions` by one function; errors name the option
//!   as each shell spells it (`--mip-gap`, `mip_gap`).
//! - [`mod@simulate`]: reading a schedule in any accepted shape (`{"events": [...]}`, a bare
//!   event list, a solve result) and the report of its replay, which `remat simulate
//!   --json` prints and `POST /v1/simulate` returns.
//! - [`mod@report`]: the graph report of `remat inspect` and `POST /v1/inspect`.
//! - [`clock`]: the time limit counted from the command's start or the request's
//!   admission, shared by reading, solving and answering.
//! - [`memory`]: the memory one solve may use (`--solve-memory`, the container's cgroup
//!   limit), which sets `SolveOptions::memory_limit`.
//! - [`files`]: the graph files named by paths and directories (`remat batch`,
//!   `remat bench`).
//! - [`max_batch`]: the largest batch that fits a memory under an overhead cap
//!   (`remat max-batch`, `POST /v1/max-batch`).
//!
//! Budgets resolve through `crate::budget::Budget::resolve`, and status and scope names
//! through `Status::as_str` / `Scope::as_str`. The front door knows no HTTP and no
//! command-line syntax: it returns typed values and errors, and each shell turns them
//! into its own output.

pub mod clock;
pub mod files;
pub mod max_batch;
pub mod memory;
pub mod options;
pub mod report;
pub mod simulate;

pub use clock::{answer_reserve, timed_peak, Clock};
pub use files::{graph_files, GraphFilesError};
pub use memory::{solve_memory_limit, SolveMemory};
pub use options::{parse_effort, InvalidOption, OptionName, OptionsInput};
pub use report::{report, GraphReport, KindCounts, StorageTier};
pub use simulate::{read_schedule, simulate_report, ScheduleInputError, SimulateReport};

#[cfg(test)]
mod tests {
    use crate::solve::{BoundMethod, Scope, Status};
    use serde::Serialize;
    use std::fmt::Display;

    fn assert_json_names<T: Copy + Serialize + Display>(values: &[T], name: fn(T) -> &'static str) {
        for &v in values {
            assert_eq!(serde_json::to_value(v).unwrap(), name(v));
            assert_eq!(v.to_string(), name(v));
        }
    }

    /// Every status and scope name is the one serde writes into the JSON. The matches
    /// have no wildcard, so a new variant fails to compile here until it is listed.
    #[test]
    fn status_and_scope_names_are_the_json_names() {
        let listed = |s: Status| match s {
            Status::Optimal
            | Status::OptimalInScope
            | Status::Feasible
            | Status::Infeasible
            | Status::NoSolution
            | Status::Error => s,
        };
        let statuses = [
            Status::Optimal,
            Status::OptimalInScope,
            Status::Feasible,
            Status::Infeasible,
            Status::NoSolution,
            Status::Error,
        ];
        assert_json_names(&statuses.map(listed), Status::as_str);
        let listed = |s: Scope| match s {
            Scope::GlobalOptimum
            | Scope::OptimalForOrder
            | Scope::OptimalAmongPersistent
            | Scope::Heuristic
            | Scope::LowerBound => s,
        };
        let scopes = [
            Scope::GlobalOptimum,
            Scope::OptimalForOrder,
            Scope::OptimalAmongPersistent,
            Scope::Heuristic,
            Scope::LowerBound,
        ];
        assert_json_names(&scopes.map(listed), Scope::as_str);
        let listed = |m: BoundMethod| match m {
            BoundMethod::SumOfCosts
            | BoundMethod::Search
            | BoundMethod::LpRelaxation
            | BoundMethod::BranchAndBound
            | BoundMethod::StageCut
            | BoundMethod::SequenceOfCuts => m,
        };
        let methods = [
            BoundMethod::SumOfCosts,
            BoundMethod::Search,
            BoundMethod::LpRelaxation,
            BoundMethod::BranchAndBound,
            BoundMethod::StageCut,
            BoundMethod::SequenceOfCuts,
        ];
        for m in methods.map(listed) {
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
    }
}
