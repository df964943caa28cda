//! Checkmate's stage view of a schedule (Jain et al., MLSys 2020, §4; `checkmate.md` §2-§3).
//!
//! With `T = n` frontier-advancing stages, stage `t` is the one that computes node `t` for
//! the first time. `S[t,i] = 1` says the output of `i` is resident entering stage `t`
//! (only `i < t`); `R[t,i] = 1` says `i` is (re)computed in stage `t`, in index order.
//!
//! Given S, the cheapest R is closed form (Checkmate's `solve_r_opt`, [`Stages::from_s`]):
//! `R[t,t] = 1`; `R[t,i] = 1` where `S[t+1,i] = 1` and `S[t,i] = 0` (persistence
//! `S[t+1,i] <= S[t,i] + R[t,i]`); then, backwards over `i`, every input `u` of a computed
//! `i` that is neither resident nor computed is computed (dependencies
//! `R[t,v] <= R[t,u] + S[t,u]`). R and S are then disjoint.
//!
//! Events from (R, S) ([`Stages::events`]): at the start of stage `t` free every resident
//! value that stage `t` does not read and `S[t+1]` does not keep; then compute the nodes of
//! `R[t]` in order, and after each, free its inputs and itself when no later node of the
//! stage reads them and `S[t+1]` does not keep them. The resident set at the end of stage
//! `t` is exactly `S[t+1]`.

use super::{Event, Schedule, StageJson};
use crate::graph::Graph;
use fixedbitset::FixedBitSet;

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
    pub fn from_s(graph: &Graph, mut s: Vec<FixedBitSet>) -> Stages {
        let n = graph.len();
        assert_eq!(s.len(), n, "one S row per stage");
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
        Stages { r, s }
    }

    /// Whether `u` is read later in stage `t` (by a computed node after `after`) or kept
    /// into stage `t + 1`.
    fn used_later(&self, graph: &Graph, t: usize, u: usize, after: Option<usize>) -> bool {
        (t + 1 < self.s.len() && self.s[t + 1].contains(u))
            || graph
                .succs(u)
                .iter()
                .any(|&v| after.is_none_or(|i| v > i) && self.r[t].contains(v))
    }

    /// The compute/free events of this stage schedule.
    pub fn events(&self, graph: &Graph) -> Vec<Event> {
        let n = graph.len();
        let mut resident = FixedBitSet::with_capacity(n);
        let mut events = Vec::new();
        for t in 0..n {
            let dead: Vec<usize> = resident
                .ones()
                .filter(|&u| !self.used_later(graph, t, u, None))
                .collect();
            for u in dead {
                resident.remove(u);
                events.push(Event::Free(u));
            }
            for i in self.r[t].ones() {
                events.push(Event::Compute(i));
                resident.insert(i);
                for &u in graph.preds(i).iter().chain(std::iter::once(&i)) {
                    if resident.contains(u) && !self.used_later(graph, t, u, Some(i)) {
                        resident.remove(u);
                        events.push(Event::Free(u));
                    }
                }
            }
        }
        events
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
    use crate::graph::generate::linear;
    use crate::schedule::simulate;

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
