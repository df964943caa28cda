//! A join-graph DP (after Beaumont, Herrmann, Pallez, Shilova, Phil. Trans. R. Soc. A
//! 2020): `k` branches meeting at the loss.
//!
//! The paper's recurrence is not in the seed; this module derives a DP over a family of
//! *nested persistent* schedules, built on the chain DP ([`super::chain_dp`]).
//!
//! # The family
//!
//! Order the branches `b_1, …, b_k`. Branch `b_1` runs the persistent chain schedule of
//! the chain DP, except that its loss stage is replaced by *the rest of the join*: the
//! schedule of `b_2, …, b_k` and the loss, run while `b_1`'s checkpoints and its last
//! output `x^{b_1}_L` are held (forward phase). Recursively, the innermost branch `b_k`
//! reaches its end and computes the loss (the turn: every branch end is resident because
//! each outer branch holds it). Right after the loss, an outer branch whose plan
//! checkpointed its end with F_ck may free it (it recomputes it for `G_L` from an earlier
//! checkpoint later), which gives the inner branches' backward phase that memory. Each
//! inner branch then reverses itself while the loss output stays resident (the outer
//! branches still need it), and returns; the outermost branch frees the loss output after
//! its first backward op (backward phase, last in first out). This matches the captions'
//! three phases and their checkpoint persistence: a forward checkpoint stays until its
//! branch has used it (or, for a branch end, until the loss has).
//!
//! **The second turn.** Holding the loss output across the inner branches' whole backward
//! phase can cost more than computing it again. A branch `b_p` whose outer branches all
//! hold their ends may instead, with F_ck at `L`:
//!
//! 1. sweep to `x^{b_p}_L` and run the inner join with `x^{b_p}_L` freed right after the
//!    loss, the inner join *owning* the loss output: `b_{p+1}` frees it after its `G_L`
//!    (the branches inside `b_{p+1}` still hold it for `b_{p+1}`);
//! 2. once the inner join's backward phase is over, recompute the inner branches' ends
//!    `x^{b_{p+1}}_L, …, x^{b_k}_L` by F∅ sweeps, each end staying resident: `b_{p+1}`,
//!    which finished last, from its `x_1` when its `G_1` read it (the plan keeps it instead
//!    of freeing it), the others from their first stage (the *resweep*);
//! 3. run its own chain from `x_a` again as a chain whose loss stage is the plain loss,
//!    computed from `x^{b_p}_L` (recomputed from `b_p`'s checkpoints) and the held inner
//!    ends, which are freed right after it: the second turn. After it, `b_p`'s backward
//!    phase proceeds as before (holding the loss output for its outer branches, or
//!    freeing it when `p = 1`).
//!
//! The optimal schedules of the unit joins (2, 2) and (3, 2) at 3 slots have exactly this
//! shape (`… loss g1_2 f1_1 g1_1 f1_2 f0_1 f0_2 loss g0_2 …`).
//!
//! # The recurrence
//!
//! With `C_p(a, b, m)` the chain DP's table of the branch at position `p`:
//!
//! * the loss stage's base case of `C_p` is `C_{p+1}(0, L_{p+1}+1, m)` (the inner join,
//!   with `x^{b_p}_{L}` held outside it), and the real loss for `p = k`; F_ck at `L` may
//!   instead use the inner join built with `x^{b_p}_L` freed at the turn;
//! * from the turn on, memory outside a table changes by a constant `h`: `+|loss|` for
//!   `p >= 2` (it holds the loss output for the outer branches) minus the ends the outer
//!   branches freed. The backward-only sub-problems (`b <= L`) are referenced from those
//!   that contain the turn with their budget shifted by `h`, and the local needs after
//!   the turn carry `+h`;
//! * the second turn is one more option of F_ck at `L` in `C_p(a, L_p+1, m)`, allowed when
//!   no outer end is freed at the first turn:
//!   `Σ_{l=a+1..L} fw_l + C^own_{p+1}(0, L_{p+1}+1, m − X_L) + R_p + C'_p(a, L_p+1, m − E_p)`
//!   when the sweep fits `m` and the resweep's peak `P_{R_p} <= m`. `C^own_{p+1}` is the
//!   inner join with `x^{b_p}_L` freed at the turn and owning the loss output (`h` without
//!   `+|loss|`); `R_p` and `E_p` are the resweep's cost and the slots of the inner ends;
//!   `C'_p` is `b_p`'s chain DP whose loss stage is the plain loss with `E_p` held outside
//!   until it and freed right after (`h = −E_p`, `+|loss|` for `p >= 2`), which is why it
//!   is read at `m − E_p`. All three terms are non-increasing in `m`;
//! * the answer is `min over orders of C_1(0, L_1+1, m)`; every order is tried for `k <= 6`
//!   (`k!` orders), else the branches are nested longest first; the freed-end and
//!   second-turn variants (which add tables per level) are built for `k <= 4`.
//!
//! **Proof sketch (within the family).** Fix the order, the set of ends freed at the
//! turn and the branches that take a second turn. A schedule of the family restricted to
//! branch `b_p` is a persistent schedule of that chain whose loss stage is an opaque op
//! with a memory-dependent cost: it holds exactly what the chain DP's sub-problem holds
//! when its base case runs (`x_L` outside, nothing else of the branch but the checkpoints
//! of enclosing sub-problems, which are outside its budget by construction). So the inner
//! join is solved optimally for every budget `m` (induction on `k − p`), its optimal cost
//! is a non-increasing function of `m`, and substituting that row for the base case keeps
//! the chain DP's optimal-substructure argument intact. The memory that appears or
//! disappears at the turn is the same for every state after it, which the shifted rows
//! account for exactly. A second turn splits `b_p`'s schedule at the end of the inner
//! join into three independent parts: the inner join (optimal by induction), the resweep
//! (fixed ops, exact peak) and a persistent schedule of `b_p` from `x_a` with a fixed
//! outside memory that drops at its turn (optimal by the same argument, with `h = −E_p`);
//! the parts share no state but `x_a` and the ends, so the best sum is the best schedule.
//!
//! **Outside the family**: schedules that interleave branches in the backward phase, that
//! run the first backward op of every branch right at the turn (the captions' "turn"
//! storing one backward datum per branch), that recompute the loss a third time, that take
//! a second turn after an outer end was freed, or that resweep an inner branch from a
//! checkpoint other than its `x_1` (or in another order); and, as for the chain DP,
//! non-persistent ones, which matter with heterogeneous sizes. The tests compare the DP
//! with the exhaustive oracle on every join of 2-3 unit branches it can search (66 feasible
//! (graph, budget) pairs, up to 11 nodes): all are equal
//! (`tests/fixtures/join_dp_above_exhaustive.json` is empty). On 40 random joins with
//! costs and sizes 1..=3 join-dp is never below the optimum and above it on the pairs
//! listed in `tests/fixtures/join_dp_random_above_exhaustive.json`. On the unit joins of
//! 2-3 branches of length <= 4 too large for the oracle, `tests/it/join_dp.rs` compares it with
//! the best MILP optimum over the nesting orders (`tests/fixtures/join_dp_vs_milp.json`):
//! on all 164 (join, budget) pairs (144 feasible, up to 25 nodes) the two agree,
//! and without the second turn four of them, the 2-branch joins at 3 slots, would be
//! reported infeasible. The solver reports its answers as heuristic.

