//! `dtr-ahead`: DTR (Kirisame, Lyubomirsky, Haan, Brennan, He, Roesch, Chen, Tatlock,
//! "Dynamic Tensor Rematerialization", ICLR 2021) run ahead of time with what a runtime
//! cannot know: when each tensor is read next. Belady's rule for a cache ("A study of
//! replacement algorithms for a virtual-storage computer", IBM Systems Journal 1966)
//! evicts the page used furthest in the future; here that distance replaces DTR's
//! staleness, its online estimate:
//!
//! ```text
//! h(t) = (c_0(t) + Σ_{t' ∈ e*(t)} c_0(t')) / (m(t) · d(t)^β)
//! ```
//!
//! with `c_0`, `m` and the upstream evicted neighbourhood `e*` as in [`super::dtr`], `τ`
//! the op whose first computation is being run and `next(t)` the first consumer of `t`
//! in solver order not yet computed. The distance `d(t)` is counted in ops,
//! `next(t) − τ + 1`, or in cost, `Σ_{τ ≤ u < next(t)} c_u + ε` (`ε` DTR's thousandth of the
//! mean op cost). A tensor the backward pass reads only at its far end (the encoder's
//! side of a U-Net's skip connection, a ResNet's stem) goes first, one read by the next
//! few ops stays, and among equals the one cheapest to bring back per byte goes.
//!
//! A tensor is also read when an evicted descendant is rematerialised from it, which a
//! direct consumer does not show (a block's input, evicted after its forward, is needed
//! again as soon as the block's backward recomputes the block). So a rule may take
//! `next(t)` as the least next use over `t` and its evicted descendants reachable through
//! evicted tensors (the downstream half of the paper's `e*`, at most [`dtr::NEIGHBOURHOOD`]
//! of them): a lower estimate of the next read, never later than the direct one.
//!
//! The rules are the two measures with `β = 1` and `β = 1/2` ([`RULES`]), each with the
//! direct and with the downstream `next(t)`; each is one run of DTR's engine, and the
//! answer is the cheapest schedule the simulator puts within the budget (ties: the first
//! rule).
//!
//! `auto` runs the rules twice more guided by a relaxation ([`solve_guided`]). Take `S_v`, the
//! share of `v` that the stage-cut bound's LP keeps resident at its cut, the first computation
//! of a node `ℓ` (`crate::solve::exact::checkmate`'s `stage_cut`; 1 for the values that are
//! not ancestors of `ℓ`). The LP prices a dropped value with whatever its recomputation needs,
//! which `h`'s neighbourhood, cut at the resident tensors of the moment, does not see. The two
//! guides:
//!
//! * **Weigh.** `h(t)` is multiplied by `1 + S_t` at every stage. A value the relaxation keeps
//!   goes as if it were twice as dear to bring back; one it drops goes at its own price.
//! * **Retain.** Up to `ℓ`'s first computation `h(t)` is multiplied by `1 + S_t`. Also, an
//!   ancestor `v` of `ℓ` with `S_v ≥ 1/2` is not freed when the solver order reads it no more:
//!   it stays until an eviction takes it. DTR frees such a value at once, yet the relaxation
//!   keeps it for what it makes cheap. On a transformer that is a matmul's output, read by the
//!   cheap ops whose large outputs the backward pass reads: dropped at the loss, those outputs
//!   come back from it at their own small cost.
//!
//! `auto` also runs the rules under *negotiated* weights ([`negotiate`]), the history
//! cost of PathFinder's negotiated congestion (McMurchie, Ebeling, "PathFinder: a
//! negotiation-based performance-driven router for FPGAs", FPGA 1995) with recomputation in
//! place of an overused wire. One schedule does not see what an eviction costs later: a
//! value evicted at the peak comes back, and so do the values it needs, at every later
//! read. So each rule runs again and again: for every computation of a value `v` after its
//! first in the last round's schedule, its weight `w_v` (the factor of `h(v)`, 1 at first)
//! is multiplied by `1 + η·u`, `u` drawn uniformly from `[0, 1)` (the seed's stream: the same
//! schedules every run). A value recomputed round after round becomes dearer to evict until
//! the rule evicts another instead. A run that finds no schedule starts again from the
//! weights of the rule's cheapest schedule, each one multiplied so; a rule that finds none
//! at its first run is not negotiated. The weights start at 1 or at one of the two guides
//! above ([`Start`]; retain's held values stay held, and its weights count at every
//! stage). On ResNet-50's training graph at batch 32 a tenth of the way from the minimum
//! budget to the peak, every plain rule computes the stem's convolution and those of the
//! first stage three to five times each; the negotiation lowers the cost from +17.3% to
//! +14.9% there.
//!
//! Last, `auto` *climbs* from the cheapest negotiated schedule of its starts ([`climb`]): a
//! local search over the weights of that schedule's rule, first improvement. A step multiplies
//! one weight `w_v` by 4 or divides it by 4, `v` half the time a value the current schedule
//! computes more than once and otherwise any node; the new weights stay where the rule's
//! schedule under them is not dearer (so the search moves along plateaus too). The negotiation
//! only raises weights, those of what a round recomputed; the climb also lowers them (a value
//! held that would better be evicted and brought back) and judges each change by the whole
//! schedule's cost. Its answer is never dearer than the schedule it starts from.
//!
//! Scope: a heuristic, no optimality claim; eight runs of DTR's engine (per guide; per
//! negotiation round), one per step of the climb, each with its limits (the caller's `stop`
//! polled, cascades given up), so on graphs where DTR gives up at a budget every rule may too.

