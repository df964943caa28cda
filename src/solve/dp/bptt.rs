//! Memory-efficient backpropagation through time (Gruslys, Munos, Danihelka, Lanctot,
//! Graves, "Memory-Efficient Backpropagation Through Time", NeurIPS 2016): the BPTT-HSM, BPTT-ISM and BPTT-MSM policies.
//!
//! # Gruslys' units
//!
//! A recurrent chain of `t` identical steps; `m` memory slots, **the slot of the initial
//! hidden state included**; one RNN core outside `m` holds one internal state; cost counts
//! forward operations only (backward operations are a constant `t`).
//!
//! * **HSM** (hidden states, §3.1 eq. 2): `Q(t, m, y) = y + C(t−y, m−1) + C(y, m)`,
//!   `C(1, m) = 1`, `C(t, 1) = t(t+1)/2`. It equals Revolve's `t(t, m) + t`
//!   (`hsm_cost`, no table needed).
//! * **ISM** (internal states, §3.2, as reconstructed here):
//!   `Q(t, m, y) = y + C(y−1, m) + C(t−y, m−1)`, `1 <= y <= t`, `C(0, m) = 0`,
//!   `C(t >= 1, 0) = ∞`.
//! * **MSM** (mixed, §3.3-3.4, eq. 8-10, as reconstructed here): memory in hidden-state
//!   units, an internal state costs `α`; either action, with the internal state of the
//!   sub-sequence's first step charged `β = α − 1` (its input hidden state is already
//!   stored): `Q_1 = y + C(y, m) + C(t−y, m−1)` (`y < t`),
//!   `Q_2 = y + C(y−1, m) + C(t−y, m − [y>1]·α − [y=1]·β)`; a non-empty right part keeps
//!   at least one unit.
//!
//! `Recurrence` (the tests' oracle, built only with them) holds the `C` and `D` tables (`O(t²·m)` time) and replays a policy to
//! count its forward operations. The paper's headline, sequence length 1000: ISM with 50
//! slots costs 1950 forward ops, so with backward = 2 forward the time is
//! `(1950 + 2000) / (1000 + 2000) = 1.317` times standard BPTT's for 5 % of its memory.
//!
//! # On a training graph
//!
//! The solvers `bptt-hsm`, `bptt-ism` and `bptt-msm` run the chain DP
//! ([`super::chain_dp`]) restricted to the policy's options: HSM keeps hidden states
//! only (F_ck: the state is recomputed before its backward), ISM keeps internal states
//! only (F_all, and F_ck kept for its backward), MSM may do both, which is the chain DP's
//! whole persistent space. The graph model sizes every value itself, so `α` is implied by
//! the node sizes rather than set.

use super::chain_dp::{solve_graph, table_footprint, Policy};
#[cfg(test)]
use super::revolve::revolve_steps;
use crate::solve::Footprint;
use crate::solve::{Instance, Outcome, Scope, SolveError, SolveOptions, Solver, SolverInfo};

/// BPTT-HSM's cost `C(t, m)` (forward operations), by the closed form; `None` when no
/// schedule exists (`m = 0`, `t >= 2`).
#[cfg(test)]
pub fn hsm_cost(t: u64, m: u64) -> Option<u64> {
    if t == 0 {
        return Some(0);
    }
    revolve_steps(t, m.max(1))
        .filter(|_| m >= 1 || t <= 1)
        .map(|p| p + t)
}

/// Which BPTT recurrence.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Model {
    Hsm,
    Ism,
    /// Mixed, with the internal-state size `α` in hidden-state units (`α >= 1`).
    Msm {
        alpha: usize,
    },
}

/// One action of a policy: advance `y` steps and store a hidden or an internal state.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store {
    Hidden(usize),
    Internal(usize),
}

#[cfg(test)]
const INF: u64 = u64::MAX;

/// The `C` and `D` tables of one BPTT model for every `t <= t_max`, `m <= m_max`.
#[cfg(test)]
pub struct Recurrence {
    model: Model,
    m_max: usize,
    c: Vec<u64>,
    d: Vec<Option<Store>>,
}

