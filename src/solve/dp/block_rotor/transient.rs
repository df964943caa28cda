//! The transient memory of one block's forward `F_j` or backward `B_j` (Rockmate's
//! per-option peak, which rotor's chain model, with one size per stage, does not have).
//!
//! [`Replay::local_peak`] replays a compute sequence as `schedule::sequence::from_computes` frees
//! it (each copy freed after its last read before the value's next computation), counting
//! only the block's own values: the largest `Σ_{u live} s_u + s_w` at a compute of `w`.
//! Values of other blocks that the sequence reads (`x_{j−1}`, the incoming gradient
//! `δ_j`) are not counted: the DP holds them outside its slots. Invariant: a value that
//! `stays` is never freed inside the sequence (the tape an option keeps for `B_j`, the
//! gradients `B_j` hands to `B_{j−1}`), and a value live at the start is freed after its
//! last read, or stays when the sequence never reads it.

use crate::graph::Graph;

/// What [`Replay::local_peak`] counts and keeps.
pub struct Replay<'a> {
    pub graph: &'a Graph,
    /// Whether a value is the block's own (counted).
    pub counted: &'a dyn Fn(usize) -> bool,
    /// Whether a value stays live after the sequence.
    pub stays: &'a dyn Fn(usize) -> bool,
}

impl Replay<'_> {
    /// The peak of the block's own memory over `sequence`, with `live` resident at its
    /// start; `later` is scratch of the graph's length, left all false.
    pub fn local_peak(&self, live: &[usize], sequence: &[usize], later: &mut [bool]) -> u64 {
        let g = self.graph;
        // freed[i]: the values whose copy is freed right after the compute at i (its own
        // output first, then its inputs), from a reverse pass over the reads.
        let mut freed: Vec<Vec<usize>> = vec![Vec::new(); sequence.len()];
        for (i, &w) in sequence.iter().enumerate().rev() {
            if !later[w] && !(self.stays)(w) {
                freed[i].push(w);
            }
            later[w] = false;
            for &u in g.preds(w) {
                if !later[u] && (self.counted)(u) && !(self.stays)(u) {
                    freed[i].push(u);
                }
                later[u] = true;
            }
        }
        // What a value live at the start still serves: freed after its last read.
        let mut held: u64 = live
            .iter()
            .filter(|&&u| (self.counted)(u))
            .map(|&u| g.memory(u))
            .sum();
        for &w in sequence {
            later[w] = false;
            for &u in g.preds(w) {
                later[u] = false;
            }
        }
        let mut peak = held;
        for (i, &w) in sequence.iter().enumerate() {
            let own = if (self.counted)(w) { g.memory(w) } else { 0 };
            peak = peak.max(held.saturating_add(own));
            held = held.saturating_add(own);
            for &u in &freed[i] {
                if (self.counted)(u) {
                    held = held.saturating_sub(g.memory(u));
                }
            }
        }
        peak
    }
}
