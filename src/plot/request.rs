//! One plot request for both shells: what `remat plot` and `POST /v1/plot/{kind}` ask for,
//! checked against the graph by [`PlotInput::validate`], so that the two accept and refuse
//! alike and name the same fields ([`PlotField`], spelt as each shell spells it).
//!
//! - A timeline or stage picture is drawn from `schedule` (a schedule in any accepted shape
//!   or a solve result; `budget`, when given, is drawn beside it instead of the result's
//!   own), or else from a solve at `budget`, which each shell runs its own way (the command
//!   line with a spinner, the service in its pool through its cache). Neither is an error.
//! - A trade-off sweeps `solvers` (default [`sweep::DEFAULT_SOLVERS`]) over `budgets`, or
//!   over `points` budgets (2 to [`sweep::MAX_POINTS`], default [`sweep::DEFAULT_POINTS`])
//!   evenly spaced from the minimum feasible budget to the checkpoint-all peak; giving both
//!   `budgets` and `points` is an error naming both. Each point's time limit defaults to
//!   [`sweep::DEFAULT_TIME_LIMIT`].

use super::input::{self, Drawn};
use super::{sweep, Kind, PlotError};
use crate::budget::{Budget, BudgetError};
use crate::graph::Graph;
use crate::solve::SolveOptions;

/// A plot request as the caller wrote it, before it is checked against the graph.
#[derive(Clone, Debug)]
pub struct PlotInput<'a> {
    pub kind: Kind,
    /// timeline, stages: the JSON text of a schedule or a solve result to draw.
    pub schedule: Option<&'a str>,
    /// timeline, stages: the budget to solve at, or to draw beside `schedule`.
    pub budget: Option<Budget>,
    /// tradeoff: the solvers swept.
    pub solvers: Option<Vec<String>>,
    /// tradeoff: the budgets swept.
    pub budgets: Option<Vec<Budget>>,
    /// tradeoff: the number of evenly spaced budgets swept.
    pub points: Option<usize>,
}

/// What a checked plot request asks for.
#[derive(Clone)]
pub enum PlotRequest {
    /// Draw this schedule.
    Draw(Drawn),
    /// Solve at this budget (bytes), then draw the result.
    Solve(u64),
    /// Run this sweep, then draw its trade-off.
    Tradeoff(sweep::Request),
}

/// A field of a plot request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotField {
    Schedule,
    Budget,
    Solvers,
    Budgets,
    Points,
}

impl PlotField {
    /// The command-line flag: `--budgets`.
    pub fn flag(self) -> &'static str {
        match self {
            PlotField::Schedule => "--schedule",
            PlotField::Budget => "--budget",
            PlotField::Solvers => "--solvers",
            PlotField::Budgets => "--budgets",
            PlotField::Points => "--points",
        }
    }

    /// The request field: `budgets`.
    pub fn field(self) -> &'static str {
        match self {
            PlotField::Schedule => "schedule",
            PlotField::Budget => "budget",
            PlotField::Solvers => "solvers",
            PlotField::Budgets => "budgets",
            PlotField::Points => "points",
        }
    }
}

/// Why a plot request is refused.
#[derive(Debug)]
pub enum PlotInputError {
    /// A timeline or stage picture with neither a schedule nor a budget.
    NothingToDraw,
    /// A trade-off with both `budgets` and `points`.
    BudgetsAndPoints,
    /// `points` out of range.
    Points(usize),
    /// A budget that does not resolve for the graph (`budget` or `budgets`).
    Budget(PlotField, BudgetError),
    /// The schedule given cannot be drawn (not a schedule, or not of this graph).
    Schedule(PlotError),
    /// The sweep is invalid: an unknown solver, too many solvers or budgets.
    Sweep(PlotError),
}

impl PlotInputError {
    /// The field at fault.
    pub fn field(&self) -> PlotField {
        match self {
            PlotInputError::NothingToDraw => PlotField::Budget,
            PlotInputError::BudgetsAndPoints | PlotInputError::Points(_) => PlotField::Points,
            PlotInputError::Budget(field, _) => *field,
            PlotInputError::Schedule(_) => PlotField::Schedule,
            PlotInputError::Sweep(PlotError::Solve(_) | PlotError::Solvers(_)) => {
                PlotField::Solvers
            }
            PlotInputError::Sweep(_) => PlotField::Budgets,
        }
    }

    /// What is wrong, naming the fields as `name` spells them (a flag or a field).
    pub fn message(&self, name: impl Fn(PlotField) -> String) -> String {
        match self {
            PlotInputError::NothingToDraw => format!(
                "give {} to draw, or {} to solve at",
                name(PlotField::Schedule),
                name(PlotField::Budget)
            ),
            PlotInputError::BudgetsAndPoints => format!(
                "give {} or {}, not both",
                name(PlotField::Budgets),
                name(PlotField::Points)
            ),
            PlotInputError::Points(points) => format!(
                "{} must be 2 to {}, got {points}",
                name(PlotField::Points),
                sweep::MAX_POINTS
            ),
            PlotInputError::Budget(field, e) => format!("{}: {e}", name(*field)),
            PlotInputError::Schedule(e) | PlotInputError::Sweep(e) => e.to_string(),
        }
    }
}

