//! The options of `C(a, b, m)`, each defined once ([`Table::define`]): when it applies,
//! the memory it needs itself, the cost of the ops it runs, the sub-problems it solves
//! (each with the memory held outside it) and the events it emits around them.
//!
//! Every option has the same shape: a step of its own (`before`), a first sub-problem, a
//! second step (`between`), a second sub-problem. So its value at budget `m` is
//! `cost + first(m − shift₁) + second(m − shift₂)` when `m >= need`, and its peak in bytes
//! is the largest of `need` and each part's peak plus its shift. [`Table::options`] lists
//! the options of `(a, b)` in one fixed order, and the three readers iterate it: the fill
//! takes the minimum of their rows ([`super::row::combine`]), the choice picks the first
//! whose value is the table's, and the emitter runs that option's steps and parts.

use super::model::{DpChain, Mem};
use super::nest::Joined;
use super::row::Row;
use super::table::Table;
use std::ops::ControlFlow;

/// One option of sub-problem `(a, b)` (the module docs of [`super`] state each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Opt {
    /// `b = a + 1 = j`: `F_j` (when `G_j` reads `x_j`), then `G_j`; for the loss stage,
    /// the loss.
    Base,
    /// The loss stage of a branch of a join: the rest of the join in its place.
    Join,
    /// F_all at `a + 1`: `x_{a+1}` kept for its own backward.
    FAll,
    /// F_ck at `k`: `x_k` kept for the right part, freed before the left part.
    Ck(usize),
    /// F_ck at `k` kept for `G_k` (Revolve's turn), then the left part up to `k − 1`.
    CkKeep(usize),
    /// F_ck at `L` whose last output is freed right after the loss (join DP).
    CkRelease,
    /// F_ck at `L` freed right after the loss, then the second turn (join DP).
    CkSecond,
}

/// An event step an option runs itself, in the memory model's vocabulary (see
/// [`Table::run`] for the events).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// `F_j`: compute `x_j`.
    Forward(usize),
    /// `F_{a+1}, …, F_k` as F∅: each `x_{l−1}` freed once `x_l` exists, except `x_a`.
    Sweep(usize, usize),
    /// `G_j`, then `x_j` freed (unless kept for `G_{j−1}`) when `free_x`, then `δ'_{j+1}`.
    Backward { j: usize, free_x: bool },
    /// Free `x_k`.
    Drop(usize),
    /// Free the outer branches' ends released right after the loss.
    Release,
    /// The second turn's resweep of the inner branches' ends.
    Resweep,
}

/// A sub-problem an option solves.
pub(super) enum Sub<'t> {
    /// `C(a, b, ·)` of a table: this one, or the second turn's own chain.
    Range(&'t Table, usize, usize),
    /// A nested join in place of the loss stage.
    Join(&'t Joined),
}

/// A sub-problem and the memory held outside it while it runs (its budget is `m − shift`).
pub(super) struct Part<'t> {
    pub(super) sub: Sub<'t>,
    pub(super) shift: Mem,
}

impl Part<'_> {
    /// The sub-problem's row.
    pub(super) fn row(&self) -> &Row {
        match self.sub {
            Sub::Range(t, a, b) => t.row(a, b),
            Sub::Join(j) => &j.row,
        }
    }

    /// The budget the part gets within `m`, `None` when the shift exceeds it.
    fn budget(&self, m: usize) -> Option<usize> {
        m.checked_add_signed(-self.shift.slots)
    }
}

/// One option of `(a, b)` written out: its own memory need and cost, its steps and its
/// parts, in the order they run.
pub(super) struct Def<'t> {
    /// Which option this is (the unit tests list them).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) opt: Opt,
    pub(super) need: Mem,
    pub(super) cost: f64,
    pub(super) before: Option<Step>,
    pub(super) first: Option<Part<'t>>,
    pub(super) between: Option<Step>,
    pub(super) second: Option<Part<'t>>,
}

