//! The size of the Checkmate model of a graph, counted before it is built, so that a
//! model too large for the memory a solve may use is refused instead of allocated
//! (HiGHS answers an allocation failure with `std::bad_alloc`, which aborts the process).
//!
//! With `h(i)` the horizon of node `i` (the largest index among `i` and its descendants,
//! [`super::horizons`]), `n` nodes and `P(k)` the inputs of `k`, the model of
//! [`super`] has exactly
//! * columns: `R = Σ_i (h(i) − i + 1)`, `S = Σ_i (h(i) − i)`, `U = n(n+1)/2` and
//!   `FREE = Σ_k |P(k)| (h(k) − k + 1)`; R and S are integer;
//! * rows: `n` of (e), `n(n−1)/2` of (f), `S` of (b), `Σ_v |P(v)| (h(v) − v + 1)` of
//!   (c) and, of (d), one per FREE and one per factor of its product (`S[t+1,i]` and the
//!   later readers `j` below; a relaxation for the first-order method keeps the paper's
//!   two big-M rows per FREE, [`super::StageModel::build_relaxation`], with two more
//!   nonzeros per FREE than counted here, within the margin of [`ModelSize::bytes`]), and
//!   one of (k) per stage `t < n − 1` with a term (none in that relaxation): a term per
//!   value `i < t` of nonzero size, not an input of `t`, with `t < h(i)`;
//! * nonzeros: per row, as [`super::StageModel::build`] writes it (zero sizes drop their
//!   terms); the sum over (d)'s rows of the later readers `j` of `i` is
//!   `Σ_{(i,k)} Σ_{j ∈ succ(i), j > k} max(0, min(h(k), h(j)) − j + 1)`, counted in
//!   `O(|E| log n)` with a Fenwick tree over horizons.
//!
//! `U` and (f) make every model quadratic in `n`, whatever the horizons: 2.5 M columns
//! at 999 nodes, 200 M at 20,000. A unit test checks these counts against built models.
//!
//! # Bytes
//! [`ModelSize::bytes`] is the peak resident memory of a `milp`, `lp-bound` or
//! `lp-rounding` solve of the model: `BYTES_FIXED + BYTES_PER_NONZERO · nonzeros`.
//! Columns and rows are not separate terms: on these models they are a fixed share of the
//! nonzeros (0.14 and 0.39), so no measurement can tell their costs apart. What the
//! figure covers: this crate's sparse rows ([`super::backend::Lp`], 16 B a nonzero) and
//! column maps, the column-wise copy handed to HiGHS (12 B), and HiGHS's own copies
//! (presolve, the row- and column-wise matrices of the simplex or the interior-point
//! normal equations, the factor, branch and bound).
//!
//! The estimate is the affine upper envelope of peaks measured on random layered graphs of
//! 299 to 999 nodes (200 B a nonzero, 152 MB fixed) with 10% on the slope and the fixed part
//! rounded up to 256 MiB; it includes the process's own baseline, about 20 MB. The calibration table is in `docs/performance.md`.

use crate::graph::Graph;
use std::fmt;

/// Fixed bytes of a solve (see the module doc).
pub const BYTES_FIXED: u64 = 256 << 20;
/// Peak bytes per nonzero of the constraint matrix.
pub const BYTES_PER_NONZERO: u64 = 220;

/// The size of a Checkmate model: its counts and the bytes a solve of it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelSize {
    pub columns: u64,
    /// Columns that are integer in the MILP (R and S).
    pub integer_columns: u64,
    pub rows: u64,
    pub nonzeros: u64,
    /// Estimated peak resident bytes of a solve of this model (saturates at `u64::MAX`).
    pub bytes: u64,
}

impl ModelSize {
    /// A model of these counts, with the bytes a solve of it needs.
    pub fn of_counts(columns: u64, integer_columns: u64, rows: u64, nonzeros: u64) -> ModelSize {
        let bytes = BYTES_PER_NONZERO
            .saturating_mul(nonzeros)
            .saturating_add(BYTES_FIXED);
        ModelSize {
            columns,
            integer_columns,
            rows,
            nonzeros,
            bytes,
        }
    }
}

impl fmt::Display for ModelSize {
    /// "a model of 2.5 M columns, 2.5 M rows and 10.1 M nonzeros".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a model of {} columns, {} rows and {} nonzeros",
            count(self.columns),
            count(self.rows),
            count(self.nonzeros)
        )
    }
}

