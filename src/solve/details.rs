//! What each solver reports beside its schedule: model sizes, thresholds, slot sizes,
//! predicted figures. Typed here; JSON only when a result is printed or sent.
//!
//! [`Details`] serialises untagged, as the bare object of its variant. Every struct
//! declares its fields in alphabetical order, the order in which results have always
//! printed them. A field that is not always known is skipped when absent; a field that is
//! always reported but may be unknown is printed as `null` (`Option<Option<_>>` where a
//! field is both).

use super::two_level::Assessment;
use serde::Serialize;

/// A solver's figures, by the family of solvers that reports them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Details {
    Exhaustive(ExhaustiveDetails),
    Chen(ChenDetails),
    Dtr(DtrDetails),
    Checkmate(Box<CheckmateDetails>),
    Revolve(RevolveDetails),
    Slots(SlotDetails),
    JoinDp(JoinDpDetails),
    TwoLevel(Box<TwoLevelDetails>),
}

/// The exhaustive oracle (A*).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExhaustiveDetails {
    /// States taken off the open list.
    pub states_expanded: u64,
}

/// Chen et al.'s segment schedules.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChenDetails {
    /// Which nodes could be checkpoints (articulation points, or every node).
    pub candidates: &'static str,
    /// The checkpoints chosen, by node id.
    pub checkpoints: Vec<String>,
    /// The segment budget of the greedy variant's sweep that was returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment_budget: Option<f64>,
}

/// DTR run ahead of time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DtrDetails {
    pub evictions: usize,
}

/// The Checkmate MILP, its LP relaxation and the LP rounding. The model's figures are
/// those of the model at the full budget, absent when it was not built.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CheckmateDetails {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binaries: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_time_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraints: Option<usize>,
    /// The MILP's LP bound (`null` when the relaxation gave none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lp_bound: Option<Option<f64>>,
    /// The rounding: the budget of the LP whose rounding fits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lp_budget: Option<u64>,
    /// The rounding: the time of the LP at the full budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lp_time_s: Option<f64>,
    /// The MILP: whether HiGHS took the start as its first incumbent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mip_start_accepted: Option<bool>,
    /// The MILP: why and how its solution was solved again, when HiGHS's schedule was
    /// over the budget within its tolerances.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub solve_time_s: Option<f64>,
    /// Where the returned schedule comes from ("branch and bound", a rounding, a baseline).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The MILP's start: its source and cost (`null` without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<Option<(String, f64)>>,
    /// Σ_v c_v, when it is the bound reported (the relaxation did not finish).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trivial_bound: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variables: Option<usize>,
}

/// Revolve's binomial checkpointing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RevolveDetails {
    /// Forward steps beyond the first sweep, by the closed form t(l, s).
    pub extra_forward_steps: Option<u64>,
    pub slot_convention: &'static str,
    /// Snapshots s, counting the initial state x₀.
    pub snapshots: usize,
    /// Steps l of the chain.
    pub steps: usize,
}

/// The chain DPs on budgets in slots (chain-dp, equiv-chain, the BPTT policies).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SlotDetails {
    /// The DP's cost of its schedule (`null` without one).
    pub predicted_cost: Option<f64>,
    /// The DP's peak of its schedule in bytes, `fixed_memory` included.
    pub predicted_peak: Option<u64>,
    pub slot_size: u64,
    pub slots: usize,
    pub table_time_s: f64,
}

/// The nested join DP.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JoinDpDetails {
    /// The nesting order of the branches returned.
    pub branch_order: Vec<usize>,
    pub predicted_cost: f64,
    pub predicted_peak: u64,
    pub slot_size: u64,
    pub slots: usize,
    pub table_time_s: f64,
}

/// Two-level checkpointing with a slow storage tier.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TwoLevelDetails {
    pub assessment: Assessment,
    /// "two-level" or "revolve", whichever simulated faster.
    pub mode: &'static str,
    pub simulated_makespan: f64,
    pub snapshots: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall_time: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stalls: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t_async: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t_async_paper: Option<Option<f64>>,
}
