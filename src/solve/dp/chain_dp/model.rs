//! The chain in the DP's terms: stages `1..=L+1` (the loss last) with their costs `fw_j`,
//! `bw_j`, sizes `X_j`, `D_j` in slots and in bytes ([`Mem`]), which values each backward op
//! reads, and the nodes each stage computes; the [`Policy`] that restricts the options; and
//! the slot arithmetic that turns a byte budget into the table's `m`.

use crate::graph::structure::{Chain, Join, Stage};
use crate::solve::core::gcd;
use std::ops::Add;

/// The default number of memory slots the budget is discretised into.
pub const DEFAULT_SLOTS: u64 = 500;

/// The largest DP table (`(L+2)(L+1)/2` rows of `m + 1` costs) the solver allocates; longer
/// chains get fewer, larger slots (reported as the slot size).
pub(super) const MAX_TABLE_BYTES: u64 = 1 << 30;

/// An amount of memory in both units the DP keeps: slots (what the table is indexed by)
/// and bytes (what the simulator measures, for the predicted peak). Every formula of the
/// recurrence is written once over `Mem` and holds in each unit separately.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mem {
    pub slots: isize,
    pub bytes: i64,
}

impl Mem {
    pub const ZERO: Mem = Mem { slots: 0, bytes: 0 };

    /// `bytes` rounded up to slots of `q` bytes.
    pub fn of_bytes(bytes: u64, q: u64) -> Mem {
        Mem {
            slots: bytes.div_ceil(q) as isize,
            bytes: bytes as i64,
        }
    }

    /// The larger amount in each unit.
    pub fn max(self, other: Mem) -> Mem {
        Mem {
            slots: self.slots.max(other.slots),
            bytes: self.bytes.max(other.bytes),
        }
    }

    /// At least 0 in each unit (a need lowered by memory freed at the turn).
    pub(super) fn at_least_zero(self) -> Mem {
        self.max(Mem::ZERO)
    }
}

impl Add for Mem {
    type Output = Mem;
    fn add(self, other: Mem) -> Mem {
        Mem {
            slots: self.slots + other.slots,
            bytes: self.bytes + other.bytes,
        }
    }
}

impl std::ops::Neg for Mem {
    type Output = Mem;
    fn neg(self) -> Mem {
        Mem {
            slots: -self.slots,
            bytes: -self.bytes,
        }
    }
}

/// A chain in DP form: stages `1..=L+1` (the loss last), sizes in slots and in bytes.
/// Index 0 and `L+2` are padding.
#[derive(Clone, Debug)]
pub struct DpChain {
    pub(super) l: usize,
    pub(super) fw: Vec<f64>,
    pub(super) bw: Vec<f64>,
    /// `X_j` in slots, `j = 0..=L+1` (`X_0 = 0`).
    x: Vec<usize>,
    /// `D_j` in slots, `j = 0..=L+2` (`D_{L+2} = 0`, `D_{L+1} = X_{L+1}`).
    d: Vec<usize>,
    x_bytes: Vec<u64>,
    d_bytes: Vec<u64>,
    pub(super) reads_input: Vec<bool>,
    pub(super) reads_output: Vec<bool>,
    /// `kept[j]`: `G_{j−1}` reads `x_j` (its next output), so `x_j` stays resident from
    /// `G_j` to `G_{j−1}` as part of the held gradient `δ'_j` (see the module docs).
    pub(super) kept: Vec<bool>,
    /// Node indices: `fnode[j]` are the ops of `F_j` (`F_{L+1}` the loss), `gnode[j]`
    /// those of `G_j` (one each for a chain, one per branch for Equiv-Chain).
    pub(super) fnode: Vec<Vec<usize>>,
    pub(super) gnode: Vec<Vec<usize>>,
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

    /// The greatest common divisor of the sizes the table counts in slots (0 when they are
    /// all 0): slots of `q` bytes round nothing exactly when `q` divides it.
    pub(super) fn size_gcd(&self) -> u64 {
        self.x_bytes
            .iter()
            .chain(&self.d_bytes)
            .fold(0, |g, &b| gcd(g, b))
    }

    /// `|x_j|`.
    pub(super) fn x(&self, j: usize) -> Mem {
        Mem {
            slots: self.x[j] as isize,
            bytes: self.x_bytes[j] as i64,
        }
    }

    /// `|δ_j|`.
    pub(super) fn d(&self, j: usize) -> Mem {
        Mem {
            slots: self.d[j] as isize,
            bytes: self.d_bytes[j] as i64,
        }
    }

    /// `|δ'_j|`: the gradient `δ_j` as held until `G_{j−1}`, with `x_j` when it is kept.
    pub(super) fn held(&self, j: usize) -> Mem {
        self.d(j) + if self.kept[j] { self.x(j) } else { Mem::ZERO }
    }

    /// The loss output stays resident after the chain (an outer branch of a join still
    /// needs it): `δ_{L+1}` is then outside the table's accounting.
    pub(super) fn hold_loss_outside(&mut self) {
        let n = self.l + 1;
        self.d[n] = 0;
        self.d_bytes[n] = 0;
    }

    /// The bytes a value of the table takes: 4 when every finite `C(a, b, m)` is an integer
    /// below 2^24, so that the rows hold it in single precision ([`super::row`]), else 8.
    /// That holds when every `fw_j` and `bw_j` is a non-negative integer and
    /// `(L + 1)·Σ_j fw_j + Σ_j bw_j < 2^24`: a plan runs each `G_j` once and each `F_j` at
    /// most once per nested sub-problem that contains stage `j`, at most `L + 1` of them.
    pub(super) fn entry_bytes(&self) -> u64 {
        let integral = |v: &f64| *v >= 0.0 && v.fract() == 0.0;
        let fw: f64 = self.fw.iter().sum();
        let bw: f64 = self.bw.iter().sum();
        let most = (self.l as f64 + 1.0) * fw + bw;
        if self.fw.iter().all(integral)
            && self.bw.iter().all(integral)
            && most < (1u64 << 24) as f64
        {
            4
        } else {
            8
        }
    }

    /// The cost of sub-problem `(a, b)` without recomputation: every `G_j` once and every
    /// `F_j` whose output something in the segment reads, once. A lower bound on every
    /// option.
    pub(super) fn no_recompute_cost(&self, a: usize, b: usize) -> f64 {
        let n = self.l + 1;
        let mut cost = 0.0;
        // Whether x_j is read within the segment, from b down.
        let mut needed = false;
        for j in (a + 1..=b).rev() {
            let read_later = j < b && (needed || self.reads_input[j + 1]);
            needed = read_later || j == n || (j < n && self.reads_output[j]);
            if needed {
                cost += self.fw[j];
            }
            if j < n {
                cost += self.bw[j];
            }
        }
        cost
    }
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

/// The number of slots (at most `slots`) whose table for `l` stages, of `entry` bytes a
/// value ([`DpChain::entry_bytes`]), fits [`MAX_TABLE_BYTES`].
pub(super) fn capped_slots(l: usize, slots: u64, entry: u64) -> u64 {
    let pairs = (l as u64 + 2) * (l as u64 + 1) / 2;
    slots.min((MAX_TABLE_BYTES / (entry * pairs)).saturating_sub(1).max(1))
}

/// The slot size for a working budget of `w` bytes split into `slots` slots.
pub fn slot_size(w: u64, slots: u64) -> u64 {
    w.div_ceil(slots.max(1)).max(1)
}
