//! The chain DP as a branch of a join (the join DP, [`crate::solve::dp::join_dp`]): where
//! the branch sits ([`Nest`]), the nested join that replaces its loss stage, and the second
//! turn with its resweep. `join_dp` builds these; the recurrence's options read them.

use super::model::Mem;
use super::row::Row;
use super::table::Table;
use crate::schedule::Event;

/// Where a branch sits in a join (the join DP, `join_dp`); the default is a
/// plain chain.
#[derive(Default)]
pub struct Nest {
    /// The rest of the join, run in place of the loss stage while this branch's last
    /// output is held.
    pub inner: Option<Box<Table>>,
    /// The rest of the join built for this branch's last output being freed right after
    /// the loss (an option of F_ck at `L`).
    pub inner_released: Option<Box<Table>>,
    /// The loss output stays resident after this branch (an outer branch needs it).
    pub holds_loss: bool,
    /// Slots and bytes of outer branches' last outputs freed right after the loss, and
    /// their nodes.
    pub released: Mem,
    pub release_nodes: Vec<usize>,
    /// The second turn: an option of F_ck at `L` (see [`SecondTurn`]).
    pub second: Option<SecondTurn>,
}

/// The second turn of a branch of a join (the join DP, `join_dp`): F_ck at `L` keeps
/// `x_L`, the rest of the join runs with `x_L` freed right after the loss and owns the
/// loss output (its outermost branch frees it after its `G_L`), [`Resweep`] recomputes
/// the inner branches' last outputs, and this branch solves `table` from `x_a`: its own
/// chain, whose loss stage recomputes the loss from them.
pub struct SecondTurn {
    pub inner: Box<Table>,
    pub resweep: Resweep,
    /// This branch's chain with `resweep`'s ends held outside until the loss, freed right
    /// after it (its `Nest::released`).
    pub table: Box<Table>,
}

/// The F∅ sweeps that recompute the inner branches' last outputs after their backward
/// phase, in the memory model of the simulator.
pub struct Resweep {
    /// Total cost of the sweeps.
    pub cost: f64,
    /// Peak of the sweeps.
    pub need: Mem,
    /// The last outputs left resident.
    pub ends: Mem,
    /// The node `x_1` of the first inner branch when the sweep starts from it: it is
    /// resident after that branch's last `G_1`, which read it, and is not freed there.
    pub keep: Option<usize>,
    pub events: Vec<Event>,
}

impl Resweep {
    /// Appends the sweeps after the inner join's events `ev`.
    pub(super) fn emit(&self, ev: &mut Vec<Event>) {
        if let Some(v) = self.keep {
            let at = ev
                .iter()
                .rposition(|e| *e == Event::Free(v))
                .expect("x_1 is freed after the last G_1");
            ev.remove(at);
        }
        ev.extend_from_slice(&self.events);
    }
}

/// A nested join run in place of a branch's loss stage, with its top row
/// `C(0, L'+1, ·)`.
pub(super) struct Joined {
    pub(super) table: Box<Table>,
    pub(super) row: Row,
}

impl Joined {
    pub(super) fn new(table: Box<Table>, m: usize) -> Joined {
        let row = table.top_row(m);
        Joined { table, row }
    }
}

/// The second turn as the recurrence reads it: the inner join (with its top row), the
/// resweep, and this branch's own chain run after them.
pub(super) struct Second {
    pub(super) inner: Joined,
    pub(super) resweep: Resweep,
    pub(super) table: Box<Table>,
}

/// [`Nest`] as a table keeps it: the nested joins with their top rows, and the memory
/// that appears or disappears at the turn.
#[derive(Default)]
pub(super) struct Placement {
    /// The rest of the join in place of the loss stage.
    pub(super) inner: Option<Joined>,
    /// The same with this branch's last output freed right after the loss.
    pub(super) released: Option<Joined>,
    /// The second turn.
    pub(super) second: Option<Second>,
    /// Whether the loss output stays resident after this branch (an outer branch still
    /// needs it): then `δ_{L+1}` lies outside every backward-only sub-problem.
    pub(super) holds_loss: bool,
    /// The change of memory at the turn, outside this table's own accounting: `+|loss|`
    /// when it holds the loss output, minus the last outputs of the outer branches freed
    /// right after the loss.
    pub(super) offset: Mem,
    /// The nodes freed right after the loss (computed by the innermost branch).
    pub(super) release_nodes: Vec<usize>,
}

impl Placement {
    /// Resolves `nest` for a chain whose loss output is `loss` and a budget of `m` slots.
    pub(super) fn new(nest: Nest, loss: Mem, m: usize) -> Placement {
        let Nest {
            inner,
            inner_released,
            holds_loss,
            released,
            release_nodes,
            second,
        } = nest;
        Placement {
            inner: inner.map(|t| Joined::new(t, m)),
            released: inner_released.map(|t| Joined::new(t, m)),
            second: second.map(|st| Second {
                inner: Joined::new(st.inner, m),
                resweep: st.resweep,
                table: st.table,
            }),
            holds_loss,
            offset: -released + if holds_loss { loss } else { Mem::ZERO },
            release_nodes,
        }
    }
}
