//! The cuts' material: the ancestor sets, the room at each node's first computation, the
//! forced values `F`, and the LP of one cut with its covers (rows (1)-(8) of [`super`]'s
//! module docs).

use super::super::backend::{Controls, Lp, RunStatus};
use super::super::model::{gcd, memory_divisor};
use super::{run_cut, BEST_CUTS, INTEGRAL_MAX_VALUES, INTEGRAL_NODES, MAX_COVER, SPREAD_CUTS};
use super::{THIRD_VALUES, TINY};
use crate::graph::Graph;
use crate::solve::{SolveError, Stop};
use fixedbitset::FixedBitSet;

/// The LP of one cut, normalised, with the columns of each value.
pub(super) struct CutLp {
    pub(super) lp: Lp,
    /// The cost the objective is in units of.
    pub(super) c_max: f64,
    /// `(S_v, D_v)` for each value of `A ∖ I`.
    pub(super) col: Vec<Option<(usize, usize)>>,
}

/// The forced values `F` (module docs) as a set, and the room at each node's first
/// computation ([`Cuts::room`]), where the cuts look for a forced value's later moments.
pub(super) struct Forced {
    pub(super) set: FixedBitSet,
    pub(super) rooms: Vec<Option<u64>>,
}

impl Forced {
    /// The set of the values of `forced` ([`Cuts::forced`]) of a graph of `n` nodes, with
    /// the `rooms` they were found with.
    pub(super) fn new(n: usize, forced: &[(usize, usize)], rooms: Vec<Option<u64>>) -> Forced {
        let mut set = FixedBitSet::with_capacity(n);
        set.extend(forced.iter().map(|&(v, _)| v));
        Forced { set, rooms }
    }
}

/// The ancestor sets and the reading relation the cuts are built from.
pub(super) struct Cuts<'g> {
    pub(super) graph: &'g Graph,
    /// `anc[v]`: the strict ancestors of `v`.
    pub(super) anc: Vec<FixedBitSet>,
    /// Whether a cut prices a forced value's third computation (module docs); the tests
    /// compare with the program without it.
    pub(super) third: bool,
}

impl<'g> Cuts<'g> {
    pub(super) fn new(graph: &'g Graph) -> Cuts<'g> {
        let n = graph.len();
        let mut anc: Vec<FixedBitSet> = Vec::with_capacity(n);
        for v in 0..n {
            let mut set = FixedBitSet::with_capacity(n);
            for &u in graph.preds(v) {
                set.union_with(&anc[u]);
                set.insert(u);
            }
            anc.push(set);
        }
        Cuts {
            graph,
            anc,
            third: true,
        }
    }

    /// Whether a descendant of `l` reads `v`: `v`'s value is needed after `l`'s first
    /// computation.
    pub(super) fn read_after(&self, v: usize, l: usize) -> bool {
        self.graph.succs(v).iter().any(|&r| self.anc[r].contains(l))
    }

    /// The bytes free at `l`'s first computation for the values of `A ∖ I`, or `None`
    /// when even `l` and its inputs do not fit.
    fn room(&self, l: usize, budget: u64) -> Option<u64> {
        budget.checked_sub(self.graph.fixed_memory() + self.graph.footprint(l))
    }

    /// The values of `A ∖ I` of cut `l`.
    fn values(&self, l: usize) -> impl Iterator<Item = usize> + '_ {
        let inputs = self.graph.preds(l);
        self.anc[l]
            .ones()
            .filter(move |v| inputs.binary_search(v).is_err())
    }

    /// `Σ_{v needed} s_v − room`: what must be dropped at `l`'s first computation.
    fn excess(&self, l: usize, room: u64) -> i128 {
        let needed: u64 = self
            .values(l)
            .filter(|&v| self.read_after(v, l))
            .map(|v| self.graph.memory(v))
            .sum();
        needed as i128 - room as i128
    }

    /// The cuts to try, in order: the largest excesses, then a spread of the others, given
    /// the `rooms` of [`Cuts::rooms`].
    pub(super) fn candidates(&self, rooms: &[Option<u64>]) -> Vec<usize> {
        let mut ranked: Vec<(i128, usize)> = (0..self.graph.len())
            .filter_map(|l| {
                let excess = self.excess(l, rooms[l]?);
                (excess > 0).then_some((excess, l))
            })
            .collect();
        ranked.sort_unstable_by_key(|&(excess, l)| (std::cmp::Reverse(excess), l));
        let best = ranked.len().min(BEST_CUTS);
        let rest = &ranked[best..];
        let step = rest.len().div_ceil(SPREAD_CUTS).max(1);
        ranked[..best]
            .iter()
            .chain(rest.iter().step_by(step))
            .map(|&(_, l)| l)
            .collect()
    }

