//! What a solve holds in memory, estimated before it is allocated ([`Footprint`]), and its
//! admission against `SolveOptions::memory_limit` (`--solve-memory`): a solver whose
//! estimate is larger is refused with [`SolveError::TooLarge`], naming the solver and the
//! estimate, before it allocates anything of that size.
//!
//! Every solver states its footprint ([`super::Solver::footprint`]); the driver and `auto`
//! admit it before running the solver. The estimate counts what grows with the instance
//! beside the graph itself (which the caller already holds):
//! * the working arrays of a solver linear in the graph, [`BYTES_PER_NODE`] a node and
//!   [`BYTES_PER_EDGE`] an edge;
//! * the answer, [`BYTES_PER_COMPUTE`] per compute event: the events (a compute and about
//!   one free, 16 B each), the simulator's memory after each (8 B each), the stage rows
//!   and the JSON form the result carries (node ids as strings), more where ids are long
//!   ([`bytes_per_compute`]);
//! * a solver's own model or table, where it has one (the MILP's matrix, a DP's table),
//!   from that solver's own count.
//!
//! A schedule whose length is known only while it is built (Checkmate stages from an S)
//! is also checked while it grows ([`Guard`]), so an estimate that was a lower bound cannot
//! let it outgrow the limit.

use super::core::{Outcome, SolveError, SolveOptions, Stop, Stopped};
use crate::graph::Graph;

/// Working bytes per node of a solver linear in the graph (flags, counters, positions and
/// the simulator's per-node arrays).
pub const BYTES_PER_NODE: u64 = 160;
/// Working bytes per edge of a solver linear in the graph.
pub const BYTES_PER_EDGE: u64 = 16;
/// Bytes per compute event of the answer (see the module doc), for ids of at most
/// [`ID_ALLOWANCE`] bytes.
pub const BYTES_PER_COMPUTE: u64 = 160;
/// The id length [`BYTES_PER_COMPUTE`] allows for (the exported graphs' ids are 1 to 55
/// bytes).
pub const ID_ALLOWANCE: u64 = 64;

/// Bytes per compute event of an answer on `graph`: [`BYTES_PER_COMPUTE`], and six times
/// the bytes by which its longest id exceeds [`ID_ALLOWANCE`]: the JSON schedule names the
/// node in each compute and in about one free, held once as strings and once written in a
/// buffer that grows by doubling. The longest id, not the mean: a schedule can recompute
/// the node of the one long id most.
pub fn bytes_per_compute(graph: &Graph) -> u64 {
    let longest = (0..graph.len())
        .map(|v| graph.id(v).len())
        .max()
        .unwrap_or(0) as u64;
    BYTES_PER_COMPUTE.saturating_add(6 * longest.saturating_sub(ID_ALLOWANCE))
}

/// A solve's estimated memory, and what it is made of, for the refusal's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footprint {
    pub bytes: u64,
    /// What would be allocated ("a schedule of at least 2.1 G compute events").
    pub what: String,
}

impl Footprint {
    /// A solver linear in `graph` whose schedule has about `computes` compute events.
    pub fn linear(graph: &Graph, computes: u64, what: impl Into<String>) -> Footprint {
        Footprint {
            bytes: linear_bytes(graph)
                .saturating_add(computes.saturating_mul(bytes_per_compute(graph))),
            what: what.into(),
        }
    }

    /// A schedule of every node once ([`Footprint::linear`] with `n` computes).
    pub fn one_pass(graph: &Graph) -> Footprint {
        Footprint::linear(
            graph,
            graph.len() as u64,
            format!("a schedule of {} compute events", graph.len()),
        )
    }

    /// A schedule that computes every node about twice (each recomputed about once:
    /// segments, blocks, Revolve's sweeps at the snapshot counts that fit, saved sets).
    pub fn recomputing_once(graph: &Graph) -> Footprint {
        let computes = 2 * graph.len() as u64;
        Footprint::linear(
            graph,
            computes,
            format!("a schedule of about {computes} compute events"),
        )
    }

