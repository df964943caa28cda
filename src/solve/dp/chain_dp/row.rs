//! The slot kernel: a row `C(a, b, ·)` of the DP table in compressed form, and the shifted
//! element-wise minimum that fills it from the rows of its sub-problems.
//!
//! A row is stored only from its first feasible budget to the budget from which it is
//! constant. [`combine`] adds an option's rows, shifted by the memory the option holds
//! while each sub-problem runs, and keeps the minimum.
//!
//! Every row is non-increasing in `m`, and so is every option's value and the running
//! minimum `full` the fill keeps. Two consequences make the kernel cheap:
//! * an option's least value is its value at the top, `floor = cost + last(first) +
//!   last(second)`, and it can only lower `full[m]` where `full[m] > floor`: a prefix of
//!   the budgets, which [`lower_by`] leaves at the first chunk where `full` is not above
//!   `floor`;
//! * where both rows have reached their constant tails the sum is a constant `v`, which
//!   lowers exactly the prefix where `full > v`, found by binary search.

/// A row `C(a, b, m)` for `m >= lo`, constant after its last stored value, `floor`.
#[derive(Clone, Debug)]
pub(super) struct Row {
    lo: usize,
    /// The last value (the least), kept beside `lo` so that an option's floor is read
    /// without touching the values.
    floor: f64,
    vals: Vals,
}

/// A row's stored values: in single precision when every one of them is exactly a
/// single-precision number (integer costs below 2^24, as on chains with small integer
/// costs), which halves the table and the memory traffic of the fill; else in double.
#[derive(Clone, Debug)]
enum Vals {
    Single(Vec<f32>),
    Double(Vec<f64>),
}

/// A stored value, read as `f64` (exactly).
pub(super) trait Val: Copy {
    fn get(self) -> f64;
}

/// The type the fill keeps its running minimum in and sums in: `f64`, or `f32` when every
/// value of the table is an integer below 2^24 ([`super::DpChain`]'s `entry_bytes`), so
/// that every sum is exact in it too, twice the values a vector instruction handles.
pub(super) trait Acc: Val + PartialOrd + std::ops::Add<Output = Self> {
    const INFINITY: Self;
    /// `v` in this type (exact where the table's values are).
    fn of(v: f64) -> Self;
}

impl Acc for f32 {
    const INFINITY: f32 = f32::INFINITY;
    #[inline(always)]
    fn of(v: f64) -> f32 {
        v as f32
    }
}

impl Acc for f64 {
    const INFINITY: f64 = f64::INFINITY;
    #[inline(always)]
    fn of(v: f64) -> f64 {
        v
    }
}

impl Val for f32 {
    #[inline(always)]
    fn get(self) -> f64 {
        self as f64
    }
}

impl Val for f64 {
    #[inline(always)]
    fn get(self) -> f64 {
        self
    }
}

impl Vals {
    fn len(&self) -> usize {
        match self {
            Vals::Single(v) => v.len(),
            Vals::Double(v) => v.len(),
        }
    }

    fn get(&self, i: usize) -> f64 {
        match self {
            Vals::Single(v) => v[i].get(),
            Vals::Double(v) => v[i],
        }
    }

    /// `vals` in single precision when that is exact, else in double.
    fn of<V: Val>(vals: &[V]) -> Vals {
        if vals.iter().all(|&v| (v.get() as f32) as f64 == v.get()) {
            Vals::Single(vals.iter().map(|&v| v.get() as f32).collect())
        } else {
            Vals::Double(vals.iter().map(|&v| v.get()).collect())
        }
    }
}

impl Default for Row {
    /// A row infeasible at every budget.
    fn default() -> Row {
        INFEASIBLE.clone()
    }
}

/// A row infeasible at every budget, the answer of [`super::Table::row`] once the fill is
/// abandoned.
pub(super) static INFEASIBLE: Row = Row {
    lo: 0,
    floor: f64::INFINITY,
    vals: Vals::Double(Vec::new()),
};

/// The cache lines of a row's values [`Row::prefetch`] asks for: its first four chunks of
/// single-precision values ([`lower_by`]).
const PREFETCH_LINES: usize = 8;

/// Asks the CPU to bring the cache line at `p` into its caches, without waiting for it
/// (a hint: no effect on the program's results; nothing on other architectures).
#[inline(always)]
pub(super) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and never faults, whatever the
    // address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

