//! Nested options: a block's backward `B_j` itself rematerialized under a memory cap, so
//! that a block whose every tape option peaks above the budget (`p_b(j, k)` of
//! `options.rs`, where each dropped value is recomputed once and kept to its last
//! backward read) still gets a plan at a tight budget.
//!
//! Given the values `K` an option keeps from `F_j` to `B_j` (possibly only `x_j`) and a
//! cap `m` on the block's own memory, [`under_cap`] builds `B_j`'s compute sequence op by
//! op in solver order, as DTR (Kirisame, Lyubomirsky, Haan, Brennan, He, Roesch, Chen,
//! Tatlock, "Dynamic Tensor Rematerialization", ICLR 2021) runs a program, restricted to
//! the block's own forward values: before backward op `b` it recomputes `b`'s absent
//! inputs (post-order, the absent inputs of those first, as `options.rs` does); while the
//! block's own memory `M` held before `b`, plus what the recomputation and `b` add, exceeds
//! `m`, it evicts one value recomputed inside `B_j` by DTR's rule with the future known
//! (as `dtr-ahead` does, Belady's furthest-next-use weighted by DTR's cost): least
//! `h(t) = c(t, e*) / (s_t · d(t))`, `c(t, e*)` the cost of `t` and its absent block
//! ancestors, `d(t)` the ops of `B_j` until its next backward reader (a value no later op
//! reads goes first). An evicted value is recomputed again before its next reader, so a
//! value may be recomputed several times in `B_j` (Revolve-like repetition inside the
//! block, which `options.rs` does not search). The sequence's frees are implied
//! (`schedule::sequence::from_computes`), and its real peak `p_b` is measured by
//! `transient.rs`, not taken from `M`, which counts every recomputed value until evicted
//! (an upper estimate).
//!
//! Invariants: the values of `K` and `x_j` are never evicted (the tape stays as the
//! option states it); the inputs of `b` and of the values being recomputed for it are
//! pinned; when no eviction brings `M` within `m` the op runs anyway (the cap is a target,
//! the measured `p_b` is what the DP sees).
//!
//! Scope: a heuristic ladder of caps, no optimality claim within the block; only blocks of
//! at most [`MAX_FORWARD`] forward values (each op scans the block).

use super::options::BlockView;
use crate::schedule::sequence::push_restored_inputs;
use crate::solve::Stopped;
use std::collections::{HashMap, HashSet};

/// The most forward values a block may have for nested options: each backward op scans
/// the block's values for `M` and for a victim, `O(|F_j| · |B_j|)` per cap and more with
/// evictions.
pub const MAX_FORWARD: usize = 512;

/// The most absent ancestors `c(t, e*)` visits (as DTR's neighbourhood).
const NEIGHBOURHOOD: usize = 64;

/// `B_j`'s compute sequence with the block's forward values outside `kept` (and `x_j`)
/// recomputed before their readers and evicted to keep the block's own memory within `cap`
/// where it can; `avail` is scratch of the graph's length, left all false. `poll` is asked
/// before each backward op.
pub fn under_cap(
    view: &BlockView,
    kept: &dyn Fn(usize) -> bool,
    cap: u64,
    avail: &mut [bool],
    poll: &dyn Fn() -> Result<(), Stopped>,
) -> Result<Vec<usize>, Stopped> {
    let run = Run::new(view, kept);
    let computes = run.sequence(cap, avail, poll);
    for &v in view.forward {
        avail[v] = false;
    }
    computes
}

/// What one block's backward reads, by position in `B_j`.
struct Run<'a, 'v> {
    view: &'a BlockView<'v>,
    kept: &'a dyn Fn(usize) -> bool,
    /// The positions in `B_j` of each own forward value's backward readers, ascending.
    readers: HashMap<usize, Vec<usize>>,
    /// The last position in `B_j` reading each own backward value, `usize::MAX` when
    /// another block reads it (`δ_{j−1}` among them: it stays).
    last_read: HashMap<usize, usize>,
}

impl<'a, 'v> Run<'a, 'v> {
    fn new(view: &'a BlockView<'v>, kept: &'a dyn Fn(usize) -> bool) -> Run<'a, 'v> {
        let g = view.graph;
        let mut readers: HashMap<usize, Vec<usize>> = HashMap::new();
        let mut last_read: HashMap<usize, usize> = HashMap::new();
        for (i, &b) in view.backward.iter().enumerate() {
            let handed_on = g.succs(b).iter().any(|&w| !(view.own)(w));
            last_read.insert(b, if handed_on { usize::MAX } else { i });
            for &u in g.preds(b) {
                if (view.mine)(u) {
                    readers.entry(u).or_default().push(i);
                } else if let Some(last) = last_read.get_mut(&u) {
                    if *last != usize::MAX {
                        *last = i;
                    }
                }
            }
        }
        Run {
            view,
            kept,
            readers,
            last_read,
        }
    }