/// A count for people: 999, 12.3 k, 2.5 M, 4.0 G.
fn count(c: u64) -> String {
    let c = c as f64;
    match c {
        _ if c >= 1e9 => format!("{:.1} G", c / 1e9),
        _ if c >= 1e6 => format!("{:.1} M", c / 1e6),
        _ if c >= 1e4 => format!("{:.1} k", c / 1e3),
        _ => format!("{c}"),
    }
}

/// A Fenwick tree over horizons `0..n`: counts and sums of the horizons inserted.
struct Fenwick {
    count: Vec<u64>,
    sum: Vec<u64>,
}

impl Fenwick {
    fn new(n: usize) -> Fenwick {
        Fenwick {
            count: vec![0; n + 1],
            sum: vec![0; n + 1],
        }
    }

    /// Adds (`sign = 1`) or removes (`sign = -1`, as wrapping arithmetic) horizon `h`.
    fn add(&mut self, h: usize, sign: u64) {
        let mut i = h + 1;
        while i < self.count.len() {
            self.count[i] = self.count[i].wrapping_add(sign);
            self.sum[i] = self.sum[i].wrapping_add(sign.wrapping_mul(h as u64));
            i += i & i.wrapping_neg();
        }
    }

    /// (count, sum) of the horizons `< h`.
    fn below(&self, h: usize) -> (u64, u64) {
        let (mut c, mut s, mut i) = (0u64, 0u64, h.min(self.count.len() - 1));
        while i > 0 {
            c = c.wrapping_add(self.count[i]);
            s = s.wrapping_add(self.sum[i]);
            i &= i - 1;
        }
        (c, s)
    }
}

/// The exact counts of the Checkmate model of `graph` (the budget changes only bounds)
/// and the bytes a solve of it needs. `O(n + |E| log n)`; nothing quadratic is allocated.
pub fn model_size(graph: &Graph) -> ModelSize {
    let n = graph.len() as u64;
    let h = super::horizons(graph);
    let span = |i: usize| (h[i] - i) as u64; // h(i) − i
    let nonzero = |i: usize| graph.memory(i) != 0;
    let preds = |v: usize| graph.preds(v).len() as u64;
    let nonzero_preds = |v: usize| graph.preds(v).iter().filter(|&&i| nonzero(i)).count() as u64;
    let tri = n * (n + 1) / 2; // U columns; also (f)'s rows + n
    let mut r = 0u64;
    let mut s = 0u64;
    let mut free = 0u64;
    let mut deps = 0u64; // (c) rows
    let mut nnz = 0u64;
    // (e): U[t,0], R[t,0] while it exists, S[t,i] of nonzero size.
    nnz += n + if nonzero(0) { span(0) + 1 } else { 0 };
    // (f): U[t,k+1], U[t,k] for every t > k; their R term while it exists.
    nnz += 2 * (tri - n);
    for i in 0..graph.len() {
        r += span(i) + 1;
        s += span(i);
        free += preds(i) * (span(i) + 1);
        deps += preds(i) * (span(i) + 1);
        if nonzero(i) {
            nnz += span(i); // (e)'s S[t,i]
            if i > 0 {
                nnz += span(i) + 1; // (f)'s R[t,i]
            }
        }
        nnz += span(i) * nonzero_preds(i); // (f)'s FREE terms, t > k = i
        nnz += 2 * span(i) + span(i).saturating_sub(1); // (b)
        nnz += 3 * preds(i) * (span(i) + 1); // (c)
    }
    // (d): per FREE[t,(i,k)], a row with R[t,k], one with S[t+1,i] while it exists
    // (t < h(i)) and one with R[t,j] for every later reader j of i that exists; each row
    // has two nonzeros.
    let mut d = 0u64;
    for k in 0..graph.len() {
        for &i in graph.preds(k) {
            let stages = span(k) + 1;
            let keep = stages - u64::from(h[i] == h[k]);
            d += stages + keep;
        }
    }
    d += later_readers(graph, &h);
    nnz += 2 * d;
    let (boundary, boundary_nnz) = boundary_rows(graph, &h);
    nnz += boundary_nnz;
    ModelSize::of_counts(
        r + s + tri + free,
        r + s,
        n + (tri - n) + s + deps + d + boundary,
        nnz,
    )
}