impl Row {
    /// Asks for the row's first values ([`prefetch`]), which the fill reads first.
    #[inline(always)]
    pub(super) fn prefetch(&self) {
        let p: *const u8 = match &self.vals {
            Vals::Single(v) => v.as_ptr().cast(),
            Vals::Double(v) => v.as_ptr().cast(),
        };
        for line in 0..PREFETCH_LINES {
            prefetch(p.wrapping_add(64 * line));
        }
    }

    /// `C(b, b, ·) = 0`: the empty sub-problem.
    pub(super) fn zero() -> Row {
        Row {
            lo: 0,
            floor: 0.0,
            vals: Vals::Double(vec![0.0]),
        }
    }

    pub(super) fn get(&self, m: usize) -> f64 {
        let len = self.vals.len();
        if m < self.lo || len == 0 {
            f64::INFINITY
        } else {
            self.vals.get((m - self.lo).min(len - 1))
        }
    }

    /// The least budget at which the row is finite, if any.
    pub(super) fn first_feasible(&self) -> Option<usize> {
        (self.vals.len() > 0).then_some(self.lo)
    }

    /// Compresses a full row (indexed by m from 0).
    pub(super) fn from_full<V: Val>(full: &[V]) -> Row {
        let Some(lo) = full.iter().position(|v| v.get().is_finite()) else {
            return Row::default();
        };
        let last = full.last().expect("non-empty").get();
        let end = full
            .iter()
            .rposition(|v| v.get() != last)
            .map_or(lo, |p| p + 1);
        Row {
            lo,
            floor: last,
            vals: Vals::of(&full[lo..=end.max(lo)]),
        }
    }
}

/// `out[m] = min(out[m], base + a(m − shift) + b(m − shift_b))` for `m >= start`, with
/// `b = Some((row, shift_b))`, where `out` is non-increasing (and stays so). Where both
/// rows have reached their constant tails the value is constant in `m`: it is written
/// only over the prefix it lowers ([`lower_to`]).
pub(super) fn combine<O: Acc>(
    out: &mut [O],
    start: usize,
    base: f64,
    a: &Row,
    shift: usize,
    b: Option<(&Row, isize)>,
) {
    use Vals::{Double, Single};
    // The option's least value: from the first budget where `out` is not above it on,
    // nothing is lowered.
    let floor = O::of(base + a.floor + b.map_or(0.0, |(row, _)| row.floor));
    let base = O::of(base);
    let first = (a.lo + shift, &a.vals);
    match (first, b.map(|(row, sh)| (row.lo as isize + sh, &row.vals))) {
        ((alo, Single(x)), None) => {
            combine_typed::<O, f32, f32>(out, start, floor, base, alo, x, None)
        }
        ((alo, Double(x)), None) => {
            combine_typed::<O, f64, f64>(out, start, floor, base, alo, x, None)
        }
        ((alo, Single(x)), Some((blo, Single(y)))) => {
            combine_typed(out, start, floor, base, alo, x, Some((blo, y.as_slice())))
        }
        ((alo, Single(x)), Some((blo, Double(y)))) => {
            combine_typed(out, start, floor, base, alo, x, Some((blo, y.as_slice())))
        }
        ((alo, Double(x)), Some((blo, Single(y)))) => {
            combine_typed(out, start, floor, base, alo, x, Some((blo, y.as_slice())))
        }
        ((alo, Double(x)), Some((blo, Double(y)))) => {
            combine_typed(out, start, floor, base, alo, x, Some((blo, y.as_slice())))
        }
    }
}

