//! Structure detection: is a training graph a *chain* or a *join graph*?
//!
//! * **Chain** (Checkmate's linear graph, a sequential network): forward ops
//!   `F_1 → F_2 → … → F_L` in a line (`F_1` reads nothing, `F_j` reads exactly `F_{j−1}`),
//!   the loss reading exactly `F_L`, and backward ops `G_L, …, G_1` in a line, where `G_j`
//!   reads the gradient `δ_{j+1}` (the output of `G_{j+1}`; `δ_{L+1}` is the loss output)
//!   and any of the forward values `x_{j−1}` (the stage's input; nothing for `j = 1`),
//!   `x_j` (its output) and `x_{j+1}` (the next stage's output, for `j < L`), and nothing
//!   else. The last is the rule of Checkmate's Keras graph extraction (Jain et al., MLSys 2020): for each
//!   forward edge `u → i` it adds `i → b(u)`, so `G_j` reads `x_{j+1}` ("next outputs").
//! * **Join graph** (Beaumont, Herrmann, Pallez, Shilova, Phil. Trans. R. Soc. A 2020): `k >= 2` such chains
//!   ("branches", possibly of different lengths) whose last outputs all meet in the one
//!   loss, each with its own backward chain starting from the loss.
//!
//! Detection: the loss is the node of kind `loss` when the graph has kinds; without kinds
//! it is the middle node when the graph has one source, else the first node (in solver
//! order) that every source reaches. The forward part is the set of ancestors of the
//! loss, the backward part the rest. When a pattern breaks, [`NotStructured`] names the
//! node that breaks it and why.
//!
//! This module describes shape only; it knows nothing of the solvers that use it.

use super::{Graph, NodeKind};
use fixedbitset::FixedBitSet;
use serde::Serialize;

/// One stage `j` of a chain or branch, as numbers: the costs of its forward op `F_j` and
/// backward op `G_j`, the sizes of their outputs, and which forward values `G_j` reads
/// besides the incoming gradient. What detection finds in a graph ([`Stage`]) and what
/// the chain generators build one from (`crate::graph::generate::chain_graph`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StageSpec {
    /// Cost of `F_j`.
    pub fw: f64,
    /// Cost of `G_j`.
    pub bw: f64,
    /// Size of `x_j`, the output of `F_j`.
    pub x: u64,
    /// Size of `δ_j`, the output of `G_j`.
    pub delta: u64,
    /// `G_j` reads `x_{j−1}` (always false for `j = 1`, whose input is nothing).
    pub reads_input: bool,
    /// `G_j` reads `x_j`.
    pub reads_output: bool,
}

/// A stage detected in a graph: its two ops' nodes, its [`StageSpec`] (read through
/// `Deref`: `stage.fw`, `stage.x`), and whether `G_j` reads the next stage's output.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stage {
    /// Node index of `F_j`, whose output is `x_j`.
    pub forward: usize,
    /// Node index of `G_j`, whose output is `δ_j`.
    pub backward: usize,
    #[serde(flatten)]
    pub spec: StageSpec,
    /// `G_j` reads `x_{j+1}`, the output of stage `j + 1` (always false for `j = L`,
    /// whose next output is the loss, read as the gradient `δ_{L+1}`).
    pub reads_next_output: bool,
}

impl std::ops::Deref for Stage {
    type Target = StageSpec;
    fn deref(&self) -> &StageSpec {
        &self.spec
    }
}

/// A chain training graph: stages `1..=L` (`stages[j−1]` is stage `j`) and the loss.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Chain {
    pub stages: Vec<Stage>,
    pub loss: usize,
    pub loss_cost: f64,
    /// Size of the loss output `δ_{L+1}`.
    pub loss_size: u64,
}

impl Chain {
    /// Number of stages `L`.
    pub fn len(&self) -> usize {
        self.stages.len()
    }
    /// Always false: a chain has at least one stage.
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }
}

