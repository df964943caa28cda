//! What a bound from HiGHS proves, in cost: every lower bound taken from a HiGHS run (the
//! MILP's branch and bound, the LP relaxation of `lp-bound`, `lp-rounding` and the MILP, the
//! stage-cut bound's LPs and integral cuts, the sequence of cuts' LPs and integral programs)
//! becomes a cost through [`within_resolution`], and through nothing else.
//!
//! HiGHS solves to tolerances, not exactly, so its figures are lowered by what they may be
//! off:
//! * its objective is accurate to about [`RESOLUTION`] of itself (its tolerances apply to
//!   scaled costs). A relaxation's bound is `L(y)` of its row duals ([`super::lagrangian`]),
//!   proven whatever HiGHS's tolerances up to a margin for its own rounding, but over a model
//!   whose costs were divided by a unit and rounded; it is lowered by the same share;
//! * its branch and bound prunes every node whose LP bound is within its
//!   `mip_feasibility_tolerance` ([`PRUNING`], in the program's objective units, whatever
//!   their cost) of the incumbent, and once no node is left reports the incumbent as its dual
//!   bound. A solution cheaper by less than that is never seen, and the bound lies up to that
//!   far above the optimum. Measured on a stage cut's integral program whose unit is a cost of
//!   1e12 (`tests/fixtures/bound_within_pruning.json`): HiGHS's bound was the incumbent,
//!   3,000,000,400,010, where a schedule of 3,000,000,200,010 exists (2e-7 of the unit; 8e-7
//!   with the two 4e5 apart).
//!
//! The cost is then raised to the next integer where every cost is one (every schedule's cost
//! is then an integer), and never put below `Σ_v c_v`, which every schedule pays.
//!
//! What the tolerances do not cover is HiGHS cutting a program's optimum off, which its MIP
//! presolve did where a memory row's coefficients were sizes divided by the largest room:
//! `random_layered(11, 349)` at 244,318,209 bytes (233 MiB and a byte), the sequence of cuts'
//! window `f0, loss, b4, b3, b1`, whose optimum fills a memory row to one byte from full
//! beside the loss's 4 bytes (a coefficient of 2e-8, a slack of 4e-9, both under HiGHS's
//! feasibility tolerances): 75 where a schedule of 73 exists (70.000001 with presolve off,
//! 73 with `mip_feasibility_tolerance` 1e-9; HiGHS issues #1273, #3094 are of this kind).
//! So every integral program whose bound is taken has its memory rows in units of its sizes'
//! gcd, as the MILP's always were: every coefficient and right-hand side an integer (the
//! room rounded down to the unit, which changes no integral point: every sum of sizes is a
//! multiple of it), so that a point the row admits and one it refuses are a whole unit
//! apart, a million times HiGHS's tolerances, and no reduction of its presolve decides
//! within them. On 9,696 cases of random layered graphs and DAGs against the exhaustive
//! optimum (docs/performance.md, session 26), 32 windows' integral programs were above it
//! before, none after. The LPs' bounds, `L(y)`, do not depend on HiGHS being right.

use super::backend::{Proof, Run};
use crate::graph::Graph;

/// How far HiGHS's objective may be off, relative to it: what every bound from it is lowered
/// by. A graph whose costs span more than that (a loss of 1e12 beside ops of 1) is told apart
/// only where its costs are integers.
const RESOLUTION: f64 = 1e-9;

/// HiGHS's `mip_feasibility_tolerance` (its default; never set here), in the objective's
/// units: its branch and bound prunes a node whose LP bound is within it of the incumbent, so
/// a dual bound may lie that far above the optimum. What a branch and bound's bound is lowered
/// by besides [`RESOLUTION`].
const PRUNING: f64 = 1e-6;

/// How far a sum `offset + unit · objective` may be off by its own rounding, relative to the
/// magnitudes summed (two operations, each within half an ulp).
const ROUNDING: f64 = 4.0 * f64::EPSILON;

