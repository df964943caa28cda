//! The checks [`Graph::new`](crate::graph::Graph::new) makes of a [`GraphSpec`], each
//! problem naming its node and field (ids empty, unprintable or used twice; costs; sizes and
//! totals within [`MAX_BYTES`] and [`MAX_TOTAL_COST`]; self-loops, unknown inputs, cycles),
//! and the solver order of a spec that passes them.

use super::{
    load, GraphError, GraphSpec, Problem, ProblemKind, Problems, MAX_BYTES, MAX_TOTAL_COST,
};
use crate::aside::Aside;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::time::Instant;

/// The problem of an id or name (`what`) holding a control character: it is printed, and a
/// terminal would run an escape sequence in it.
pub(super) fn unprintable(what: &str, text: &str) -> Option<String> {
    let c = text.chars().find(|c| c.is_control())?;
    Some(format!(
        "the {what} {:?} holds the control character {c:?}: it is printed, and a terminal \
         would run it",
        load::excerpt(text)
    ))
}

/// [`Graph::new_by`](crate::graph::Graph::new_by)'s deadline, looked at every
/// `TIME_CHECK_EVERY` nodes of a pass.
pub(super) struct Clock {
    pub(super) deadline: Option<Instant>,
    pub(super) nodes: usize,
}

impl Clock {
    pub(super) fn late(&self, i: usize) -> Result<(), GraphError> {
        let past = |d: Instant| Instant::now() >= d;
        if i % load::raw::TIME_CHECK_EVERY == 0 && self.deadline.is_some_and(past) {
            Err(GraphError::TimeLimit { nodes: self.nodes })
        } else {
            Ok(())
        }
    }
}

/// Every id's file position (it becomes the graph's index once the order is known), with
/// the problems of the ids (empty, unprintable, used twice) and of the costs.
pub(super) fn positions(
    spec: &GraphSpec,
    clock: &Clock,
    problems: &mut Problems,
) -> Result<Aside<HashMap<String, usize>>, GraphError> {
    let mut position = Aside::new(HashMap::<String, usize>::with_capacity(spec.nodes.len()));
    for (i, node) in spec.nodes.iter().enumerate() {
        clock.late(i)?;
        if node.id.is_empty() {
            problems.push(Problem::at_index(
                ProblemKind::InvalidField,
                i,
                "id",
                "the id is empty",
            ));
        }
        if let Some(message) = unprintable("id", &node.id) {
            problems.push(Problem::at_index(
                ProblemKind::InvalidField,
                i,
                "id",
                message,
            ));
        }
        if position.insert(node.id.clone(), i).is_some() {
            problems.push(Problem::node(
                ProblemKind::DuplicateId,
                &node.id,
                "id",
                format!(
                    "id '{}' is used by more than one node",
                    load::excerpt(&node.id)
                ),
            ));
        }
        if !node.cost.is_finite() || node.cost < 0.0 {
            problems.push(Problem::node(
                ProblemKind::InvalidCost,
                &node.id,
                "cost",
                format!("cost must be a finite number >= 0, got {}", node.cost),
            ));
        }
    }
    Ok(position)
}

/// Each node's inputs as file positions, an input listed twice counted once, with the
/// problems of self-loops and unknown inputs.
pub(super) fn edges(
    spec: &GraphSpec,
    position: &HashMap<String, usize>,
    clock: &Clock,
    problems: &mut Problems,
) -> Result<Aside<Vec<Vec<usize>>>, GraphError> {
    let mut preds = Aside::new(vec![Vec::<usize>::new(); spec.nodes.len()]);
    let mut seen = HashSet::new();
    for (v, node) in spec.nodes.iter().enumerate() {
        clock.late(v)?;
        seen.clear();
        for (k, input) in node.inputs.iter().enumerate() {
            if repeated(&node.inputs, k, &mut seen) {
                continue;
            }
            if input == &node.id {
                problems.push(Problem::node(
                    ProblemKind::SelfLoop,
                    &node.id,
                    "inputs",
                    format!(
                        "node '{}' lists itself as an input",
                        load::excerpt(&node.id)
                    ),
                ));
                continue;
            }
            match position.get(input.as_str()) {
                Some(&u) => preds[v].push(u),
                None => problems.push(Problem::node(
                    ProblemKind::UnknownInput,
                    &node.id,
                    "inputs",
                    format!(
                        "input '{}' is not a node of the graph",
                        load::excerpt(input)
                    ),
                )),
            }
        }
    }
    Ok(preds)
}

/// Whether `inputs[k]` repeats an earlier input of the same node: a scan for the few
/// inputs of most nodes, `seen` (cleared by the caller for each node) for many.
pub(super) fn repeated<'a>(inputs: &'a [String], k: usize, seen: &mut HashSet<&'a str>) -> bool {
    const SCAN: usize = 16;
    if inputs.len() <= SCAN {
        inputs[..k].contains(&inputs[k])
    } else {
        !seen.insert(inputs[k].as_str())
    }
}

