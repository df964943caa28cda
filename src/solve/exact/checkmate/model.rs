//! The Checkmate model of one instance (the formulation in [`super`]'s module doc): the
//! lower-triangle columns cut at each node's horizon, scaled costs and memory, and the map
//! from (R, S, FREE, U) to columns.

use super::backend::{first_order, Lp};
use super::size::model_size;
use super::ModelSize;
use crate::graph::Graph;
use crate::schedule::stages::{empty_s, Stages};
use crate::solve::details::CheckmateDetails;
use crate::solve::{Instance, Stop, Stopped};
use fixedbitset::FixedBitSet;
use std::time::{Duration, Instant};

pub(super) const NONE: u32 = u32::MAX;

/// The Checkmate model of one instance, with the map from (R, S, FREE, U) to columns.
pub(crate) struct StageModel {
    /// Taken by the HiGHS run ([`StageModel::take_lp`]); the maps below stay.
    pub(super) lp: Lp,
    /// Its counts, as built (bytes by [`ModelSize`]'s calibration).
    pub size: ModelSize,
    /// `r[t][i]`: column of `R[t,i]`, or `NONE`.
    pub(super) r: Vec<Vec<u32>>,
    /// `s[t][i]`: column of `S[t,i]` (`i < t`), or `NONE`.
    pub(super) s: Vec<Vec<u32>>,
    /// `u[t][k]`: column of `U[t,k]`.
    pub(super) u: Vec<Vec<u32>>,
    /// Every FREE column as `(t, i, k, column)`.
    pub(super) free: Vec<(u32, u32, u32, u32)>,
    /// Objective units: cost `c` is `c / cost_scale` in the model (an objective value is a
    /// cost only through [`super::resolution::within_resolution`]).
    pub(super) cost_scale: f64,
    /// Memory in units of `mem_scale` bytes.
    pub(super) mem_scale: u64,
    /// What memory units are divided by in the rows ([`memory_divisor`]): a power of two,
    /// so that the division is exact in floating point.
    pub(super) mem_div: f64,
    /// `⌊(B − K) / mem_scale⌋ / mem_div`.
    pub(super) budget_units: f64,
    pub build_time: Duration,
}

/// `h(i)`: the largest index among `i` and its descendants.
pub(super) fn horizons(graph: &Graph) -> Vec<usize> {
    let n = graph.len();
    let mut h: Vec<usize> = (0..n).collect();
    for i in (0..n).rev() {
        for &j in graph.succs(i) {
            h[i] = h[i].max(h[j]);
        }
    }
    h
}

/// The memory unit `g` of the model: the gcd of the sizes.
pub(super) fn memory_scale(graph: &Graph) -> u64 {
    graph.nodes().iter().map(|v| v.memory).fold(0, gcd).max(1)
}

/// The most memory units the budget row of a MILP holds: HiGHS refuses a coefficient of
/// 1e15 or more ("HiGHS rejected the model"), and its MIP presolve died of an integer
/// division (SIGFPE) on rows with coefficients near 1e14 beside ones of a few units.
const MILP_MAX_UNITS: u64 = 1 << 31;

/// What a model divides memory units by, given the budget's `units` (every size that can
/// be resident is at most that): for a relaxation the power of two nearest below `units`,
/// so that the budget row reads `U <= [1, 2)`; for a MILP 1, or where `units` exceed
/// [`MILP_MAX_UNITS`] the power of two that brings them within it. A power of two divides
/// exactly; HiGHS's row tolerance then counts in the divided units, which the MILP's
/// repair margin takes into account.
pub(super) fn memory_divisor(units: u64, normalise: bool) -> f64 {
    match units.checked_ilog2() {
        Some(k) if normalise => f64::from(k).exp2(),
        Some(k) if units > MILP_MAX_UNITS => f64::from(k - (MILP_MAX_UNITS.ilog2() - 1)).exp2(),
        _ => 1.0,
    }
}

pub(super) use crate::solve::core::gcd;