use super::chain_dp::{
    outlasts, slot_size, table_footprint, DpChain, Mem, Nest, Policy, Resweep, SecondTurn, Table,
    DEFAULT_SLOTS,
};
use super::join_of;
use crate::graph::structure::{Chain, Join, Stage};
use crate::schedule::Event;
use crate::solve::details::{Details, JoinDpDetails};
use crate::solve::Footprint;
use crate::solve::{
    Claim, Instance, Outcome, Plan, Scope, SolveError, SolveOptions, Solver, SolverInfo, Stop,
    Stopped,
};
use std::time::Instant;

pub struct JoinDp;

/// The most branches: the tables nest one a branch, built, emitted and dropped by
/// recursion (about 4 KB of stack a level in release, more in debug builds: 600 branches
/// overflowed a 2 MiB thread stack).
const MAX_BRANCHES: usize = 64;

/// The largest number of branches for which every nesting order is tried.
const ALL_ORDERS: usize = 6;

/// The largest number of branches for which the "free the last output at the turn" and
/// second-turn variants are built (each adds tables per nesting level).
const RELEASE_VARIANTS: usize = 4;

/// Outer branches' last outputs freed right after the loss: their memory and nodes.
#[derive(Clone, Default)]
struct Released {
    mem: Mem,
    nodes: Vec<usize>,
}