use super::dtr;
use super::walk::Walk;
use crate::graph::Graph;
use crate::schedule::{simulate_polled, Event, Schedule};
use crate::solve::{
    internal, replayed_within_budget, Footprint, Instance, Outcome, Scope, SolveError,
    SolveOptions, Solver, SolverInfo, Stop, Stopped,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub struct DtrAhead;

/// How the distance to the next use is counted.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Measure {
    /// Ops in solver order.
    Ops,
    /// The cost of the ops in between.
    Cost,
}

/// The distances tried, each with and without the evicted descendants, in order: the
/// measure of `d(t)` and its exponent `β`.
const RULES: [(Measure, Beta); 4] = [
    (Measure::Ops, Beta::One),
    (Measure::Ops, Beta::Half),
    (Measure::Cost, Beta::One),
    (Measure::Cost, Beta::Half),
];

/// The exponent `β` of the distance.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Beta {
    /// `β = 1`.
    One,
    /// `β = 1/2`.
    Half,
}

impl Beta {
    /// `d^β`: `d`, or its square root, which IEEE 754 rounds correctly (so on every machine
    /// the same, where a libm's `pow` need not be).
    fn of(self, d: f64) -> f64 {
        match self {
            Beta::One => d,
            Beta::Half => d.sqrt(),
        }
    }
}

/// `η`, the most a negotiation round raises the weight of a value it recomputed
/// ([`negotiate`]).
const HISTORY_STEP: f64 = 0.1;

/// The negotiation's work per rule when the caller sets no work limit, in rounds of
/// [`ROUND_SCORES`] eviction scores ([`negotiate`]).
pub(crate) const NEGOTIATION_ROUNDS: u64 = 160;

/// [`climb`]'s work when the caller sets no work limit, in runs counted as negotiation rounds
/// (of [`ROUND_SCORES`] eviction scores).
pub(crate) const CLIMB_ROUNDS: u64 = 3_000;

/// The factor one step of [`climb`] multiplies a weight by, or divides it by.
const CLIMB_STEP: f64 = 4.0;

/// The eviction scores of one negotiation round: a run of DTR-ahead computes 4,000 to 9,000
/// on the 300- to 900-node exported graphs at a tenth of the span, so there each run is one
/// round; one that computes more counts as that many scores (on a 1,000-node random layered
/// graph, about eight rounds), one that finds no schedule as one round.
const ROUND_SCORES: u64 = 10_000;

