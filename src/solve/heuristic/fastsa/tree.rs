//! The memory profile over the slots: a range-add / range-max segment tree (FastSA §2,
//! "peak memory in O(log T)"). Leaf `t` holds the bytes resident at slot `t`; a value
//! lifetime `[a, b]` of `s` bytes is one [`PeakTree::add`]; the peak of the whole
//! sequence is the root, read in O(1).
//!
//! Bottom-up and without push-down: `max[p]` is the largest leaf of `p`'s subtree
//! counting every add applied to `p` and below it, `pending[p]` the adds applied to the
//! whole of `p` (not yet in its children). Only the root is ever read, so adds never need
//! to be pushed down.

pub(super) struct PeakTree {
    /// The number of leaves, a power of two.
    leaves: usize,
    /// `max[1]` is the root; the leaves are `max[leaves..2 * leaves]`.
    max: Vec<i64>,
    /// The adds applied to each inner node as a whole.
    pending: Vec<i64>,
}

impl PeakTree {
    /// A tree of `leaves` zeros (`leaves` a power of two, at least 1).
    pub(super) fn new(leaves: usize) -> PeakTree {
        debug_assert!(leaves.is_power_of_two());
        PeakTree {
            leaves,
            max: vec![0; 2 * leaves],
            pending: vec![0; leaves],
        }
    }

    /// The largest leaf.
    pub(super) fn peak(&self) -> i64 {
        self.max[1]
    }

    /// Adds `value` to every leaf of `first..=last`.
    pub(super) fn add(&mut self, first: usize, last: usize, value: i64) {
        debug_assert!(first <= last && last < self.leaves);
        let (mut l, mut r) = (first + self.leaves, last + 1 + self.leaves);
        let (l0, r0) = (l, r - 1);
        while l < r {
            if l & 1 == 1 {
                self.apply(l, value);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                self.apply(r, value);
            }
            l >>= 1;
            r >>= 1;
        }
        self.pull(l0, r0);
    }

    fn apply(&mut self, p: usize, value: i64) {
        self.max[p] += value;
        if p < self.leaves {
            self.pending[p] += value;
        }
    }

    /// Recomputes the ancestors of the leaves `l` and `r`, level by level, those they share
    /// once.
    fn pull(&mut self, mut l: usize, mut r: usize) {
        while l > 1 {
            l >>= 1;
            r >>= 1;
            self.max[l] = self.max[2 * l].max(self.max[2 * l + 1]) + self.pending[l];
            if r != l {
                self.max[r] = self.max[2 * r].max(self.max[2 * r + 1]) + self.pending[r];
            }
        }
    }

    /// The bytes this tree allocates for `leaves` leaves.
    pub(super) fn bytes(leaves: usize) -> u64 {
        // `max` has 2 · leaves entries, `pending` leaves, 8 bytes each.
        24 * leaves as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_root_is_the_largest_leaf_after_random_range_adds() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for leaves in [1usize, 2, 8, 64] {
            let mut tree = PeakTree::new(leaves);
            let mut naive = vec![0i64; leaves];
            for _ in 0..2000 {
                let a = rng.random_range(0..leaves);
                let b = rng.random_range(a..leaves);
                let value = rng.random_range(-5i64..=9);
                tree.add(a, b, value);
                naive[a..=b].iter_mut().for_each(|x| *x += value);
                assert_eq!(tree.peak(), *naive.iter().max().unwrap());
            }
        }
    }
}
