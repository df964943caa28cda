//! Schedules given as a *compute sequence*: the nodes in the order they are computed,
//! repeats being recomputations, with every free implied. Each production of `v` lives
//! from its compute until the last compute that reads it before `v` is produced again,
//! and is freed right after that read (right after its own compute when nothing reads
//! it). No schedule with the same computes peaks lower, so solvers that search over
//! orders and recomputations (the constructive solver, simulated annealing) work on
//! sequences and turn them into events here, once.

use super::{Event, Schedule};
use crate::graph::Graph;

/// The schedule that computes `computes` in order and frees every value after its last
/// read. The simulator judges it: a sequence that reads a value before it is produced is
/// an invalid schedule there.
pub fn from_computes(graph: &Graph, computes: &[usize]) -> Schedule {
    // Backwards: `read_later[u]` says whether the current production of `u` (the latest
    // one before the position reached) is read at or after that position. The frees after
    // each position are appended as one block, the last position's first.
    let mut read_later = vec![false; graph.len()];
    let mut frees: Vec<usize> = Vec::with_capacity(computes.len());
    let mut block = vec![0u32; computes.len()];
    for (i, &v) in computes.iter().enumerate().rev() {
        let before = frees.len();
        for &u in graph.preds(v) {
            if !read_later[u] {
                frees.push(u);
                read_later[u] = true;
            }
        }
        if !read_later[v] {
            frees.push(v);
        }
        read_later[v] = false;
        block[i] = (frees.len() - before) as u32;
    }
    let mut events = Vec::with_capacity(computes.len() + frees.len());
    let mut end = frees.len();
    for (&v, &len) in computes.iter().zip(&block) {
        let start = end - len as usize;
        events.push(Event::Compute(v));
        events.extend(frees[start..end].iter().map(|&u| Event::Free(u)));
        end = start;
    }
    Schedule::new(events)
}

/// Appends to `computes` the recomputation of the inputs of `v` that are `absent` and not
/// yet `restored`, with, first, the absent inputs of those (post-order, so each value's
/// inputs come before it), each at most once: it marks them in `restored`. What selective
/// recomputation runs before an op that reads dropped values.
pub fn push_restored_inputs(
    graph: &Graph,
    v: usize,
    absent: impl Fn(usize) -> bool,
    restored: &mut [bool],
    computes: &mut Vec<usize>,
) {
    let missing = |x: usize, restored: &[bool]| {
        graph
            .preds(x)
            .iter()
            .copied()
            .filter(|&u| absent(u) && !restored[u])
            .collect::<Vec<_>>()
    };
    let mut stack: Vec<(usize, bool)> = missing(v, restored)
        .into_iter()
        .map(|u| (u, false))
        .collect();
    while let Some((x, inputs_done)) = stack.pop() {
        if restored[x] {
            continue;
        }
        if inputs_done {
            restored[x] = true;
            computes.push(x);
            continue;
        }
        stack.push((x, true));
        stack.extend(missing(x, restored).into_iter().map(|u| (u, false)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::schedule::simulate;
    use Event::{Compute as C, Free as F};

    #[test]
    fn each_production_is_freed_after_its_last_read_before_the_next() {
        // linear(3): forward 0 1 2, loss 3, backward 4 (reads 3, 2), 5 (4, 1), 6 (5, 0).
        // 0 and 1 are recomputed before 5: their first copies die at their last read
        // before the recomputation, the second ones after 5 and 6.
        let g = linear(3);
        let schedule = from_computes(&g, &[0, 1, 2, 3, 4, 0, 1, 5, 6]);
        let expected = [
            C(0),
            C(1),
            F(0),
            C(2),
            F(1),
            C(3),
            C(4),
            F(2),
            F(3),
            C(0),
            C(1),
            C(5),
            F(1),
            F(4),
            C(6),
            F(0),
            F(5),
            F(6),
        ];
        assert_eq!(schedule.events, expected);
        let stats = simulate(&g, &schedule).unwrap();
        assert_eq!(stats.computes, [2, 2, 1, 1, 1, 1, 1]);
        assert_eq!(stats.total_cost, 9.0);
    }

    #[test]
    fn a_read_before_any_production_is_left_to_the_simulator() {
        let g = linear(1);
        assert!(simulate(&g, &from_computes(&g, &[1, 0, 2])).is_err());
    }
}
