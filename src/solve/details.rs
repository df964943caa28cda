//! What each solver reports beside its schedule: model sizes, thresholds, slot sizes,
//! predicted figures. Typed here; JSON only when a result is printed or sent.
//!
//! [`Details`] serialises untagged, as the bare object of its variant. Every struct
//! declares its fields in alphabetical order, the order in which results have always
//! printed them. A field that is not always known is skipped when absent; a field that is
//! always reported but may be unknown is printed as `null` (`Option<Option<_>>` where a
//! field is both).

use serde::Serialize;

/// A solver's figures, by the family of solvers that reports them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Details {
    Exhaustive(ExhaustiveDetails),
    Chen(ChenDetails),
    Dtr(DtrDetails),
    FastSa(Box<FastSaDetails>),
    SethiUllman(SethiUllmanDetails),
    Knapsack(KnapsackDetails),
    Checkmate(Box<CheckmateDetails>),
    Revolve(RevolveDetails),
    Slots(SlotDetails),
    JoinDp(JoinDpDetails),
    TwoLevel(Box<TwoLevelDetails>),
    Auto(Box<AutoDetails>),
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

/// FastSA's simulated annealing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FastSaDetails {
    /// Mutations accepted.
    pub accepted: u64,
    /// The iteration at which the returned sequence was found (absent when `source` is
    /// `start`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_found_at_iteration: Option<u64>,
    /// The seconds into the search at which it was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_found_at_s: Option<f64>,
    /// The seconds into the search at which a sequence first fit the budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_fit_s: Option<f64>,
    /// The nodes of the grouped graph phase 1 annealed (absent when phase 1 did not run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grouped_nodes: Option<usize>,
    /// Mutations drawn, valid or not.
    pub iterations: u64,
    /// The lowest peak of any sequence visited, in bytes (phase 1's grouped bound there).
    pub lowest_peak: u64,
    /// 1: the search ended on the grouped graph; 2: it reached the original nodes.
    pub phase_reached: u8,
    /// The slots T of the last phase's sequence.
    pub slots: usize,
    /// `annealing`, or `start` when `improve` found nothing cheaper than its start.
    pub source: &'static str,
}

/// The Sethi–Ullman construction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SethiUllmanDetails {
    /// Values evicted while a later target still read them.
    pub evictions: usize,
    /// `K + max_v need(v)`: every budget from it gets a schedule (`null` beyond 2^64).
    pub need_budget: Option<u64>,
    /// Computes beyond the first of each node.
    pub recomputations: usize,
}

/// The saved-set knapsack.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KnapsackDetails {
    /// Forward values some backward node reads: the values that can be saved.
    pub candidates: usize,
    /// Candidates dropped (recomputed once, before the backward pass reads them).
    pub dropped: usize,
    /// The ranking that chose them: `own_cost` or `with_unsaved_inputs`.
    pub ranking: &'static str,
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
    /// The rounding: how HiGHS ended the LP at the full budget ("optimal", "time limit",
    /// or a status without a verdict such as "Unknown"; the bound holds in every case).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lp_status: Option<String>,
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

// The two-level model's figures (`crate::solve::dp::two_level`, Kukreja et al.'s
// asynchronous two-level checkpointing), reported in [`TwoLevelDetails`] and by
// `remat inspect`; their methods are beside the model.

/// What the tier does for one chain and budget: the model's figures, before any
/// simulation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Assessment {
    /// Whether the two-level schedule is predicted faster than plain Revolve.
    pub helps: bool,
    pub intervals: Intervals,
    /// The time to load the largest state back.
    pub load_time: f64,
    /// Whether a load can arrive while one interval is reversed.
    pub loads_hidden: bool,
    /// The stalls the model predicts otherwise: every stored base's load outlasts the
    /// reversal of the interval it is prefetched during by `T_R − (t(I, s)·T_A + I·T_B)`.
    pub predicted_stall: f64,
    /// `R(I, s)`: the paper's factor of an interval.
    pub r_interval: Option<f64>,
    /// `R(l, s')`: the paper's factor of plain Revolve.
    pub r_revolve: Option<f64>,
    /// Snapshots `s'` plain Revolve gets from the budget.
    pub revolve_snapshots: Option<u64>,
    /// Snapshots `s` per interval (two-level) from the budget.
    pub snapshots: Option<u64>,
    /// The graph-exact `T_async` of the two-level schedule (see the module docs of `two_level`).
    pub t_async: Option<f64>,
    /// The paper's `T_async` with `n = l`.
    pub t_async_paper: Option<f64>,
    /// The graph-exact time of plain Revolve.
    pub t_revolve: Option<f64>,
    /// The paper's `T_revolve` with `n = l`.
    pub t_revolve_paper: Option<f64>,
    pub times: StepTimes,
    /// `T_T`: the time to store the largest state.
    pub transfer_time: f64,
    /// One sentence saying whether the tier helps, and why.
    pub verdict: String,
}

