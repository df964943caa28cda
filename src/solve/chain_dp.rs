//! The heterogeneous chain DP: optimal persistent checkpointing of a chain with per-stage
//! costs and sizes (Butt's precise-cost generalisation of Gruslys' DP, seed digest
//! §4.5-4.6 with the corrected restatement of §4.6.7; rotor's persistent DP with its
//! forward kinds F∅ / F_ck / F_all, anchors §4), stated directly in the one memory model
//! of the simulator (§6.2) so that its predicted cost and peak are the simulator's.
//!
//! # Model
//!
//! A chain ([`crate::graph::structure::Chain`]) has stages `j = 1..L`: `F_j` computes
//! `x_j` from `x_{j−1}` (`x_0` is nothing), `G_j` computes `δ_j` from `δ_{j+1}` and reads
//! `x_{j−1}` and/or `x_j`. The loss is stage `L + 1`: `F_{L+1}` computes it from `x_L`, and
//! its output is `δ_{L+1}`; `δ_{L+2}` is nothing. Sizes are in *slots* of `q` bytes:
//! `X_j = ⌈|x_j|/q⌉`, `D_j = ⌈|δ_j|/q⌉` (rounded up) and the budget `m = ⌊(M − K)/q⌋`
//! (rounded down), so a schedule within `m` slots is within the true budget `M`.
//!
//! # Next-output reads (Checkmate's Keras rule)
//!
//! Chains extracted by Checkmate's Keras rule (checkmate.md §4.3) have `G_j` also read
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
//! (held, `δ'_{b+1}`) inside `m` and owned by us (Butt's ownership fix, §4.6.3), never using
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
//! done): for heterogeneous sizes a non-persistent schedule can be cheaper (seed digest
//! §4.10 item 4: 28 vs 25), and the tests list every such case found
//! (`tests/fixtures/chain_dp_above_exhaustive.json`). Besides recomputing a tensor early
//! and dropping its checkpoint (§4.10), the cases there show a second source: a
//! sub-problem holds its input checkpoint `x_a` until it returns, even when, as when
//! `G_{a+1}` does not read `x_a`, nothing after `F_{a+1}` needs it; a schedule that frees
//! it at once can fit a budget the DP declares infeasible.
//!
//! # Complexity
//!
//! `O(L³·m)` time. Each row `C(a, b, ·)` is stored only between its first feasible `m`
//! and the `m` from which it is constant, and the inner loop over `m` is a shifted
//! element-wise minimum the compiler vectorises; where two rows are both constant the
//! minimum is applied once per row, and budgets at which a row already equals its
//! no-recomputation cost (a lower bound) are skipped. No choice table is kept: the plan is
//! rebuilt by re-evaluating the options of the `O(L)` sub-problems it visits.

use super::details::{Details, SlotDetails};
use super::{
    Claim, Instance, Outcome, Plan, Scope, SolveError, SolveOptions, Solver, SolverInfo, Stop,
};
use crate::graph::structure::{self, Chain, Join, Stage};
use crate::schedule::{Event, Schedule};

/// The default number of memory slots the budget is discretised into.
pub const DEFAULT_SLOTS: u64 = 500;

/// The largest DP table (`(L+2)(L+1)/2` rows of `m + 1` costs) the solver allocates; longer
/// chains get fewer, larger slots (reported as the slot size).
const MAX_TABLE_BYTES: u64 = 1 << 30;

/// A row `C(a, b, m)` for `m >= lo`, constant after its last stored value.
#[derive(Clone, Debug, Default)]
struct Row {
    lo: usize,
    vals: Vec<f64>,
}

impl Row {
    fn get(&self, m: usize) -> f64 {
        if m < self.lo || self.vals.is_empty() {
            f64::INFINITY
        } else {
            self.vals[(m - self.lo).min(self.vals.len() - 1)]
        }
    }

    /// Compresses a full row (indexed by m from 0).
    fn from_full(full: &[f64]) -> Row {
        let Some(lo) = full.iter().position(|v| v.is_finite()) else {
            return Row::default();
        };
        let last = *full.last().expect("non-empty");
        let end = full.iter().rposition(|&v| v != last).map_or(lo, |p| p + 1);
        Row {
            lo,
            vals: full[lo..=end.max(lo)].to_vec(),
        }
    }
}

/// `out[m] = min(out[m], base + a(m − shift) + b(m − shift_b))` for `m >= start`, with
/// `b = Some((row, shift_b))`. Where both rows
/// have reached their constant tails the value is constant in `m`: it is pushed to
/// `tails` as `(from, value)` instead of being written out (see [`apply_tails`]).
fn combine(
    out: &mut [f64],
    tails: &mut Vec<(usize, f64)>,
    start: usize,
    base: f64,
    a: &Row,
    shift: usize,
    b: Option<(&Row, isize)>,
) {
    let top = out.len();
    if a.vals.is_empty() {
        return;
    }
    let mut m = start.max(a.lo + shift);
    // b's row and the first m it is defined at (negative: before 0).
    let b = b.map(|(row, sh)| (row, row.lo as isize + sh));
    if let Some((b, blo)) = b {
        if b.vals.is_empty() {
            return;
        }
        m = m.max(blo.max(0) as usize);
    }
    while m < top {
        // A stretch where both indices advance, or one is clamped at its last value.
        let ia = m - shift - a.lo;
        let a_end = if ia + 1 < a.vals.len() {
            a.lo + shift + a.vals.len() - 1
        } else {
            top
        };
        match b {
            Some((b, blo)) => {
                let ib = (m as isize - blo) as usize;
                let b_end = if ib + 1 < b.vals.len() {
                    (blo + b.vals.len() as isize - 1) as usize
                } else {
                    top
                };
                let end = a_end.min(b_end).min(top).max(m + 1);
                let len = end - m;
                let av = &a.vals[ia.min(a.vals.len() - 1)..];
                let bv = &b.vals[ib.min(b.vals.len() - 1)..];
                let o = &mut out[m..end];
                match (ia + 1 < a.vals.len(), ib + 1 < b.vals.len()) {
                    (true, true) => {
                        for ((o, &x), &y) in o.iter_mut().zip(&av[..len]).zip(&bv[..len]) {
                            let v = base + x + y;
                            if v < *o {
                                *o = v;
                            }
                        }
                    }
                    (true, false) => {
                        let y = bv[0];
                        for (o, &x) in o.iter_mut().zip(&av[..len]) {
                            let v = base + x + y;
                            if v < *o {
                                *o = v;
                            }
                        }
                    }
                    (false, true) => {
                        let x = av[0];
                        for (o, &y) in o.iter_mut().zip(&bv[..len]) {
                            let v = base + x + y;
                            if v < *o {
                                *o = v;
                            }
                        }
                    }
                    (false, false) => {
                        tails.push((m, base + av[0] + bv[0]));
                        return;
                    }
                }
                m = end;
            }
            None => {
                let end = a_end.min(top).max(m + 1);
                let len = end - m;
                let av = &a.vals[ia.min(a.vals.len() - 1)..];
                let o = &mut out[m..end];
                if ia + 1 < a.vals.len() {
                    for (o, &x) in o.iter_mut().zip(&av[..len]) {
                        let v = base + x;
                        if v < *o {
                            *o = v;
                        }
                    }
                } else {
                    tails.push((m, base + av[0]));
                    return;
                }
                m = end;
            }
        }
    }
}

