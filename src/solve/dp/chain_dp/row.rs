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
//!   the budgets, found by binary search ([`improvable`]); an option whose floor is not
//!   below `full` at its first budget is skipped whole (dominated);
//! * where both rows have reached their constant tails the sum is a constant `v`, which
//!   lowers exactly the prefix where `full > v`, again found by binary search.

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
trait Val: Copy {
    fn get(self) -> f64;
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

    /// `vals` in single precision when that is exact, else as they are.
    fn of(vals: &[f64]) -> Vals {
        if vals.iter().all(|&v| (v as f32) as f64 == v) {
            Vals::Single(vals.iter().map(|&v| v as f32).collect())
        } else {
            Vals::Double(vals.to_vec())
        }
    }
}

impl Default for Row {
    /// A row infeasible at every budget.
    fn default() -> Row {
        Row {
            lo: 0,
            floor: f64::INFINITY,
            vals: Vals::Double(Vec::new()),
        }
    }
}

impl Row {
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

    /// The least value, at the top (infinite for a row that is never feasible).
    pub(super) fn floor(&self) -> f64 {
        self.floor
    }

    /// Compresses a full row (indexed by m from 0).
    pub(super) fn from_full(full: &[f64]) -> Row {
        let Some(lo) = full.iter().position(|v| v.is_finite()) else {
            return Row::default();
        };
        let last = *full.last().expect("non-empty");
        let end = full.iter().rposition(|&v| v != last).map_or(lo, |p| p + 1);
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
pub(super) fn combine(
    out: &mut [f64],
    start: usize,
    base: f64,
    a: &Row,
    shift: usize,
    b: Option<(&Row, isize)>,
) {
    use Vals::{Double, Single};
    let first = (a.lo + shift, &a.vals);
    match (first, b.map(|(row, sh)| (row.lo as isize + sh, &row.vals))) {
        ((alo, Single(x)), None) => combine_typed::<f32, f32>(out, start, base, alo, x, None),
        ((alo, Double(x)), None) => combine_typed::<f64, f64>(out, start, base, alo, x, None),
        ((alo, Single(x)), Some((blo, Single(y)))) => {
            combine_typed(out, start, base, alo, x, Some((blo, y.as_slice())))
        }
        ((alo, Single(x)), Some((blo, Double(y)))) => {
            combine_typed(out, start, base, alo, x, Some((blo, y.as_slice())))
        }
        ((alo, Double(x)), Some((blo, Single(y)))) => {
            combine_typed(out, start, base, alo, x, Some((blo, y.as_slice())))
        }
        ((alo, Double(x)), Some((blo, Double(y)))) => {
            combine_typed(out, start, base, alo, x, Some((blo, y.as_slice())))
        }
    }
}

/// [`combine`] on the rows' values: `a` stored from budget `alo` of `out` on, `b` from
/// `blo` (negative: before 0).
fn combine_typed<X: Val, Y: Val>(
    out: &mut [f64],
    start: usize,
    base: f64,
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
        match b {
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
                match (ia + 1 < a.len(), ib + 1 < b.len()) {
                    (true, true) => lower_by(o, &av[..len], Some(&bv[..len]), base),
                    (true, false) => lower_by::<X, Y>(o, &av[..len], None, base + bv[0].get()),
                    (false, true) => lower_by::<Y, X>(o, &bv[..len], None, base + av[0].get()),
                    (false, false) => {
                        lower_to(&mut out[m..], base + av[0].get() + bv[0].get());
                        return;
                    }
                }
                m = end;
            }
            None => {
                let end = a_end.min(top).max(m + 1);
                let len = end - m;
                let o = &mut out[m..end];
                if ia + 1 < a.len() {
                    lower_by::<X, Y>(o, &av[..len], None, base);
                } else {
                    lower_to(&mut out[m..], base + av[0].get());
                    return;
                }
                m = end;
            }
        }
    }
}

/// The budgets [`lower_by`] checks at once before it touches them.
const CHUNK: usize = 32;

/// `o[i] = min(o[i], base + x[i] + y[i])` (`y` absent: 0), for a non-increasing `o` and
/// non-increasing `x`, `y`. Chunk by chunk: the sum is least at a chunk's end and `o`
/// greatest at its start, so when the one is not below the other nothing in the chunk
/// can be lowered and the chunk is skipped. Of the sums the fill forms, few lower `o`
/// (3% on rotor's L = 200 chain with 1000 slots) and about half of the chunks are skipped
/// (L = 500, 500 slots).
#[inline(always)]
fn lower_by<X: Val, Y: Val>(o: &mut [f64], x: &[X], y: Option<&[Y]>, base: f64) {
    let least = |i: usize| base + x[i].get() + y.map_or(0.0, |y| y[i].get());
    let mut start = 0;
    while start < o.len() {
        let end = (start + CHUNK).min(o.len());
        if least(end - 1) < o[start] {
            let o = &mut o[start..end];
            match y {
                Some(y) => {
                    for ((o, &x), &y) in o.iter_mut().zip(&x[start..end]).zip(&y[start..end]) {
                        *o = lesser(*o, base + x.get() + y.get());
                    }
                }
                None => {
                    for (o, &x) in o.iter_mut().zip(&x[start..end]) {
                        *o = lesser(*o, base + x.get());
                    }
                }
            }
        }
        start = end;
    }
}

/// `min(o, v)` as a select, which the compiler turns into a vector minimum (a branch per
/// element instead when written as a conditional store).
#[inline(always)]
fn lesser(o: f64, v: f64) -> f64 {
    if v < o {
        v
    } else {
        o
    }
}

/// Lowers `settled` past the entries of `full` that equal the lower bound `lb`.
pub(super) fn settle(full: &[f64], settled: &mut usize, lb: f64) {
    while *settled > 0 && full[*settled - 1] <= lb {
        *settled -= 1;
    }
}

/// The budgets of the non-increasing `full` that a value of at least `floor` may still
/// lower: those before the first entry `<= floor`.
pub(super) fn improvable(full: &[f64], floor: f64) -> usize {
    full.partition_point(|&v| v > floor)
}

/// `out[m] = min(out[m], v)` for every `m`, on a non-increasing `out`: only the prefix
/// above `v` changes.
fn lower_to(out: &mut [f64], v: f64) {
    let end = improvable(out, v);
    out[..end].fill(v);
}