/// One eviction rule: the distance `d(t)^β` that divides `h`, under a guide.
pub(crate) struct Lookahead<'a> {
    measure: Measure,
    exponent: Beta,
    /// Whether `next(t)` also counts the next use of `t`'s evicted descendants.
    downstream: bool,
    /// `prefix[v]`: `Σ_{u < v} c_u`, in solver order.
    prefix: Vec<f64>,
    /// `ε` ([`dtr::unit`]), so that a distance in cost is never zero.
    unit: f64,
    /// The relaxation's guide, under [`solve_guided`].
    guide: &'a Guide,
}

/// How a relaxation's keep shares `S_v` steer the eviction rule ([`solve_guided`]); the
/// default guides nothing.
#[derive(Clone, Default)]
struct Guide {
    /// `1 + S_v` for each node; empty: 1 everywhere.
    weight: Vec<f64>,
    /// The last stage whose evictions are weighted.
    until: usize,
    /// The values not freed when the solver order reads them no more; empty: none.
    retain: Vec<bool>,
}

impl Guide {
    /// Weigh: `h(t) · (1 + S_t)` at every stage.
    fn weigh(keep: &[f64]) -> Guide {
        Guide {
            weight: keep.iter().map(|s| 1.0 + s.clamp(0.0, 1.0)).collect(),
            until: usize::MAX,
            retain: Vec::new(),
        }
    }

    /// Retain: `h(t) · (1 + S_t)` up to the first computation of `cut`, whose strict
    /// ancestors with `S_v ≥ 1/2`, its inputs excepted, stay until evicted.
    fn retain(graph: &Graph, keep: &[f64], cut: usize) -> Guide {
        let mut retain = vec![false; graph.len()];
        let mut stack: Vec<usize> = graph.preds(cut).to_vec();
        let mut seen = vec![false; graph.len()];
        while let Some(v) = stack.pop() {
            if std::mem::replace(&mut seen[v], true) {
                continue;
            }
            retain[v] = keep.get(v).is_some_and(|&s| s >= 0.5);
            stack.extend_from_slice(graph.preds(v));
        }
        for &u in graph.preds(cut) {
            retain[u] = false;
        }
        Guide {
            until: cut,
            retain,
            ..Guide::weigh(keep)
        }
    }
}

impl<'a> Lookahead<'a> {
    fn new(
        graph: &Graph,
        (measure, exponent, downstream): (Measure, Beta, bool),
        guide: &'a Guide,
    ) -> Lookahead<'a> {
        let mut prefix = Vec::with_capacity(graph.len() + 1);
        prefix.push(0.0);
        for v in 0..graph.len() {
            prefix.push(prefix[v] + graph.cost(v));
        }
        Lookahead {
            measure,
            exponent,
            downstream,
            prefix,
            unit: dtr::unit(graph),
            guide,
        }
    }

    /// The factor of `h(t)` while op `stage` is being run: `1 + S_t` where a guide weighs
    /// that stage, else 1.
    pub(crate) fn weight(&self, t: usize, stage: usize) -> f64 {
        if stage > self.guide.until {
            return 1.0;
        }
        self.guide.weight.get(t).copied().unwrap_or(1.0)
    }

    /// Whether `t` stays resident when the solver order reads it no more.
    pub(crate) fn retains(&self, t: usize) -> bool {
        self.guide.retain.get(t).copied().unwrap_or(false)
    }

    /// `d(t)^β` while op `stage` is being run, `computed` flagging the ops computed at
    /// least once (all those before `stage`) and `resident` those in memory; `walk` is the
    /// run's walk through the evicted descendants.
    pub(crate) fn distance(
        &self,
        graph: &Graph,
        t: usize,
        stage: usize,
        computed: &[bool],
        resident: &[bool],
        walk: &mut Walk,
    ) -> f64 {
        let next_use = |v: usize| {
            graph
                .succs(v)
                .iter()
                .copied()
                .filter(|&u| !computed[u])
                .min()
                .unwrap_or(graph.len())
        };
        let mut next = next_use(t);
        if self.downstream {
            walk.start(graph.succs(t));
            while let Some(u) = walk.next() {
                if resident[u] || !computed[u] || !walk.see(u) {
                    continue;
                }
                next = next.min(next_use(u));
                if walk.seen() == dtr::NEIGHBOURHOOD {
                    break;
                }
                walk.extend(graph.succs(u));
            }
        }
        let next = next.max(stage);
        let d = match self.measure {
            Measure::Ops => (next - stage + 1) as f64,
            Measure::Cost => self.prefix[next] - self.prefix[stage] + self.unit,
        };
        self.exponent.of(d)
    }
}