/// The cost of sub-problem `(a, b)` without recomputation: every `G_j` once and every
/// `F_j` whose output something in the segment reads, once. A lower bound on every option.
fn no_recompute_cost(c: &DpChain, a: usize, b: usize) -> f64 {
    let n = c.l + 1;
    let mut cost = 0.0;
    // Whether x_j is read within the segment, from b down.
    let mut needed = false;
    for j in (a + 1..=b).rev() {
        let read_later = j < b && (needed || c.reads_input[j + 1]);
        needed = read_later || j == n || (j < n && c.reads_output[j]);
        if needed {
            cost += c.fw[j];
        }
        if j < n {
            cost += c.bw[j];
        }
    }
    cost
}

/// Lowers `settled` past the entries of `full` that equal the lower bound `lb`.
fn settle(full: &[f64], settled: &mut usize, lb: f64) {
    while *settled > 0 && full[*settled - 1] <= lb {
        *settled -= 1;
    }
}

/// Applies the constant tails `(from, v)`: `out[m] = min(out[m], v)` for `m >= from`.
fn apply_tails(out: &mut [f64], tails: &mut Vec<(usize, f64)>) {
    tails.sort_unstable_by_key(|t| t.0);
    let mut best = f64::INFINITY;
    let mut next = tails.iter().peekable();
    let Some(&&(first, _)) = next.peek() else {
        return;
    };
    for (m, o) in out.iter_mut().enumerate().skip(first) {
        while let Some(&&(from, v)) = next.peek() {
            if from > m {
                break;
            }
            best = best.min(v);
            next.next();
        }
        if best < *o {
            *o = best;
        }
    }
    tails.clear();
}

/// A chain in DP form: stages `1..=L+1` (the loss last), sizes in slots and in bytes.
/// Index 0 and `L+2` are padding.
#[derive(Clone, Debug)]
pub struct DpChain {
    l: usize,
    fw: Vec<f64>,
    bw: Vec<f64>,
    /// `X_j` in slots, `j = 0..=L+1` (`X_0 = 0`).
    x: Vec<usize>,
    /// `D_j` in slots, `j = 0..=L+2` (`D_{L+2} = 0`, `D_{L+1} = X_{L+1}`).
    d: Vec<usize>,
    x_bytes: Vec<u64>,
    d_bytes: Vec<u64>,
    reads_input: Vec<bool>,
    reads_output: Vec<bool>,
    /// `kept[j]`: `G_{j−1}` reads `x_j` (its next output), so `x_j` stays resident from
    /// `G_j` to `G_{j−1}` as part of the held gradient `δ'_j` (see the module docs).
    kept: Vec<bool>,
    /// Node indices: `fnode[j]` are the ops of `F_j` (`F_{L+1}` the loss), `gnode[j]`
    /// those of `G_j` (one each for a chain, one per branch for Equiv-Chain).
    fnode: Vec<Vec<usize>>,
    gnode: Vec<Vec<usize>>,
}

impl DpChain {
    /// The DP form of `chain` with slot size `q` bytes.
    pub fn new(chain: &Chain, q: u64) -> DpChain {
        DpChain::levels(
            chain.stages.iter().map(|st| vec![st.clone()]).collect(),
            (chain.loss, chain.loss_cost, chain.loss_size),
            q,
        )
    }

    /// Equiv-Chain (Beaumont et al. 2020, Fig. 9): the join as a chain of `max_b L_b`
    /// levels aligned at the loss; level `j` holds stage `j − (L_max − L_b)` of every
    /// branch `b` that has one, with costs and sizes summed and the backward reads united.
    pub fn equiv_chain(join: &Join, q: u64) -> DpChain {
        let depth = join.branches.iter().map(Vec::len).max().unwrap_or(0);
        let levels = (1..=depth)
            .map(|j| {
                join.branches
                    .iter()
                    .filter_map(|br| (j + br.len()).checked_sub(depth + 1).map(|i| br[i].clone()))
                    .collect()
            })
            .collect();
        DpChain::levels(levels, (join.loss, join.loss_cost, join.loss_size), q)
    }

    /// Stages made of one or more chain stages run together.
    fn levels(levels: Vec<Vec<Stage>>, loss: (usize, f64, u64), q: u64) -> DpChain {
        let l = levels.len();
        let slots = |b: u64| b.div_ceil(q) as usize;
        let mut c = DpChain {
            l,
            fw: vec![0.0; l + 2],
            bw: vec![0.0; l + 2],
            x: vec![0; l + 2],
            d: vec![0; l + 3],
            x_bytes: vec![0; l + 2],
            d_bytes: vec![0; l + 3],
            reads_input: vec![false; l + 2],
            reads_output: vec![false; l + 2],
            kept: vec![false; l + 3],
            fnode: vec![Vec::new(); l + 2],
            gnode: vec![Vec::new(); l + 2],
        };
        for (i, level) in levels.iter().enumerate() {
            let j = i + 1;
            for st in level {
                c.fw[j] += st.fw;
                c.bw[j] += st.bw;
                c.x_bytes[j] += st.x;
                c.d_bytes[j] += st.delta;
                c.reads_input[j] |= st.reads_input;
                c.reads_output[j] |= st.reads_output;
                // Within a branch the next stage sits on the next level.
                c.kept[j + 1] |= st.reads_next_output;
                c.fnode[j].push(st.forward);
                c.gnode[j].push(st.backward);
            }
        }
        let (loss, loss_cost, loss_size) = loss;
        c.fw[l + 1] = loss_cost;
        c.x_bytes[l + 1] = loss_size;
        c.d_bytes[l + 1] = loss_size;
        // A kept `x_j` is resident at `G_j`: the plans treat `G_j` as reading it.
        for j in 1..=l {
            c.reads_output[j] |= c.kept[j];
        }
        c.kept[l + 1] = false;
        c.fnode[l + 1] = vec![loss];
        c.gnode[l + 1] = vec![loss];
        c.x = c.x_bytes.iter().map(|&b| slots(b)).collect();
        c.d = c.d_bytes.iter().map(|&b| slots(b)).collect();
        c
    }
}

/// Memory sizes in either unit, for the shared peak/feasibility formulas.
trait Sizes {
    fn x(&self, j: usize) -> u64;
    fn d(&self, j: usize) -> u64;
    fn kept(&self, j: usize) -> bool;
    /// `|δ'_j|`: the gradient `δ_j` as held until `G_{j−1}`, with `x_j` when it is kept.
    fn held(&self, j: usize) -> u64 {
        self.d(j) + if self.kept(j) { self.x(j) } else { 0 }
    }
}
struct Slots<'a>(&'a DpChain);
struct Bytes<'a>(&'a DpChain);
impl Sizes for Slots<'_> {
    fn x(&self, j: usize) -> u64 {
        self.0.x[j] as u64
    }
    fn d(&self, j: usize) -> u64 {
        self.0.d[j] as u64
    }
    fn kept(&self, j: usize) -> bool {
        self.0.kept[j]
    }
}
impl Sizes for Bytes<'_> {
    fn x(&self, j: usize) -> u64 {
        self.0.x_bytes[j]
    }
    fn d(&self, j: usize) -> u64 {
        self.0.d_bytes[j]
    }
    fn kept(&self, j: usize) -> bool {
        self.0.kept[j]
    }
}

