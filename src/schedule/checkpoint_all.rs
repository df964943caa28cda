//! The checkpoint-all schedule and its peak: compute every node once in solver order and
//! free each output right after its last consumer (a node nobody reads is freed right
//! after it is computed). Its cost is `Σ c_v`; its peak is the *checkpoint-all peak*, the
//! 100% of percentage budgets (Checkmate Fig. 5's no-recomputation schedule).
//!
//! It lives here, beside the simulator, because budgets resolve against it
//! (`crate::budget::Budget::resolve`) and the `checkpoint-all` solver returns it.

use super::sequence::from_computes;
use super::{simulate, simulate_polled, Schedule};
use crate::graph::Graph;
use std::time::Instant;

/// The checkpoint-all schedule.
pub fn checkpoint_all(graph: &Graph) -> Schedule {
    from_computes(graph, &(0..graph.len()).collect::<Vec<_>>())
}

/// Peak memory of the checkpoint-all schedule (`fixed_memory` included).
pub fn checkpoint_all_peak(graph: &Graph) -> u64 {
    simulate(graph, &checkpoint_all(graph))
        .expect("checkpoint-all is a valid schedule")
        .peak_memory
}

/// [`checkpoint_all_peak`], or `None` once `deadline` passes during the replay (polled
/// as [`simulate_polled`] polls).
pub fn checkpoint_all_peak_by(graph: &Graph, deadline: Option<Instant>) -> Option<u64> {
    let late = || match deadline {
        Some(d) if Instant::now() >= d => Err(()),
        _ => Ok(()),
    };
    let replay = simulate_polled(graph, &checkpoint_all(graph), late).ok()?;
    Some(
        replay
            .expect("checkpoint-all is a valid schedule")
            .peak_memory,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;

    #[test]
    fn checkpoint_all_computes_each_node_once_and_peaks_at_its_peak() {
        // Checkmate: checkpoint-all on gen_linear_graph costs T = 2n + 1.
        for n in [1, 4, 8] {
            let g = linear(n);
            let stats = simulate(&g, &checkpoint_all(&g)).unwrap();
            assert_eq!(stats.total_cost, (2 * n + 1) as f64);
            assert!(stats.computes.iter().all(|&c| c == 1));
            assert_eq!(stats.peak_memory, checkpoint_all_peak(&g));
        }
    }

    #[test]
    fn the_peak_replay_stops_at_its_deadline() {
        let g = linear(8);
        assert_eq!(checkpoint_all_peak_by(&g, Some(Instant::now())), None);
        assert_eq!(
            checkpoint_all_peak_by(&g, None),
            Some(checkpoint_all_peak(&g))
        );
    }
}