impl Solver for DtrAhead {
    fn info(&self) -> SolverInfo {
        SolverInfo {
            name: "dtr-ahead",
            description: "DTR run ahead of time with the future known: the tensor of least \
                          rematerialisation cost / (size x distance to its next use) evicted \
                          (Belady's rule weighted by DTR's cost), eight distance rules, the \
                          cheapest schedule kept.",
            scope: Scope::Heuristic,
            accepts: "any graph",
        }
    }

    fn footprint(&self, instance: &Instance) -> Footprint {
        dtr::Dtr.footprint(instance)
    }

    fn solve(&self, instance: &Instance, options: &SolveOptions) -> Result<Outcome, SolveError> {
        run_rules(instance, options, &[Guide::default()], "")
    }
}

/// `dtr-ahead` guided by `keep`, the share of each node that the stage-cut bound's LP keeps
/// resident at its cut, the first computation of `cut` (module docs): every rule under each
/// guide, weigh and retain, the cheapest schedule.
pub(crate) fn solve_guided(
    instance: &Instance,
    options: &SolveOptions,
    keep: &[f64],
    cut: usize,
) -> Result<Outcome, SolveError> {
    let guides = [Guide::weigh(keep), Guide::retain(instance.graph, keep, cut)];
    run_rules(instance, options, &guides, " guided by the stage-cut LP")
}

/// One run of DTR's engine per rule and guide; the cheapest schedule the simulator puts
/// within the budget (`how` the runs were guided, for the message when none does).
fn run_rules(
    instance: &Instance,
    options: &SolveOptions,
    guides: &[Guide],
    how: &str,
) -> Result<Outcome, SolveError> {
    let stop = Stop::start(options);
    let mut best = Cheapest::default();
    'runs: for guide in guides {
        for rule in rules() {
            match run_rule(instance, &stop, rule, guide)? {
                Run::Done(Some((cost, schedule)), _) => best.offer(cost, schedule),
                Run::Done(None, _) => {}
                Run::Stopped(stopped) if best.0.is_none() => {
                    return stopped.outcome("dtr-ahead", "while running DTR's rules")
                }
                Run::Stopped(_) => break 'runs,
            }
        }
    }
    Ok(best.outcome(instance, guides.len() * 2 * RULES.len(), how))
}

/// The weights a negotiation starts from ([`negotiate`]).
#[derive(Clone, Copy)]
pub(crate) enum Start<'a> {
    /// 1 everywhere: the plain rules.
    Plain,
    /// Weigh's `1 + S_v` from the stage-cut LP's keep shares ([`solve_guided`]).
    Weigh(&'a [f64]),
    /// Retain's weights and held values from the keep shares and the cut's node; the
    /// negotiated weights count at every stage.
    Retain(&'a [f64], usize),
}

impl Start<'_> {
    fn guide(self, graph: &Graph) -> Guide {
        let guide = match self {
            Start::Plain => Guide {
                weight: vec![1.0; graph.len()],
                ..Guide::default()
            },
            Start::Weigh(keep) => Guide::weigh(keep),
            Start::Retain(keep, cut) => Guide::retain(graph, keep, cut),
        };
        Guide {
            until: usize::MAX,
            ..guide
        }
    }
}

/// What a negotiation leaves for [`climb`]: the rule and the weights (with the start's held
/// values) of its cheapest schedule, that schedule and its cost.
pub(crate) struct Negotiated {
    rule: (Measure, Beta, bool),
    guide: Guide,
    cost: f64,
    schedule: Schedule,
}

impl Negotiated {
    /// The cost of the cheapest schedule of the negotiation.
    pub(crate) fn cost(&self) -> f64 {
        self.cost
    }
}