/// One option of sub-problem `(a, b)`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Choice {
    Base,
    FAll,
    Ck(usize),
    CkKeep(usize),
    /// F_ck at `L` whose last output is freed right after the loss (join DP).
    CkRelease,
    /// F_ck at `L` freed right after the loss, then the second turn (join DP).
    CkSecond,
}

/// Local memory needs of each option (everything but the sub-problems), in `S`'s unit.
fn base_need(c: &DpChain, s: &impl Sizes, j: usize) -> u64 {
    if j == c.l + 1 {
        s.x(j)
    } else if c.reads_output[j] {
        s.held(j + 1) + s.x(j) + s.d(j)
    } else {
        s.held(j + 1) + s.d(j)
    }
}
/// `h`: the memory change at the turn (see [`Table`]'s `offset`), in the same unit.
fn fall_need(s: &impl Sizes, a: usize, b: usize, h: isize) -> usize {
    ((s.held(b + 1) + s.x(a + 1)) as usize).max(plus(s.x(a + 1) + s.held(a + 2) + s.d(a + 1), h))
}

/// `x + h`, at least 0.
fn plus(x: u64, h: isize) -> usize {
    (x as isize + h).max(0) as usize
}

/// Where a branch sits in a join (the join DP, `join_dp`); the default is a
/// plain chain.
#[derive(Default)]
pub struct Nest {
    /// The rest of the join, run in place of the loss stage while this branch's last
    /// output is held.
    pub inner: Option<Box<Table>>,
    /// The rest of the join built for this branch's last output being freed right after
    /// the loss (an option of F_ck at `L`).
    pub inner_released: Option<Box<Table>>,
    /// The loss output stays resident after this branch (an outer branch needs it).
    pub holds_loss: bool,
    /// Slots and bytes of outer branches' last outputs freed right after the loss, and
    /// their nodes.
    pub released: usize,
    pub released_bytes: u64,
    pub release_nodes: Vec<usize>,
    /// The second turn: an option of F_ck at `L` (see [`SecondTurn`]).
    pub second: Option<SecondTurn>,
}

/// The second turn of a branch of a join (the join DP, `join_dp`): F_ck at `L` keeps
/// `x_L`, the rest of the join runs with `x_L` freed right after the loss and owns the
/// loss output (its outermost branch frees it after its `G_L`), [`Resweep`] recomputes
/// the inner branches' last outputs, and this branch solves `table` from `x_a`: its own
/// chain, whose loss stage recomputes the loss from them.
pub struct SecondTurn {
    pub inner: Box<Table>,
    pub resweep: Resweep,
    /// This branch's chain with `resweep`'s ends held outside until the loss, freed right
    /// after it (its `Nest::released`).
    pub table: Box<Table>,
}

/// The F∅ sweeps that recompute the inner branches' last outputs after their backward
/// phase, in the memory model of the simulator.
pub struct Resweep {
    /// Total cost of the sweeps.
    pub cost: f64,
    /// Peak of the sweeps, in slots and bytes.
    pub need: usize,
    pub need_bytes: u64,
    /// The last outputs left resident, in slots and bytes.
    pub ends: usize,
    pub ends_bytes: u64,
    /// The node `x_1` of the first inner branch when the sweep starts from it: it is
    /// resident after that branch's last `G_1`, which read it, and is not freed there.
    pub keep: Option<usize>,
    pub events: Vec<Event>,
}

impl Resweep {
    /// Appends the sweeps after the inner join's events `ev`.
    fn emit(&self, ev: &mut Vec<Event>) {
        if let Some(v) = self.keep {
            let at = ev
                .iter()
                .rposition(|e| *e == Event::Free(v))
                .expect("x_1 is freed after the last G_1");
            ev.remove(at);
        }
        ev.extend_from_slice(&self.events);
    }
}
/// Peak of the F∅ sweep `F_{a+1}..F_k` while `δ_{b+1}` is resident.
fn sweep_need(s: &impl Sizes, a: usize, b: usize, k: usize) -> u64 {
    s.held(b + 1)
        + (a + 1..=k)
            .map(|l| if l - 1 > a { s.x(l - 1) } else { 0 } + s.x(l))
            .max()
            .unwrap_or(0)
}
fn keep_need(s: &impl Sizes, k: usize) -> u64 {
    s.x(k) + s.held(k + 1) + s.d(k)
}

/// Which options the DP may use: rotor's full persistent space, or one of Gruslys'
/// restricted policies (BPTT-HSM keeps hidden states only: F_ck; BPTT-ISM keeps internal
/// states only: F_all and F_ck kept for its backward). The base case is always allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// F_ck at `k`, freed before the left part.
    pub ck: bool,
    /// F_all at `a + 1` and F_ck at `k` kept for `G_k`.
    pub keep: bool,
}

impl Policy {
    pub const ALL: Policy = Policy {
        ck: true,
        keep: true,
    };
}

/// The DP table for one chain and one slot budget.
pub struct Table {
    chain: DpChain,
    policy: Policy,
    /// The join DP's nesting: the table whose top-level problem replaces this chain's
    /// loss stage (see [`super::join_dp`]).
    inner: Option<Box<Table>>,
    /// The same with this branch's last output freed right after the loss.
    inner_released: Option<Box<Table>>,
    /// Whether the loss output stays resident after this branch (an outer branch still
    /// needs it): then `δ_{L+1}` lies outside every backward-only sub-problem.
    holds_loss: bool,
    /// The change of memory at the turn, outside this table's own accounting, in slots
    /// and bytes: `+|loss|` when it holds the loss output, minus the last outputs of the
    /// outer branches freed right after the loss.
    offset: isize,
    offset_bytes: i64,
    /// The nodes freed right after the loss (computed by the innermost branch).
    release_nodes: Vec<usize>,
    /// `C` of the loss stage's base case with the last output freed at the turn.
    release_row: Option<Row>,
    /// The second turn, and the top row of its inner join.
    second: Option<(SecondTurn, Row)>,
    m: usize,
    /// `rows[b][a]` for `0 <= a < b <= L+1`.
    rows: Vec<Vec<Row>>,
}

/// Cancelled or out of time while filling the table.
#[derive(Debug)]
pub struct Interrupted;

impl Table {
    /// Fills `C(a, b, m')` for every `m' <= m`. `poll` is called before each row and stops
    /// the fill when it returns false.
    pub fn fill(
        chain: DpChain,
        policy: Policy,
        m: usize,
        poll: impl FnMut(f64) -> bool,
    ) -> Result<Table, Interrupted> {
        Table::fill_nested(chain, policy, m, Nest::default(), poll)
    }