    /// The room at each node's first computation ([`Cuts::room`]).
    pub(super) fn rooms(&self, budget: u64) -> Vec<Option<u64>> {
        (0..self.graph.len())
            .map(|l| self.room(l, budget))
            .collect()
    }

    /// The forced values `F` (module docs), each with the first node `ℓ` found at which it
    /// does not fit, given the `rooms` of [`Cuts::rooms`]. Only a value larger than the
    /// least room can be forced. Each value is proven on its own, so when `stop` ends the
    /// search early those found still count.
    pub(super) fn forced(&self, rooms: &[Option<u64>], stop: &Stop) -> Vec<(usize, usize)> {
        let g = self.graph;
        let Some(least) = rooms.iter().flatten().min().copied() else {
            return Vec::new();
        };
        let mut forced = Vec::new();
        let mut after = FixedBitSet::with_capacity(g.len());
        for v in (0..g.len()).filter(|&v| g.memory(v) > least) {
            if stop.should_stop() {
                break;
            }
            // The nodes after which a reader of `v` runs: the ancestors of its readers.
            after.clear();
            for &r in g.succs(v) {
                after.union_with(&self.anc[r]);
            }
            let at = after.ones().find(|&l| {
                self.anc[l].contains(v)
                    && g.preds(l).binary_search(&v).is_err()
                    && rooms[l].is_some_and(|room| g.memory(v) > room)
            });
            if let Some(l) = at {
                forced.push((v, l));
            }
        }
        forced
    }

    /// The LP of cut `l` (module docs, (2)-(4), a value larger than the room not resident,
    /// the forced values' `D_v` free, and (5)-(8) for their later moments), normalised, its
    /// columns integral if `integral`; `None` when it has no column.
    pub(super) fn lp(&self, l: usize, room: u64, forced: &Forced, integral: bool) -> Option<CutLp> {
        let g = self.graph;
        let values: Vec<usize> = self.values(l).collect();
        let c_max = values.iter().map(|&v| g.cost(v)).fold(0.0, f64::max);
        if c_max <= 0.0 {
            return None;
        }
        let s_max = values.iter().map(|&v| g.memory(v)).max().unwrap_or(0);
        let s_unit = room.max(s_max).max(1) as f64;
        let mut lp = Lp::new();
        // Columns S_v, D_v for each value, by position.
        let mut col = vec![None; g.len()];
        for &v in &values {
            let fits = if g.memory(v) > room { 0.0 } else { 1.0 };
            let s = lp.add_col(0.0, 0.0, fits, integral);
            let price = if forced.set.contains(v) {
                0.0
            } else {
                significant(g.cost(v) / c_max)
            };
            let d = lp.add_col(price, 0.0, 1.0, integral);
            col[v] = Some((s, d));
        }
        let mut terms = Vec::new();
        for &v in &values {
            let (s, d) = col[v].expect("a column");
            if self.read_after(v, l) {
                terms.extend([(s, 1.0), (d, 1.0)]);
                lp.add_row(1.0, f64::INFINITY, &mut terms);
                terms.clear();
            }
            // Inputs of ℓ have no column: resident at t*, they satisfy (4) as they are.
            for &u in g.preds(v) {
                if let Some((su, du)) = col[u] {
                    terms.extend([(d, 1.0), (su, -1.0), (du, -1.0)]);
                    lp.add_row(f64::NEG_INFINITY, 0.0, &mut terms);
                    terms.clear();
                }
            }
        }
        let room = Room {
            bytes: room,
            s_unit,
            integral,
        };
        memory_rows(&mut lp, g, &values, room, |v| col[v].map(|(s, _)| s));
        let mut cut = CutLp { lp, c_max, col };
        if self.third {
            for (m, at_m) in self.third_moments(l, forced) {
                self.between(&mut cut, l, m, &at_m, integral);
            }
        }
        Some(cut)
    }