/// `dtr-ahead` under negotiated weights (module docs) from `start`: each rule for `work`
/// rounds (the caller's work limit, else [`NEGOTIATION_ROUNDS`]) of [`ROUND_SCORES`] eviction
/// scores (a run that computes more counts for more, in proportion), a value weighed
/// `1 + η·u` times more in the next round for each computation after its first in this one;
/// the cheapest schedule of all rounds, and what [`climb`] starts from (`None` when no round
/// found a schedule).
pub(crate) fn negotiate(
    instance: &Instance,
    options: &SolveOptions,
    start: Start,
) -> Result<(Outcome, Option<Negotiated>), SolveError> {
    let graph = instance.graph;
    let stop = Stop::start(options);
    let work = options.work_limit.unwrap_or(NEGOTIATION_ROUNDS);
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut cheapest: Option<Negotiated> = None;
    let mut runs = 0;
    'rules: for rule in rules() {
        let mut guide = start.guide(graph);
        let mut rule_best = (f64::INFINITY, guide.weight.clone());
        let mut spent = 0;
        while spent < work.saturating_mul(ROUND_SCORES) {
            runs += 1;
            let (found, scored) = match run_rule(instance, &stop, rule, &guide)? {
                Run::Done(found, scored) => (found, scored),
                Run::Stopped(stopped) if cheapest.is_none() => {
                    return stopped
                        .outcome("dtr-ahead", "while negotiating DTR's weights")
                        .map(|outcome| (outcome, None))
                }
                Run::Stopped(_) => break 'rules,
            };
            spent += scored.max(ROUND_SCORES);
            let (cost, schedule) = match found {
                Some(found) => found,
                // Nothing to negotiate from: the rule found no schedule from its start.
                None if rule_best.0.is_infinite() => continue 'rules,
                None => {
                    guide.weight = rule_best.1.iter().map(|w| w * raise(&mut rng)).collect();
                    continue;
                }
            };
            if cost <= rule_best.0 {
                rule_best = (cost, guide.weight.clone());
            }
            if cheapest.as_ref().is_none_or(|c| cost < c.cost) {
                cheapest = Some(Negotiated {
                    rule,
                    guide: guide.clone(),
                    cost,
                    schedule: schedule.clone(),
                });
            }
            for v in recomputations(graph, &schedule) {
                guide.weight[v] *= raise(&mut rng);
            }
        }
    }
    let outcome = match &cheapest {
        // Replayed within the budget by `run_rule`.
        Some(c) => replayed_within_budget("dtr-ahead", c.schedule.clone(), None),
        None => no_schedule(instance, runs, " under negotiated weights"),
    };
    Ok((outcome, cheapest))
}

/// A local search from a negotiation's cheapest schedule (module docs): `work` runs (the
/// caller's work limit, else [`CLIMB_ROUNDS`]; counted as negotiation rounds) of its rule,
/// each with one weight multiplied or divided by [`CLIMB_STEP`] (half the time the weight of a
/// value the current schedule computes more than once, else any), the new weights kept where
/// the schedule under them is not dearer; the cheapest schedule, never dearer than `from`'s.
pub(crate) fn climb(
    instance: &Instance,
    options: &SolveOptions,
    from: &Negotiated,
) -> Result<Outcome, SolveError> {
    let graph = instance.graph;
    let stop = Stop::start(options);
    let work = options.work_limit.unwrap_or(CLIMB_ROUNDS);
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut guide = from.guide.clone();
    let (mut cost, mut schedule) = (from.cost, from.schedule.clone());
    let mut again = recomputed(graph, &schedule);
    let mut spent = 0;
    while spent < work.saturating_mul(ROUND_SCORES) {
        let v = if !again.is_empty() && rng.random::<bool>() {
            again[rng.random_range(0..again.len())]
        } else {
            rng.random_range(0..graph.len())
        };
        let was = guide.weight[v];
        guide.weight[v] *= if rng.random::<bool>() {
            CLIMB_STEP
        } else {
            1.0 / CLIMB_STEP
        };
        let (found, scored) = match run_rule(instance, &stop, from.rule, &guide)? {
            Run::Done(found, scored) => (found, scored),
            Run::Stopped(_) => break,
        };
        spent += scored.max(ROUND_SCORES);
        match found {
            Some((c, s)) if c <= cost => {
                again = recomputed(graph, &s);
                (cost, schedule) = (c, s);
            }
            _ => guide.weight[v] = was,
        }
    }
    // Replayed within the budget by `run_rule` (or the negotiation's, by it too).
    Ok(replayed_within_budget("dtr-ahead", schedule, None))
}