    /// [`Table::fill`] for a branch of a join placed as `nest` says.
    pub fn fill_nested(
        mut chain: DpChain,
        policy: Policy,
        m: usize,
        nest: Nest,
        mut poll: impl FnMut(f64) -> bool,
    ) -> Result<Table, Interrupted> {
        let n = chain.l + 1; // stages 1..=n
        let Nest {
            inner,
            inner_released,
            holds_loss,
            released,
            released_bytes,
            release_nodes,
            second,
        } = nest;
        let (mut offset, mut offset_bytes) = (-(released as isize), -(released_bytes as i64));
        if holds_loss {
            offset += chain.x[n] as isize;
            offset_bytes += chain.x_bytes[n] as i64;
            chain.d[n] = 0;
            chain.d_bytes[n] = 0;
        }
        // The base case of the loss stage with the last output freed at the turn.
        let release_row = inner_released.as_deref().map(|t| t.top_row(m));
        let second = second.map(|st| {
            let row = st.inner.top_row(m);
            (st, row)
        });
        let mut rows: Vec<Vec<Row>> = (0..=n).map(|b| vec![Row::default(); b]).collect();
        let mut full = vec![f64::INFINITY; m + 1];
        let mut tails = Vec::new();
        // C(b, b, ·) = 0: the empty right part of an F_ck kept at k = b.
        let zero = Row {
            lo: 0,
            vals: vec![0.0],
        };
        let s = Slots(&chain);
        for len in 1..=n {
            for a in 0..=n - len {
                if !poll(len as f64 / n as f64) {
                    return Err(Interrupted);
                }
                let b = a + len;
                full.fill(f64::INFINITY);
                // The memory change at the turn applies after the right part.
                let h = if b == n { offset } else { 0 };
                if len == 1 && b == n && inner.is_some() {
                    let inner = inner.as_deref().expect("checked");
                    for (mm, v) in full.iter_mut().enumerate() {
                        *v = inner.c(0, inner.chain.l + 1, mm);
                    }
                } else if len == 1 {
                    let need = base_need(&chain, &s, b) as usize;
                    let cost = chain.fw[b] * f64::from(u8::from(chain.reads_output[b] || b == n))
                        + if b == n { 0.0 } else { chain.bw[b] };
                    if need <= m {
                        full[need..].fill(cost);
                    }
                } else {
                    // No option beats computing every op of the segment once: where
                    // `full` reaches that bound it is final, and later options skip it.
                    let lb = if b == n && inner.is_some() {
                        f64::NEG_INFINITY
                    } else {
                        no_recompute_cost(&chain, a, b)
                    };
                    let mut settled = full.len();
                    if policy.keep {
                        // F_all at a+1.
                        combine(
                            &mut full[..settled],
                            &mut tails,
                            fall_need(&s, a, b, h),
                            chain.fw[a + 1] + chain.bw[a + 1],
                            &rows[b][a + 1],
                            chain.x[a + 1],
                            None,
                        );
                        settle(&full, &mut settled, lb);
                    }
                    let mut fc = 0.0;
                    let mut sweep = 0usize;
                    for k in a + 1..=b.min(chain.l) {
                        fc += chain.fw[k];
                        sweep = sweep.max(if k - 1 > a { chain.x[k - 1] } else { 0 } + chain.x[k]);
                        let start = s.held(b + 1) as usize + sweep;
                        // The right part C(k, b, m − X_k); empty when k = b.
                        let (right, shift) = if k < b {
                            (&rows[b][k], chain.x[k])
                        } else {
                            (&zero, 0)
                        };
                        if policy.ck && k < b {
                            combine(
                                &mut full[..settled],
                                &mut tails,
                                start,
                                fc,
                                right,
                                shift,
                                Some((&rows[k][a], h)),
                            );
                            settle(&full, &mut settled, lb);
                        }
                        if let (true, Some(release)) =
                            (policy.ck && b == n && k == chain.l, &release_row)
                        {
                            combine(
                                &mut full[..settled],
                                &mut tails,
                                start,
                                fc,
                                release,
                                shift,
                                Some((&rows[k][a], h)),
                            );
                            settle(&full, &mut settled, lb);
                        }
                        if let (true, Some((st, inner))) =
                            (policy.ck && b == n && k == chain.l, &second)
                        {
                            let rs = &st.resweep;
                            combine(
                                &mut full[..settled],
                                &mut tails,
                                start.max(rs.need),
                                fc + rs.cost,
                                inner,
                                shift,
                                Some((&st.table.rows[n][a], rs.ends as isize)),
                            );
                            settle(&full, &mut settled, lb);
                        }
                        if policy.keep && k > a + 1 && !chain.reads_input[k] {
                            let start = start.max(plus(keep_need(&s, k), h));
                            combine(
                                &mut full[..settled],
                                &mut tails,
                                start,
                                fc + chain.bw[k],
                                right,
                                shift,
                                Some((&rows[k - 1][a], h)),
                            );
                            settle(&full, &mut settled, lb);
                        }
                    }
                }
                apply_tails(&mut full, &mut tails);
                rows[b][a] = Row::from_full(&full);
            }
        }
        Ok(Table {
            chain,
            policy,
            inner,
            inner_released,
            holds_loss,
            offset,
            offset_bytes,
            release_nodes,
            release_row,
            second,
            m,
            rows,
        })
    }

    /// `C(0, L+1, m')` for `m' <= m` as a row.
    fn top_row(&self, m: usize) -> Row {
        let full: Vec<f64> = (0..=m).map(|mm| self.c(0, self.chain.l + 1, mm)).collect();
        Row::from_full(&full)
    }

    fn c(&self, a: usize, b: usize, m: usize) -> f64 {
        if a == b {
            0.0
        } else {
            self.rows[b][a].get(m)
        }
    }

    /// The optimal cost `C(0, L+1, m)`, infinite when infeasible.
    pub fn cost(&self) -> f64 {
        self.c(0, self.chain.l + 1, self.m)
    }

    /// The smallest slot budget at which the chain is feasible, if any `<= m`.
    pub fn min_slots(&self) -> Option<usize> {
        let r = &self.rows[self.chain.l + 1][0];
        (!r.vals.is_empty()).then_some(r.lo)
    }

    /// The budget `m − h` of a part run after the turn, capped at the table's budget (the
    /// plan for `m` fits any larger budget); `None` when negative.
    fn after_turn(&self, m: usize, h: isize) -> Option<usize> {
        usize::try_from(m as isize - h).ok().map(|v| v.min(self.m))
    }

    /// The option that attains `C(a, b, m)` (same arithmetic as [`Table::fill`]).
    fn choice(&self, a: usize, b: usize, m: usize) -> Choice {
        let c = &self.chain;
        let s = Slots(c);
        let target = self.c(a, b, m);
        if b == a + 1 {
            return Choice::Base;
        }
        let xa1 = c.x[a + 1];
        let p = self.policy;
        let n = c.l + 1;
        let h = if b == n { self.offset } else { 0 };
        if p.keep
            && fall_need(&s, a, b, h) <= m
            && m >= xa1
            && c.fw[a + 1] + c.bw[a + 1] + self.c(a + 1, b, m - xa1) == target
        {
            return Choice::FAll;
        }
        let mut fc = 0.0;
        for k in a + 1..=b.min(c.l) {
            fc += c.fw[k];
            if sweep_need(&s, a, b, k) as usize > m || c.x[k] > m {
                continue;
            }
            if let (true, Some((st, inner))) = (p.ck && b == n && k == c.l, &self.second) {
                let rs = &st.resweep;
                if rs.need <= m
                    && rs.ends <= m
                    && fc + rs.cost + inner.get(m - c.x[k]) + st.table.c(a, b, m - rs.ends)
                        == target
                {
                    return Choice::CkSecond;
                }
            }
            let Some(mh) = self.after_turn(m, h) else {
                continue;
            };
            let right = self.c(k, b, m - c.x[k]);
            if p.ck && k < b && fc + right + self.c(a, k, mh) == target {
                return Choice::Ck(k);
            }
            if let (true, Some(release)) = (p.ck && b == n && k == c.l, &self.release_row) {
                if fc + release.get(m - c.x[k]) + self.c(a, k, mh) == target {
                    return Choice::CkRelease;
                }
            }
            if p.keep
                && k > a + 1
                && !c.reads_input[k]
                && plus(keep_need(&s, k), h) <= m
                && fc + c.bw[k] + right + self.c(a, k - 1, mh) == target
            {
                return Choice::CkKeep(k);
            }
        }
        unreachable!("a finite C(a, b, m) is attained by one of its options")
    }