/// [`combine`] on the rows' values: `a` stored from budget `alo` of `out` on, `b` from
/// `blo` (negative: before 0); `floor` the least value of the sum.
fn combine_typed<O: Acc, X: Val, Y: Val>(
    out: &mut [O],
    start: usize,
    floor: O,
    base: O,
    alo: usize,
    a: &[X],
    b: Option<(isize, &[Y])>,
) {
    let top = out.len();
    if a.is_empty() {
        return;
    }
    let mut m = start.max(alo);
    if let Some((blo, b)) = b {
        if b.is_empty() {
            return;
        }
        m = m.max(blo.max(0) as usize);
    }
    while m < top {
        // A stretch where both indices advance, or one is clamped at its last value.
        let ia = m - alo;
        let a_end = if ia + 1 < a.len() {
            alo + a.len() - 1
        } else {
            top
        };
        let av = &a[ia.min(a.len() - 1)..];
        let (end, stopped) = match b {
            Some((blo, b)) => {
                let ib = (m as isize - blo) as usize;
                let b_end = if ib + 1 < b.len() {
                    (blo + b.len() as isize - 1) as usize
                } else {
                    top
                };
                let end = a_end.min(b_end).min(top).max(m + 1);
                let len = end - m;
                let bv = &b[ib.min(b.len() - 1)..];
                let o = &mut out[m..end];
                let stopped = match (ia + 1 < a.len(), ib + 1 < b.len()) {
                    (true, true) => lower_by(o, floor, &av[..len], Some(&bv[..len]), base),
                    (true, false) => {
                        lower_by::<O, X, Y>(o, floor, &av[..len], None, base + O::of(bv[0].get()))
                    }
                    (false, true) => {
                        lower_by::<O, Y, X>(o, floor, &bv[..len], None, base + O::of(av[0].get()))
                    }
                    (false, false) => {
                        lower_to(
                            &mut out[m..],
                            base + O::of(av[0].get()) + O::of(bv[0].get()),
                        );
                        true
                    }
                };
                (end, stopped)
            }
            None => {
                let end = a_end.min(top).max(m + 1);
                let len = end - m;
                let stopped = if ia + 1 < a.len() {
                    lower_by::<O, X, Y>(&mut out[m..end], floor, &av[..len], None, base)
                } else {
                    lower_to(&mut out[m..], base + O::of(av[0].get()));
                    true
                };
                (end, stopped)
            }
        };
        if stopped {
            return;
        }
        m = end;
    }
}

/// The budgets [`lower_by`] checks at once before it touches them.
const CHUNK: usize = 32;

/// `o[i] = min(o[i], base + x[i] + y[i])` (`y` absent: 0), for a non-increasing `o` and
/// non-increasing `x`, `y` whose sum is nowhere below `floor`. Chunk by chunk: it stops at
/// the first chunk whose `o` is not above `floor` (nothing from there on can be lowered;
/// it returns true); the sum is least at a chunk's end and `o` greatest at its start, so
/// when the one is not below the other nothing in the chunk can be lowered and the chunk
/// is skipped. Of the sums the fill forms, few lower `o` (3% on rotor's L = 200 chain
/// with 1000 slots) and about half of the chunks are skipped (L = 500, 500 slots).
#[inline(always)]
fn lower_by<O: Acc, X: Val, Y: Val>(
    o: &mut [O],
    floor: O,
    x: &[X],
    y: Option<&[Y]>,
    base: O,
) -> bool {
    let least = |i: usize| match y {
        Some(y) => base + O::of(x[i].get()) + O::of(y[i].get()),
        None => base + O::of(x[i].get()),
    };
    let mut start = 0;
    while start < o.len() {
        if o[start] <= floor {
            return true;
        }
        let end = (start + CHUNK).min(o.len());
        if least(end - 1) < o[start] {
            let o = &mut o[start..end];
            match y {
                Some(y) => {
                    for ((o, &x), &y) in o.iter_mut().zip(&x[start..end]).zip(&y[start..end]) {
                        *o = lesser(*o, base + O::of(x.get()) + O::of(y.get()));
                    }
                }
                None => {
                    for (o, &x) in o.iter_mut().zip(&x[start..end]) {
                        *o = lesser(*o, base + O::of(x.get()));
                    }
                }
            }
        }
        start = end;
    }
    false
}

/// `min(o, v)` as a select, which the compiler turns into a vector minimum (a branch per
/// element instead when written as a conditional store).
#[inline(always)]
fn lesser<O: PartialOrd>(o: O, v: O) -> O {
    if v < o {
        v
    } else {
        o
    }
}

/// Lowers `settled` past the entries of `full` that equal the lower bound `lb`.
pub(super) fn settle<O: Val>(full: &[O], settled: &mut usize, lb: f64) {
    while *settled > 0 && full[*settled - 1].get() <= lb {
        *settled -= 1;
    }
}

/// `out[m] = min(out[m], v)` for every `m`, on a non-increasing `out`: only the prefix
/// above `v` changes.
fn lower_to<O: Acc>(out: &mut [O], v: O) {
    let end = out.partition_point(|&w| w > v);
    out[..end].fill(v);
}