    /// The later moments of cut `l`'s forced values (module docs, "A third computation"):
    /// for each of the [`THIRD_VALUES`] dearest forced values `v` of `A ∖ I`, the first
    /// strict descendant `m` of `l` at which `v` does not fit, is no input, is read after,
    /// and is an ancestor of an input of `m` in `A ∖ I`; grouped by `m`, ascending.
    fn third_moments(&self, l: usize, forced: &Forced) -> Vec<(usize, FixedBitSet)> {
        let g = self.graph;
        let mut moments: Vec<(usize, FixedBitSet)> = Vec::new();
        let inputs = g.preds(l);
        let mut dearest: Vec<usize> = self.values(l).filter(|&v| forced.set.contains(v)).collect();
        dearest.sort_unstable_by(|&a, &b| g.cost(b).total_cmp(&g.cost(a)).then(a.cmp(&b)));
        dearest.truncate(THIRD_VALUES);
        let after: Vec<usize> = (l + 1..g.len())
            .filter(|&m| self.anc[m].contains(l))
            .collect();
        for v in dearest {
            let behind = |u: usize| {
                self.anc[u].contains(v)
                    && self.anc[l].contains(u)
                    && inputs.binary_search(&u).is_err()
            };
            let found = after.iter().copied().find(|&m| {
                self.anc[m].contains(v)
                    && g.preds(m).binary_search(&v).is_err()
                    && forced.rooms[m].is_some_and(|room| g.memory(v) > room)
                    && self.read_after(v, m)
                    && g.preds(m).iter().any(|&u| behind(u))
            });
            let Some(m) = found else { continue };
            match moments.iter_mut().find(|(at, _)| *at == m) {
                Some((_, set)) => set.insert(v),
                None => {
                    let mut set = FixedBitSet::with_capacity(g.len());
                    set.insert(v);
                    moments.push((m, set));
                }
            }
        }
        moments.sort_unstable_by_key(|(m, _)| *m);
        moments
    }

    /// The rows of a forced moment `m` after the cut `l` (module docs, "A third
    /// computation"): `E_x`, `x` computed between `t*` and `m`'s first computation, for the
    /// values of `A ∖ I` that are ancestors of `m` and have a value forced at `m` among
    /// their ancestors or are one; an input `u` of `m` resident at `t*` or computed after it
    /// (`S_u + E_u >= 1`), inputs resident for each computation (`E_x <= S_y + E_y`), a
    /// computation after `t*` counted by `D_x` (`E_x <= D_x`), or, for a value forced at
    /// `m`, priced `c_x` as its third computation.
    fn between(&self, cut: &mut CutLp, l: usize, m: usize, at_m: &FixedBitSet, integral: bool) {
        let g = self.graph;
        let CutLp { lp, c_max, col } = cut;
        // Whether a value of `at_m` is `x` or among its ancestors, in solver order.
        let mut behind = vec![false; g.len()];
        for x in 0..g.len() {
            behind[x] = at_m.contains(x) || g.preds(x).iter().any(|&y| behind[y]);
        }
        let mut e = vec![None; g.len()];
        for x in self.values(l).filter(|&x| self.anc[m].contains(x)) {
            if behind[x] {
                let price = if at_m.contains(x) {
                    significant(g.cost(x) / *c_max)
                } else {
                    0.0
                };
                e[x] = Some(lp.add_col(price, 0.0, 1.0, integral));
            }
        }
        let mut terms = Vec::new();
        for (x, ex) in e.iter().enumerate() {
            let Some(ex) = *ex else { continue };
            let (_, dx) = col[x].expect("a column");
            if !at_m.contains(x) {
                terms.extend([(ex, 1.0), (dx, -1.0)]);
                lp.add_row(f64::NEG_INFINITY, 0.0, &mut terms);
                terms.clear();
            }
            for &y in g.preds(x) {
                if let (Some((sy, _)), Some(ey)) = (col[y], e[y]) {
                    terms.extend([(ex, 1.0), (sy, -1.0), (ey, -1.0)]);
                    lp.add_row(f64::NEG_INFINITY, 0.0, &mut terms);
                    terms.clear();
                }
            }
        }
        for &u in g.preds(m) {
            if let (Some((su, _)), Some(eu)) = (col[u], e[u]) {
                terms.extend([(su, 1.0), (eu, 1.0)]);
                lp.add_row(1.0, f64::INFINITY, &mut terms);
                terms.clear();
            }
        }
    }

    /// The cost that HiGHS's dual bound on cut `l` with `S` and `D` integral (module docs),
    /// within [`INTEGRAL_NODES`] branch-and-bound nodes, proves over `base`, what every
    /// schedule pays besides the cut's objective (within HiGHS's resolution); `None` for a cut
    /// of more than [`INTEGRAL_MAX_VALUES`] values or when HiGHS proves nothing.
    pub(super) fn integral_cost(
        &self,
        l: usize,
        forced: &Forced,
        controls: &Controls,
        base: f64,
    ) -> Result<Option<f64>, SolveError> {
        let Some(room) = forced.rooms[l] else {
            return Ok(None);
        };
        if self.values(l).count() > INTEGRAL_MAX_VALUES {
            return Ok(None);
        }
        let Some(CutLp { lp, c_max, .. }) = self.lp(l, room, forced, true) else {
            return Ok(None);
        };
        let controls = Controls {
            relax: false,
            max_nodes: Some(INTEGRAL_NODES),
            ..controls.clone()
        };
        let run = run_cut(lp, &controls)?;
        Ok(match run.status {
            RunStatus::Infeasible => None,
            _ => run.proves(self.graph, base, c_max),
        })
    }
}