/// The rows (k) and their nonzeros: at each stage `t < n − 1`, one term per `S[t+1,i]`
/// with `i < t` not an input of `t` and of nonzero size (`i < t < h(i)`, counted with a
/// difference array over `t`); a stage without terms has no row.
fn boundary_rows(graph: &Graph, h: &[usize]) -> (u64, u64) {
    let n = graph.len();
    let live = |i: usize| graph.memory(i) != 0 && i + 1 < h[i];
    let mut starts = vec![0i64; n + 1];
    for i in (0..n).filter(|&i| live(i)) {
        starts[i + 1] += 1;
        starts[h[i]] -= 1;
    }
    let (mut rows, mut nnz, mut across) = (0u64, 0u64, 0i64);
    for (t, start) in starts.iter().enumerate().take(n.saturating_sub(1)) {
        across += start;
        let inputs = graph
            .preds(t)
            .iter()
            .filter(|&&p| live(p) && t < h[p])
            .count();
        let terms = across as u64 - inputs as u64;
        rows += u64::from(terms > 0);
        nnz += terms;
    }
    (rows, nnz)
}

/// `Σ_{(i,k) ∈ E} Σ_{j ∈ succ(i), j > k} max(0, min(h(k), h(j)) − j + 1)`: the later
/// readers in (d)'s rows. For each `i`, its readers in order; for reader `j` (after `k`),
/// every earlier reader `k` with `h(k) >= h(j)` adds `h(j) − j + 1`, one with
/// `j <= h(k) < h(j)` adds `h(k) − j + 1`.
fn later_readers(graph: &Graph, h: &[usize]) -> u64 {
    let mut tree = Fenwick::new(graph.len());
    let mut total = 0u64;
    for i in 0..graph.len() {
        let succs = graph.succs(i);
        for (b, &j) in succs.iter().enumerate() {
            if b > 0 {
                let (below_j, sum_j) = tree.below(j);
                let (below_hj, sum_hj) = tree.below(h[j]);
                let at_least_hj = b as u64 - below_hj;
                total += at_least_hj * (h[j] - j + 1) as u64;
                // Earlier readers with j <= h(k) < h(j): each adds h(k) − j + 1.
                let between = below_hj - below_j;
                total += (sum_hj - sum_j) + between - between * j as u64;
            }
            tree.add(h[j], 1);
        }
        for &j in succs {
            tree.add(h[j], u64::MAX);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::{linear, random_dag, DagShape};
    use crate::solve::exact::checkmate::StageModel;
    use crate::solve::{Instance, SolveOptions, Stop};

    fn built(graph: &Graph) -> ModelSize {
        let stop = Stop::start(&SolveOptions::default());
        let instance = Instance {
            graph,
            budget: u64::MAX,
        };
        let model = StageModel::build(&instance, &stop).unwrap();
        ModelSize {
            bytes: 0,
            ..model.size
        }
    }

    /// `graph` with every third node of size zero (their terms leave the rows).
    fn with_zero_sizes(graph: &Graph) -> Graph {
        let mut spec = graph.to_spec();
        for node in spec.nodes.iter_mut().step_by(3) {
            node.memory = 0;
        }
        Graph::new(spec).unwrap()
    }

    fn edgeless(n: usize) -> Graph {
        Graph::new(crate::graph::GraphSpec {
            nodes: (0..n)
                .map(|i| crate::graph::NodeSpec {
                    id: format!("v{i}"),
                    cost: 1.0,
                    memory: 1,
                    inputs: vec![],
                    kind: None,
                    op: None,
                })
                .collect(),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn counts_are_those_of_the_built_model() {
        let mut graphs = vec![linear(1), linear(6), edgeless(5)];
        for seed in 0..30 {
            let g = random_dag(&DagShape::sparse(), seed);
            graphs.push(with_zero_sizes(&g));
            graphs.push(g);
            graphs.push(random_dag(&DagShape::dense(9), seed));
        }
        for g in &graphs {
            let counted = ModelSize {
                bytes: 0,
                ..model_size(g)
            };
            assert_eq!(counted, built(g), "{} nodes", g.len());
        }
    }

    #[test]
    fn the_model_is_quadratic_whatever_the_horizons() {
        let g = crate::graph::generate::random_layered(999, 1);
        let size = model_size(&g);
        assert!(size.columns >= 999 * 1000 / 2, "{size:?}");
        assert!(size.to_string().starts_with("a model of "), "{size}");
        // An edgeless graph of 200,000 nodes is counted in no time, its U alone 2e10.
        let many = edgeless(200_000);
        assert!(model_size(&many).columns > 20_000_000_000);
    }
}
