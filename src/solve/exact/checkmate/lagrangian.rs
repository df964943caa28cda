//! A proven lower bound on an LP from any row multipliers: weak Lagrangian duality, as
//! in Neumaier and Shcherbina's safe bounds ("Safe bounds in linear and mixed-integer
//! linear programming", Math. Programming 99, 2004).
//!
//! For `min cᵀx` subject to `ℓ_r <= a_rᵀx <= υ_r` and `l_j <= x_j <= u_j`, take any
//! multipliers `y` and, per row, `ρ_r = ℓ_r` where `y_r > 0`, `ρ_r = υ_r` where `y_r < 0`
//! (a multiplier whose side is unbounded counts as 0). Then `y_r (a_rᵀx − ρ_r) >= 0` for
//! every feasible `x`, so with the reduced costs `d = c − Aᵀy`
//!
//! `cᵀx >= cᵀx − Σ_r y_r (a_rᵀx − ρ_r) = dᵀx + yᵀρ >= yᵀρ + Σ_j min(d_j l_j, d_j u_j) = L(y)`.
//!
//! Every column of the Checkmate models is bounded, so `L(y)` is finite for every `y`,
//! and it equals the LP's optimum at an optimal dual. HiGHS's duals are therefore never
//! trusted, only used: an interior-point or first-order (PDLP) run stopped short of its
//! tolerances, or one ending without a verdict, still proves `L(y)`. The sum is taken
//! less a margin for its rounding errors.

/// The data `L(y)` reads: the LP's costs, bounds and its matrix by columns.
#[derive(Debug)]
pub(crate) struct Lagrangian {
    pub cost: Vec<f64>,
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    pub row_lower: Vec<f64>,
    pub row_upper: Vec<f64>,
    /// Column `j`'s entries are `start[j]..start[j + 1]` of `rows_of` and `values`.
    pub start: Vec<u32>,
    pub rows_of: Vec<u32>,
    pub values: Vec<f64>,
}

impl Lagrangian {
    /// `L(y)` less its rounding margin; `None` when `y` does not fit the rows, is not
    /// finite, or a column unbounded on the side its reduced cost needs makes it `−∞`.
    pub(crate) fn bound(&self, y: &[f64]) -> Option<f64> {
        if y.len() != self.row_lower.len() || y.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut total = 0.0;
        // Σ of the magnitudes every rounding error is relative to.
        let mut magnitude = 0.0;
        let y: Vec<f64> = y
            .iter()
            .zip(self.row_lower.iter().zip(&self.row_upper))
            .map(|(&y, (&lo, &up))| {
                let rho = if y > 0.0 { lo } else { up };
                if y == 0.0 || !rho.is_finite() {
                    return 0.0;
                }
                total += y * rho;
                magnitude += (y * rho).abs();
                y
            })
            .collect();
        for j in 0..self.cost.len() {
            let entries = self.start[j] as usize..self.start[j + 1] as usize;
            let mut d = self.cost[j];
            let mut size = d.abs();
            for (&r, &a) in self.rows_of[entries.clone()]
                .iter()
                .zip(&self.values[entries])
            {
                d -= a * y[r as usize];
                size += (a * y[r as usize]).abs();
            }
            let (l, u) = (self.lower[j], self.upper[j]);
            let term = if d > 0.0 {
                d * l
            } else if d < 0.0 {
                d * u
            } else {
                0.0
            };
            if !term.is_finite() {
                return None;
            }
            total += term;
            magnitude += size * l.abs().max(u.abs());
        }
        let operations = (self.values.len() + self.cost.len() + y.len()) as f64;
        Some(total - 2.0 * operations * f64::EPSILON * magnitude)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `min x + y` subject to `x + y >= 1` and `x − y <= 0.5`, `x, y` in `[0, 1]`.
    fn small() -> Lagrangian {
        Lagrangian {
            cost: vec![1.0, 1.0],
            lower: vec![0.0, 0.0],
            upper: vec![1.0, 1.0],
            row_lower: vec![1.0, f64::NEG_INFINITY],
            row_upper: vec![f64::INFINITY, 0.5],
            start: vec![0, 2, 4],
            rows_of: vec![0, 1, 0, 1],
            values: vec![1.0, 1.0, 1.0, -1.0],
        }
    }

    #[test]
    fn the_optimal_multiplier_gives_the_optimum_and_any_other_a_lower_value() {
        let lp = small();
        let at = |y: &[f64]| lp.bound(y).unwrap();
        // The optimum is 1 (x + y = 1); its dual is y = (1, 0).
        assert!((at(&[1.0, 0.0]) - 1.0).abs() < 1e-12);
        assert!(at(&[1.0, 0.0]) <= 1.0);
        for y in [[0.0, 0.0], [0.5, 0.0], [2.0, 0.0], [1.0, -0.3], [-1.0, 0.4]] {
            assert!(at(&y) < 1.0, "{y:?}: {}", at(&y));
        }
        // A multiplier on an unbounded side counts as 0: (−1, 0.4) is (0, 0) there.
        assert_eq!(at(&[-1.0, 0.4]), at(&[0.0, 0.0]));
        assert_eq!(lp.bound(&[1.0]), None);
        assert_eq!(lp.bound(&[f64::NAN, 0.0]), None);
    }
}