/// A join graph: `k >= 2` branches whose last forward outputs meet in the loss. Each
/// branch lists its stages as a [`Chain`] does; the loss fields are shared.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Join {
    pub branches: Vec<Vec<Stage>>,
    pub loss: usize,
    pub loss_cost: f64,
    pub loss_size: u64,
}

/// Why a graph is neither a chain nor a join graph.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NotStructured {
    /// The node that breaks the pattern, when one does.
    pub node: Option<String>,
    pub reason: String,
}

impl std::fmt::Display for NotStructured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.node {
            Some(node) => write!(f, "node '{node}': {}", self.reason),
            None => f.write_str(&self.reason),
        }
    }
}

/// The structure class of a training graph.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "class", rename_all = "lowercase")]
pub enum Structure {
    Chain(Chain),
    Join(Join),
    General(NotStructured),
}

impl Structure {
    /// `"chain"`, `"join"` or `"general"`.
    pub fn class(&self) -> &'static str {
        match self {
            Structure::Chain(_) => "chain",
            Structure::Join(_) => "join",
            Structure::General(_) => "general",
        }
    }

    /// One line for `remat inspect`.
    pub fn describe(&self, graph: &Graph) -> String {
        match self {
            Structure::Chain(c) => {
                format!("chain of {} stages (loss '{}')", c.len(), graph.id(c.loss))
            }
            Structure::Join(j) => format!(
                "join graph of {} branches of lengths {} (loss '{}')",
                j.branches.len(),
                lengths(j.branches.iter().map(Vec::len)),
                graph.id(j.loss)
            ),
            Structure::General(n) => format!("general graph ({n})"),
        }
    }
}

/// Detects the structure class of `graph`.
pub fn detect(graph: &Graph) -> Structure {
    match detect_branches(graph) {
        Ok((mut branches, loss)) => {
            let (loss_cost, loss_size) = (graph.cost(loss), graph.memory(loss));
            if branches.len() == 1 {
                Structure::Chain(Chain {
                    stages: branches.pop().expect("one branch"),
                    loss,
                    loss_cost,
                    loss_size,
                })
            } else {
                Structure::Join(Join {
                    branches,
                    loss,
                    loss_cost,
                    loss_size,
                })
            }
        }
        Err(e) => Structure::General(e),
    }
}

/// The chain of `graph`, or why it is not one.
pub fn chain(graph: &Graph) -> Result<Chain, NotStructured> {
    match detect(graph) {
        Structure::Chain(c) => Ok(c),
        Structure::Join(j) => Err(NotStructured {
            node: Some(graph.id(j.loss).to_string()),
            reason: format!(
                "the loss joins {} branches: a join graph, not a chain",
                j.branches.len()
            ),
        }),
        Structure::General(e) => Err(e),
    }
}

/// The join graph of `graph`, a chain counting as a join of one branch, or why it is
/// neither.
pub fn join(graph: &Graph) -> Result<Join, NotStructured> {
    match detect(graph) {
        Structure::Join(j) => Ok(j),
        Structure::Chain(c) => Ok(Join {
            branches: vec![c.stages],
            loss: c.loss,
            loss_cost: c.loss_cost,
            loss_size: c.loss_size,
        }),
        Structure::General(e) => Err(e),
    }
}

fn broken(graph: &Graph, v: usize, reason: impl Into<String>) -> NotStructured {
    NotStructured {
        node: Some(graph.id(v).to_string()),
        reason: reason.into(),
    }
}