/// The limits of the module docs: each size and `K` within `MAX_BYTES`, then
/// `K + Σ_v s_v <= MAX_BYTES` and `Σ_v c_v <= MAX_TOTAL_COST`.
pub(super) fn totals(spec: &GraphSpec, problems: &mut Problems) {
    let limit = |what: &str, got: u128| {
        format!("{what} must be at most 2^53 = {MAX_BYTES} bytes, got {got}")
    };
    if spec.fixed_memory > MAX_BYTES {
        problems.push(Problem::graph(
            ProblemKind::InvalidMemory,
            "fixed_memory",
            limit("fixed_memory", spec.fixed_memory.into()),
        ));
    }
    let mut sizes_ok = true;
    for node in &spec.nodes {
        if node.memory > MAX_BYTES {
            sizes_ok = false;
            problems.push(Problem::node(
                ProblemKind::InvalidMemory,
                &node.id,
                "memory",
                limit("memory", node.memory.into()),
            ));
        }
    }
    let total: u128 = u128::from(spec.fixed_memory)
        + spec
            .nodes
            .iter()
            .map(|n| u128::from(n.memory))
            .sum::<u128>();
    if sizes_ok && spec.fixed_memory <= MAX_BYTES && total > u128::from(MAX_BYTES) {
        problems.push(Problem::graph(
            ProblemKind::InvalidMemory,
            "memory",
            limit("fixed_memory + the sum of every node's memory", total),
        ));
    }
    let costs_ok = spec
        .nodes
        .iter()
        .all(|n| n.cost.is_finite() && n.cost >= 0.0);
    let total_cost: f64 = spec.nodes.iter().map(|n| n.cost).sum();
    // Costs are finite and >= 0, so the sum is a number (possibly +inf), never NaN.
    if costs_ok && total_cost > MAX_TOTAL_COST {
        let got = if total_cost.is_finite() {
            format!("{total_cost:e}")
        } else {
            format!("more than the largest float, {:e}", f64::MAX)
        };
        problems.push(Problem::graph(
            ProblemKind::InvalidCost,
            "cost",
            format!(
                "the sum of every node's cost must be at most {MAX_TOTAL_COST:e} (room for \
                 recomputation below the largest float), got {got}"
            ),
        ));
    }
}

/// The solver order from file positions: the file's order when it is topological, else
/// Kahn's algorithm breaking ties by file position. On a cycle, returns the strongly
/// connected components that contain one (each as file positions in file order).
pub(super) fn solver_order(preds: &[Vec<usize>]) -> Result<Vec<usize>, Vec<Vec<usize>>> {
    let n = preds.len();
    if preds
        .iter()
        .enumerate()
        .all(|(v, ps)| ps.iter().all(|&u| u < v))
    {
        return Ok((0..n).collect());
    }
    let mut indegree: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut succs = vec![Vec::new(); n];
    for (v, ps) in preds.iter().enumerate() {
        for &u in ps {
            succs[u].push(v);
        }
    }
    let mut ready: BinaryHeap<std::cmp::Reverse<usize>> = (0..n)
        .filter(|&v| indegree[v] == 0)
        .map(std::cmp::Reverse)
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(std::cmp::Reverse(u)) = ready.pop() {
        order.push(u);
        for &v in &succs[u] {
            indegree[v] -= 1;
            if indegree[v] == 0 {
                ready.push(std::cmp::Reverse(v));
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    let mut left = vec![true; n];
    for &v in &order {
        left[v] = false;
    }
    Err(cycles(preds, &succs, &left))
}

/// The strongly connected components of more than one node among the nodes `left` (those
/// Kahn's algorithm could not order, which every cycle lies within), each as sorted file
/// positions, in sorted order. Kosaraju's two passes with explicit stacks: a cycle can
/// run through every node of the graph, deeper than any thread's stack would recurse.
fn cycles(preds: &[Vec<usize>], succs: &[Vec<usize>], left: &[bool]) -> Vec<Vec<usize>> {
    let n = preds.len();
    // The first pass: the nodes in the order a depth-first search along `succs` finishes them.
    let mut seen = vec![false; n];
    let mut finished = Vec::new();
    for root in 0..n {
        if !left[root] || seen[root] {
            continue;
        }
        seen[root] = true;
        let mut stack = vec![(root, 0)];
        while let Some(top) = stack.last_mut() {
            let (v, next) = *top;
            match succs[v].get(next) {
                Some(&w) => {
                    top.1 += 1;
                    if left[w] && !seen[w] {
                        seen[w] = true;
                        stack.push((w, 0));
                    }
                }
                None => {
                    finished.push(v);
                    stack.pop();
                }
            }
        }
    }
    // The second: along `preds` from the last finished, each search one component.
    let mut taken = vec![false; n];
    let mut components = Vec::new();
    for &root in finished.iter().rev() {
        if taken[root] {
            continue;
        }
        taken[root] = true;
        let mut component = vec![root];
        let mut stack = vec![root];
        while let Some(v) = stack.pop() {
            for &u in &preds[v] {
                if left[u] && !taken[u] {
                    taken[u] = true;
                    component.push(u);
                    stack.push(u);
                }
            }
        }
        if component.len() > 1 {
            component.sort_unstable();
            components.push(component);
        }
    }
    components.sort();
    components
}
