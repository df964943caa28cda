//! Pictures of schedules, as SVG written by hand ([`svg`]): no system libraries, no fonts.
//!
//! - [`timeline`]: the memory in use after every event of a schedule, from the simulator's
//!   replay, against the budget and the checkpoint-all peak; recomputations marked, the
//!   peak event labelled with its node.
//! - [`mod@stages`]: Checkmate's R and S matrices (stage × node), the solver's own when it
//!   returns stages, else the equivalent matrices read off the events
//!   ([`stages::EventStages`] defines them).
//! - [`tradeoff`]: the cost of the schedule found at each budget of a sweep
//!   ([`sweep`]), one curve per solver, with the best known lower bound.
//!
//! The command line (`remat plot`) and the service (`POST /v1/plot/*`, the page at `/`)
//! are thin shells over this module: both check their request with
//! [`request::PlotInput::validate`] (the schedule read with [`input::read`], the sweep's
//! budgets and solvers), draw the result of a solve run on the spot with
//! [`input::from_result`], run sweeps with [`sweep::run`] and write the same bytes. Every figure drawn comes from
//! `schedule::simulate`. Each SVG's root carries `data-*` attributes with the figures it
//! shows (`data-budget`, `data-peak-node`, ...), so that tests and scripts can check a
//! picture without reading pixels.

pub mod input;
pub mod request;
pub mod stages;
pub mod svg;
pub mod sweep;
pub mod timeline;
pub mod tradeoff;

use crate::schedule::SimError;
use crate::solve::SolveError;

/// Which picture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Timeline,
    Stages,
    Tradeoff,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Timeline => "timeline",
            Kind::Stages => "stages",
            Kind::Tradeoff => "tradeoff",
        }
    }
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Kind, String> {
        match s {
            "timeline" => Ok(Kind::Timeline),
            "stages" => Ok(Kind::Stages),
            "tradeoff" => Ok(Kind::Tradeoff),
            _ => Err(format!(
                "unknown plot '{s}'; expected timeline, stages or tradeoff"
            )),
        }
    }
}

/// The timeline or stage picture of `drawn` (a trade-off is drawn from a sweep,
/// [`tradeoff::render`]); `source` names the schedule when `drawn` has no caption (a
/// file name).
pub fn draw(
    kind: Kind,
    graph: &crate::graph::Graph,
    drawn: &input::Drawn,
    source: &str,
) -> Result<String, PlotError> {
    let caption = drawn.caption.as_deref().unwrap_or(source);
    match kind {
        Kind::Timeline => timeline::render(graph, drawn, caption),
        Kind::Stages => stages::render(graph, &drawn.schedule, caption),
        Kind::Tradeoff => Err(PlotError::Sweep(
            "a trade-off is drawn from a budget sweep, not from one schedule".into(),
        )),
    }
}

/// Why a picture cannot be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The schedule breaks a rule of the simulator.
    #[error(transparent)]
    Schedule(#[from] SimError),
    /// The schedule input is not a schedule, or a result without one.
    #[error(transparent)]
    Input(#[from] crate::front::ScheduleInputError),
    /// A stage matrix names a node the graph does not have.
    #[error("stage {stage} of the schedule names node '{node}', which is not in the graph")]
    UnknownStageNode { stage: usize, node: String },
    /// The schedule's stage matrices are not those of its events.
    #[error(
        "the schedule's stage matrices (`stages`) {why}; the events are the schedule: remove \
         `stages` to draw the matrices read off them"
    )]
    StagesDisagree { why: String },
    /// A solve found no schedule to draw (its status and message).
    #[error("no schedule to plot: {0}")]
    NoSchedule(String),
    /// The picture would be too large to be useful or to hold in memory.
    #[error("{what} has {count} {unit}; at most {max} can be drawn")]
    TooLarge {
        what: &'static str,
        count: usize,
        unit: &'static str,
        max: usize,
    },
    /// The sweep's request is invalid (no budget, too many) or a solve failed.
    #[error("{0}")]
    Sweep(String),
    /// The sweep's request has no solver or too many.
    #[error("{0}")]
    Solvers(String),
    #[error(transparent)]
    Solve(#[from] SolveError),
}