fn find_loss(graph: &Graph) -> Result<usize, NotStructured> {
    let n = graph.len();
    if graph.has_kinds() {
        if let Some(v) = (0..n).find(|&v| graph.node(v).kind.is_none()) {
            return Err(broken(
                graph,
                v,
                "some nodes have a kind and this one has none",
            ));
        }
        let losses: Vec<usize> = (0..n)
            .filter(|&v| graph.node(v).kind == Some(NodeKind::Loss))
            .collect();
        return match losses.as_slice() {
            [v] => Ok(*v),
            [] => Err(NotStructured {
                node: None,
                reason: "no node has kind 'loss'".into(),
            }),
            [_, second, ..] => Err(broken(graph, *second, "a second node of kind 'loss'")),
        };
    }
    let sources: Vec<usize> = (0..n).filter(|&v| graph.preds(v).is_empty()).collect();
    if sources.len() == 1 {
        return if n % 2 == 1 && n >= 3 {
            Ok(n / 2)
        } else {
            Err(NotStructured {
                node: None,
                reason: format!("a chain has 2L+1 nodes; this graph has {n}"),
            })
        };
    }
    // The first node every source reaches. Up to the first node with two or more inputs,
    // every node is reached by one source only (a source, or the one source of its one
    // input), so with k >= 2 sources that node is the first candidate: the answer when
    // every source reaches it, found in O(n + |E|).
    let k = sources.len();
    let no_join = || NotStructured {
        node: None,
        reason: format!("no node joins all {k} sources"),
    };
    let first = (0..n)
        .find(|&v| graph.preds(v).len() >= 2)
        .ok_or_else(no_join)?;
    if ancestor_sources(graph, first) == k {
        return Ok(first);
    }
    // Beyond it, a set of sources per node (k bits each), within MAX_REACH_BITS.
    if (k as u64).saturating_mul(n as u64) > MAX_REACH_BITS {
        return Err(broken(
            graph,
            first,
            format!(
                "it joins some of the {k} sources but not all, and looking further would \
                 take {k} x {n} bits"
            ),
        ));
    }
    let mut reached: Vec<FixedBitSet> = vec![FixedBitSet::with_capacity(k); n];
    for (b, &s) in sources.iter().enumerate() {
        reached[s].insert(b);
    }
    for v in 0..n {
        let mut set = reached[v].clone();
        for &u in graph.preds(v) {
            set.union_with(&reached[u]);
        }
        if set.count_ones(..) == k {
            return Ok(v);
        }
        reached[v] = set;
    }
    Err(no_join())
}

/// The bound on the bits [`find_loss`] keeps for the sets of sources (64 MiB).
const MAX_REACH_BITS: u64 = 1 << 29;

/// The number of sources among `v` and its ancestors.
fn ancestor_sources(graph: &Graph, v: usize) -> usize {
    let mut seen = FixedBitSet::with_capacity(graph.len());
    let mut stack = vec![v];
    seen.insert(v);
    let mut sources = 0;
    while let Some(u) = stack.pop() {
        if graph.preds(u).is_empty() {
            sources += 1;
        }
        for &p in graph.preds(u) {
            if !seen.put(p) {
                stack.push(p);
            }
        }
    }
    sources
}

/// The branches (each as stages `1..=L_b`) and the loss.
fn detect_branches(graph: &Graph) -> Result<(Vec<Vec<Stage>>, usize), NotStructured> {
    let loss = find_loss(graph)?;
    let forward = forward_part(graph, loss);
    if graph.has_kinds() {
        check_kinds(graph, loss, &forward)?;
    }
    let (chains, branch_of) = forward_lines(graph, loss, &forward)?;
    let next_grad = backward_successors(graph, loss, &forward)?;
    let mut branches: Vec<Option<Vec<Stage>>> = vec![None; chains.len()];
    for &start in &next_grad[loss] {
        let mut path = vec![start];
        while let Some(&w) = next_grad[*path.last().expect("non-empty")].first() {
            path.push(w);
        }
        let b = branch_of_line(graph, &path, &forward, &branch_of, chains.len())?;
        let fwd = &chains[b];
        if branches[b].is_some() {
            return Err(broken(
                graph,
                start,
                "a second backward line for one branch",
            ));
        }
        if path.len() != fwd.len() {
            return Err(broken(
                graph,
                start,
                format!(
                    "its backward line has {} ops but its forward line has {}",
                    path.len(),
                    fwd.len()
                ),
            ));
        }
        branches[b] = Some(line_stages(graph, fwd, &path, &forward)?);
    }
    check_covered(graph, loss, &branches)?;
    Ok((
        branches
            .into_iter()
            .map(|b| b.expect("all covered"))
            .collect(),
        loss,
    ))
}