impl Released {
    /// The same with the branch end `end` added.
    fn with(&self, end: &Stage, q: u64) -> Released {
        let mut nodes = self.nodes.clone();
        nodes.push(end.forward);
        Released {
            mem: self.mem + Mem::of_bytes(end.x, q),
            nodes,
        }
    }
}

/// One nesting order of a join, the slot size, the budget, the deadline and the
/// interrupt poll.
struct Nesting<'a> {
    join: &'a Join,
    order: &'a [usize],
    q: u64,
    m: usize,
    deadline: Option<Instant>,
    poll: &'a mut dyn FnMut() -> bool,
}

impl Nesting<'_> {
    /// The branch at position `p`.
    fn branch(&self, p: usize) -> &[Stage] {
        &self.join.branches[self.order[p]]
    }

    /// Fills the table of the branch at position `p` (its loss stage the join's loss)
    /// placed as `placement` says; `None` when interrupted, or at once when the fill
    /// cannot finish before the deadline ([`outlasts`]: the table is not even allocated).
    fn fill(&mut self, p: usize, placement: Nest) -> Option<Table> {
        let left = self
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()));
        if outlasts(self.branch(p).len() + 1, self.m, left) {
            return None;
        }
        let chain = Chain {
            stages: self.branch(p).to_vec(),
            loss: self.join.loss,
            loss_cost: self.join.loss_cost,
            loss_size: self.join.loss_size,
        };
        let poll = &mut *self.poll;
        Table::fill_nested(
            DpChain::new(&chain, self.q),
            Policy::ALL,
            self.m,
            placement,
            |_| poll(),
        )
        .ok()
    }

    /// The nested table of the branch at position `p` and everything inside it, with
    /// `released` freed right after the loss; `holds_loss`: the loss output stays after
    /// this branch's `G_L` (an outer branch uses it). `None` when interrupted.
    fn nest(&mut self, p: usize, released: &Released, holds_loss: bool) -> Option<Table> {
        let k = self.order.len();
        let (mut inner, mut inner_released, mut second) = (None, None, None);
        if p + 1 < k {
            inner = Some(Box::new(self.nest(p + 1, released, true)?));
            if k <= RELEASE_VARIANTS {
                let end = self.branch(p).last().expect("a branch has a stage");
                let more = released.with(end, self.q);
                inner_released = Some(Box::new(self.nest(p + 1, &more, true)?));
                // The second turn needs every outer end resident at the recomputed loss.
                if released.nodes.is_empty() {
                    let inner = Box::new(self.nest(p + 1, &more, false)?);
                    let resweep = self.resweep(p + 1);
                    let held = Nest {
                        holds_loss,
                        released: resweep.ends,
                        release_nodes: self.ends(p + 1),
                        ..Nest::default()
                    };
                    let table = Box::new(self.fill(p, held)?);
                    second = Some(SecondTurn {
                        inner,
                        resweep,
                        table,
                    });
                }
            }
        }
        let placement = Nest {
            inner,
            inner_released,
            holds_loss,
            released: released.mem,
            release_nodes: released.nodes.clone(),
            second,
        };
        self.fill(p, placement)
    }

    /// The last outputs of the branches at positions `from..`.
    fn ends(&self, from: usize) -> Vec<usize> {
        (from..self.order.len())
            .map(|p| self.branch(p).last().expect("a stage").forward)
            .collect()
    }

    /// The F∅ sweeps that recompute the last outputs of the branches at positions
    /// `from..` after their backward phase: the branch at `from`, which finished last,
    /// from its `x_1` when its `G_1` read it, the others from their first stage; each end
    /// stays resident.
    fn resweep(&self, from: usize) -> Resweep {
        let size = |st: &Stage| Mem::of_bytes(st.x, self.q);
        let mut r = Resweep {
            cost: 0.0,
            need: Mem::ZERO,
            ends: Mem::ZERO,
            keep: None,
            events: Vec::new(),
        };
        for p in from..self.order.len() {
            let stages = self.branch(p);
            let first = usize::from(p == from && stages[0].reads_output);
            if first == 1 {
                r.keep = Some(stages[0].forward);
                r.need = size(&stages[0]);
            }
            for l in first..stages.len() {
                let st = &stages[l];
                let prev = l.checked_sub(1).map(|i| &stages[i]);
                r.events.push(Event::Compute(st.forward));
                if let Some(pr) = prev {
                    r.events.push(Event::Free(pr.forward));
                }
                r.cost += st.fw;
                r.need = r.need.max(r.ends + prev.map_or(Mem::ZERO, size) + size(st));
            }
            r.ends = r.ends + size(stages.last().expect("a stage"));
        }
        r
    }
}