    /// Whether `u` is one of the block's forward values that `B_j` recomputes when absent.
    fn recomputed(&self, u: usize) -> bool {
        (self.view.mine)(u) && u != self.view.cut && !(self.kept)(u)
    }

    fn sequence(
        &self,
        cap: u64,
        avail: &mut [bool],
        poll: &dyn Fn() -> Result<(), Stopped>,
    ) -> Result<Vec<usize>, Stopped> {
        let g = self.view.graph;
        let absent = |u: usize| self.recomputed(u);
        let mut computes = Vec::with_capacity(self.view.backward.len());
        let mut chain = Vec::new();
        for (i, &b) in self.view.backward.iter().enumerate() {
            poll()?;
            loop {
                chain.clear();
                push_restored_inputs(g, b, absent, avail, &mut chain);
                for &x in &chain {
                    avail[x] = false;
                }
                let adds: u64 = chain.iter().map(|&x| g.memory(x)).sum();
                let over =
                    self.held(i, avail).saturating_add(adds) > cap.saturating_sub(g.memory(b));
                if !over {
                    break;
                }
                let Some(victim) = self.victim(i, b, &chain, avail) else {
                    break;
                };
                avail[victim] = false;
            }
            for &x in &chain {
                avail[x] = true;
            }
            computes.extend_from_slice(&chain);
            computes.push(b);
        }
        Ok(computes)
    }

    /// `M` before the op at position `i`: the kept values and own backward values still
    /// read at or after `i`, and every value recomputed and not evicted.
    fn held(&self, i: usize, avail: &[bool]) -> u64 {
        let g = self.view.graph;
        let forward: u64 = self
            .view
            .forward
            .iter()
            .filter(|&&v| {
                if self.recomputed(v) {
                    avail[v]
                } else {
                    self.next_read(v, i).is_some()
                }
            })
            .map(|&v| g.memory(v))
            .sum();
        let backward: u64 = self.view.backward[..i]
            .iter()
            .filter(|b| self.last_read.get(b).is_some_and(|&last| last >= i))
            .map(|&b| g.memory(b))
            .sum();
        forward.saturating_add(backward)
    }

    /// The first position at or after `i` where `B_j` reads `v`.
    fn next_read(&self, v: usize, i: usize) -> Option<usize> {
        let at = self.readers.get(&v)?;
        at.get(at.partition_point(|&p| p < i)).copied()
    }

    /// The recomputed value of least `h(t)` that neither `b` nor `chain` reads (lowest
    /// index among equals).
    fn victim(&self, i: usize, b: usize, chain: &[usize], avail: &[bool]) -> Option<usize> {
        let g = self.view.graph;
        let pinned: HashSet<usize> = std::iter::once(b)
            .chain(chain.iter().copied())
            .flat_map(|x| g.preds(x).iter().copied())
            .collect();
        self.view
            .forward
            .iter()
            .copied()
            .filter(|&t| avail[t] && self.recomputed(t) && g.memory(t) > 0 && !pinned.contains(&t))
            .map(|t| (self.score(t, i, avail), t))
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map(|(_, t)| t)
    }

    /// `h(t) = c(t, e*) / (s_t · d(t))`; zero when no later op of `B_j` reads `t`.
    fn score(&self, t: usize, i: usize, avail: &[bool]) -> f64 {
        let g = self.view.graph;
        let Some(next) = self.next_read(t, i) else {
            return 0.0;
        };
        let mut cost = g.cost(t);
        // At most NEIGHBOURHOOD values are seen: a list is the set.
        let mut seen: Vec<usize> = Vec::with_capacity(NEIGHBOURHOOD);
        let mut stack: Vec<usize> = g.preds(t).to_vec();
        while let Some(u) = stack.pop() {
            if !self.recomputed(u) || avail[u] || seen.contains(&u) {
                continue;
            }
            seen.push(u);
            cost += g.cost(u);
            if seen.len() == NEIGHBOURHOOD {
                break;
            }
            stack.extend_from_slice(g.preds(u));
        }
        cost / (g.memory(t) as f64 * (next - i + 1) as f64)
    }
}
