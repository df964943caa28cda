//! Checkmate's stage view of a schedule (Jain et al., "Checkmate: Breaking the Memory Wall with Optimal
//! Tensor Rematerialization", MLSys 2020, §4).
//!
//! With `T = n` frontier-advancing stages, stage `t` is the one that computes node `t` for
//! the first time. `S[t,i] = 1` says the output of `i` is resident entering stage `t`
//! (only `i < t`); `R[t,i] = 1` says `i` is (re)computed in stage `t`, in index order.
//!
//! Given S, the cheapest R is closed form (Checkmate's `solve_r_opt`, [`StagePlan::new`]):
//! `R[t,t] = 1`; `R[t,i] = 1` where `S[t+1,i] = 1` and `S[t,i] = 0` (persistence
//! `S[t+1,i] <= S[t,i] + R[t,i]`); then every input `u` of a computed `i` that is neither
//! resident nor computed is computed (dependencies `R[t,v] <= R[t,u] + S[t,u]`). R and S
//! are then disjoint.
//!
//! Events from (R, S) ([`StagePlan::events`]): at the start of stage `t` free every
//! resident value that stage `t` does not read and `S[t+1]` does not keep; then compute the
//! nodes of `R[t]` in order, and after each, free its inputs and itself when no later node
//! of the stage reads them and `S[t+1]` does not keep them. The resident set at the end of
//! stage `t` is exactly `S[t+1]` (so the values freed at the start of stage `t` are among
//! those of `S[t]` that `S[t+1]` drops).
//!
//! Two forms hold the same schedule. [`StagePlan`] takes memory linear in the schedule: S
//! as [`Keep`] intervals (a value resident entering stages `first..=last`), R as its rows
//! of computed nodes; the heuristics (Chen's segments, recompute-all, DTR's stages) build
//! it on graphs of any size. [`Stages`], one bit row of R and of S per stage (`2n²` bits),
//! is the form the MILP and the stage plot read; it is attached to a schedule only up to
//! [`DENSE_MAX_NODES`] nodes.

use super::{Event, Schedule, StageJson};
use crate::graph::Graph;
use fixedbitset::FixedBitSet;
use std::convert::Infallible;

/// The most nodes whose schedules carry their dense [`Stages`] (`2n²` bits: 25 MB at
/// 10,000 nodes); above it a stage schedule is its events alone.
pub const DENSE_MAX_NODES: usize = 10_000;

/// How many computed nodes [`StagePlan::new`] builds between two calls of its check.
pub const CHECK_EVERY: usize = 4096;

/// One interval of S: `S[t, node] = 1` for `first <= t <= last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keep {
    pub node: usize,
    pub first: usize,
    pub last: usize,
}

/// A stage schedule in memory linear in its events: S as keep intervals, R as its rows.
#[derive(Clone, Debug, PartialEq)]
pub struct StagePlan {
    /// The intervals of S, each with `node < first <= last < n`.
    keeps: Vec<Keep>,
    /// `R[t]` is `r_nodes[r_start[t]..r_start[t + 1]]`, ascending.
    r_start: Vec<usize>,
    r_nodes: Vec<u32>,
}

/// The keep intervals grouped by the stage they start at and the stage they end at.
struct Sweep {
    /// `starting.of(t)`: nodes whose interval has `first == t`.
    starting: Buckets,
    /// `ending.of(t)`: nodes whose interval has `last == t`.
    ending: Buckets,
    /// How many intervals hold each node at the stage swept (S membership when > 0).
    count: Vec<u32>,
}

/// Nodes grouped by a stage in `0..=n`, in one flat array (a counting sort, so that a
/// million stages are two allocations, not a million): the nodes of stage `t`, in the
/// order given, are `nodes[start[t]..start[t + 1]]`.
struct Buckets {
    start: Vec<usize>,
    nodes: Vec<u32>,
}

impl Buckets {
    /// `(stage, node)` pairs grouped by stage; every stage is at most `n`.
    fn new(n: usize, pairs: impl Iterator<Item = (usize, u32)> + Clone) -> Buckets {
        let mut start = vec![0usize; n + 2];
        for (t, _) in pairs.clone() {
            start[t + 1] += 1;
        }
        for t in 0..=n {
            start[t + 1] += start[t];
        }
        let mut next = start.clone();
        let mut nodes = vec![0u32; start[n + 1]];
        for (t, v) in pairs {
            nodes[next[t]] = v;
            next[t] += 1;
        }
        Buckets { start, nodes }
    }

    fn of(&self, t: usize) -> &[u32] {
        &self.nodes[self.start[t]..self.start[t + 1]]
    }
}