/// Each computation of a value after its first in `schedule`, in the schedule's order.
fn recomputations<'s>(graph: &Graph, schedule: &'s Schedule) -> impl Iterator<Item = usize> + 's {
    let mut computed = vec![false; graph.len()];
    schedule
        .events
        .iter()
        .filter_map(move |&event| match event {
            Event::Compute(v) if std::mem::replace(&mut computed[v], true) => Some(v),
            _ => None,
        })
}

/// The values `schedule` computes more than once, each once, in node order.
fn recomputed(graph: &Graph, schedule: &Schedule) -> Vec<usize> {
    let mut values: Vec<usize> = recomputations(graph, schedule).collect();
    values.sort_unstable();
    values.dedup();
    values
}

/// A negotiation round's factor of a weight: `1 + η·u`, `u` uniform in `[0, 1)`.
fn raise(rng: &mut ChaCha8Rng) -> f64 {
    1.0 + HISTORY_STEP * rng.random::<f64>()
}

/// The eight rules: each distance of [`RULES`], with the direct and with the downstream
/// `next(t)`.
fn rules() -> impl Iterator<Item = (Measure, Beta, bool)> {
    [false, true]
        .into_iter()
        .flat_map(|downstream| RULES.map(|(m, e)| (m, e, downstream)))
}

/// How one run of DTR's engine ended.
enum Run {
    /// Its schedule, replayed within the budget, and that schedule's cost (`None` when it
    /// found none or the replay overshot), and the eviction scores it computed (0 when DTR's
    /// engine gave up: its work is not counted).
    Done(Option<(f64, Schedule)>, u64),
    /// The caller's stop came first.
    Stopped(Stopped),
}

/// One run of DTR's engine under `rule` and `guide`, replayed by the simulator.
fn run_rule(
    instance: &Instance,
    stop: &Stop,
    rule: (Measure, Beta, bool),
    guide: &Guide,
) -> Result<Run, SolveError> {
    let graph = instance.graph;
    let ahead = Lookahead::new(graph, rule, guide);
    let (events, scored) = match dtr::run_ahead(graph, instance.budget, stop, &ahead) {
        Ok(Some(run)) => run,
        Ok(None) => return Ok(Run::Done(None, 0)),
        Err(stopped) => return Ok(Run::Stopped(stopped)),
    };
    let schedule = Schedule::new(events);
    let stats = match simulate_polled(graph, &schedule, || stop.poll()) {
        Ok(replayed) => replayed.map_err(|e| internal("dtr-ahead", e))?,
        Err(stopped) => return Ok(Run::Stopped(stopped)),
    };
    Ok(Run::Done(
        (stats.peak_memory <= instance.budget).then_some((stats.total_cost, schedule)),
        scored,
    ))
}

/// The cheapest schedule within the budget so far (ties: the first).
#[derive(Default)]
struct Cheapest(Option<(f64, Schedule)>);

impl Cheapest {
    fn offer(&mut self, cost: f64, schedule: Schedule) {
        if self.0.as_ref().is_none_or(|(c, _)| cost < *c) {
            self.0 = Some((cost, schedule));
        }
    }

    /// The answer after `runs` runs of DTR's engine, steered `how`.
    fn outcome(self, instance: &Instance, runs: usize, how: &str) -> Outcome {
        match self.0 {
            // Replayed within the budget by `run_rule`.
            Some((_, schedule)) => replayed_within_budget("dtr-ahead", schedule, None),
            None => no_schedule(instance, runs, how),
        }
    }
}

