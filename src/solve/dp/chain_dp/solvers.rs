//! The chain DP's entry points: the solvers `chain-dp` and `equiv-chain`, the policy-restricted
//! runs the BPTT solvers make ([`solve_graph`]), and [`solve_chain`], which other solvers and
//! benchmarks call on a chain they hold. Each splits the budget into slots, fills the
//! [`Table`] and turns its answer into an [`Outcome`].

use super::model::{capped_slots, slot_size, DpChain, Policy, DEFAULT_SLOTS};
use super::table::{fill_work, table_bytes, Table};
use crate::graph::structure::Chain;
use crate::graph::{structure, Graph};
use crate::schedule::{checkpoint_all, simulate_polled, Schedule, SimStats};
use crate::solve::details::{Details, SlotDetails};
use crate::solve::dp::{chain_of, join_of};
use crate::solve::Footprint;
use crate::solve::{
    Claim, Instance, Outcome, Plan, Scope, SolveError, SolveOptions, Solver, SolverInfo, Stop,
    Stopped,
};
use std::time::Duration;

pub struct ChainDp;

impl Solver for ChainDp {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "chain-dp",
            description: "Optimal persistent checkpointing of a heterogeneous chain (Butt / rotor \
                          DP), budget discretised into 500 slots.",
            scope: Scope::OptimalAmongPersistent,
            accepts: "chain graphs",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        table_footprint(instance.graph)
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        Self::on_chain(&chain_of("chain-dp", instance.graph)?, instance, options)
    }
}

impl ChainDp {
    /// The `chain-dp` solver on `chain`, the chain already detected in `instance.graph`
    /// (`structured::exact_solver_for` hands it over).
    pub fn on_chain(
        chain: &Chain,
        instance: &Instance,
        options: &SolveOptions,
    ) -> Result<Outcome, SolveError> {
        run(
            "chain-dp",
            Policy::ALL,
            Scope::OptimalAmongPersistent,
            instance,
            options,
            |q| DpChain::new(chain, q),
        )
    }
}

/// Runs the DP restricted to `policy` on a chain instance, as solver `solver` whose
/// answers are optimal within `scope`.
pub(crate) fn solve_graph(
    solver: &'static str,
    policy: Policy,
    scope: Scope,
    instance: &Instance,
    options: &SolveOptions,
) -> Result<Outcome, SolveError> {
    let chain = chain_of(solver, instance.graph)?;
    run(solver, policy, scope, instance, options, |q| {
        DpChain::new(&chain, q)
    })
}

/// Splits the budget, runs the DP on the chain `build` makes for a slot size, and turns
/// the answer into an outcome.
fn run(
    solver: &'static str,
    policy: Policy,
    scope: Scope,
    instance: &Instance,
    options: &SolveOptions,
    build: impl Fn(u64) -> DpChain,
) -> Result<Outcome, SolveError> {
    let k = instance.graph.fixed_memory();
    let Some(w) = instance.budget.checked_sub(k) else {
        return Ok(Outcome::Infeasible {
            solver,
            proven: Some(Scope::GlobalOptimum),
            reason: format!("fixed_memory {k} exceeds the budget {}", instance.budget),
        });
    };
    let answer = match (policy == Policy::ALL)
        .then(|| without_recomputation(instance, options))
        .flatten()
    {
        Some((schedule, stats)) => ChainAnswer {
            plan: Some((schedule, stats.total_cost, stats.peak_memory - k)),
            exact: true,
            time_s: 0.0,
            min_slots: None,
            unfilled: None,
            ..cut(&build, w, DEFAULT_SLOTS).1.answer()
        },
        None => solve_dp(build, policy, w, DEFAULT_SLOTS, options)?,
    };
    answer.into_outcome(solver, scope, k)
}

/// The checkpoint-all schedule and its replay when it fits the budget: it costs `Σ_v c_v`,
/// a global optimum, and it is a persistent schedule of the full policy. The table cannot
/// be trusted to find it: with every size rounded up to slots it needs up to a slot a value
/// more than the chain holds, so at the checkpoint-all peak (100%) no plan fits the rounded
/// budget. `None` when it does not fit, or when its replay is stopped.
fn without_recomputation(
    instance: &Instance,
    options: &SolveOptions,
) -> Option<(Schedule, SimStats)> {
    let stop = Stop::start(options);
    let schedule = checkpoint_all(instance.graph);
    let stats = simulate_polled(instance.graph, &schedule, || stop.poll())
        .ok()?
        .ok()?;
    (stats.peak_memory <= instance.budget).then_some((schedule, stats))
}

/// `equiv-chain`: the chain DP on a join graph's Equiv-Chain ([`DpChain::equiv_chain`]).
/// A heuristic: the branches advance in lockstep, level by level, and memory is charged
/// per level (its predicted peak bounds the simulated one from above).
pub struct EquivChain;

