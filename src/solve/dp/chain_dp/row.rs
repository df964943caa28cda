//! The slot kernel: a row `C(a, b, ·)` of the DP table in compressed form, and the shifted
//! element-wise minimum that fills it from the rows of its sub-problems.
//!
//! A row is stored only from its first feasible budget to the budget from which it is
//! constant. [`combine`] adds an option's rows, shifted by the memory the option holds
//! while each sub-problem runs, and keeps the minimum; where both rows have reached their
//! constant tails the sum is constant too, and is pushed to a list of tails applied once
//! per row ([`apply_tails`]) instead of being written out for every budget.

/// A row `C(a, b, m)` for `m >= lo`, constant after its last stored value.
#[derive(Clone, Debug, Default)]
pub(super) struct Row {
    lo: usize,
    vals: Vec<f64>,
}

impl Row {
    /// `C(b, b, ·) = 0`: the empty sub-problem.
    pub(super) fn zero() -> Row {
        Row {
            lo: 0,
            vals: vec![0.0],
        }
    }

    pub(super) fn get(&self, m: usize) -> f64 {
        if m < self.lo || self.vals.is_empty() {
            f64::INFINITY
        } else {
            self.vals[(m - self.lo).min(self.vals.len() - 1)]
        }
    }

    /// The least budget at which the row is finite, if any.
    pub(super) fn first_feasible(&self) -> Option<usize> {
        (!self.vals.is_empty()).then_some(self.lo)
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
            vals: full[lo..=end.max(lo)].to_vec(),
        }
    }
}

/// `out[m] = min(out[m], base + a(m − shift) + b(m − shift_b))` for `m >= start`, with
/// `b = Some((row, shift_b))`. Where both rows
/// have reached their constant tails the value is constant in `m`: it is pushed to
/// `tails` as `(from, value)` instead of being written out (see [`apply_tails`]).
pub(super) fn combine(
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

/// Lowers `settled` past the entries of `full` that equal the lower bound `lb`.
pub(super) fn settle(full: &[f64], settled: &mut usize, lb: f64) {
    while *settled > 0 && full[*settled - 1] <= lb {
        *settled -= 1;
    }
}

/// Applies the constant tails `(from, v)`: `out[m] = min(out[m], v)` for `m >= from`.
pub(super) fn apply_tails(out: &mut [f64], tails: &mut Vec<(usize, f64)>) {
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
