//! The DP table of one chain and one slot budget: [`Table::fill`] computes every row
//! `C(a, b, ·)` bottom-up from the options of the recurrence
//! ([`super::recurrence`]), [`Table::cost`] reads the answer, and [`Table::schedule`]
//! rebuilds the optimal plan by asking, sub-problem by sub-problem, which option attains
//! its value and emitting that option's events.

use super::model::{DpChain, Mem, Policy, DEFAULT_SLOTS, MAX_TABLE_BYTES};
use super::nest::{Nest, Placement};
use super::recurrence::{Def, Part, Step, Sub};
use super::row::{combine, prefetch, settle, Acc, Row, INFEASIBLE};
use crate::schedule::{Event, Schedule};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The DP table for one chain and one slot budget.
pub struct Table {
    pub(super) chain: DpChain,
    pub(super) policy: Policy,
    /// The join DP's nesting (see [`crate::solve::dp::join_dp`]): a plain chain by default.
    pub(super) nest: Placement,
    pub(super) m: usize,
    /// `rows[b][a]` for `0 <= a < b <= L+1`, each set once by the fill.
    rows: Vec<Vec<OnceLock<Row>>>,
    /// Raised when a filler unwinds (a panic) before its end is filled: the other filler's
    /// waits for rows that will never come return at once ([`Table::row`]), and the fill
    /// fails, so no row computed after it is ever read.
    abandoned: AtomicBool,
    /// A test's injected failure: the filler of `(a, b)` panics there, and the fill runs
    /// on two threads whatever its size.
    #[cfg(test)]
    fault: Option<(usize, usize)>,
}

/// The work of a fill ([`fill_work`]) above which two threads share it.
pub(super) const PARALLEL_WORK: usize = 1 << 20;

/// The work of filling `n` stages at `m` slots: about `n³/6` options × `m + 1` budgets.
pub(super) fn fill_work(n: usize, m: usize) -> usize {
    (n.saturating_mul(n).saturating_mul(n) / 6).saturating_mul(m + 1)
}

/// How many `k` ahead the options' rows are asked for ([`Table::prefetch_options`]). The
/// fill is bound by the wait for the first values of each row an option reads (rows lie
/// far apart in memory); asking for them early saves about 45% of it ([`super`]).
const PREFETCH_AHEAD: usize = 6;