/// Names the fields by their command-line flags.
impl std::fmt::Display for PlotInputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message(|field| field.flag().to_string()))
    }
}

impl std::error::Error for PlotInputError {}

impl PlotInput<'_> {
    /// Checks the request against `graph`; `options` are a sweep's (its per-point time
    /// limit defaults to [`sweep::DEFAULT_TIME_LIMIT`]).
    pub fn validate(
        self,
        graph: &Graph,
        mut options: SolveOptions,
    ) -> Result<PlotRequest, PlotInputError> {
        if self.kind == Kind::Tradeoff {
            options.time_limit = options.time_limit.or(Some(sweep::DEFAULT_TIME_LIMIT));
            let request = sweep::Request {
                solvers: self
                    .solvers
                    .unwrap_or_else(|| sweep::DEFAULT_SOLVERS.map(String::from).to_vec()),
                budgets: sweep_budgets(graph, self.budgets, self.points)?,
                options,
                total: None,
            };
            // Refuse a bad sweep now rather than after it started.
            sweep::check(&request).map_err(PlotInputError::Sweep)?;
            return Ok(PlotRequest::Tradeoff(request));
        }
        let budget = self
            .budget
            .map(|b| b.resolve(graph))
            .transpose()
            .map_err(|e| PlotInputError::Budget(PlotField::Budget, e))?;
        match (self.schedule, budget) {
            (Some(text), budget) => {
                let mut drawn = input::read(graph, text).map_err(PlotInputError::Schedule)?;
                drawn.budget = budget.or(drawn.budget);
                Ok(PlotRequest::Draw(drawn))
            }
            (None, Some(budget)) => Ok(PlotRequest::Solve(budget)),
            (None, None) => Err(PlotInputError::NothingToDraw),
        }
    }
}

/// The budgets of a sweep, in bytes: `budgets`, or `points` evenly spaced ones.
fn sweep_budgets(
    graph: &Graph,
    budgets: Option<Vec<Budget>>,
    points: Option<usize>,
) -> Result<Vec<u64>, PlotInputError> {
    match (budgets, points) {
        (Some(_), Some(_)) => Err(PlotInputError::BudgetsAndPoints),
        (Some(list), None) => list
            .iter()
            .map(|b| b.resolve(graph))
            .collect::<Result<_, _>>()
            .map_err(|e| PlotInputError::Budget(PlotField::Budgets, e)),
        (None, points) => {
            let points = points.unwrap_or(sweep::DEFAULT_POINTS);
            if !(2..=sweep::MAX_POINTS).contains(&points) {
                return Err(PlotInputError::Points(points));
            }
            Ok(sweep::default_budgets(graph, points))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::linear;

    fn tradeoff(budgets: Option<Vec<Budget>>, points: Option<usize>) -> PlotInput<'static> {
        PlotInput {
            kind: Kind::Tradeoff,
            schedule: None,
            budget: None,
            solvers: None,
            budgets,
            points,
        }
    }

    #[test]
    fn budgets_and_points_together_are_refused_naming_both() {
        let g = linear(4);
        let e = tradeoff(Some(vec![Budget::OfPeak(0.8)]), Some(4))
            .validate(&g, SolveOptions::default())
            .err()
            .expect("refused");
        assert_eq!(e.field(), PlotField::Points);
        assert_eq!(e.to_string(), "give --budgets or --points, not both");
        assert_eq!(
            e.message(|f| format!("`{}`", f.field())),
            "give `budgets` or `points`, not both"
        );
        let Ok(PlotRequest::Tradeoff(r)) =
            tradeoff(None, Some(3)).validate(&g, SolveOptions::default())
        else {
            panic!("points alone are a sweep")
        };
        assert_eq!(r.budgets.len(), 3);
        assert_eq!(r.options.time_limit, Some(sweep::DEFAULT_TIME_LIMIT));
        let e = tradeoff(None, Some(1))
            .validate(&g, SolveOptions::default())
            .err()
            .expect("refused");
        assert_eq!(e.to_string(), "--points must be 2 to 200, got 1");
    }

    #[test]
    fn a_picture_needs_a_schedule_or_a_budget() {
        let g = linear(2);
        let input = PlotInput {
            kind: Kind::Timeline,
            ..tradeoff(None, None)
        };
        let e = input.validate(&g, SolveOptions::default()).err().unwrap();
        assert_eq!(e.field(), PlotField::Budget);
        assert_eq!(
            e.to_string(),
            "give --schedule to draw, or --budget to solve at"
        );
    }
}