impl Solver for EquivChain {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "equiv-chain",
            description:
                "Beaumont et al.'s Equiv-Chain heuristic: a join graph's branches, aligned at \
                          the loss, solved as one chain by the chain DP.",
            scope: Scope::Heuristic,
            accepts: "join graphs and chains",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        table_footprint(instance.graph)
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        let join = join_of("equiv-chain", instance.graph)?;
        run(
            "equiv-chain",
            Policy::ALL,
            Scope::Heuristic,
            instance,
            options,
            |q| DpChain::equiv_chain(&join, q),
        )
    }
}

/// The footprint of a chain DP over the branches of `graph` (a chain is a join of one
/// branch): its table (`table_bytes`, every branch's stages as one chain, an upper bound
/// of the nested tables) and a schedule of about two computes a node. A graph of another
/// shape has the footprint of its refusal.
pub fn table_footprint(graph: &Graph) -> Footprint {
    let stages = structure::join(graph).map_or(0, |j| j.branches.iter().map(Vec::len).sum());
    stages_footprint(graph, stages)
}

/// [`table_footprint`] of a chain of `stages` stages detected in `graph`.
pub fn stages_footprint(graph: &Graph, stages: usize) -> Footprint {
    let computes = 2 * graph.len() as u64;
    let mut footprint = Footprint::linear(
        graph,
        computes,
        format!(
            "a DP table over {stages} stages and a schedule of about {computes} compute events"
        ),
    );
    footprint.bytes = footprint.bytes.saturating_add(table_bytes(stages));
    footprint
}

/// A chain DP answer before it becomes an [`Outcome`].
pub struct ChainAnswer {
    pub plan: Option<(Schedule, f64, u64)>,
    pub slot_size: u64,
    /// Whether the plan is the policy's optimum for the true sizes: the slot size divides
    /// every size (the table rounds nothing), or the plan recomputes nothing. Else it is
    /// the optimum for the sizes rounded up to slots.
    pub exact: bool,
    pub slots: usize,
    pub min_slots: Option<usize>,
    pub time_s: f64,
    /// Why there is no plan when the table was not filled: `None` when it was.
    pub unfilled: Option<Unfilled>,
}

/// Why a chain DP's table was not filled.
#[derive(Clone, Copy, Debug)]
pub enum Unfilled {
    /// Its fill, over `stages` stages, would outlast the time limit ([`outlasts`]): not
    /// started.
    NotStarted { stages: usize },
    /// The time limit passed while filling it.
    Interrupted,
}

impl ChainAnswer {
    /// The outcome for `solver`, whose optimality holds within `scope`, on a graph of
    /// `fixed_memory` `k`.
    pub fn into_outcome(
        self,
        solver: &'static str,
        scope: Scope,
        k: u64,
    ) -> Result<Outcome, SolveError> {
        let details = Details::Slots(SlotDetails {
            predicted_cost: self.plan.as_ref().map(|p| p.1),
            predicted_peak: self.plan.as_ref().map(|p| p.2 + k),
            slot_size: self.slot_size,
            slots: self.slots,
            table_time_s: self.time_s,
        });
        Ok(match self.plan {
            Some((schedule, _, _)) => Outcome::Plan(Plan {
                schedule,
                claim: if self.exact {
                    claim_within(scope)
                } else {
                    Claim::Feasible
                },
                solver,
                scope,
                lower_bound: None,
                message: (!self.exact).then(|| {
                    format!(
                        "sizes rounded up to slots of {} bytes: optimal for the rounded sizes, \
                         not claimed for the true ones",
                        self.slot_size
                    )
                }),
                details: Some(details),
            }),
            None => match self.unfilled {
                Some(Unfilled::Interrupted) => {
                    return Stopped::TimeLimit.outcome(solver, "while filling the DP table")
                }
                Some(Unfilled::NotStarted { stages }) => Outcome::NoSolution {
                    solver,
                    reason: format!(
                        "filling its DP table ({stages} stages x {} slots) would take longer \
                         than the time limit, so it was not started",
                        self.slots
                    ),
                },
                None => Outcome::Infeasible {
                    solver,
                    proven: None,
                    reason: format!(
                        "no schedule of {solver}'s policy fits {} slots of {} bytes{}",
                        self.slots,
                        self.slot_size,
                        self.min_slots
                            .map(|s| format!(" (the chain needs {s} slots)"))
                            .unwrap_or_default()
                    ),
                },
            },
        })
    }
}

/// What a plan of a solver optimal within `scope` claims.
fn claim_within(scope: Scope) -> Claim {
    if scope == Scope::Heuristic {
        Claim::Feasible
    } else {
        Claim::Optimal
    }
}