    /// `Ok` when the footprint fits `options.memory_limit` (or there is none), else the
    /// refusal of `solver`.
    pub fn admit(&self, solver: &'static str, options: &SolveOptions) -> Result<(), SolveError> {
        match options.memory_limit {
            Some(limit) if self.bytes > limit => Err(SolveError::TooLarge {
                solver,
                what: self.what.clone(),
                needed: self.bytes,
                limit,
            }),
            _ => Ok(()),
        }
    }
}

/// The working bytes of a solver linear in `graph`, before its answer.
pub fn linear_bytes(graph: &Graph) -> u64 {
    (graph.len() as u64)
        .saturating_mul(BYTES_PER_NODE)
        .saturating_add((graph.edge_count() as u64).saturating_mul(BYTES_PER_EDGE))
}

/// Why a build was cut short: the caller's stop, or its answer grew past the memory limit.
#[derive(Debug)]
pub enum Halt {
    Stopped(Stopped),
    Refused(SolveError),
}

impl From<Stopped> for Halt {
    fn from(s: Stopped) -> Halt {
        Halt::Stopped(s)
    }
}

impl Halt {
    /// The answer of `solver` cut short `during` something: [`Stopped::outcome`] for a
    /// stop, the refusal itself otherwise.
    pub fn outcome(self, solver: &'static str, during: &str) -> Result<Outcome, SolveError> {
        match self {
            Halt::Stopped(s) => s.outcome(solver, during),
            Halt::Refused(e) => Err(e),
        }
    }
}

/// The check of a schedule that grows while it is built: the caller's stop, and the
/// memory limit against the compute events so far.
pub struct Guard<'a> {
    solver: &'static str,
    stop: &'a Stop,
    /// The bytes the solve holds beside its schedule.
    base: u64,
    /// [`bytes_per_compute`] of the graph.
    per_compute: u64,
    limit: Option<u64>,
}

impl<'a> Guard<'a> {
    pub fn new(
        solver: &'static str,
        graph: &Graph,
        stop: &'a Stop,
        options: &SolveOptions,
    ) -> Guard<'a> {
        Guard {
            solver,
            stop,
            base: linear_bytes(graph),
            per_compute: bytes_per_compute(graph),
            limit: options.memory_limit,
        }
    }

    /// `Ok` while the solve may go on with `computes` compute events built.
    pub fn check(&self, computes: usize) -> Result<(), Halt> {
        self.stop.poll()?;
        let bytes = self
            .base
            .saturating_add((computes as u64).saturating_mul(self.per_compute));
        match self.limit {
            Some(limit) if bytes > limit => Err(Halt::Refused(SolveError::TooLarge {
                solver: self.solver,
                what: format!("a schedule of more than {computes} compute events"),
                needed: bytes,
                limit,
            })),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;
    use crate::graph::load::{parse_graph, Format};

    /// Ids as long as exported graphs' cost nothing more; a long one is paid for in every
    /// compute event, so that a 3 MB request of 1,000-byte ids cannot be admitted for an
    /// answer of a gigabyte (`revolve` at its least budget: 1,046 MB measured, 1,051 MB
    /// estimated).
    #[test]
    fn long_ids_are_paid_for_in_every_compute_event() {
        assert_eq!(bytes_per_compute(&linear(8)), BYTES_PER_COMPUTE);
        let long = "x".repeat(1064);
        let text = format!(
            r#"{{"nodes": [{{"id": "a", "cost": 1, "memory": 1}},
                {{"id": "{long}", "cost": 1, "memory": 1, "inputs": ["a"]}}]}}"#
        );
        let g = parse_graph(&text, Format::Native).unwrap();
        assert_eq!(bytes_per_compute(&g), BYTES_PER_COMPUTE + 6 * 1000);
        let f = Footprint::linear(&g, 10, "ten");
        assert_eq!(f.bytes, linear_bytes(&g) + 10 * (BYTES_PER_COMPUTE + 6000));
    }
}