/// The unit costs are expressed in: their gcd when they are all (not too large)
/// integers and the ratio to the largest stays moderate, else the largest cost.
pub(super) fn cost_scale(graph: &Graph) -> f64 {
    let max = graph.nodes().iter().map(|n| n.cost).fold(0.0, f64::max);
    if max <= 0.0 {
        return 1.0;
    }
    let integral = graph
        .nodes()
        .iter()
        .all(|n| n.cost.fract() == 0.0 && n.cost < 9.0e15);
    if integral {
        let g = graph
            .nodes()
            .iter()
            .map(|n| n.cost as u64)
            .fold(0, gcd)
            .max(1) as f64;
        if max / g <= 1.0e9 {
            return g;
        }
    }
    max
}

impl StageModel {
    /// Builds the model of `instance` (`budget >= fixed_memory` is the caller's check,
    /// and [`admit`](super::admit) the check that it fits in memory), polling `stop` once
    /// per stage.
    pub(crate) fn build(instance: &Instance, stop: &Stop) -> Result<StageModel, Stopped> {
        StageModel::build_within(instance, 0, stop)
    }

    /// The model for its relaxation: memory divided further by a power of two, so that
    /// the budget row reads `U <= [1, 2)` (exported graphs have sizes near 1e8 bytes and
    /// budgets near 1e9, which stalls the large LPs: [`super::backend::FIRST_ORDER_MIN_COLS`]);
    /// for PDLP, the paper's big-M rows for (d), which it solves faster.
    pub(crate) fn build_relaxation(
        instance: &Instance,
        stop: &Stop,
    ) -> Result<StageModel, Stopped> {
        StageModel::build_with(instance, 0, true, stop)
    }

    /// The model with its budget rows tightened by `margin` memory units:
    /// `U <= ⌊(B − K)/g⌋ − margin`.
    pub(crate) fn build_within(
        instance: &Instance,
        margin: u64,
        stop: &Stop,
    ) -> Result<StageModel, Stopped> {
        StageModel::build_with(instance, margin, false, stop)
    }

    fn build_with(
        instance: &Instance,
        margin: u64,
        normalise: bool,
        stop: &Stop,
    ) -> Result<StageModel, Stopped> {
        let began = Instant::now();
        let graph = instance.graph;
        let mem_scale = memory_scale(graph);
        let units = (instance.budget.saturating_sub(graph.fixed_memory()) / mem_scale)
            .saturating_sub(margin);
        let mem_div = memory_divisor(units, normalise);
        // A relaxation for the first-order method keeps the paper's rows: big-M rows for
        // (d) and no (k). PDLP solves the exported ResNet-18 b32 in 78 s with them, 259 s
        // with the rows of one factor each (284,455 rows instead of 258,025), 375 s with
        // (k) beside the big-M rows.
        let paper_rows = normalise && first_order(model_size(graph).columns);
        let cost_scale = cost_scale(graph);
        let mut build = Build {
            graph,
            lp: Lp::new(),
            r: Vec::new(),
            s: Vec::new(),
            u: Vec::new(),
            free: Vec::new(),
            mem_scale,
            mem_div,
            budget_units: units as f64 / mem_div,
            paper_rows,
            row: Vec::new(),
        };
        build.add_columns(cost_scale, stop)?;
        // free_of[k]: the FREE columns (i, column) of the edges into k, in stage t.
        let mut free_of: Vec<Vec<(usize, usize)>> = Vec::new();
        for t in 0..graph.len() {
            stop.poll()?;
            build.add_free_columns(t, &mut free_of);
            build.add_memory_rows(t, &free_of);
            build.add_persistence_rows(t);
            build.add_dependency_rows(t);
            build.add_boundary_row(t);
            build.add_free_rows(t, &free_of);
        }
        let Build {
            lp,
            r,
            s,
            u,
            free,
            budget_units,
            ..
        } = build;
        let size = ModelSize::of_counts(
            lp.num_cols() as u64,
            lp.num_integer() as u64,
            lp.num_rows() as u64,
            lp.num_nonzeros() as u64,
        );
        Ok(StageModel {
            lp,
            size,
            r,
            s,
            u,
            free,
            cost_scale,
            mem_scale,
            mem_div,
            budget_units,
            build_time: began.elapsed(),
        })
    }

    pub(crate) fn num_variables(&self) -> u64 {
        self.size.columns
    }
    pub(crate) fn num_constraints(&self) -> u64 {
        self.size.rows
    }

