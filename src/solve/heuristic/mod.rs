//! Heuristics: schedules in milliseconds with no optimality claim, the baselines every
//! other answer is compared with and the starts of the exact solvers.
//!
//! * [`baseline`]: checkpoint-all and recompute-all (Checkmate's checkpoint-last-node).
//! * [`chen`]: Chen et al.'s √n and greedy segment schedules at articulation points.
//! * [`dtr`]: Dynamic Tensor Rematerialization (Kirisame et al.) simulated ahead of time.
//! * [`dtr_ahead`]: DTR evicting by the distance to the next use (Belady's rule) instead of
//!   the staleness.
//! * [`fastsa`]: FastSA (Imanishi et al.), simulated annealing over the compute sequence.
//! * [`knapsack`]: the saved-set knapsack of PyTorch's memory-budget partitioner, each
//!   dropped value recomputed once, just before the backward pass reads it.
//! * [`sethi_ullman`]: recursive rematerialisation in Sethi–Ullman order, a schedule at
//!   every budget from its need bound.
//!
//! `walk` is the walk through an evicted neighbourhood that the eviction scores of DTR,
//! DTR-ahead and Sethi–Ullman take.

pub mod baseline;
pub mod chen;
pub mod dtr;
pub mod dtr_ahead;
pub mod fastsa;
pub mod knapsack;
pub mod sethi_ullman;
mod walk;