/// The forward part: the ancestors of the loss.
fn forward_part(graph: &Graph, loss: usize) -> Vec<bool> {
    let mut forward = vec![false; graph.len()];
    let mut stack = vec![loss];
    while let Some(v) = stack.pop() {
        for &u in graph.preds(v) {
            if !forward[u] {
                forward[u] = true;
                stack.push(u);
            }
        }
    }
    forward
}

/// Every node's declared kind agrees with its position (before the loss or not).
fn check_kinds(graph: &Graph, loss: usize, forward: &[bool]) -> Result<(), NotStructured> {
    for v in (0..graph.len()).filter(|&v| v != loss) {
        let want = if forward[v] {
            NodeKind::Forward
        } else {
            NodeKind::Backward
        };
        if graph.node(v).kind != Some(want) {
            return Err(broken(
                graph,
                v,
                format!(
                    "its kind is {:?} but its position (it {} the loss) makes it {want:?}",
                    graph.node(v).kind.expect("checked"),
                    if forward[v] {
                        "precedes"
                    } else {
                        "does not precede"
                    }
                ),
            ));
        }
    }
    Ok(())
}

/// Forward lines: each forward node reads at most one node and feeds exactly one forward
/// node or the loss. Returns the lines (source first) and each forward node's line.
fn forward_lines(
    graph: &Graph,
    loss: usize,
    forward: &[bool],
) -> Result<(Vec<Vec<usize>>, Vec<usize>), NotStructured> {
    let n = graph.len();
    let mut chains: Vec<Vec<usize>> = Vec::new();
    let mut branch_of = vec![usize::MAX; n];
    for v in (0..n).filter(|&v| forward[v]) {
        if graph.preds(v).len() > 1 {
            return Err(broken(graph, v, "a forward op with more than one input"));
        }
        let next: Vec<usize> = graph
            .succs(v)
            .iter()
            .copied()
            .filter(|&w| forward[w] || w == loss)
            .collect();
        if next.len() != 1 {
            return Err(broken(
                graph,
                v,
                format!("a forward op feeding {} forward ops", next.len()),
            ));
        }
        match graph.preds(v).first() {
            None => {
                branch_of[v] = chains.len();
                chains.push(vec![v]);
            }
            Some(&u) => {
                branch_of[v] = branch_of[u];
                chains[branch_of[u]].push(v);
            }
        }
    }
    if chains.is_empty() {
        return Err(broken(graph, loss, "the loss reads no forward op"));
    }
    Ok((chains, branch_of))
}

/// Backward lines: each backward op reads exactly one backward op or the loss (its
/// gradient input); they form one path per branch, starting at the loss. Returns, for
/// every node, the backward ops reading it as their gradient (at most one, checked).
fn backward_successors(
    graph: &Graph,
    loss: usize,
    forward: &[bool],
) -> Result<Vec<Vec<usize>>, NotStructured> {
    let n = graph.len();
    let grad_input = |v: usize| -> Result<usize, NotStructured> {
        let g: Vec<usize> = graph
            .preds(v)
            .iter()
            .copied()
            .filter(|&u| !forward[u])
            .collect();
        match g.as_slice() {
            [u] => Ok(*u),
            _ => Err(broken(
                graph,
                v,
                format!(
                    "a backward op must read exactly one gradient (a backward op or the loss); it reads {}",
                    g.len()
                ),
            )),
        }
    };
    let mut next_grad: Vec<Vec<usize>> = vec![Vec::new(); n];
    for v in (0..n).filter(|&v| !forward[v] && v != loss) {
        next_grad[grad_input(v)?].push(v);
    }
    if let Some(v) = (0..n).find(|&v| v != loss && !forward[v] && next_grad[v].len() > 1) {
        return Err(broken(
            graph,
            v,
            "its gradient feeds more than one backward op",
        ));
    }
    Ok(next_grad)
}