    /// The sparse program, for the one HiGHS run of this model; its memory goes with it.
    pub(super) fn take_lp(&mut self) -> Lp {
        std::mem::take(&mut self.lp)
    }

    /// Model figures for a result's `details`.
    pub(super) fn details(&self) -> CheckmateDetails {
        CheckmateDetails {
            variables: Some(self.size.columns as usize),
            binaries: Some(self.size.integer_columns as usize),
            constraints: Some(self.size.rows as usize),
            build_time_s: Some(self.build_time.as_secs_f64()),
            ..CheckmateDetails::default()
        }
    }

    /// The value of `S[t,i]` in `columns` (0 where the variable does not exist).
    pub(super) fn s_value(&self, columns: &[f64], t: usize, i: usize) -> f64 {
        match self.s[t].get(i) {
            Some(&c) if c != NONE => columns[c as usize],
            _ => 0.0,
        }
    }

    /// S rounded at `threshold`: `S[t,i] = 1` where the value is `>= threshold`.
    pub(super) fn s_at(&self, columns: &[f64], threshold: f64) -> Vec<FixedBitSet> {
        let n = self.s.len();
        let mut s = empty_s(n);
        for (t, row) in s.iter_mut().enumerate() {
            for i in 0..t {
                if self.s_value(columns, t, i) >= threshold {
                    row.insert(i);
                }
            }
        }
        s
    }

    /// A complete column vector for the stage schedule `stages` (R, S as given, FREE and
    /// U by their definitions), or `None` when it is not a feasible point of this model
    /// (a variable it needs does not exist, or `U` exceeds the budget).
    pub(super) fn point(&self, graph: &Graph, stages: &Stages) -> Option<Vec<f64>> {
        let n = graph.len();
        let mut x = vec![0.0; self.size.columns as usize];
        for t in 0..n {
            for i in stages.r[t].ones() {
                x[*self.r[t].get(i).filter(|&&c| c != NONE)? as usize] = 1.0;
            }
            for i in stages.s[t].ones() {
                x[*self.s[t].get(i).filter(|&&c| c != NONE)? as usize] = 1.0;
            }
        }
        let kept = |t: usize, i: usize| t + 1 < n && stages.s[t + 1].contains(i);
        let m = |i: usize| (graph.memory(i) / self.mem_scale) as f64 / self.mem_div;
        let mut freed: Vec<Vec<f64>> = (0..n).map(|t| vec![0.0; t + 1]).collect();
        for &(t, i, k, c) in &self.free {
            let (t, i, k) = (t as usize, i as usize, k as usize);
            let r = &stages.r[t];
            let value = r.contains(k)
                && !kept(t, i)
                && !graph
                    .succs(i)
                    .iter()
                    .any(|&j| j > k && j <= t && r.contains(j));
            if value {
                x[c as usize] = 1.0;
                freed[t][k] += m(i);
            }
        }
        for t in 0..n {
            let mut used: f64 = stages.s[t].ones().map(m).sum();
            for k in 0..=t {
                if k > 0 {
                    used -= freed[t][k - 1];
                }
                if stages.r[t].contains(k) {
                    used += m(k);
                }
                if used > self.budget_units + 1e-9 {
                    return None;
                }
                x[self.u[t][k] as usize] = used;
            }
        }
        Some(x)
    }
}

/// The model being built: the columns of every stage so far, and the rows of the
/// formulation in [`super`]'s module doc, added stage by stage in a fixed order.
struct Build<'a> {
    graph: &'a Graph,
    lp: Lp,
    r: Vec<Vec<u32>>,
    s: Vec<Vec<u32>>,
    u: Vec<Vec<u32>>,
    free: Vec<(u32, u32, u32, u32)>,
    mem_scale: u64,
    mem_div: f64,
    budget_units: f64,
    /// The paper's big-M rows for (d) and no (k), for a first-order relaxation.
    paper_rows: bool,
    /// The row being written, reused.
    row: Vec<(usize, f64)>,
}

/// The column of an entry of `r`, `s` or `u`, if it exists.
fn col(c: u32) -> Option<usize> {
    (c != NONE).then_some(c as usize)
}

