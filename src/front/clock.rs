//! The clock of one solve as its caller sees it: the time limit counts from the moment the
//! command started (or the request was admitted), so that reading the graph, resolving
//! the budget, solving, judging the schedule and writing the answer all fit in it. The
//! graph reader stops at the deadline (`crate::graph::load::Limits::deadline`); the solver
//! gets what is left after reading, less a reserve for judging and writing its answer:
//! [`ANSWER_REPLAYS`] times the replay of the checkpoint-all schedule on this graph, timed
//! when the budget is resolved ([`timed_peak`]), so the reserve follows the graph's size
//! and the machine's speed and load. With no time left the solver gets a zero limit and
//! stops at its first poll (`no_solution`), at once. The judge's replay of the answer stops
//! [`JUDGE_GRACE`] past the deadline (`SolveOptions::judge_by`): a schedule it could not
//! judge by then is answered `no_solution`, never unjudged. The grace covers a solver that
//! stops a little after its own deadline on a graph whose reserve is next to nothing, and
//! leaves the rest of the second past the limit for writing the answer.

use crate::graph::Graph;
use crate::schedule::checkpoint_all_peak_by;
use std::time::{Duration, Instant};

/// Replays of the checkpoint-all schedule the answer is given time for: the judge's
/// replay of a schedule that may recompute (about twice as many events), naming its
/// events for the answer, and writing it.
pub const ANSWER_REPLAYS: u32 = 4;

/// How far past the deadline the judge's replay of the answer may run.
pub const JUDGE_GRACE: Duration = Duration::from_millis(500);

/// When a command or request started, and its time limit.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    started: Instant,
    limit: Option<Duration>,
}

impl Clock {
    /// Starts the clock of `limit` now.
    pub fn start(limit: Option<Duration>) -> Clock {
        Clock::since(Instant::now(), limit)
    }

    /// The clock of `limit` started at `started` (a request's admission).
    pub fn since(started: Instant, limit: Option<Duration>) -> Clock {
        Clock { started, limit }
    }

    /// The instant everything must be done by, if there is a time limit.
    pub fn deadline(&self) -> Option<Instant> {
        self.limit.and_then(|l| self.started.checked_add(l))
    }

    /// The instant the judge's replay must end by ([`JUDGE_GRACE`] past the deadline).
    pub fn judge_by(&self) -> Option<Instant> {
        self.deadline().and_then(|d| d.checked_add(JUDGE_GRACE))
    }

    /// The time limit of the solve: what is left of the limit, less `reserve` for the
    /// answer; zero once nothing is left.
    pub fn solve_limit(&self, reserve: Duration) -> Option<Duration> {
        self.deadline().map(|d| {
            d.saturating_duration_since(Instant::now())
                .saturating_sub(reserve)
        })
    }
}

/// The checkpoint-all peak of `graph` (the 100% of percentage budgets) and the time its
/// replay took; `None` when `deadline` passed during the replay (a graph read just
/// before its deadline).
pub fn timed_peak(graph: &Graph, deadline: Option<Instant>) -> Option<(u64, Duration)> {
    let start = Instant::now();
    let peak = checkpoint_all_peak_by(graph, deadline)?;
    Some((peak, start.elapsed()))
}

/// The time the answer is given: [`ANSWER_REPLAYS`] times one replay.
pub fn answer_reserve(replay: Duration) -> Duration {
    replay * ANSWER_REPLAYS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_solve_gets_what_is_left_less_the_reserve_and_never_less_than_zero() {
        let second = Duration::from_secs(1);
        let clock = Clock::since(Instant::now() - 3 * second, Some(10 * second));
        let left = clock.solve_limit(2 * second).unwrap();
        assert!(left <= 5 * second && left > 4 * second, "{left:?}");
        assert_eq!(clock.solve_limit(8 * second), Some(Duration::ZERO));
        let late = Clock::since(Instant::now() - 3 * second, Some(second));
        assert_eq!(late.solve_limit(Duration::ZERO), Some(Duration::ZERO));
        assert_eq!(Clock::start(None).solve_limit(second), None);
        assert_eq!(Clock::start(None).deadline(), None);
        assert_eq!(Clock::start(None).judge_by(), None);
        assert_eq!(
            clock.judge_by(),
            clock.deadline().map(|d| d + JUDGE_GRACE),
            "the judge ends half a second past the deadline"
        );
    }
}