/// The bytes of the table of a chain of `l` stages, about: a row header per pair
/// `a < b <= l + 1` and their values, at most [`MAX_TABLE_BYTES`] (the slots are capped to
/// keep them there, [`super::model::capped_slots`]).
pub(crate) fn table_bytes(l: usize) -> u64 {
    let pairs = (l as u64 + 2).saturating_mul(l as u64 + 1) / 2;
    let headers = pairs.saturating_mul(std::mem::size_of::<OnceLock<Row>>() as u64);
    let values = pairs
        .saturating_mul((DEFAULT_SLOTS + 1) * 8)
        .min(MAX_TABLE_BYTES);
    headers.saturating_add(values)
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
        poll: impl FnMut(f64) -> bool,
    ) -> Result<Table, Interrupted> {
        let n = chain.l + 1; // stages 1..=n
        let nest = Placement::new(nest, chain.x(n), m);
        if nest.holds_loss {
            chain.hold_loss_outside();
        }
        let table = Table::empty(chain, policy, nest, m);
        table.fill_rows(poll)?;
        Ok(table)
    }

    /// [`Table::fill`] on two threads, the filler of `(a, b)` panicking there (`at`).
    #[cfg(test)]
    pub(super) fn fill_failing_at(
        chain: DpChain,
        policy: Policy,
        m: usize,
        at: (usize, usize),
    ) -> Result<Table, Interrupted> {
        let nest = Placement::new(Nest::default(), chain.x(chain.l + 1), m);
        let table = Table {
            fault: Some(at),
            ..Table::empty(chain, policy, nest, m)
        };
        table.fill_rows(|_| true)?;
        Ok(table)
    }

    /// The table with no row filled yet.
    fn empty(chain: DpChain, policy: Policy, nest: Placement, m: usize) -> Table {
        let n = chain.l + 1;
        Table {
            chain,
            policy,
            nest,
            m,
            rows: (0..=n)
                .map(|b| (0..b).map(|_| OnceLock::new()).collect())
                .collect(),
            abandoned: AtomicBool::new(false),
            #[cfg(test)]
            fault: None,
        }
    }

    /// Fills the rows by increasing end `b`, and for each `b` by decreasing start `a`: row
    /// `C(a, b, ·)` is the minimum over the options of `(a, b)` of their cost plus their
    /// sub-problems' rows, shifted, and those are `C(k, b, ·)` with `k > a`, filled just
    /// before it, and `C(a, k, ·)` with `k < b`. While one thread fills the rows of `b`, the
    /// other fills those of `b + 1`, a step behind: the rows of `C(·, b + 1, ·)` wait only on
    /// `C(a, b, ·)` of the same `a`, and the rows of `C(·, b, ·)`, which every option of
    /// `b` reads, stay in the caches. Two threads when there is enough work
    /// ([`PARALLEL_WORK`]). The fill sums in single precision when every value of the
    /// table is an integer below 2^24 ([`DpChain::entry_bytes`]) and no join is nested in
    /// it (a nested join's rows come from other chains), else in double.
    fn fill_rows(&self, poll: impl FnMut(f64) -> bool) -> Result<(), Interrupted> {
        let nest = &self.nest;
        let plain = nest.inner.is_none() && nest.released.is_none() && nest.second.is_none();
        if plain && self.chain.entry_bytes() == 4 {
            self.fill_rows_in::<f32>(poll)
        } else {
            self.fill_rows_in::<f64>(poll)
        }
    }

    /// [`Table::fill_rows`] with the running minimum in `O`.
    fn fill_rows_in<O: Acc>(&self, mut poll: impl FnMut(f64) -> bool) -> Result<(), Interrupted> {
        let n = self.chain.l + 1;
        let threads = std::thread::available_parallelism().map_or(1, |p| p.get().min(2));
        // The next end `b` to fill, and whether the caller asked to stop.
        let next = AtomicUsize::new(1);
        let stopped = AtomicBool::new(false);
        let two = threads > 1 && fill_work(n, self.m) >= PARALLEL_WORK;
        #[cfg(test)]
        let two = two || self.fault.is_some();
        if two {
            std::thread::scope(|scope| {
                let other = scope.spawn(|| self.fill_ends::<O>(&next, &stopped, |_| true));
                self.fill_ends::<O>(&next, &stopped, &mut poll);
                other
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            });
        } else {
            self.fill_ends::<O>(&next, &stopped, &mut poll);
        }
        if stopped.load(Ordering::Relaxed) {
            return Err(Interrupted);
        }
        Ok(())
    }

    /// Fills the rows `C(·, b, ·)` of the ends `b` taken from `next`, one at a time, until
    /// none is left or `stopped` is raised; `poll` (the fraction of the work done) raises
    /// it when it returns false. An end once taken is filled whole: the other thread may
    /// be waiting for its rows. A panic on the way abandons the table ([`Abandon`]).
    fn fill_ends<O: Acc>(
        &self,
        next: &AtomicUsize,
        stopped: &AtomicBool,
        mut poll: impl FnMut(f64) -> bool,
    ) {
        let _abandon = Abandon {
            table: self,
            stopped,
        };
        let n = self.chain.l + 1;
        let mut full = vec![O::INFINITY; self.m + 1];
        while !stopped.load(Ordering::Relaxed) {
            let done = next.load(Ordering::Relaxed).saturating_sub(1).min(n);
            if !poll((done as f64 / n as f64).powi(3)) {
                stopped.store(true, Ordering::Relaxed);
                return;
            }
            let b = next.fetch_add(1, Ordering::Relaxed);
            if b > n {
                return;
            }
            for a in (0..b).rev() {
                #[cfg(test)]
                if self.fault == Some((a, b)) {
                    panic!("injected fault at C({a}, {b}, ·)");
                }
                let row = self.fill_row(a, b, &mut full);
                self.rows[b][a]
                    .set(row)
                    .unwrap_or_else(|_| unreachable!("each row is filled once"));
            }
        }
    }

    /// The row `C(a, b, ·)` from the rows it reads, with `full` as the running minimum.
    fn fill_row<O: Acc>(&self, a: usize, b: usize, full: &mut [O]) -> Row {
        let n = self.chain.l + 1;
        let zero = Row::zero();
        full.fill(O::INFINITY);
        // No option beats computing every op of the segment once: where `full` reaches
        // that bound it is final, and later options skip it.
        let lb = if b == a + 1 || (b == n && self.nest.inner.is_some()) {
            f64::NEG_INFINITY
        } else {
            self.chain.no_recompute_cost(a, b)
        };
        let mut settled = full.len();
        let _: ControlFlow<()> = self.options(a, b, |def| {
            let (first, shift) = def
                .first
                .as_ref()
                .map_or((&zero, 0), |p| (p.row(), p.shift.slots as usize));
            combine(
                &mut full[..settled],
                def.need.slots as usize,
                def.cost,
                first,
                shift,
                def.second.as_ref().map(|p| (p.row(), p.shift.slots)),
            );
            settle(full, &mut settled, lb);
            ControlFlow::Continue(())
        });
        Row::from_full(full)
    }

    /// `C(0, L+1, m')` for `m' <= m` as a row.
    pub(super) fn top_row(&self, m: usize) -> Row {
        let full: Vec<f64> = (0..=m).map(|mm| self.c(0, self.chain.l + 1, mm)).collect();
        Row::from_full(&full)
    }

    /// The row `C(a, b, ·)`, `a < b`. During the fill, a row of an end the other thread
    /// is filling is waited for (it comes a step ahead: [`Table::fill_rows`]); once that
    /// thread has abandoned the fill, the wait ends at once with an infeasible row (the
    /// fill then fails: no row computed from it is read).
    pub(super) fn row(&self, a: usize, b: usize) -> &Row {
        let cell = &self.rows[b][a];
        loop {
            if let Some(row) = cell.get() {
                return row;
            }
            if self.abandoned.load(Ordering::Acquire) {
                return &INFEASIBLE;
            }
            std::hint::spin_loop();
        }
    }

    /// Asks for the rows the options of `(a, b)` read a few `k` after this one
    /// ([`PREFETCH_AHEAD`] = D): the values of `C(k + D, b, ·)` and `C(a, k + D, ·)`, and
    /// the header of `C(a, k + 3D, ·)` (the headers of `C(·, b, ·)` lie side by side, those
    /// of `C(a, ·, ·)` do not).
    #[inline(always)]
    pub(super) fn prefetch_options(&self, a: usize, k: usize, b: usize) {
        let d = PREFETCH_AHEAD;
        if k + 3 * d < b {
            prefetch(&self.rows[k + 3 * d][a]);
        }
        if k + d < b {
            for cell in [&self.rows[b][k + d], &self.rows[k + d][a]] {
                if let Some(row) = cell.get() {
                    row.prefetch();
                }
            }
        }
    }

    pub(super) fn c(&self, a: usize, b: usize, m: usize) -> f64 {
        if a == b {
            0.0
        } else {
            self.row(a, b).get(m)
        }
    }

    /// The optimal cost `C(0, L+1, m)`, infinite when infeasible.
    pub fn cost(&self) -> f64 {
        self.c(0, self.chain.l + 1, self.m)
    }

    /// The smallest slot budget at which the chain is feasible, if any `<= m`.
    pub fn min_slots(&self) -> Option<usize> {
        self.row(0, self.chain.l + 1).first_feasible()
    }

    /// The option that attains `C(a, b, m)`: the first, in the order of
    /// [`Table::options`], whose value is the table's.
    fn choice(&self, a: usize, b: usize, m: usize) -> Def<'_> {
        let target = self.c(a, b, m);
        match self.options(a, b, |def| {
            if def.value(m) == target {
                ControlFlow::Break(def)
            } else {
                ControlFlow::Continue(())
            }
        }) {
            ControlFlow::Break(def) => def,
            ControlFlow::Continue(()) => {
                unreachable!("a finite C(a, b, m) is attained by one of its options")
            }
        }
    }

    /// The schedule of the optimal plan, and its peak in bytes (excluding `K`).
    pub fn schedule(&self) -> (Schedule, u64) {
        let mut events = Vec::new();
        let peak = emit(self, &mut events);
        (Schedule::new(events), peak)
    }

    /// Appends the events of one of an option's own steps.
    fn run(&self, step: Step, ev: &mut Vec<Event>) {
        let c = &self.chain;
        let n = c.l + 1;
        let compute = |ev: &mut Vec<Event>, nodes: &[usize]| {
            ev.extend(nodes.iter().map(|&v| Event::Compute(v)));
        };
        let free = |ev: &mut Vec<Event>, nodes: &[usize]| {
            ev.extend(nodes.iter().map(|&v| Event::Free(v)));
        };
        match step {
            Step::Forward(j) => compute(ev, &c.fnode[j]),
            Step::Sweep(a, k) => {
                for l in a + 1..=k {
                    compute(ev, &c.fnode[l]);
                    if l - 1 > a {
                        free(ev, &c.fnode[l - 1]);
                    }
                }
            }
            Step::Backward { j, free_x } => {
                compute(ev, &c.gnode[j]);
                // x_j after G_j, unless it is kept for G_{j−1}.
                if free_x && !c.kept[j] {
                    free(ev, &c.fnode[j]);
                }
                // δ'_{j+1} after its last reader G_j: δ_{j+1}, and x_{j+1} when kept. The
                // loss output is freed here unless an outer branch still needs it.
                if j + 1 < n || (j + 1 == n && !self.nest.holds_loss) {
                    free(ev, &c.gnode[j + 1]);
                }
                if c.kept[j + 1] {
                    free(ev, &c.fnode[j + 1]);
                }
            }
            Step::Drop(k) => free(ev, &c.fnode[k]),
            Step::Release => free(ev, &self.nest.release_nodes),
            Step::Resweep => {
                let second = self.nest.second.as_ref().expect("a second turn");
                second.resweep.emit(ev);
            }
        }
    }

    /// The change of memory at the turn for sub-problems `(·, b)`: the nesting's offset
    /// when `b = L + 1`, else none.
    pub(super) fn turn(&self, b: usize) -> Mem {
        if b == self.chain.l + 1 {
            self.nest.offset
        } else {
            Mem::ZERO
        }
    }
}