    /// The schedule of the optimal plan, and its peak in bytes (excluding `K`).
    pub fn schedule(&self) -> (Schedule, u64) {
        let mut events = Vec::new();
        let peak = self.emit(0, self.chain.l + 1, self.m, &mut events);
        (Schedule::new(events), peak)
    }

    /// Runs the rest of the join (the loss stage of a nested branch) with budget `m`;
    /// returns its peak.
    fn emit_inner(inner: &Table, m: usize, ev: &mut Vec<Event>) -> u64 {
        let peak = inner.emit(0, inner.chain.l + 1, m.min(inner.m), ev);
        // The inner branches' first gradients δ_1 are final: free them.
        ev.extend(inner.chain.gnode[1].iter().map(|&v| Event::Free(v)));
        peak
    }

    /// Emits the plan of `(a, b, m)`; returns its peak in bytes (δ_{b+1} included, x_a not).
    fn emit(&self, a: usize, b: usize, m: usize, ev: &mut Vec<Event>) -> u64 {
        let m = m.min(self.m);
        let c = &self.chain;
        let by = Bytes(c);
        let n = c.l + 1;
        let compute = |ev: &mut Vec<Event>, nodes: &[usize]| {
            ev.extend(nodes.iter().map(|&v| Event::Compute(v)));
        };
        let free = |ev: &mut Vec<Event>, nodes: &[usize]| {
            ev.extend(nodes.iter().map(|&v| Event::Free(v)));
        };
        // δ'_j after its last reader G_{j−1}: δ_j, and x_j when kept. The loss output is
        // freed here unless an outer branch still needs it.
        let free_grad = |ev: &mut Vec<Event>, j: usize| {
            if j < n || (j == n && !self.holds_loss) {
                free(ev, &c.gnode[j]);
            }
            if c.kept[j] {
                free(ev, &c.fnode[j]);
            }
        };
        // x_j after G_j, unless it is kept for G_{j−1}.
        let free_output = |ev: &mut Vec<Event>, j: usize| {
            if !c.kept[j] {
                free(ev, &c.fnode[j]);
            }
        };
        let (h, hb) = if b == n {
            (self.offset, self.offset_bytes)
        } else {
            (0, 0)
        };
        // A peak after the turn, in this table's accounting.
        let shifted = |peak: u64| (peak as i64 + hb).max(0) as u64;
        let choice = self.choice(a, b, m);
        match choice {
            Choice::Base => {
                let j = b;
                if let (true, Some(inner)) = (j == n, &self.inner) {
                    return Table::emit_inner(inner, m, ev);
                }
                if j == n {
                    compute(ev, &c.fnode[n]);
                    free(ev, &self.release_nodes);
                } else {
                    if c.reads_output[j] {
                        compute(ev, &c.fnode[j]);
                    }
                    compute(ev, &c.gnode[j]);
                    if c.reads_output[j] {
                        free_output(ev, j);
                    }
                    free_grad(ev, j + 1);
                }
                base_need(c, &by, j)
            }
            Choice::FAll => {
                let j = a + 1;
                compute(ev, &c.fnode[j]);
                let inner = self.emit(j, b, m - c.x[j], ev);
                compute(ev, &c.gnode[j]);
                free_output(ev, j);
                free_grad(ev, j + 1);
                (fall_need(&by, a, b, hb as isize) as u64).max(by.x(j) + inner)
            }
            Choice::Ck(_) | Choice::CkKeep(_) | Choice::CkRelease | Choice::CkSecond => {
                let k = match choice {
                    Choice::Ck(k) | Choice::CkKeep(k) => k,
                    _ => c.l,
                };
                for l in a + 1..=k {
                    compute(ev, &c.fnode[l]);
                    if l - 1 > a {
                        free(ev, &c.fnode[l - 1]);
                    }
                }
                let right = match (choice, &self.inner_released, &self.second) {
                    (Choice::CkRelease, Some(inner), _) => {
                        by.x(k) + Table::emit_inner(inner, m - c.x[k], ev)
                    }
                    (Choice::CkSecond, _, Some((st, _))) => {
                        let first = by.x(k) + Table::emit_inner(&st.inner, m - c.x[k], ev);
                        st.resweep.emit(ev);
                        let rs = &st.resweep;
                        let left = st.table.emit(a, b, m - rs.ends, ev);
                        // The second turn is the whole left part.
                        return sweep_need(&by, a, b, k)
                            .max(first)
                            .max(rs.need_bytes)
                            .max(rs.ends_bytes + left);
                    }
                    _ if k < b => by.x(k) + self.emit(k, b, m - c.x[k], ev),
                    _ => 0,
                };
                let mut peak = sweep_need(&by, a, b, k).max(right);
                let left_end = match choice {
                    Choice::CkKeep(_) => {
                        compute(ev, &c.gnode[k]);
                        free_output(ev, k);
                        free_grad(ev, k + 1);
                        peak = peak.max(shifted(keep_need(&by, k)));
                        k - 1
                    }
                    // Freed right after the loss.
                    Choice::CkRelease => k,
                    _ => {
                        free(ev, &c.fnode[k]);
                        k
                    }
                };
                if left_end > a {
                    let mh = self.after_turn(m, h).expect("the choice checked it");
                    peak = peak.max(shifted(self.emit(a, left_end, mh, ev)));
                }
                peak
            }
        }
    }
}

/// The number of slots (at most `slots`) whose table for `l` stages fits
/// [`MAX_TABLE_BYTES`].
fn capped_slots(l: usize, slots: u64) -> u64 {
    let pairs = (l as u64 + 2) * (l as u64 + 1) / 2;
    slots.min((MAX_TABLE_BYTES / (8 * pairs)).saturating_sub(1).max(1))
}

/// The slot size for a working budget of `w` bytes split into `slots` slots.
pub fn slot_size(w: u64, slots: u64) -> u64 {
    w.div_ceil(slots.max(1)).max(1)
}

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

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        solve_graph(
            "chain-dp",
            Policy::ALL,
            Scope::OptimalAmongPersistent,
            instance,
            options,
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
    let chain = structure::chain(instance.graph).map_err(|e| SolveError::Unsupported {
        solver,
        reason: format!("the graph is not a chain: {e}"),
    })?;
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
            proven: true,
            reason: format!("fixed_memory {k} exceeds the budget {}", instance.budget),
        });
    };
    solve_dp(build, policy, w, DEFAULT_SLOTS, options).map(|o| o.into_outcome(solver, scope, k))
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

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        let join = structure::join(instance.graph).map_err(|e| SolveError::Unsupported {
            solver: "equiv-chain",
            reason: format!("the graph is not a join graph: {e}"),
        })?;
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