/// No run of `runs`, steered `how`, found a schedule within the budget.
fn no_schedule(instance: &Instance, runs: usize, how: &str) -> Outcome {
    Outcome::Infeasible {
        solver: "dtr-ahead",
        proven: None,
        reason: format!(
            "none of DTR's {runs} look-ahead runs{how} found a schedule within {} bytes \
             (its pinned inputs filled the budget or its rematerialisations cascaded)",
            instance.budget
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::generate::{random_dag, random_layered, DagShape};
    use crate::schedule::{checkpoint_all_peak, simulate};
    use crate::solve::exact::checkmate::stage_cut_bound;
    use crate::solve::solve;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// On random DAGs of up to 9 nodes, at every budget from the least feasible to the
    /// checkpoint-all peak: every schedule `run` gives passes the simulator within the budget
    /// and costs at least the exhaustive optimum.
    fn never_below_the_exhaustive_optimum(run: impl Fn(&Instance, u64) -> Outcome) {
        let mut found = 0;
        for seed in 0..300u64 {
            let n = 2 + (seed % 8) as usize;
            let graph = random_dag(&DagShape::dense(n), seed);
            let (min_budget, _) = graph.min_feasible_budget();
            let peak = checkpoint_all_peak(&graph);
            let step = ((peak - min_budget) / 12).max(1);
            for budget in (min_budget..=peak).step_by(step as usize) {
                let instance = Instance {
                    graph: &graph,
                    budget,
                };
                let Outcome::Plan(plan) = run(&instance, seed) else {
                    continue;
                };
                let stats = simulate(&graph, &plan.schedule).expect("a valid schedule");
                found += 1;
                assert!(stats.peak_memory <= budget, "seed {seed} @ {budget}");
                let optimum = solve(&instance, "exhaustive", &SolveOptions::default())
                    .unwrap()
                    .stats
                    .expect("a schedule fits, so the oracle finds one")
                    .total_cost;
                assert!(
                    stats.total_cost >= optimum - 1e-9 * optimum.abs().max(1.0),
                    "seed {seed} @ {budget}: {} < optimum {optimum}",
                    stats.total_cost
                );
            }
        }
        // At least the checkpoint-all peak of every graph (DTR gives up at many tight budgets).
        assert!(found >= 300, "only {found} cases got a schedule");
    }

    #[test]
    fn never_below_the_exhaustive_optimum_and_always_valid() {
        never_below_the_exhaustive_optimum(|instance, _| {
            DtrAhead.solve(instance, &SolveOptions::default()).unwrap()
        });
    }

    /// Guided by the stage-cut LP's keep shares and cut where the bound has one, else by
    /// shares and a cut drawn at random: whatever the guide, the schedules are valid and
    /// never below the optimum.
    #[test]
    fn guided_never_below_the_exhaustive_optimum_and_always_valid() {
        let options = SolveOptions::default();
        let retaining = std::cell::Cell::new(0);
        never_below_the_exhaustive_optimum(|instance, seed| {
            let (cut, keep) =
                match stage_cut_bound(instance.graph, instance.budget, &options).unwrap() {
                    Some(cut) => (cut.node, cut.keep),
                    None => {
                        let n = instance.graph.len();
                        let mut rng = ChaCha8Rng::seed_from_u64(seed);
                        (
                            rng.random_range(0..n),
                            (0..n).map(|_| rng.random()).collect(),
                        )
                    }
                };
            if Guide::retain(instance.graph, &keep, cut)
                .retain
                .contains(&true)
            {
                retaining.set(retaining.get() + 1);
            }
            solve_guided(instance, &options, &keep, cut).unwrap()
        });
        // Retain keeps a value past its last read in some of them (91 at this writing).
        assert!(
            retaining.get() >= 50,
            "retain kept a value in {} cases",
            retaining.get()
        );
    }

    /// Under negotiated weights (20 rounds a rule) the schedules are valid and never below
    /// the optimum, and the negotiation finds cheaper schedules than the plain rules.
    #[test]
    fn negotiated_never_below_the_exhaustive_optimum_and_always_valid() {
        let cheaper = std::cell::Cell::new(0);
        never_below_the_exhaustive_optimum(|instance, seed| {
            let options = SolveOptions {
                work_limit: Some(20),
                seed,
                ..SolveOptions::default()
            };
            let (negotiated, _) = negotiate(instance, &options, Start::Plain).unwrap();
            let plain = DtrAhead.solve(instance, &options).unwrap();
            if cost(instance, &negotiated) < cost(instance, &plain) {
                cheaper.set(cheaper.get() + 1);
            }
            negotiated
        });
        // The negotiation pays (cheaper in 9 cases at this writing).
        assert!(cheaper.get() >= 5, "cheaper in {} cases", cheaper.get());
    }

    /// A negotiation (20 rounds a rule, from weights of 1) and the climb from it (200 steps):
    /// the negotiation's schedule and the climb's, or `None` when the negotiation found none.
    fn negotiated_and_climbed(instance: &Instance, seed: u64) -> Option<(f64, Outcome)> {
        let options = SolveOptions {
            work_limit: Some(20),
            seed,
            ..SolveOptions::default()
        };
        let (negotiated, from) = negotiate(instance, &options, Start::Plain).unwrap();
        let from = from?;
        assert_eq!(cost(instance, &negotiated), from.cost);
        let steps = SolveOptions {
            work_limit: Some(200),
            ..options
        };
        Some((from.cost, climb(instance, &steps, &from).unwrap()))
    }

    /// Climbing from a negotiation, the schedules are valid, never below the optimum and
    /// never dearer than the negotiation's.
    #[test]
    fn climbed_never_below_the_exhaustive_optimum_nor_above_its_start() {
        never_below_the_exhaustive_optimum(|instance, seed| {
            match negotiated_and_climbed(instance, seed) {
                Some((start, climbed)) => {
                    assert!(cost(instance, &climbed) <= start, "seed {seed}");
                    climbed
                }
                None => DtrAhead.solve(instance, &SolveOptions::default()).unwrap(),
            }
        });
    }

    /// On Checkmate's random layered graphs of 41 nodes, a tenth to four tenths of the way
    /// from the minimum budget to the checkpoint-all peak, the climb's schedules fit (the
    /// simulator's replay) and are cheaper than the negotiation's in most cases (on the
    /// smaller graphs above the negotiation leaves it nothing).
    #[test]
    fn climbing_pays_on_random_layered_graphs() {
        let (mut cheaper, mut climbed) = (0, 0);
        for seed in 0..20u64 {
            let graph = random_layered(41, seed);
            let (min, _) = graph.min_feasible_budget();
            let peak = checkpoint_all_peak(&graph);
            for tenth in 1..=4 {
                let budget = min + (peak - min) * tenth / 10;
                let instance = Instance {
                    graph: &graph,
                    budget,
                };
                let Some((start, outcome)) = negotiated_and_climbed(&instance, seed) else {
                    continue;
                };
                let Outcome::Plan(plan) = &outcome else {
                    panic!("seed {seed} @ {budget}: the climb lost its start's schedule");
                };
                let stats = simulate(&graph, &plan.schedule).expect("a valid schedule");
                assert!(stats.peak_memory <= budget, "seed {seed} @ {budget}");
                assert!(stats.total_cost <= start, "seed {seed} @ {budget}");
                climbed += 1;
                cheaper += usize::from(stats.total_cost < start);
            }
        }
        // Cheaper in 44 of 68 at this writing, by 3.4% on average.
        assert!(
            cheaper * 2 > climbed,
            "cheaper in {cheaper} of {climbed} cases"
        );
    }

    /// The cost of `outcome`'s schedule as the simulator replays it; infinite without one.
    fn cost(instance: &Instance, outcome: &Outcome) -> f64 {
        match outcome {
            Outcome::Plan(plan) => {
                simulate(instance.graph, &plan.schedule)
                    .expect("a valid schedule")
                    .total_cost
            }
            _ => f64::INFINITY,
        }
    }

    /// With the whole checkpoint-all peak nothing is evicted: the cost is `Σ_v c_v`.
    #[test]
    fn at_the_checkpoint_all_peak_nothing_is_recomputed() {
        let graph = random_dag(&DagShape::dense(9), 7);
        let instance = Instance {
            graph: &graph,
            budget: checkpoint_all_peak(&graph),
        };
        let r = solve(&instance, "dtr-ahead", &SolveOptions::default()).unwrap();
        assert_eq!(r.stats.map(|s| s.total_cost), Some(graph.total_cost()));
    }
}
