//! The graph as a chain of blocks: the forward pass cut at its articulation points, each
//! backward node given to the block whose values it reads.
//!
//! A *cut* is a forward node `a` that no forward-to-forward edge `u → v` with
//! `u < a < v` jumps over (in solver order); values that only the backward pass reads do
//! not count, unlike Chen's articulation points, which a value read by nobody later in the
//! forward pass would block. Forward block `j` (1-based) holds the forward nodes after
//! the cut `a_{j−1}` up to `a_j`; `x_j` is the value of `a_j`, the only value of block `j`
//! that later blocks read in the forward pass. The forward nodes after the
//! last articulation point join the last block. A non-forward node belongs to the highest
//! block it reads a forward value of; one that reads none, to the lowest block among the
//! non-forward nodes it reads (the gradient flows from the last block to the first), or to
//! the last block. The chain is *well formed* when no backward op of a lower block feeds
//! one of a higher block: then running `B_L, …, B_1` in that order, each block's ops in
//! solver order, is a topological order of the backward part. A backward op may still read
//! a forward value of an earlier block than its own and `x_{j−1}`: that value is on its
//! block's tape, and where the DP's plan frees it earlier the compute sequence keeps it
//! (the simulator, not the DP, measures what that costs in memory).

use super::options::{options, BlockView, TapeOption};
use crate::graph::{Graph, NodeKind};
use crate::solve::Stopped;

/// A block: its forward ops `F_j`, the costs of `F_j` and `B_j`, the bytes of its output
/// `x_j`, and its [`TapeOption`]s (the first keeps the whole tape: the values of `F_j` that
/// the backward pass reads, `x_j` counted).
#[derive(Clone, Debug, Default)]
pub struct Block {
    pub forward: Vec<usize>,
    pub forward_cost: f64,
    pub backward_cost: f64,
    pub output: u64,
    pub options: Vec<TapeOption>,
    /// The transient peak of `F_j` keeping only `x_j` (the block's own values).
    pub forward_peak: u64,
}

/// Why a graph is not a chain of blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotBlocks {
    /// Fewer than two articulation points, or no forward/backward kinds.
    NoCut,
    /// A backward op of a lower block feeds one of a higher block.
    Crossing { node: usize },
    /// The solve's stop came while the blocks' options were built.
    Stopped(Stopped),
}

/// The chain of blocks of `graph`, merged down to at most `max_blocks` blocks of about
/// equal forward cost; `poll` is asked before each block's options and within them.
pub fn blocks(
    graph: &Graph,
    max_blocks: usize,
    poll: &dyn Fn() -> Result<(), Stopped>,
) -> Result<Vec<Block>, NotBlocks> {
    if !graph.has_kinds() {
        return Err(NotBlocks::NoCut);
    }
    let n = graph.len();
    let is_forward: Vec<bool> = (0..n)
        .map(|v| graph.node(v).kind == Some(NodeKind::Forward))
        .collect();
    let forward: Vec<usize> = (0..n).filter(|&v| is_forward[v]).collect();
    let cuts = merged_cuts(graph, &is_forward, &forward, max_blocks);
    if cuts.len() < 2 {
        return Err(NotBlocks::NoCut);
    }
    // block[v]: 1-based block of every node; the forward nodes first.
    let mut block = vec![0usize; n];
    let mut j = 1;
    for &v in &forward {
        block[v] = j;
        if j < cuts.len() && v == cuts[j - 1] {
            j += 1;
        }
    }
    let last = cuts.len();
    for v in (0..n).filter(|&v| !is_forward[v]) {
        let reads_forward = graph.preds(v).iter().filter(|&&u| is_forward[u]);
        block[v] = match reads_forward.map(|&u| block[u]).max() {
            Some(b) => b,
            None => graph
                .preds(v)
                .iter()
                .map(|&u| block[u])
                .min()
                .unwrap_or(last),
        };
    }
    let mut chain = vec![Block::default(); last];
    let mut backward = vec![Vec::new(); last];
    let mut tape = vec![0u64; last];
    let mut read_by_backward = vec![false; n];
    for v in (0..n).filter(|&v| !is_forward[v]) {
        let b = block[v];
        for &u in graph.preds(v) {
            if !is_forward[u] && block[u] < b {
                return Err(NotBlocks::Crossing { node: v });
            }
            read_by_backward[u] |= is_forward[u] && !(b >= 2 && u == cuts[b - 2]);
        }
        backward[b - 1].push(v);
        chain[b - 1].backward_cost += graph.cost(v);
    }
    for &v in &forward {
        let b = &mut chain[block[v] - 1];
        b.forward.push(v);
        b.forward_cost += graph.cost(v);
        if read_by_backward[v] || cuts.get(block[v] - 1) == Some(&v) {
            tape[block[v] - 1] = tape[block[v] - 1].saturating_add(graph.memory(v));
        }
    }
    let mut later = vec![false; n];
    for (j, (b, &cut)) in chain.iter_mut().zip(&cuts).enumerate() {
        poll().map_err(NotBlocks::Stopped)?;
        b.output = graph.memory(cut);
        let view = BlockView {
            graph,
            mine: &|u| is_forward[u] && block[u] == j + 1,
            read_by_backward: &read_by_backward,
            cut,
            own: &|u| block[u] == j + 1,
            forward: &b.forward,
            backward: &backward[j],
            tape: tape[j],
        };
        let forward_peak = view.forward_peak(&|_| false, &mut later);
        let options = options(&view, poll).map_err(NotBlocks::Stopped)?;
        (b.forward_peak, b.options) = (forward_peak, options);
    }
    Ok(chain)
}

/// The cuts of the forward pass, in solver order; the last forward node is one.
fn cuts(graph: &Graph, is_forward: &[bool]) -> Vec<usize> {
    let n = graph.len();
    // spans[c] > 0 when some forward edge jumps over position c: a difference array.
    let mut diff = vec![0i64; n + 1];
    for (u, v) in graph.edges() {
        if is_forward[u] && is_forward[v] && u + 1 < v {
            diff[u + 1] += 1;
            diff[v] -= 1;
        }
    }
    let mut jumped = 0;
    let mut points = Vec::new();
    for c in 0..n {
        jumped += diff[c];
        if jumped == 0 && is_forward[c] {
            points.push(c);
        }
    }
    points
}

/// At most about `max_blocks` of the cuts, chosen so that the blocks between them carry
/// about equal forward cost; the last forward node always ends the last block.
fn merged_cuts(
    graph: &Graph,
    is_forward: &[bool],
    forward: &[usize],
    max_blocks: usize,
) -> Vec<usize> {
    let points = cuts(graph, is_forward);
    if points.len() <= max_blocks {
        return points;
    }
    let total: f64 = forward.iter().map(|&v| graph.cost(v)).sum();
    let step = total / max_blocks as f64;
    let mut cuts = Vec::with_capacity(max_blocks);
    let mut done = 0.0;
    let mut p = points.iter().peekable();
    for &v in forward {
        done += graph.cost(v);
        if p.peek() == Some(&&v) {
            p.next();
            let last = p.peek().is_none();
            if last || done >= step * (cuts.len() + 1) as f64 {
                cuts.push(v);
            }
        }
    }
    cuts
}