/// Whether every cost is an integer: then so is every schedule's cost, and a bound may be
/// raised to the next integer.
pub(crate) fn integral_costs(graph: &Graph) -> bool {
    graph.nodes().iter().all(|n| n.cost.fract() == 0.0)
}

/// What HiGHS's figure may be off by, in cost, for a program whose objective is in units of
/// `unit` (the cost its objective coefficient 1 stands for): [`RESOLUTION`] of the figure
/// `objective`, and for a branch and bound's bound also [`PRUNING`].
pub(crate) fn resolution(objective: f64, unit: f64, proof: Proof) -> f64 {
    let pruning = match proof {
        Proof::Duals => 0.0,
        Proof::BranchAndBound => PRUNING,
    };
    unit * (RESOLUTION * objective.abs() + pruning)
}

/// The cost that a HiGHS bound `objective` (by `proof`) proves on a program whose objective is
/// in units of `unit` and leaves out `offset`, a cost proven without HiGHS (`Σ_{v ∈ F} c_v`
/// of a stage cut's forced values): `offset + unit · objective` lowered by its
/// [`resolution`] and by its own rounding, raised to the next integer where every cost is
/// one, and never below `Σ_v c_v`.
pub(crate) fn within_resolution(
    graph: &Graph,
    offset: f64,
    unit: f64,
    objective: f64,
    proof: Proof,
) -> f64 {
    let proven = unit * objective - resolution(objective, unit, proof);
    let mut cost = offset + proven;
    cost -= ROUNDING * (offset.abs() + proven.abs());
    if integral_costs(graph) {
        cost = cost.ceil();
    }
    cost.max(graph.total_cost())
}

impl Run {
    /// [`within_resolution`] of the run's bound, if it has one.
    pub(crate) fn proves(&self, graph: &Graph, offset: f64, unit: f64) -> Option<f64> {
        self.bound
            .map(|b| within_resolution(graph, offset, unit, b, self.proof))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{GraphSpec, NodeSpec};

    fn graph(costs: &[f64]) -> Graph {
        let nodes = costs
            .iter()
            .enumerate()
            .map(|(i, &c)| NodeSpec::plain(&format!("n{i}"), c, 1, &[]))
            .collect();
        Graph::new(GraphSpec {
            nodes,
            ..Default::default()
        })
        .unwrap()
    }

    /// Integral costs of 1: a bound a hair under an integer is raised to it, a bound exactly
    /// on one stays; a branch and bound's bound in units of 1e12 is lowered by about 1e6 and
    /// never below `Σ_v c_v`; the duals' bound only by its share.
    #[test]
    fn bounds_are_lowered_by_what_highs_may_be_off_and_raised_to_integers() {
        let g = graph(&[1.0, 1.0, 1.0]);
        assert_eq!(within_resolution(&g, 0.0, 1.0, 7.0, Proof::Duals), 7.0);
        assert_eq!(
            within_resolution(&g, 0.0, 1.0, 7.0, Proof::BranchAndBound),
            7.0
        );
        assert_eq!(within_resolution(&g, 2.0, 1.0, 4.4, Proof::Duals), 7.0);
        assert_eq!(within_resolution(&g, 0.0, 1.0, 1.0, Proof::Duals), 3.0);
        let g = graph(&[1e12, 1.0, 1.0]);
        let base = g.total_cost();
        let unit = 1e12;
        let bb = within_resolution(&g, 0.0, unit, 3.0, Proof::BranchAndBound);
        assert_eq!(bb, 3e12 - 1e6 - 3e3);
        let duals = within_resolution(&g, 0.0, unit, 3.0, Proof::Duals);
        assert_eq!(duals, 3e12 - 3e3);
        assert_eq!(
            within_resolution(&g, 0.0, unit, 1.0, Proof::BranchAndBound),
            base
        );
        // Non-integral costs are lowered, not rounded.
        let g = graph(&[0.5, 0.25]);
        let c = within_resolution(&g, 0.0, 1.0, 2.0, Proof::Duals);
        assert!(c < 2.0 && c > 2.0 - 1e-8, "{c}");
    }
}