/// What is left to emit of a plan, last first on [`emit`]'s stack.
enum Work<'t> {
    /// The plan of `C(a, b, m)` of `table` (`m` at most its own), with `offset` bytes held
    /// outside it: the events of the option that attains it, its parts' plans in between.
    Plan {
        table: &'t Table,
        a: usize,
        b: usize,
        m: usize,
        offset: i64,
    },
    /// One of an option's own steps.
    Step(&'t Table, Step),
    /// The end of a nested join's plan: its branches' first gradients `δ_1` are final.
    Joined(&'t Table),
}

/// Emits the plan of `table`'s `C(0, L+1, m)` into `ev` and returns its peak in bytes
/// (`K` excluded). The plan is a tree of sub-problems as deep as the chain is long (and
/// one level more a nested branch), so it is walked with a stack of its own, not
/// recursion, which overflowed a thread's stack on long chains. The peak is the largest
/// need of an option plus the memory held outside it (each part's shift, summed down the
/// tree): every need is at least 0, so this is the nested maximum of each part's peak plus
/// its shift.
fn emit<'t>(table: &'t Table, ev: &mut Vec<Event>) -> u64 {
    let mut peak: i64 = 0;
    let mut stack = vec![Work::Plan {
        table,
        a: 0,
        b: table.chain.l + 1,
        m: table.m,
        offset: 0,
    }];
    while let Some(work) = stack.pop() {
        let (table, a, b, m, offset) = match work {
            Work::Step(table, step) => {
                table.run(step, ev);
                continue;
            }
            Work::Joined(inner) => {
                ev.extend(inner.chain.gnode[1].iter().map(|&v| Event::Free(v)));
                continue;
            }
            Work::Plan {
                table,
                a,
                b,
                m,
                offset,
            } => (table, a, b, m, offset),
        };
        let def = table.choice(a, b, m);
        peak = peak.max(offset + def.need.bytes);
        // Pushed last to first: before, first, between, second.
        let part = |stack: &mut Vec<Work<'t>>, part: &Part<'t>| {
            let m = m
                .checked_add_signed(-part.shift.slots)
                .expect("the choice checked it");
            let offset = offset + part.shift.bytes;
            match part.sub {
                Sub::Range(table, a, b) => stack.push(Work::Plan {
                    table,
                    a,
                    b,
                    m: m.min(table.m),
                    offset,
                }),
                Sub::Join(joined) => {
                    let inner = &*joined.table;
                    stack.push(Work::Joined(inner));
                    stack.push(Work::Plan {
                        table: inner,
                        a: 0,
                        b: inner.chain.l + 1,
                        m: m.min(inner.m),
                        offset,
                    });
                }
            }
        };
        if let Some(second) = &def.second {
            part(&mut stack, second);
        }
        if let Some(step) = def.between {
            stack.push(Work::Step(table, step));
        }
        if let Some(first) = &def.first {
            part(&mut stack, first);
        }
        if let Some(step) = def.before {
            stack.push(Work::Step(table, step));
        }
    }
    peak.max(0) as u64
}

/// A filler's guard: dropped while its thread unwinds, it abandons the table and stops the
/// other filler, which would otherwise wait forever for the rows of the end this one left
/// unfilled.
struct Abandon<'t> {
    table: &'t Table,
    stopped: &'t AtomicBool,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.stopped.store(true, Ordering::Relaxed);
            self.table.abandoned.store(true, Ordering::Release);
        }
    }
}