impl Sweep {
    fn new(n: usize, keeps: &[Keep]) -> Sweep {
        Sweep {
            starting: Buckets::new(n, keeps.iter().map(|k| (k.first, k.node as u32))),
            ending: Buckets::new(n, keeps.iter().map(|k| (k.last, k.node as u32))),
            count: vec![0; n],
        }
    }

    /// Whether `u` is in the S row swept to.
    fn holds(&self, u: usize) -> bool {
        self.count[u] > 0
    }

    /// Moves from the row `S[t]` to `S[t + 1]`.
    fn advance(&mut self, t: usize) {
        for &u in self.starting.of(t + 1) {
            self.count[u as usize] += 1;
        }
        for &u in self.ending.of(t) {
            self.count[u as usize] -= 1;
        }
    }
}

impl StagePlan {
    /// The minimal recomputation R for the S of `keeps` (intervals are clipped to
    /// `node < first`, `last < n`; empty ones dropped). `check` is called with the number of
    /// nodes computed so far every [`CHECK_EVERY`] of them; its error ends the build
    /// (a caller's stop, or a schedule grown past what it admits).
    pub fn new<E>(
        graph: &Graph,
        mut keeps: Vec<Keep>,
        mut check: impl FnMut(usize) -> Result<(), E>,
    ) -> Result<StagePlan, E> {
        let n = graph.len();
        keeps.retain_mut(|k| {
            k.first = k.first.max(k.node + 1);
            k.last = k.last.min(n.saturating_sub(1));
            k.node < n && k.first <= k.last
        });
        let mut sweep = Sweep::new(n, &keeps);
        let mut mark = vec![0u32; n];
        let mut stack = Vec::new();
        let mut r_start = Vec::with_capacity(n + 1);
        let mut r_nodes: Vec<u32> = Vec::with_capacity(n);
        let mut next_check = CHECK_EVERY;
        for t in 0..n {
            r_start.push(r_nodes.len());
            // `mark[v] == stamp`: v is in R[t]; `sweep` holds S[t].
            let stamp = t as u32 + 1;
            let row = r_nodes.len();
            let mut push = |v: usize, stack: &mut Vec<usize>| {
                if mark[v] != stamp {
                    mark[v] = stamp;
                    stack.push(v);
                }
            };
            push(t, &mut stack);
            for &u in sweep.starting.of(t + 1) {
                if !sweep.holds(u as usize) {
                    push(u as usize, &mut stack);
                }
            }
            while let Some(v) = stack.pop() {
                r_nodes.push(v as u32);
                for &u in graph.preds(v) {
                    if !sweep.holds(u) {
                        push(u, &mut stack);
                    }
                }
            }
            r_nodes[row..].sort_unstable();
            sweep.advance(t);
            if r_nodes.len() >= next_check {
                check(r_nodes.len())?;
                next_check = r_nodes.len() + CHECK_EVERY;
            }
        }
        r_start.push(r_nodes.len());
        Ok(StagePlan {
            keeps,
            r_start,
            r_nodes,
        })
    }

    /// The plan of dense matrices: their R rows as they are, S as maximal intervals.
    fn of_dense(stages: &Stages) -> StagePlan {
        let mut r_start = Vec::with_capacity(stages.r.len() + 1);
        let mut r_nodes = Vec::new();
        for row in &stages.r {
            r_start.push(r_nodes.len());
            r_nodes.extend(row.ones().map(|v| v as u32));
        }
        r_start.push(r_nodes.len());
        StagePlan {
            keeps: dense_keeps(&stages.s),
            r_start,
            r_nodes,
        }
    }

    /// The number of stages.
    fn len(&self) -> usize {
        self.r_start.len() - 1
    }

    /// `R[t]`, ascending.
    fn r(&self, t: usize) -> &[u32] {
        &self.r_nodes[self.r_start[t]..self.r_start[t + 1]]
    }

    /// The number of compute events: `Σ_t |R[t]|`.
    pub fn computes(&self) -> usize {
        self.r_nodes.len()
    }