#[cfg(test)]
impl Recurrence {
    pub fn new(model: Model, t_max: usize, m_max: usize) -> Recurrence {
        let w = m_max + 1;
        let mut c = vec![INF; (t_max + 1) * w];
        let mut d = vec![None; (t_max + 1) * w];
        c[..w].fill(0); // C(0, m) = 0
        let add = |a: u64, b: u64, y: usize| a.checked_add(b).and_then(|v| v.checked_add(y as u64));
        // HSM's single core runs one step without a slot: C(1, 0) = 1, so that
        // C(t, 1) = t(t+1)/2 follows from the recurrence.
        let m_min = usize::from(model != Model::Hsm);
        for t in 1..=t_max {
            for m in m_min..=m_max {
                let mut best = (INF, None);
                let mut consider = |v: Option<u64>, s: Store| {
                    if let Some(v) = v.filter(|&v| v < best.0) {
                        best = (v, Some(s));
                    }
                };
                let get = |t: usize, m: usize| c[t * w + m];
                let hidden = !matches!(model, Model::Ism);
                let internal = !matches!(model, Model::Hsm);
                if t == 1 {
                    consider(Some(1), Store::Internal(1));
                }
                for y in 1..t {
                    if hidden && m >= 1 {
                        consider(add(get(y, m), get(t - y, m - 1), y), Store::Hidden(y));
                    }
                }
                if internal {
                    for y in 1..=t {
                        let charge = match model {
                            Model::Msm { alpha } if y == 1 => alpha - 1,
                            Model::Msm { alpha } => alpha,
                            _ => 1,
                        };
                        let right = t - y;
                        // An empty right part needs nothing; a non-empty one at least 1 unit.
                        let rm = match m.checked_sub(charge) {
                            _ if right == 0 => 0,
                            Some(rm) if rm >= 1 => rm,
                            _ => continue,
                        };
                        consider(add(get(y - 1, m), get(right, rm), y), Store::Internal(y));
                    }
                }
                c[t * w + m] = best.0;
                d[t * w + m] = best.1;
            }
        }
        Recurrence { model, m_max, c, d }
    }

    /// `C(t, m)`, `None` when infeasible.
    pub fn cost(&self, t: usize, m: usize) -> Option<u64> {
        Some(self.c[t * (self.m_max + 1) + m]).filter(|&v| v != INF)
    }

    /// The policy's first action at `(t, m)`.
    pub fn decision(&self, t: usize, m: usize) -> Option<Store> {
        self.d[t * (self.m_max + 1) + m]
    }

    /// Runs the policy for `(t, m)` and counts its forward operations (checks `C`).
    pub fn replay(&self, t: usize, m: usize) -> Option<u64> {
        if t == 0 {
            return Some(0);
        }
        Some(match self.decision(t, m)? {
            Store::Hidden(y) => y as u64 + self.replay(t - y, m - 1)? + self.replay(y, m)?,
            Store::Internal(y) if t == 1 && y == 1 && self.model != Model::Ism => 1,
            Store::Internal(y) => {
                let charge = match self.model {
                    Model::Msm { alpha } if y == 1 => alpha - 1,
                    Model::Msm { alpha } => alpha,
                    _ => 1,
                };
                y as u64 + self.replay(y - 1, m)? + self.replay(t - y, m.saturating_sub(charge))?
            }
        })
    }
}

macro_rules! bptt_solver {
    ($ty:ident, $name:literal, $policy:expr, $scope:expr, $desc:literal) => {
        pub struct $ty;
        impl Solver for $ty {
            fn info(&self) -> SolverInfo {
                SolverInfo {
                    name: $name,
                    description: $desc,
                    scope: $scope,
                    accepts: "chain graphs",
                }
            }
            fn footprint(&self, instance: &Instance) -> Footprint {
                table_footprint(instance.graph)
            }
            fn solve(
                &self,
                instance: &Instance,
                options: &SolveOptions,
            ) -> Result<Outcome, SolveError> {
                solve_graph($name, $policy, $scope, instance, options)
            }
        }
    };
}