/// Runs the chain DP on `chain` with a working budget of `w` bytes (`K` excluded) split
/// into `slots` slots. The plan carries (schedule, predicted cost, predicted peak bytes
/// excluding `K`).
pub fn solve_chain(
    chain: &Chain,
    policy: Policy,
    w: u64,
    slots: u64,
    options: &SolveOptions,
) -> Result<ChainAnswer, SolveError> {
    solve_dp(|q| DpChain::new(chain, q), policy, w, slots, options)
}

/// Option evaluations per second of a fill, measured on a shared 2-core machine
/// (`L = 1000`, 500 slots: `fill_work` 8.4·10^10 in about 18 s).
const FILL_RATE: f64 = 4.6e9;

/// How many times faster than [`FILL_RATE`] a machine may be before a fill refused by
/// [`outlasts`] could have finished (at 16, a 20,001-node chain capped to one slot,
/// `fill_work` 3.3·10^11, still started at a 5 s limit and took 20 s to allocate and free
/// its 2.7 GB of rows).
const FILL_MARGIN: f64 = 4.0;

/// Whether filling the table of `n` stages at `m` slots cannot finish in the time `left`
/// even [`FILL_MARGIN`] times faster than measured; such a fill is not started (the join
/// DP asks it before each of its nested tables, with what is left of its deadline).
pub fn outlasts(n: usize, m: usize, left: Option<Duration>) -> bool {
    left.is_some_and(|left| fill_work(n, m) as f64 > FILL_RATE * FILL_MARGIN * left.as_secs_f64())
}

/// How a working budget is cut into slots.
#[derive(Clone, Copy)]
struct Slots {
    /// The slot size in bytes.
    q: u64,
    /// The budget in slots, `⌊w / q⌋`.
    m: usize,
    /// Whether `q` divides every size, so that the table rounds nothing.
    exact: bool,
}

impl Slots {
    /// An answer in these slots, with no plan (yet).
    fn answer(self) -> ChainAnswer {
        ChainAnswer {
            plan: None,
            slot_size: self.q,
            exact: self.exact,
            slots: self.m,
            min_slots: None,
            time_s: 0.0,
            unfilled: None,
        }
    }
}

/// `w` bytes in `slots` slots (fewer where the table would not fit
/// [`super::model::MAX_TABLE_BYTES`]), or in slots of the sizes' gcd when that needs no more
/// of them, and the chain `build` makes for that slot size.
fn cut(build: &impl Fn(u64) -> DpChain, w: u64, slots: u64) -> (DpChain, Slots) {
    let mut q = slot_size(w, slots);
    let mut chain = build(q);
    let capped = capped_slots(chain.l, slots, chain.entry_bytes());
    if capped < slots {
        q = slot_size(w, capped);
        chain = build(q);
    }
    let g = chain.size_gcd();
    if g > q {
        q = g;
        chain = build(q);
    }
    let m = (w / q) as usize;
    (
        chain,
        Slots {
            q,
            m,
            exact: g % q == 0,
        },
    )
}

/// [`solve_chain`] for the chain `build` makes for a slot size.
fn solve_dp(
    build: impl Fn(u64) -> DpChain,
    policy: Policy,
    w: u64,
    slots: u64,
    options: &SolveOptions,
) -> Result<ChainAnswer, SolveError> {
    let stop = Stop::start(options);
    let (chain, cut) = cut(&build, w, slots);
    let unfilled = |time_s, why| ChainAnswer {
        time_s,
        unfilled: Some(why),
        ..cut.answer()
    };
    let stages = chain.l + 1;
    if outlasts(stages, cut.m, options.time_limit) {
        // Not even allocated: the table alone would take seconds to fault in and free.
        return Ok(unfilled(
            stop.elapsed().as_secs_f64(),
            Unfilled::NotStarted { stages },
        ));
    }
    let mut stopped = None;
    let mut reported = -1.0;
    let table = Table::fill(chain, policy, cut.m, |f| {
        if f > reported {
            reported = f;
            options.report("chain-dp: filling the table", Some(f));
        }
        stopped = stop.poll().err();
        stopped.is_none()
    });
    if stopped == Some(Stopped::Cancelled) {
        return Err(SolveError::Cancelled);
    }
    let time_s = stop.elapsed().as_secs_f64();
    let Ok(table) = table else {
        return Ok(unfilled(time_s, Unfilled::Interrupted));
    };
    Ok(ChainAnswer {
        plan: table.cost().is_finite().then(|| {
            let (schedule, peak) = table.schedule();
            (schedule, table.cost(), peak)
        }),
        min_slots: table.min_slots(),
        time_s,
        ..cut.answer()
    })
}