/// The intervals of `l` steps for interval length `I`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Intervals {
    /// `q = ⌈l / I⌉`.
    pub count: u64,
    /// The interval `I`.
    pub interval: u64,
    /// Steps of the last interval, `l − (q−1)·I`.
    pub last: u64,
    /// Revolve steps `l` (chain stages + the loss).
    pub steps: u64,
}

/// Per-step times of a chain: the paper's `T_A`, `T_B`, and the loss.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StepTimes {
    /// Mean backward cost `T_B`.
    pub backward: f64,
    /// Mean forward cost `T_A`.
    pub forward: f64,
    pub loss: f64,
}

/// The `auto` portfolio: what ran and what each candidate found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AutoDetails {
    /// Seconds from the start to the returned schedule.
    pub best_found_s: f64,
    /// What ended the solve (also the result's `ended_by`).
    pub ended_by: crate::solve::EndedBy,
    /// Seconds from the start to the first verified schedule.
    pub first_found_s: Option<f64>,
    /// The bound of the sequence of cuts, when it rose above the stage-cut bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<SequenceDetails>,
    /// The figures of the solver whose schedule is returned.
    pub solver_details: Option<Details>,
    /// The stage-cut bound, when it rose above `Σ_v c_v`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage_cut: Option<StageCutDetails>,
    /// Every candidate, in the order they ran.
    pub tried: Vec<Tried>,
}

/// The stage-cut bound `auto` proved (`crate::solve::exact::checkmate`'s `stage_cut`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StageCutDetails {
    /// The bound on every schedule's cost.
    pub bound: f64,
    /// The node whose first computation gave it.
    pub cut: String,
    /// The cuts whose LP was solved.
    pub cuts: usize,
    /// The values every schedule computes at least twice (a value too large to be resident
    /// beside some node that runs between two of its uses), whose second computation the
    /// bound adds to every cut's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub forced: Vec<String>,
    /// Whether the bound is a cut's with its keep and recompute choices integral (branch and
    /// bound on the cut), higher than every cut's LP.
    pub integral: bool,
    /// Seconds it took.
    pub time_s: f64,
}

/// The bound of the sequence of cuts `auto` proved (`crate::solve::exact::checkmate`'s
/// `stage_cut::sequence`): the stage-cut bound's relaxation around several moments at once.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SequenceDetails {
    /// The bound on every schedule's cost.
    pub bound: f64,
    /// Whether every window of the effort was solved within the bound's time share: if
    /// not, another machine may prove a different bound (never a different schedule).
    pub complete: bool,
    /// Whether the bound is the window's integral program's (branch and bound), higher than
    /// its LP.
    pub integral: bool,
    /// The nodes whose first computations are its moments, in the order every schedule
    /// computes them.
    pub moments: Vec<String>,
    /// Seconds it took.
    pub time_s: f64,
    /// The windows of moments whose LP was solved.
    pub windows: usize,
}

/// One candidate of the portfolio.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Tried {
    /// The simulator's cost of its schedule, when it produced one.
    pub cost: Option<f64>,
    /// Seconds from the portfolio's start to the end of this run.
    pub finished_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The simulator's peak of its schedule.
    pub peak_memory: Option<u64>,
    pub solver: &'static str,
    pub time_s: f64,
    pub verdict: Verdict,
}

/// What a candidate of the portfolio gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A schedule within budget, verified by the simulator.
    Schedule,
    /// A schedule over the budget (skipped).
    OverBudget,
    /// A schedule the simulator rejects (skipped; a bug in that solver).
    Invalid,
    Infeasible,
    NoSolution,
    /// The solver failed or refused (a model too large, a graph it does not accept).
    Failed,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Schedule => "schedule",
            Verdict::OverBudget => "over_budget",
            Verdict::Invalid => "invalid",
            Verdict::Infeasible => "infeasible",
            Verdict::NoSolution => "no_solution",
            Verdict::Failed => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    /// The module docs' rule, read from this file's source: every struct with named fields
    /// declares them in alphabetical order.
    #[test]
    fn every_struct_declares_its_fields_in_alphabetical_order() {
        let source = include_str!("details.rs");
        let source = source.split("#[cfg(test)]").next().unwrap();
        let mut checked = 0;
        for block in source.split("pub struct ").skip(1) {
            let (name, rest) = block.split_once(' ').unwrap();
            let Some(body) = rest.strip_prefix('{') else {
                continue;
            };
            let body = &body[..body.find("\n}").unwrap()];
            let fields: Vec<&str> = body
                .lines()
                .filter_map(|l| l.trim().strip_prefix("pub "))
                .filter_map(|l| l.split_once(':').map(|(field, _)| field))
                .collect();
            let mut sorted = fields.clone();
            sorted.sort_unstable();
            assert_eq!(fields, sorted, "{name}'s fields");
            checked += 1;
        }
        assert!(checked >= 10, "{checked} structs read");
    }
}