    /// The compute/free events of this stage schedule; `check` is called as in
    /// [`StagePlan::new`], with the number of nodes computed so far.
    pub fn events<E>(
        &self,
        graph: &Graph,
        mut check: impl FnMut(usize) -> Result<(), E>,
    ) -> Result<Vec<Event>, E> {
        let n = self.len();
        let mut sweep = Sweep::new(n, &self.keeps);
        let mut mark = vec![0u32; n];
        let mut resident = vec![false; n];
        let mut events = Vec::with_capacity(2 * self.computes());
        let mut dead = Vec::new();
        let mut next_check = CHECK_EVERY;
        for t in 0..n {
            if self.r_start[t] >= next_check {
                check(self.r_start[t])?;
                next_check = self.r_start[t] + CHECK_EVERY;
            }
            let stamp = t as u32 + 1;
            for &v in self.r(t) {
                mark[v as usize] = stamp;
            }
            // `sweep` now holds S[t + 1]: kept into the next stage.
            sweep.advance(t);
            // Read later in stage t (by a computed node after `after`) or kept.
            let used_later = |u: usize, after: Option<usize>, sweep: &Sweep| {
                sweep.holds(u)
                    || graph
                        .succs(u)
                        .iter()
                        .any(|&v| after.is_none_or(|i| v > i) && mark[v] == stamp)
            };
            dead.clear();
            dead.extend(
                sweep
                    .ending
                    .of(t)
                    .iter()
                    .map(|&u| u as usize)
                    .filter(|&u| resident[u] && !used_later(u, None, &sweep)),
            );
            dead.sort_unstable();
            dead.dedup();
            for &u in &dead {
                resident[u] = false;
                events.push(Event::Free(u));
            }
            for &i in self.r(t) {
                let i = i as usize;
                events.push(Event::Compute(i));
                resident[i] = true;
                for &u in graph.preds(i).iter().chain(std::iter::once(&i)) {
                    if resident[u] && !used_later(u, Some(i), &sweep) {
                        resident[u] = false;
                        events.push(Event::Free(u));
                    }
                }
            }
        }
        Ok(events)
    }

    /// The dense matrices (`2n²` bits).
    pub fn to_dense(&self) -> Stages {
        let n = self.len();
        let mut s = vec![FixedBitSet::with_capacity(n); n];
        for k in &self.keeps {
            for row in &mut s[k.first..=k.last] {
                row.insert(k.node);
            }
        }
        let r = (0..n)
            .map(|t| {
                let mut row = FixedBitSet::with_capacity(n);
                row.extend(self.r(t).iter().map(|&v| v as usize));
                row
            })
            .collect();
        Stages { r, s }
    }

    /// The schedule: events, with the dense matrices up to [`DENSE_MAX_NODES`] nodes;
    /// `check` as in [`StagePlan::events`].
    pub fn into_schedule<E>(
        self,
        graph: &Graph,
        check: impl FnMut(usize) -> Result<(), E>,
    ) -> Result<Schedule, E> {
        Ok(Schedule {
            events: self.events(graph, check)?,
            stages: (self.len() <= DENSE_MAX_NODES).then(|| self.to_dense()),
        })
    }
}

/// The check of a build nothing stops (the dense form is only built small).
fn no_check(_: usize) -> Result<(), Infallible> {
    Ok(())
}

/// The value of a build that cannot fail.
fn unchecked<T>(built: Result<T, Infallible>) -> T {
    match built {
        Ok(value) => value,
        Err(never) => match never {},
    }
}

/// The maximal intervals of the dense rows `s` (one row per stage).
fn dense_keeps(s: &[FixedBitSet]) -> Vec<Keep> {
    let none = FixedBitSet::new();
    let mut first = vec![0; s.len()];
    let mut keeps = Vec::new();
    for t in 0..=s.len() {
        let before = t.checked_sub(1).map_or(&none, |p| &s[p]);
        let row = s.get(t).unwrap_or(&none);
        for i in row.difference(before) {
            if i >= first.len() {
                first.resize(i + 1, 0);
            }
            first[i] = t;
        }
        keeps.extend(before.difference(row).map(|i| Keep {
            node: i,
            first: first[i],
            last: t - 1,
        }));
    }
    keeps
}

/// The R and S matrices, one bit row per stage.
#[derive(Clone, Debug, PartialEq)]
pub struct Stages {
    pub r: Vec<FixedBitSet>,
    pub s: Vec<FixedBitSet>,
}

/// An all-zero S for `n` stages.
pub fn empty_s(n: usize) -> Vec<FixedBitSet> {
    vec![FixedBitSet::with_capacity(n); n]
}

impl Stages {
    /// The minimal recomputation R for `s` (entries with `i >= t` are dropped from S).
    pub fn from_s(graph: &Graph, s: Vec<FixedBitSet>) -> Stages {
        assert_eq!(s.len(), graph.len(), "one S row per stage");
        unchecked(StagePlan::new(graph, dense_keeps(&s), no_check)).to_dense()
    }

    /// The compute/free events of this stage schedule ([`StagePlan::events`]).
    pub fn events(&self, graph: &Graph) -> Vec<Event> {
        unchecked(StagePlan::of_dense(self).events(graph, no_check))
    }

    /// The schedule: events plus these matrices.
    pub fn into_schedule(self, graph: &Graph) -> Schedule {
        Schedule {
            events: self.events(graph),
            stages: Some(self),
        }
    }