impl Def<'_> {
    /// The option's value at budget `m` (slots): infinite when it does not fit.
    pub(super) fn value(&self, m: usize) -> f64 {
        if self.need.slots > m as isize {
            return f64::INFINITY;
        }
        let mut v = self.cost;
        for part in [&self.first, &self.second].into_iter().flatten() {
            match part.budget(m) {
                Some(mm) => v += part.row().get(mm),
                None => return f64::INFINITY,
            }
        }
        v
    }
}

/// The F∅ sweep `F_{a+1}, …, F_k` of an F_ck option while `δ'_{b+1}` is resident, advanced
/// one `k` at a time.
#[derive(Clone, Copy)]
pub(super) struct Sweep {
    /// The state `x_k` the sweep has reached.
    k: usize,
    /// `Σ_{l=a+1..k} fw_l`.
    cost: f64,
    /// `|δ'_{b+1}| + max_{l=a+1..k} ([l−1 > a]·X_{l−1} + X_l)`: its peak.
    need: Mem,
    held: Mem,
    top: Mem,
}

impl Sweep {
    fn start(c: &DpChain, b: usize) -> Sweep {
        Sweep {
            k: 0,
            cost: 0.0,
            need: Mem::ZERO,
            held: c.held(b + 1),
            top: Mem::ZERO,
        }
    }

    fn advance(&mut self, c: &DpChain, a: usize, k: usize) {
        self.k = k;
        self.cost += c.fw[k];
        let before = if k - 1 > a { c.x(k - 1) } else { Mem::ZERO };
        self.top = self.top.max(before + c.x(k));
        self.need = self.held + self.top;
    }
}

/// `C(a, b, ·)` of table `t` with `shift` held outside.
fn range(t: &Table, a: usize, b: usize, shift: Mem) -> Option<Part<'_>> {
    Some(Part {
        sub: Sub::Range(t, a, b),
        shift,
    })
}

/// The nested join `j` with `shift` held outside.
fn join(j: &Joined, shift: Mem) -> Option<Part<'_>> {
    Some(Part {
        sub: Sub::Join(j),
        shift,
    })
}