bptt_solver!(
    BpttHsm,
    "bptt-hsm",
    Policy {
        ck: true,
        keep: false
    },
    Scope::Heuristic,
    "Gruslys et al.'s BPTT-HSM: the best schedule that stores hidden states only."
);
bptt_solver!(
    BpttIsm,
    "bptt-ism",
    Policy {
        ck: false,
        keep: true
    },
    Scope::Heuristic,
    "Gruslys et al.'s BPTT-ISM: the best schedule that stores internal states only."
);
bptt_solver!(
    BpttMsm,
    "bptt-msm",
    Policy::ALL,
    Scope::OptimalAmongPersistent,
    "Gruslys et al.'s BPTT-MSM: hidden or internal states, the chain DP's whole persistent space."
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hsm_table_matches_the_tabulated_values() {
        // Tabulated C(t, m) for t = 10 and t = 20, m = 1..8.
        let row10 = [55, 30, 25, 24, 23, 22, 21, 20];
        let row20 = [210, 85, 65, 59, 53, 52, 51, 50];
        let rec = Recurrence::new(Model::Hsm, 20, 8);
        for m in 1..=8 {
            assert_eq!(hsm_cost(10, m as u64), Some(row10[m - 1]));
            assert_eq!(hsm_cost(20, m as u64), Some(row20[m - 1]));
            for t in 1..=20 {
                assert_eq!(
                    rec.cost(t, m),
                    hsm_cost(t as u64, m as u64),
                    "t = {t}, m = {m}"
                );
                assert_eq!(rec.replay(t, m), rec.cost(t, m));
            }
        }
        for (m, c) in [
            (10, 4636),
            (50, 2948),
            (100, 2898),
            (250, 2748),
            (500, 2498),
            (1000, 1999),
        ] {
            assert_eq!(hsm_cost(1000, m), Some(c));
        }
    }

    #[test]
    fn ism_and_msm_tables_match_the_tabulated_values() {
        let ism = Recurrence::new(Model::Ism, 16, 8);
        let ism16 = [136, 50, 36, 30, 27, 26, 25, 24];
        let ism10 = [55, 24, 18, 16, 15, 14, 13, 12];
        let msm = Recurrence::new(Model::Msm { alpha: 2 }, 12, 8);
        let msm12 = [78, 39, 29, 24, 21, 19, 18, 17];
        let msm5 = [15, 10, 8, 6, 5, 5, 5, 5];
        for m in 1..=8 {
            assert_eq!(ism.cost(16, m), Some(ism16[m - 1]), "ISM t = 16, m = {m}");
            assert_eq!(ism.cost(10, m), Some(ism10[m - 1]), "ISM t = 10, m = {m}");
            assert_eq!(msm.cost(12, m), Some(msm12[m - 1]), "MSM t = 12, m = {m}");
            assert_eq!(msm.cost(5, m), Some(msm5[m - 1]), "MSM t = 5, m = {m}");
            for t in 0..=12 {
                assert_eq!(ism.replay(t, m), ism.cost(t, m));
                assert_eq!(msm.replay(t, m), msm.cost(t, m));
            }
        }
    }

    #[test]
    fn headline_one_thousand_steps() {
        let ism = Recurrence::new(Model::Ism, 1000, 50);
        let c = ism.cost(1000, 50).unwrap();
        assert_eq!(c, 1950);
        assert_eq!(ism.replay(1000, 50), Some(1950));
        // Backward = 2 forward: time relative to standard BPTT (1000 forward, 1000 slots).
        let ratio = (c as f64 + 2000.0) / 3000.0;
        assert!((ratio - 1.317).abs() < 1e-3, "{ratio}");
        assert_eq!(1.0 - 50.0 / 1000.0, 0.95);
    }

    #[test]
    fn graph_solvers_are_valid_and_ordered() {
        use crate::graph::generate::linear;
        use crate::solve::{solve, Instance, SolveOptions, Status};
        let cost = |g: &crate::graph::Graph, budget: u64, name: &str| {
            let r = solve(
                &Instance { graph: g, budget },
                name,
                &SolveOptions::default(),
            )
            .unwrap();
            match r.status {
                Status::Optimal | Status::OptimalInScope | Status::Feasible => {
                    let stats = r.stats.unwrap();
                    assert!(stats.peak_memory <= budget, "{name}");
                    Some(stats.total_cost)
                }
                Status::Infeasible => None,
                other => panic!("{name}: {other:?} {:?}", r.message),
            }
        };
        for n in 1..=7 {
            let g = linear(n);
            for budget in 1..=(2 * n as u64 + 3) {
                let dp = cost(&g, budget, "chain-dp");
                assert_eq!(cost(&g, budget, "bptt-msm"), dp, "linear({n}) at {budget}");
                for name in ["bptt-hsm", "bptt-ism"] {
                    let c = cost(&g, budget, name);
                    assert!(
                        c.is_none() || (dp.is_some() && c >= dp),
                        "{name}: linear({n}) at {budget}"
                    );
                }
            }
            // With memory for everything, ISM stores every internal state: no recomputation;
            // HSM recomputes each state once before its backward.
            let big = 2 * n as u64 + 3;
            assert_eq!(cost(&g, big, "bptt-ism"), Some(g.total_cost()));
            assert_eq!(cost(&g, big, "bptt-hsm"), Some(g.total_cost() + n as f64));
        }
    }
}