    /// Σ_t Σ_i c_i `R[t,i]`: the cost of the schedule.
    pub fn cost(&self, graph: &Graph) -> f64 {
        self.r
            .iter()
            .flat_map(|row| row.ones())
            .map(|i| graph.cost(i))
            .sum()
    }

    pub fn to_json(&self, graph: &Graph) -> Vec<StageJson> {
        let ids = |row: &FixedBitSet| row.ones().map(|i| graph.id(i).to_string()).collect();
        self.r
            .iter()
            .zip(&self.s)
            .map(|(r, s)| StageJson {
                r: ids(r),
                s: ids(s),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::{linear, random_dag, random_layered, DagShape};
    use crate::schedule::simulate;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The dense closure and events, stage by stage over bit rows, as the MILP's stages
    /// were built before the plan: the reference the plan must reproduce event for event.
    #[allow(clippy::needless_range_loop)] // R[t] and S[t], S[t + 1] side by side
    fn dense_reference(graph: &Graph, mut s: Vec<FixedBitSet>) -> (Vec<FixedBitSet>, Vec<Event>) {
        let n = graph.len();
        for (t, row) in s.iter_mut().enumerate() {
            row.grow(n);
            row.remove_range(t..);
        }
        let mut r = vec![FixedBitSet::with_capacity(n); n];
        for t in 0..n {
            r[t].insert(t);
            if t + 1 < n {
                r[t].union_with(&s[t + 1]);
                r[t].difference_with(&s[t]);
            }
            for v in (0..=t).rev() {
                if r[t].contains(v) {
                    for &u in graph.preds(v) {
                        if !s[t].contains(u) {
                            r[t].insert(u);
                        }
                    }
                }
            }
        }
        let used_later = |t: usize, u: usize, after: Option<usize>| {
            (t + 1 < n && s[t + 1].contains(u))
                || graph
                    .succs(u)
                    .iter()
                    .any(|&v| after.is_none_or(|i| v > i) && r[t].contains(v))
        };
        let mut resident = FixedBitSet::with_capacity(n);
        let mut events = Vec::new();
        for t in 0..n {
            let dead: Vec<usize> = resident
                .ones()
                .filter(|&u| !used_later(t, u, None))
                .collect();
            for u in dead {
                resident.remove(u);
                events.push(Event::Free(u));
            }
            for i in r[t].ones() {
                events.push(Event::Compute(i));
                resident.insert(i);
                for &u in graph.preds(i).iter().chain(std::iter::once(&i)) {
                    if resident.contains(u) && !used_later(t, u, Some(i)) {
                        resident.remove(u);
                        events.push(Event::Free(u));
                    }
                }
            }
        }
        (r, events)
    }

    #[test]
    fn the_plan_reproduces_the_dense_closure_and_events() {
        let shape = DagShape {
            nodes: 2..=40,
            ..DagShape::sparse()
        };
        for seed in 0..200 {
            let g = if seed % 4 == 0 {
                random_layered(30 + seed as usize % 17, seed)
            } else {
                random_dag(&shape, seed)
            };
            let n = g.len();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let density = rng.random_range(0.0..1.0);
            let s: Vec<FixedBitSet> = (0..n)
                .map(|_| {
                    let mut row = FixedBitSet::with_capacity(n);
                    row.extend((0..n).filter(|_| rng.random_bool(density)));
                    row
                })
                .collect();
            let (r, events) = dense_reference(&g, s.clone());
            let stages = Stages::from_s(&g, s);
            assert_eq!(stages.r, r, "seed {seed}: R");
            assert_eq!(stages.events(&g), events, "seed {seed}: events");
            simulate(&g, &stages.into_schedule(&g)).unwrap();
        }
    }

    #[test]
    fn keeping_nothing_recomputes_ancestors_each_stage() {
        let g = linear(2); // 0 1 2(loss) 3 4
        let st = Stages::from_s(&g, empty_s(g.len()));
        let sched = st.clone().into_schedule(&g);
        let stats = simulate(&g, &sched).unwrap();
        // stage t recomputes all ancestors of t: 1 + 2 + 3 + 4 + 5 computes
        assert_eq!(stats.total_cost, st.cost(&g));
        assert_eq!(stats.total_cost, 15.0);
    }

    #[test]
    fn keeping_everything_until_last_use_costs_nothing_extra() {
        let g = linear(3);
        let n = g.len();
        let mut s = empty_s(n);
        for i in 0..n {
            let last = g.succs(i).last().copied().unwrap_or(i);
            for row in s.iter_mut().take(last + 1).skip(i + 1) {
                row.insert(i);
            }
        }
        let sched = Stages::from_s(&g, s).into_schedule(&g);
        let stats = simulate(&g, &sched).unwrap();
        assert_eq!(stats.total_cost, n as f64);
    }
}