/// Every permutation of `0..k`, in lexicographic order.
fn orders(k: usize) -> Vec<Vec<usize>> {
    if k == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for rest in orders(k - 1) {
        for pos in 0..=rest.len() {
            let mut o = rest.clone();
            o.insert(pos, k - 1);
            out.push(o);
        }
    }
    out.sort();
    out
}

impl Solver for JoinDp {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "join-dp",
            description: "Join graphs: the chain DP nested branch by branch (forward phase, turn, \
                          backward phase), best nesting order.",
            scope: Scope::Heuristic,
            accepts: "join graphs and chains",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        table_footprint(instance.graph)
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        let graph = instance.graph;
        let join = join_of("join-dp", graph)?;
        if join.branches.len() > MAX_BRANCHES {
            return Err(SolveError::Unsupported {
                solver: "join-dp",
                reason: format!(
                    "a join of {} branches: join-dp nests a table a branch, for at most \
                     {MAX_BRANCHES} (equiv-chain and auto take any number)",
                    join.branches.len()
                ),
            });
        }
        let k_mem = graph.fixed_memory();
        let Some(w) = instance.budget.checked_sub(k_mem) else {
            return Ok(Outcome::Infeasible {
                solver: "join-dp",
                proven: Some(Scope::GlobalOptimum),
                reason: format!(
                    "fixed_memory {k_mem} exceeds the budget {}",
                    instance.budget
                ),
            });
        };
        let q = slot_size(w, DEFAULT_SLOTS);
        let m = (w / q) as usize;
        let stop = Stop::start(options);
        let mut stopped = None;
        let mut poll = || {
            stopped = stop.poll().err();
            stopped.is_none()
        };
        let k = join.branches.len();
        let candidates = if k <= ALL_ORDERS {
            orders(k)
        } else {
            let mut o: Vec<usize> = (0..k).collect();
            o.sort_by_key(|&b| std::cmp::Reverse(join.branches[b].len()));
            vec![o]
        };
        let mut best: Option<(f64, Vec<usize>, Table)> = None;
        for order in candidates {
            let mut nesting = Nesting {
                join: &join,
                order: &order,
                q,
                m,
                deadline: stop.deadline(),
                poll: &mut poll,
            };
            let Some(table) = nesting.nest(0, &Released::default(), false) else {
                // A stop, or a table that cannot be filled in the time left.
                let stopped = stopped.unwrap_or(Stopped::TimeLimit);
                return stopped.outcome("join-dp", "while filling the DP tables");
            };
            let cost = table.cost();
            if cost.is_finite() && best.as_ref().is_none_or(|b| cost < b.0) {
                best = Some((cost, order, table));
            }
        }
        let Some((cost, order, table)) = best else {
            return Ok(Outcome::Infeasible {
                solver: "join-dp",
                proven: None,
                reason: format!(
                    "no nested persistent schedule fits {m} slots of {q} bytes, in any branch order"
                ),
            });
        };
        let (schedule, peak) = table.schedule();
        Ok(Outcome::Plan(Plan {
            schedule,
            claim: Claim::Feasible,
            solver: "join-dp",
            scope: Scope::Heuristic,
            lower_bound: None,
            message: None,
            details: Some(Details::JoinDp(JoinDpDetails {
                branch_order: order,
                predicted_cost: cost,
                predicted_peak: peak + k_mem,
                slot_size: q,
                slots: m,
                table_time_s: stop.elapsed().as_secs_f64(),
            })),
        }))
    }
}