/// The branch of a backward line: that of the first forward value it reads (the only
/// branch when it reads none).
fn branch_of_line(
    graph: &Graph,
    path: &[usize],
    forward: &[bool],
    branch_of: &[usize],
    branches: usize,
) -> Result<usize, NotStructured> {
    match path
        .iter()
        .flat_map(|&v| graph.preds(v).iter())
        .find(|&&u| forward[u])
    {
        Some(&u) => Ok(branch_of[u]),
        None if branches == 1 => Ok(0),
        None => Err(broken(
            graph,
            path[0],
            "a backward line that reads no forward value, so its branch is unknown",
        )),
    }
}

/// The stages `1..=L` of a forward line `fwd` and its backward line `path` (loss side
/// first), each backward op reading only its stage's input, output or the next output.
fn line_stages(
    graph: &Graph,
    fwd: &[usize],
    path: &[usize],
    forward: &[bool],
) -> Result<Vec<Stage>, NotStructured> {
    let mut stages = Vec::with_capacity(fwd.len());
    for (t, &g) in path.iter().enumerate() {
        let j = fwd.len() - t; // stage j, 1-based
        let (input, output) = (j.checked_sub(2).map(|i| fwd[i]), fwd[j - 1]);
        let next = fwd.get(j).copied();
        let (mut reads_input, mut reads_output, mut reads_next_output) = (false, false, false);
        for &u in graph.preds(g).iter().filter(|&&u| forward[u]) {
            if Some(u) == input {
                reads_input = true;
            } else if u == output {
                reads_output = true;
            } else if Some(u) == next {
                reads_next_output = true;
            } else {
                return Err(broken(
                    graph,
                    g,
                    format!(
                        "the backward op of stage {j} reads '{}', which is neither the input nor the output of that stage nor of the next",
                        graph.id(u)
                    ),
                ));
            }
        }
        stages.push(Stage {
            forward: output,
            backward: g,
            spec: StageSpec {
                fw: graph.cost(output),
                bw: graph.cost(g),
                x: graph.memory(output),
                delta: graph.memory(g),
                reads_input,
                reads_output,
            },
            reads_next_output,
        });
    }
    stages.reverse();
    Ok(stages)
}

/// Every node lies on a forward/backward line pair or is the loss.
fn check_covered(
    graph: &Graph,
    loss: usize,
    branches: &[Option<Vec<Stage>>],
) -> Result<(), NotStructured> {
    let n = graph.len();
    let covered: usize = branches.iter().flatten().map(|s| 2 * s.len()).sum();
    if covered + 1 == n {
        return Ok(());
    }
    let mut seen = vec![false; n];
    seen[loss] = true;
    for s in branches.iter().flatten().flatten() {
        seen[s.forward] = true;
        seen[s.backward] = true;
    }
    let v = (0..n)
        .find(|&v| !seen[v])
        .expect("some node is not covered");
    Err(broken(
        graph,
        v,
        "not part of any forward/backward line pair",
    ))
}

/// Branch lengths for one line: each distinct length with how many branches have it, in
/// the order they first come (`[3, 5 x2, 1 x100000]`), at most [`LENGTHS_SHOWN`] of them.
fn lengths(of: impl Iterator<Item = usize>) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut at = std::collections::HashMap::new();
    for len in of {
        let k = *at.entry(len).or_insert_with(|| {
            runs.push((len, 0));
            runs.len() - 1
        });
        runs[k].1 += 1;
    }
    let mut shown: Vec<String> = runs
        .iter()
        .take(LENGTHS_SHOWN)
        .map(|&(len, count)| match count {
            1 => len.to_string(),
            _ => format!("{len} x{count}"),
        })
        .collect();
    if runs.len() > LENGTHS_SHOWN {
        shown.push(format!("... {} more lengths", runs.len() - LENGTHS_SHOWN));
    }
    format!("[{}]", shown.join(", "))
}

/// The most distinct branch lengths [`lengths`] shows.
const LENGTHS_SHOWN: usize = 16;

#[cfg(test)]
pub(crate) mod tests;