impl Build<'_> {
    /// `M_i`: the size of `i` in the rows' memory units.
    fn m(&self, i: usize) -> f64 {
        (self.graph.memory(i) / self.mem_scale) as f64 / self.mem_div
    }

    fn r_at(&self, t: usize, i: usize) -> Option<usize> {
        col(self.r[t][i])
    }

    fn s_at(&self, t: usize, i: usize) -> Option<usize> {
        if i < t {
            col(self.s[t][i])
        } else {
            None
        }
    }

    fn s_next(&self, t: usize, i: usize) -> Option<usize> {
        self.s.get(t + 1).and_then(|row| col(row[i]))
    }

    /// Adds the row in `self.row` with the bounds `[lower, upper]`.
    fn add_row(&mut self, lower: f64, upper: f64) {
        self.lp.add_row(lower, upper, &mut self.row);
    }

    /// The R, S and U columns of every stage, cut at each node's horizon `h(i)`.
    fn add_columns(&mut self, cost_scale: f64, stop: &Stop) -> Result<(), Stopped> {
        let graph = self.graph;
        let n = graph.len();
        let h = horizons(graph);
        let lp = &mut self.lp;
        self.r = vec![Vec::new(); n];
        self.s = vec![Vec::new(); n];
        self.u = vec![Vec::new(); n];
        for t in 0..n {
            if t % 64 == 0 {
                stop.poll()?;
            }
            self.r[t] = (0..=t)
                .map(|i| {
                    if t > h[i] {
                        NONE
                    } else {
                        let lower = if i == t { 1.0 } else { 0.0 };
                        lp.add_col(graph.cost(i) / cost_scale, lower, 1.0, true) as u32
                    }
                })
                .collect();
            self.s[t] = (0..t)
                .map(|i| {
                    if t > h[i] {
                        NONE
                    } else {
                        lp.add_col(0.0, 0.0, 1.0, true) as u32
                    }
                })
                .collect();
            self.u[t] = (0..=t)
                .map(|_| lp.add_col(0.0, 0.0, self.budget_units, false) as u32)
                .collect();
        }
        Ok(())
    }

    /// The FREE columns of stage `t`, one an edge `(i, k)` with `R[t,k]`; `free_of[k]`
    /// receives those of the edges into `k`.
    fn add_free_columns(&mut self, t: usize, free_of: &mut Vec<Vec<(usize, usize)>>) {
        free_of.clear();
        free_of.resize(t + 1, Vec::new());
        for (k, frees) in free_of.iter_mut().enumerate() {
            if self.r_at(t, k).is_some() {
                for &i in self.graph.preds(k) {
                    // Continuous: its upper bounds (d) are integral wherever R
                    // and S are, and nothing gains from a FREE below them.
                    let c = self.lp.add_col(0.0, 0.0, 1.0, false);
                    self.free.push((t as u32, i as u32, k as u32, c as u32));
                    frees.push((i, c));
                }
            }
        }
    }

    /// (e) `U[t,0] = M_0 R[t,0] + Σ_i M_i S[t,i]` and
    /// (f) `U[t,k+1] = U[t,k] + M_{k+1} R[t,k+1] − Σ_{(i,k)} M_i FREE[t,(i,k)]`.
    fn add_memory_rows(&mut self, t: usize, free_of: &[Vec<(usize, usize)>]) {
        self.row.push((self.u[t][0] as usize, 1.0));
        if let Some(c) = self.r_at(t, 0) {
            self.row.push((c, -self.m(0)));
        }
        for i in 0..t {
            if let Some(c) = self.s_at(t, i) {
                self.row.push((c, -self.m(i)));
            }
        }
        self.add_row(0.0, 0.0);
        for (k, frees) in free_of.iter().enumerate().take(t) {
            self.row.push((self.u[t][k + 1] as usize, 1.0));
            self.row.push((self.u[t][k] as usize, -1.0));
            if let Some(c) = self.r_at(t, k + 1) {
                self.row.push((c, -self.m(k + 1)));
            }
            for &(i, c) in frees {
                self.row.push((c, self.m(i)));
            }
            self.add_row(0.0, 0.0);
        }
    }

    /// (b) persistence `S[t,i] <= S[t-1,i] + R[t-1,i]`.
    fn add_persistence_rows(&mut self, t: usize) {
        if t == 0 {
            return;
        }
        for i in 0..self.r[t - 1].len() {
            if let Some(c) = self.s_at(t, i) {
                self.row.push((c, 1.0));
                if let Some(c) = col(self.r[t - 1][i]) {
                    self.row.push((c, -1.0));
                }
                if let Some(c) = self.s[t - 1].get(i).and_then(|&c| col(c)) {
                    self.row.push((c, -1.0));
                }
                self.add_row(f64::NEG_INFINITY, 0.0);
            }
        }
    }

    /// (c) dependencies `R[t,v] <= R[t,u] + S[t,u]`.
    fn add_dependency_rows(&mut self, t: usize) {
        for v in 0..=t {
            let Some(rv) = self.r_at(t, v) else { continue };
            for &p in self.graph.preds(v) {
                self.row.push((rv, 1.0));
                if let Some(c) = self.r_at(t, p) {
                    self.row.push((c, -1.0));
                }
                if let Some(c) = self.s_at(t, p) {
                    self.row.push((c, -1.0));
                }
                self.add_row(f64::NEG_INFINITY, 0.0);
            }
        }
    }

    /// (k) the stage boundary:
    /// `Σ_{i<t, i ∉ P(t)} M_i S[t+1,i] <= B − K − M_t − Σ_{P(t)} M_p`.
    fn add_boundary_row(&mut self, t: usize) {
        if t + 1 >= self.graph.len() || self.paper_rows {
            return;
        }
        let inputs = self.graph.preds(t);
        for i in (0..t).filter(|i| !inputs.contains(i)) {
            if let Some(c) = self.s_next(t, i).filter(|_| self.m(i) > 0.0) {
                self.row.push((c, self.m(i)));
            }
        }
        if !self.row.is_empty() {
            let held = self.m(t) + inputs.iter().map(|&p| self.m(p)).sum::<f64>();
            self.add_row(f64::NEG_INFINITY, self.budget_units - held);
        }
    }

    /// (d) `FREE[t,(i,k)] <= R[t,k] (1 − S[t+1,i]) Π_{j>k} (1 − R[t,j])`: one row a
    /// factor, or for a first-order relaxation the paper's big-M rows.
    fn add_free_rows(&mut self, t: usize, free_of: &[Vec<(usize, usize)>]) {
        for (k, frees) in free_of.iter().enumerate() {
            let Some(rk) = self.r_at(t, k) else { continue };
            for &(i, f) in frees {
                let later: Vec<usize> = self
                    .graph
                    .succs(i)
                    .iter()
                    .filter(|&&j| j > k && j <= t)
                    .filter_map(|&j| self.r_at(t, j))
                    .collect();
                let keep = self.s_next(t, i);
                if self.paper_rows {
                    // With the hazards H = (1 − R[t,k]) + S[t+1,i] + Σ_j R[t,j] and κ
                    // their number: 1 − FREE <= H and κ (1 − FREE) >= H.
                    let kappa = 1.0 + keep.is_some() as u8 as f64 + later.len() as f64;
                    self.row.push((f, -1.0));
                    self.row.push((rk, 1.0));
                    self.row.extend(keep.map(|c| (c, -1.0)));
                    self.row.extend(later.iter().map(|&c| (c, -1.0)));
                    self.add_row(f64::NEG_INFINITY, 0.0);
                    self.row.push((f, kappa));
                    self.row.push((rk, -1.0));
                    self.row.extend(keep.map(|c| (c, 1.0)));
                    self.row.extend(later.iter().map(|&c| (c, 1.0)));
                    self.add_row(f64::NEG_INFINITY, kappa - 1.0);
                    continue;
                }
                // One row a factor: FREE <= R[t,k], FREE + S[t+1,i] <= 1,
                // FREE + R[t,j] <= 1.
                self.row.push((f, 1.0));
                self.row.push((rk, -1.0));
                self.add_row(f64::NEG_INFINITY, 0.0);
                for hazard in keep.into_iter().chain(later) {
                    self.row.push((f, 1.0));
                    self.row.push((hazard, 1.0));
                    self.add_row(f64::NEG_INFINITY, 1.0);
                }
            }
        }
    }
}