/// The cardinality covers of the memory row (module docs): for each `k < MAX_COVER`, the
/// largest set `T` of the largest values of which no `k + 1` fit in `room` together, with
/// `k`. Values that do not fit alone (fixed at 0) or take no memory are left out.
fn covers(graph: &Graph, values: &[usize], room: u64) -> Vec<(Vec<usize>, usize)> {
    let mut by_size: Vec<usize> = values
        .iter()
        .copied()
        .filter(|&v| (1..=room).contains(&graph.memory(v)))
        .collect();
    by_size.sort_unstable_by_key(|&v| (std::cmp::Reverse(graph.memory(v)), v));
    // `fits[m]`: the most of the `m + 1` largest that fit together (its smallest ones).
    let fits = |m: usize| -> usize {
        let mut used = 0u64;
        by_size[..=m]
            .iter()
            .rev()
            .take_while(|&&v| {
                used += graph.memory(v);
                used <= room
            })
            .count()
    };
    let mut rows: Vec<(Vec<usize>, usize)> = Vec::new();
    for m in 0..by_size.len() {
        let k = fits(m);
        if k >= MAX_COVER {
            break;
        }
        if k <= m {
            match rows.last_mut() {
                Some(last) if last.1 == k => last.0 = by_size[..=m].to_vec(),
                _ => rows.push((by_size[..=m].to_vec(), k)),
            }
        }
    }
    rows
}

/// A normalised coefficient, or 0 below [`TINY`]: HiGHS would drop it with a warning.
/// A size or cost read as 0 only loosens the LP, so its optimum stays a lower bound.
pub(super) fn significant(value: f64) -> f64 {
    if value < TINY {
        0.0
    } else {
        value
    }
}

/// A moment's room for its memory row: `bytes`, the unit `s_unit` an LP's sizes are divided
/// by, and whether the program is `integral` ([`memory_rows`]).
#[derive(Clone, Copy)]
pub(super) struct Room {
    pub bytes: u64,
    pub s_unit: f64,
    pub integral: bool,
}

/// A moment's memory row `Σ_v s_v S_v <= room` over `values` (`column(v)`: the column of
/// `S_v`) and its cardinality covers ([`covers`]), added to `lp` (module docs, "Numerics").
/// An LP's sizes are divided by `s_unit`, the larger of the room and the largest size. An
/// integral program's are divided by the gcd `g` of those that fit in the room (a value that
/// does not is fixed at 0 and left out of the row), so that every coefficient is an integer
/// and the right-hand side is `⌊room / g⌋` (no integral point changes: every sum of sizes is
/// a multiple of `g`), and by a power of two more where that exceeds 2^31 units, as the
/// MILP's rows are ([`memory_divisor`]). HiGHS then never decides within its tolerances
/// whether a point fits ([`super::super::resolution`]).
pub(super) fn memory_rows(
    lp: &mut Lp,
    graph: &Graph,
    values: &[usize],
    room: Room,
    column: impl Fn(usize) -> Option<usize>,
) {
    let fits = |v: &&usize| !room.integral || graph.memory(**v) <= room.bytes;
    let (unit, rhs) = if room.integral {
        let g = values
            .iter()
            .filter(fits)
            .map(|&v| graph.memory(v))
            .fold(0, gcd)
            .max(1);
        let units = room.bytes / g;
        let divisor = memory_divisor(units, false);
        (g as f64 * divisor, units as f64 / divisor)
    } else {
        (room.s_unit, room.bytes as f64 / room.s_unit)
    };
    let mut terms: Vec<(usize, f64)> = values
        .iter()
        .filter(fits)
        .map(|&v| {
            let s = column(v).expect("a column");
            (s, significant(graph.memory(v) as f64 / unit))
        })
        .collect();
    lp.add_row(f64::NEG_INFINITY, rhs, &mut terms);
    for (set, most) in covers(graph, values, room.bytes) {
        terms.extend(set.iter().filter_map(|&v| Some((column(v)?, 1.0))));
        lp.add_row(f64::NEG_INFINITY, most as f64, &mut terms);
    }
}