impl Table {
    /// Calls `f` on the options of `(a, b)` that apply, in a fixed order, until it breaks:
    /// the base case for one stage, else F_all, then for each `k` the second turn, F_ck,
    /// F_ck released at the turn and F_ck kept for `G_k`. The order decides which option
    /// the plan takes among equal ones.
    pub(super) fn options<'t, B>(
        &'t self,
        a: usize,
        b: usize,
        mut f: impl FnMut(Def<'t>) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        let c = &self.chain;
        let mut sweep = Sweep::start(c, b);
        if b == a + 1 {
            for opt in [Opt::Join, Opt::Base] {
                if let Some(def) = self.define(opt, a, b, sweep) {
                    f(def)?;
                }
            }
            return ControlFlow::Continue(());
        }
        if let Some(def) = self.define(Opt::FAll, a, b, sweep) {
            f(def)?;
        }
        for k in a + 1..=b.min(c.l) {
            self.prefetch_options(a, k, b);
            sweep.advance(c, a, k);
            for opt in [Opt::CkSecond, Opt::Ck(k), Opt::CkRelease, Opt::CkKeep(k)] {
                if let Some(def) = self.define(opt, a, b, sweep) {
                    f(def)?;
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// The definition of option `opt` of `(a, b)`, `None` when it does not apply; `sweep`
    /// is the F∅ sweep to the option's `k` (unused by the others).
    #[inline]
    fn define(&self, opt: Opt, a: usize, b: usize, sweep: Sweep) -> Option<Def<'_>> {
        let c = &self.chain;
        let p = self.policy;
        let n = c.l + 1;
        // The memory that changes at the turn, for the parts run after it.
        let h = self.turn(b);
        let nothing = Def {
            opt,
            need: Mem::ZERO,
            cost: 0.0,
            before: None,
            first: None,
            between: None,
            second: None,
        };
        // F_ck at L in the sub-problems that contain the turn.
        let at_turn = p.ck && b == n && sweep.k == c.l;
        Some(match opt {
            Opt::Base => return self.base(b, nothing),
            Opt::Join if b == n => Def {
                first: join(self.nest.inner.as_ref()?, Mem::ZERO),
                ..nothing
            },
            // x_{a+1} kept through C(a+1, b, m − X_{a+1}), then G_{a+1}:
            // D'_{b+1} + X_{a+1} and, after the turn, X_{a+1} + D'_{a+2} + D_{a+1}.
            Opt::FAll if p.keep => {
                let j = a + 1;
                Def {
                    opt,
                    need: (c.held(b + 1) + c.x(j))
                        .max((c.x(j) + c.held(j + 1) + c.d(j) + h).at_least_zero()),
                    cost: c.fw[j] + c.bw[j],
                    before: Some(Step::Forward(j)),
                    first: range(self, j, b, c.x(j)),
                    between: Some(Step::Backward { j, free_x: true }),
                    second: None,
                }
            }
            // The sweep, C(k, b, m − X_k), free x_k, C(a, k, m) after the turn.
            Opt::Ck(k) if p.ck && k < b => Def {
                opt,
                need: sweep.need,
                cost: sweep.cost,
                before: Some(Step::Sweep(a, k)),
                first: range(self, k, b, c.x(k)),
                between: Some(Step::Drop(k)),
                second: range(self, a, k, h),
            },
            // The sweep to x_L, the join built with x_L freed right after the loss, then
            // C(a, L, m) after the turn.
            Opt::CkRelease if at_turn => Def {
                opt,
                need: sweep.need,
                cost: sweep.cost,
                before: Some(Step::Sweep(a, c.l)),
                first: join(self.nest.released.as_ref()?, c.x(c.l)),
                between: None,
                second: range(self, a, c.l, h),
            },
            // The sweep to x_L, the inner join owning the loss output, the resweep of the
            // inner ends (peak P_R, E held), then this branch's own chain from x_a.
            Opt::CkSecond if at_turn => {
                let second = self.nest.second.as_ref()?;
                let rs = &second.resweep;
                Def {
                    opt,
                    need: sweep.need.max(rs.need),
                    cost: sweep.cost + rs.cost,
                    before: Some(Step::Sweep(a, c.l)),
                    first: join(&second.inner, c.x(c.l)),
                    between: Some(Step::Resweep),
                    second: range(&second.table, a, b, rs.ends),
                }
            }
            // The sweep, C(k, b, m − X_k) (none when k = b), G_k from the kept x_k
            // (X_k + D'_{k+1} + D_k after the turn), C(a, k − 1, m) after the turn.
            Opt::CkKeep(k) if p.keep && k > a + 1 && !c.reads_input[k] => Def {
                opt,
                need: sweep
                    .need
                    .max((c.x(k) + c.held(k + 1) + c.d(k) + h).at_least_zero()),
                cost: sweep.cost + c.bw[k],
                before: Some(Step::Sweep(a, k)),
                first: if k < b {
                    range(self, k, b, c.x(k))
                } else {
                    None
                },
                between: Some(Step::Backward { j: k, free_x: true }),
                second: range(self, a, k - 1, h),
            },
            _ => return None,
        })
    }

    /// Option `Base` at `(a, b)`: `G_b` while `b` is within the chain, the loss at its end
    /// (unless an inner join owns it); `nothing` the definition they fill in.
    fn base<'d>(&self, b: usize, nothing: Def<'d>) -> Option<Def<'d>> {
        let c = &self.chain;
        let n = c.l + 1;
        if b < n {
            // G_j (after F_j when it reads x_j): D'_{j+1} + [reads x_j]·X_j + D_j.
            let j = b;
            let reads = c.reads_output[j];
            return Some(Def {
                need: c.held(j + 1) + if reads { c.x(j) } else { Mem::ZERO } + c.d(j),
                cost: if reads { c.fw[j] + c.bw[j] } else { c.bw[j] },
                before: reads.then_some(Step::Forward(j)),
                between: Some(Step::Backward { j, free_x: reads }),
                ..nothing
            });
        }
        // The loss: needs X_{L+1}; then the ends released at the turn are freed.
        (b == n && self.nest.inner.is_none()).then_some(Def {
            need: c.x(n),
            cost: c.fw[n],
            before: Some(Step::Forward(n)),
            between: Some(Step::Release),
            ..nothing
        })
    }
}