/// A chain DP answer before it becomes an [`Outcome`].
pub struct ChainAnswer {
    pub plan: Option<(Schedule, f64, u64)>,
    pub slot_size: u64,
    pub slots: usize,
    pub min_slots: Option<usize>,
    pub time_s: f64,
    pub interrupted: bool,
}

impl ChainAnswer {
    /// The outcome for `solver`, whose optimality holds within `scope`.
    pub fn into_outcome(self, solver: &'static str, scope: Scope, k: u64) -> Outcome {
        let details = Details::Slots(SlotDetails {
            predicted_cost: self.plan.as_ref().map(|p| p.1),
            predicted_peak: self.plan.as_ref().map(|p| p.2 + k),
            slot_size: self.slot_size,
            slots: self.slots,
            table_time_s: self.time_s,
        });
        match self.plan {
            Some((schedule, _, _)) => Outcome::Plan(Plan {
                schedule,
                claim: if scope == Scope::Heuristic {
                    Claim::Feasible
                } else {
                    Claim::Optimal
                },
                solver,
                scope,
                lower_bound: None,
                message: (self.slot_size > 1).then(|| {
                    format!(
                        "sizes rounded up to slots of {} bytes; optimal for the rounded sizes",
                        self.slot_size
                    )
                }),
                details: Some(details),
            }),
            None if self.interrupted => Outcome::NoSolution {
                solver,
                reason: "the time limit passed while filling the DP table".into(),
            },
            None => Outcome::Infeasible {
                solver,
                proven: false,
                reason: format!(
                    "no schedule of {solver}'s policy fits {} slots of {} bytes{}",
                    self.slots,
                    self.slot_size,
                    self.min_slots
                        .map(|s| format!(" (the chain needs {s} slots)"))
                        .unwrap_or_default()
                ),
            },
        }
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

/// [`solve_chain`] for the chain `build` makes for a slot size.
fn solve_dp(
    build: impl Fn(u64) -> DpChain,
    policy: Policy,
    w: u64,
    slots: u64,
    options: &SolveOptions,
) -> Result<ChainAnswer, SolveError> {
    let stop = Stop::start(options);
    let mut q = slot_size(w, slots);
    let mut chain = build(q);
    let capped = capped_slots(chain.l, slots);
    if capped < slots {
        q = slot_size(w, capped);
        chain = build(q);
    }
    let m = (w / q) as usize;
    let mut cancelled = false;
    let mut reported = -1.0;
    let table = Table::fill(chain, policy, m, |f| {
        if f > reported {
            reported = f;
            options.report("chain-dp: filling the table", Some(f));
        }
        cancelled = stop.cancelled();
        !stop.should_stop()
    });
    if cancelled {
        return Err(SolveError::Cancelled);
    }
    let time_s = stop.elapsed().as_secs_f64();
    let Ok(table) = table else {
        return Ok(ChainAnswer {
            plan: None,
            slot_size: q,
            slots: m,
            min_slots: None,
            time_s,
            interrupted: true,
        });
    };
    let plan = table.cost().is_finite().then(|| {
        let (schedule, peak) = table.schedule();
        (schedule, table.cost(), peak)
    });
    Ok(ChainAnswer {
        plan,
        slot_size: q,
        slots: m,
        min_slots: table.min_slots(),
        time_s,
        interrupted: false,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{capped_slots, MAX_TABLE_BYTES};
    use crate::graph::generate::{join, join_with, linear};
    use crate::graph::{Graph, GraphSpec, NodeKind, NodeSpec};
    use crate::solve::{revolve::revolve_steps, solve, Instance, SolveOptions, Status};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// One stage for [`chain_graph`]: (fw, bw, |x|, |δ|, reads input, reads output).
    pub(crate) type StageSpec = (f64, f64, u64, u64, bool, bool);

    /// A chain training graph: f1..fL, loss, gL..g1.
    pub(crate) fn chain_graph(stages: &[StageSpec], loss: (f64, u64), fixed: u64) -> Graph {
        chain_graph_reading(stages, &[], loss, fixed)
    }

    /// [`chain_graph`] where `g{j}` also reads `f{j+1}` for each `j` in `next`
    /// (Checkmate's Keras rule reads it for every `j < L`).
    fn chain_graph_reading(
        stages: &[StageSpec],
        next: &[usize],
        loss: (f64, u64),
        fixed: u64,
    ) -> Graph {
        let l = stages.len();
        let mut nodes = Vec::new();
        for (i, st) in stages.iter().enumerate() {
            nodes.push(NodeSpec {
                id: format!("f{}", i + 1),
                cost: st.0,
                memory: st.2,
                inputs: if i == 0 {
                    vec![]
                } else {
                    vec![format!("f{i}")]
                },
                kind: Some(NodeKind::Forward),
                op: None,
            });
        }
        nodes.push(NodeSpec {
            id: "loss".into(),
            cost: loss.0,
            memory: loss.1,
            inputs: vec![format!("f{l}")],
            kind: Some(NodeKind::Loss),
            op: None,
        });
        for j in (1..=l).rev() {
            let st = stages[j - 1];
            let mut inputs = vec![if j == l {
                "loss".to_string()
            } else {
                format!("g{}", j + 1)
            }];
            if st.4 && j > 1 {
                inputs.push(format!("f{}", j - 1));
            }
            if st.5 {
                inputs.push(format!("f{j}"));
            }
            if next.contains(&j) {
                inputs.push(format!("f{}", j + 1));
            }
            nodes.push(NodeSpec {
                id: format!("g{j}"),
                cost: st.1,
                memory: st.3,
                inputs,
                kind: Some(NodeKind::Backward),
                op: None,
            });
        }
        Graph::new(GraphSpec {
            name: None,
            fixed_memory: fixed,
            cost_unit: None,
            nodes,
        })
        .unwrap()
    }

    /// Runs chain-dp through the driver; checks the simulator agrees with the prediction.
    fn dp(g: &Graph, budget: u64) -> Option<f64> {
        run_dp("chain-dp", g, budget)
    }

    /// Runs a DP `solver` through the driver; checks its plan fits the budget and the
    /// simulator agrees with the predicted cost and peak.
    fn run_dp(solver: &str, g: &Graph, budget: u64) -> Option<f64> {
        let r = solve(
            &Instance { graph: g, budget },
            solver,
            &SolveOptions::default(),
        )
        .unwrap();
        match r.status {
            Status::Optimal | Status::Feasible => {
                let stats = r.stats.unwrap();
                let d = serde_json::to_value(r.details.unwrap()).unwrap();
                assert!(stats.peak_memory <= budget);
                assert_eq!(d["predicted_cost"].as_f64(), Some(stats.total_cost));
                assert_eq!(d["predicted_peak"].as_u64(), Some(stats.peak_memory));
                Some(stats.total_cost)
            }
            Status::Infeasible => None,
            other => panic!("{solver} at M = {budget}: {other:?} {:?}", r.message),
        }
    }

    fn exhaustive(g: &Graph, budget: u64) -> Option<f64> {
        let r = solve(
            &Instance { graph: g, budget },
            "exhaustive",
            &SolveOptions::default(),
        )
        .unwrap();
        (r.status == Status::Optimal).then(|| r.stats.unwrap().total_cost)
    }

    #[test]
    fn long_chains_get_fewer_slots() {
        assert_eq!(capped_slots(200, 1000), 1000);
        let s = capped_slots(2000, 500);
        assert!(
            s < 500 && 2002 * 2001 / 2 * 8 * (s + 1) <= MAX_TABLE_BYTES,
            "{s}"
        );
    }

    /// chain-dp against Revolve's closed form and the oracle; `tests/dp_vs_milp.rs` adds
    /// the MILP on `linear(1..=6)` through the driver.
    #[test]
    fn uniform_chains_equal_revolve_and_exhaustive() {
        for n in 1..=6usize {
            let g = linear(n);
            for budget in 1..=(2 * n as u64 + 3) {
                let got = dp(&g, budget);
                let revolve = budget
                    .checked_sub(2)
                    .filter(|&s| s >= 1)
                    .and_then(|s| revolve_steps(n as u64 + 1, s))
                    .map(|t| (t + n as u64 + 1) as f64);
                assert_eq!(got, revolve, "linear({n}) at M = {budget}");
                if g.len() <= 12 {
                    assert_eq!(got, exhaustive(&g, budget), "linear({n}) at M = {budget}");
                }
            }
        }
        // Backward ops reading their input instead, sizes 2, fixed memory 3.
        for n in 1..=5usize {
            let g = chain_graph(&vec![(1.0, 1.0, 2, 2, true, false); n], (1.0, 2), 3);
            for budget in 3..=(3 + 2 * (n as u64 + 3)) {
                assert_eq!(
                    dp(&g, budget),
                    exhaustive(&g, budget),
                    "input-reading n = {n}, M = {budget}"
                );
            }
        }
    }

    /// Compares `cases` with the fixture `tests/fixtures/{name}`; `REMAT_BLESS=1` rewrites it.
    fn check_fixture(name: &str, about: &str, pairs: usize, cases: serde_json::Value) {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        if std::env::var_os("REMAT_BLESS").is_some() {
            let text = serde_json::to_string_pretty(&serde_json::json!({
                "about": about,
                "pairs_checked": pairs,
                "cases": cases,
            }))
            .unwrap();
            std::fs::write(&path, text + "\n").unwrap();
        }
        let fixture: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            fixture["pairs_checked"].as_u64(),
            Some(pairs as u64),
            "{name}"
        );
        assert_eq!(fixture["cases"], cases, "{name}");
    }

    fn random_chain(seed: u64) -> Graph {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let l = rng.random_range(1..=5usize);
        let stages: Vec<StageSpec> = (0..l)
            .map(|i| {
                let pattern = rng.random_range(0..4u8);
                (
                    rng.random_range(1..=5u32) as f64,
                    rng.random_range(1..=5u32) as f64,
                    rng.random_range(1..=4u64),
                    rng.random_range(1..=4u64),
                    i > 0 && pattern & 1 == 1,
                    pattern & 2 == 2 || (i == 0 && pattern == 1),
                )
            })
            .collect();
        chain_graph(
            &stages,
            (
                rng.random_range(1..=3u32) as f64,
                rng.random_range(1..=4u64),
            ),
            0,
        )
    }

    /// Cases where the persistent optimum is above the global optimum, as the fixture
    /// lists them.
    #[derive(serde::Serialize)]
    struct AboveCase {
        seed: u64,
        budget: u64,
        chain_dp: Option<f64>,
        optimum: f64,
    }

    #[test]
    fn heterogeneous_chains_never_below_exhaustive() {
        let mut above = Vec::new();
        let mut pairs = 0;
        for seed in 0..60u64 {
            let g = random_chain(seed);
            let (lo, _) = g.min_feasible_budget();
            let hi = crate::solve::baseline::checkpoint_all_peak(&g);
            for budget in lo..=hi {
                let Some(opt) = exhaustive(&g, budget) else {
                    assert_eq!(dp(&g, budget), None, "seed {seed}, M = {budget}");
                    continue;
                };
                pairs += 1;
                let got = dp(&g, budget);
                if got.is_none_or(|c| c > opt) {
                    above.push(AboveCase {
                        seed,
                        budget,
                        chain_dp: got,
                        optimum: opt,
                    });
                } else {
                    assert_eq!(
                        got,
                        Some(opt),
                        "seed {seed}, M = {budget}: below the optimum"
                    );
                }
            }
        }
        check_fixture(
            "chain_dp_above_exhaustive.json",
            "random heterogeneous chains (chain_dp::tests::random_chain(seed)) and budgets where the persistent chain DP is above the exhaustive optimum",
            pairs,
            serde_json::json!(above),
        );
    }

    /// A chain whose backward ops read the next stage's output: on even seeds Checkmate's
    /// Keras rule (checkmate.md §4.3: every `G_j` reads `x_j` and, for `j < L`, `x_{j+1}`),
    /// on odd seeds random read patterns with `x_{j+1}` read for a random subset of `j`.
    /// Random costs and sizes, at most 5 stages (11 nodes).
    fn next_reading_chain(seed: u64) -> (Graph, Vec<usize>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let l = rng.random_range(1..=5usize);
        let mixed = seed % 2 == 1;
        let stages: Vec<StageSpec> = (0..l)
            .map(|i| {
                let pattern = if mixed { rng.random_range(0..4u8) } else { 2 };
                (
                    rng.random_range(1..=5u32) as f64,
                    rng.random_range(1..=5u32) as f64,
                    rng.random_range(1..=4u64),
                    rng.random_range(1..=4u64),
                    i > 0 && pattern & 1 == 1,
                    pattern & 2 == 2,
                )
            })
            .collect();
        let next: Vec<usize> = (1..l).filter(|_| !mixed || rng.random_bool(0.5)).collect();
        let loss = (
            rng.random_range(1..=3u32) as f64,
            rng.random_range(1..=4u64),
        );
        (chain_graph_reading(&stages, &next, loss, 0), next)
    }

    /// Keras-style chains, uniform (`L = 1..=5`, unit costs and sizes) and random
    /// ([`next_reading_chain`]): detected as chains with `reads_next_output` where `G_j`
    /// reads `x_{j+1}`; every budget: chain-dp's plan passes the simulator within budget
    /// with the predicted cost and peak (checked in `dp`), is never below the exhaustive
    /// optimum, and the cases above it are those the fixture lists.
    #[test]
    fn next_output_chains_against_exhaustive() {
        let uniform = (1..=5usize).map(|l| {
            let next: Vec<usize> = (1..l).collect();
            let stages = vec![(1.0, 1.0, 1, 1, false, true); l];
            (
                format!("uniform L={l}"),
                chain_graph_reading(&stages, &next, (1.0, 1), 0),
                next,
            )
        });
        let random = (0..40u64).map(|seed| {
            let (g, next) = next_reading_chain(seed);
            (format!("seed {seed}"), g, next)
        });
        let cases = uniform.chain(random).map(|(name, g, next)| {
            let chain = crate::graph::structure::chain(&g).unwrap();
            for (i, st) in chain.stages.iter().enumerate() {
                assert_eq!(st.reads_next_output, next.contains(&(i + 1)), "{name}");
            }
            (name, g)
        });
        against_exhaustive(
            "chain-dp",
            cases,
            "chain_dp_next_output_above_exhaustive.json",
            "chains whose backward ops read the next stage's output (chain_dp::tests::next_output_chains_against_exhaustive) and budgets where chain-dp is above the exhaustive optimum (None = reported infeasible)",
        );
    }

    /// Runs the DP `solver` on each named graph at every budget from the least feasible
    /// to the checkpoint-all peak: infeasible only where the oracle is, never below the
    /// optimum (and checked by [`run_dp`]); the pairs above it are compared with the
    /// fixture `name` ([`check_fixture`]).
    fn against_exhaustive(
        solver: &str,
        cases: impl IntoIterator<Item = (String, Graph)>,
        name: &str,
        about: &str,
    ) {
        let mut above = Vec::new();
        let mut pairs = 0;
        for (case, g) in cases {
            let (lo, _) = g.min_feasible_budget();
            let hi = crate::solve::baseline::checkpoint_all_peak(&g);
            for budget in lo..=hi {
                let got = run_dp(solver, &g, budget);
                let Some(opt) = exhaustive(&g, budget) else {
                    assert_eq!(got, None, "{case}, M = {budget}");
                    continue;
                };
                pairs += 1;
                assert!(
                    got.is_none_or(|c| c >= opt),
                    "{case}, M = {budget}: {got:?} below the optimum {opt}"
                );
                if got != Some(opt) {
                    above.push(format!(
                        "{case} M={budget}: {solver} {got:?} vs optimum {opt}"
                    ));
                }
            }
        }
        check_fixture(name, about, pairs, serde_json::json!(above));
    }

    #[test]
    fn equiv_chain_on_small_joins_is_valid_and_never_below_the_optimum() {
        for lengths in [
            vec![1, 1],
            vec![2, 1],
            vec![2, 2],
            vec![3, 2],
            vec![1, 1, 1],
            vec![2, 1, 1],
            vec![1, 1, 3],
        ] {
            let g = join(&lengths);
            assert_eq!(crate::graph::structure::detect(&g).class(), "join");
            for budget in 1..=(g.len() as u64) {
                let r = solve(
                    &Instance { graph: &g, budget },
                    "equiv-chain",
                    &SolveOptions::default(),
                )
                .unwrap();
                let opt = exhaustive(&g, budget);
                match r.status {
                    Status::Feasible => {
                        let stats = r.stats.unwrap();
                        assert!(stats.peak_memory <= budget);
                        assert!(Some(stats.total_cost) >= opt, "{lengths:?} at M = {budget}");
                    }
                    Status::Infeasible => {}
                    other => panic!("{lengths:?} at M = {budget}: {other:?} {:?}", r.message),
                }
            }
            // With memory for everything, no recomputation.
            let r = solve(
                &Instance {
                    graph: &g,
                    budget: g.len() as u64,
                },
                "equiv-chain",
                &SolveOptions::default(),
            )
            .unwrap();
            assert_eq!(r.stats.unwrap().total_cost, g.total_cost(), "{lengths:?}");
        }
    }

    #[test]
    fn join_dp_against_exhaustive() {
        let mut above = Vec::new();
        let mut pairs = 0;
        for lengths in [
            vec![1, 1],
            vec![2, 1],
            vec![2, 2],
            vec![3, 1],
            vec![3, 2],
            vec![4, 1],
            vec![1, 1, 1],
            vec![2, 1, 1],
            vec![2, 2, 1],
            vec![3, 1, 1],
        ] {
            let g = join(&lengths);
            for budget in 1..=(g.len() as u64) {
                let got = run_dp("join-dp", &g, budget);
                let opt = exhaustive(&g, budget);
                if opt.is_some() {
                    pairs += 1;
                }
                if got != opt {
                    assert!(
                        got.is_none() || got > opt,
                        "{lengths:?} at M = {budget}: below the optimum"
                    );
                    above.push(format!(
                        "{lengths:?} M={budget}: join-dp {got:?} vs optimum {opt:?}"
                    ));
                }
            }
        }
        check_fixture(
            "join_dp_above_exhaustive.json",
            "joins of unit branches (graph::generate::join) and budgets where join-dp is above the exhaustive optimum (None = reported infeasible)",
            pairs,
            serde_json::json!(above),
        );
    }

    /// A random join of 2 or 3 branches of 1 to 3 stages and at most 11 nodes: op costs
    /// 1..=3, sizes 1..=3; on a third of the seeds the backward ops also read the next
    /// stage's output.
    fn random_join(seed: u64) -> Graph {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let lengths = loop {
            let k = rng.random_range(2..=3usize);
            let l: Vec<usize> = (0..k).map(|_| rng.random_range(1..=3usize)).collect();
            if l.iter().sum::<usize>() <= 5 {
                break l;
            }
        };
        join_with(&lengths, seed % 3 == 0, |_| {
            (
                rng.random_range(1..=3u32) as f64,
                rng.random_range(1..=3u64),
            )
        })
    }

    /// Random joins ([`random_join`]), every budget from the least feasible to the
    /// checkpoint-all peak: join-dp's plan fits with the predicted cost and peak (checked
    /// in [`run_dp`]), is infeasible only where the oracle is, never below the optimum,
    /// and the cases above it are those the fixture lists.
    #[test]
    fn random_joins_never_below_exhaustive() {
        against_exhaustive(
            "join-dp",
            (0..40u64).map(|seed| (format!("seed {seed}"), random_join(seed))),
            "join_dp_random_above_exhaustive.json",
            "random joins (chain_dp::tests::random_join(seed)) and budgets where join-dp is above the exhaustive optimum (None = reported infeasible)",
        );
    }

    /// Joins whose branches read the next stage's output: join-dp's plans fit the budget
    /// with the predicted cost and peak and equiv-chain's fit it, both never below the
    /// exhaustive optimum.
    #[test]
    fn joins_reading_next_outputs_are_valid() {
        for lengths in [
            vec![2, 1],
            vec![2, 2],
            vec![3, 1],
            vec![3, 2],
            vec![2, 1, 1],
        ] {
            let g = join_with(&lengths, true, |_| (1.0, 1));
            let join = crate::graph::structure::join(&g).unwrap();
            assert!(join.branches.iter().any(|b| b[0].reads_next_output));
            for budget in 1..=(g.len() as u64) {
                let opt = exhaustive(&g, budget);
                let got = run_dp("join-dp", &g, budget);
                assert!(
                    got.is_none_or(|c| Some(c) >= opt),
                    "{lengths:?} at M = {budget}"
                );
                for solver in ["join-dp", "equiv-chain"] {
                    let r = solve(
                        &Instance { graph: &g, budget },
                        solver,
                        &SolveOptions::default(),
                    )
                    .unwrap();
                    let case = format!("{solver} {lengths:?} at M = {budget}");
                    match r.status {
                        Status::Feasible => {
                            let stats = r.stats.unwrap();
                            assert!(stats.peak_memory <= budget, "{case}");
                            assert!(Some(stats.total_cost) >= opt, "{case}");
                        }
                        Status::Infeasible => {
                            assert!(budget < g.len() as u64, "{case}: room for every node")
                        }
                        other => panic!("{case}: {other:?} {:?}", r.message),
                    }
                }
            }
        }
    }
}
