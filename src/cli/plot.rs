//! `remat plot {timeline|stages|tradeoff}`: an SVG picture written atomically to
//! `--output`, through `crate::plot` as the service draws it: the request checked by
//! `plot::request`, then a timeline or stage picture drawn from `--schedule` (a schedule
//! file or a `remat solve` result) or from a solve run on the spot at `--budget`, or a
//! trade-off sweep run with a progress bar.

use super::args::PlotArgs;
use super::solve::solve_with_progress;
use super::{bad, load, read_schedule_file, solve_options, write_file, CliError};
use crate::budget::human_bytes;
use crate::graph::Graph;
use crate::plot::request::{PlotInput, PlotInputError, PlotRequest};
use crate::plot::{self, input, sweep, Kind};
use indicatif::{ProgressBar, ProgressStyle};

/// Draws and writes the picture; exit code 1 when a solve on the spot finds no schedule.
pub(super) fn run(args: &PlotArgs) -> Result<i32, CliError> {
    let inputs: Vec<&std::path::Path> = std::iter::once(args.graph.graph.as_path())
        .chain(args.schedule.as_deref())
        .collect();
    super::output::check_output(&args.output, &inputs)?;
    refuse_misplaced(args)?;
    let g = load(&args.graph)?;
    let options = solve_options(&args.solver_flags, args.time_limit, 1)?;
    let schedule = (args.schedule.as_deref())
        .filter(|_| args.kind != Kind::Tradeoff)
        .map(read_schedule_file)
        .transpose()?;
    let input = PlotInput {
        kind: args.kind,
        schedule: schedule.as_deref(),
        budget: args.budget.as_deref().map(str::parse).transpose()?,
        solvers: (!args.solvers.is_empty()).then(|| args.solvers.clone()),
        budgets: (!args.budgets.is_empty())
            .then(|| args.budgets.iter().map(|b| b.parse()).collect())
            .transpose()?,
        points: args.points,
    };
    let request = input.validate(&g, options.clone()).map_err(|e| match e {
        PlotInputError::Schedule(e) => schedule_error(args, e),
        e => bad(e),
    })?;
    let (drawn, source) = match request {
        PlotRequest::Tradeoff(request) => return write(args, &tradeoff(&g, &request)?),
        PlotRequest::Draw(drawn) => (drawn, schedule_name(args)),
        PlotRequest::Solve(budget) => {
            let solver = args.solver.as_deref().unwrap_or("auto");
            let result = solve_with_progress(&g, budget, solver, options)?;
            match input::from_result(&g, &result) {
                Ok(drawn) => (drawn, String::new()),
                Err(e) => {
                    crate::shell::to_stderr(format_args!(
                        "error: {}",
                        super::printable(&e.to_string())
                    ));
                    return Ok(1);
                }
            }
        }
    };
    let svg = plot::draw(args.kind, &g, &drawn, &source).map_err(|e| schedule_error(args, e))?;
    write(args, &svg)
}

/// Refuses a flag the picture does not use (it was silently ignored): a trade-off sweeps
/// budgets with its solvers, the other pictures draw one schedule.
fn refuse_misplaced(args: &PlotArgs) -> Result<(), CliError> {
    let tradeoff = args.kind == Kind::Tradeoff;
    let given = if tradeoff {
        [
            ("--schedule", args.schedule.is_some()),
            ("--budget", args.budget.is_some()),
            ("--solver", args.solver.is_some()),
        ]
    } else {
        [
            ("--solvers", !args.solvers.is_empty()),
            ("--points", args.points.is_some()),
            ("--budgets", !args.budgets.is_empty()),
        ]
    };
    match given.iter().find(|(_, given)| *given) {
        Some((flag, _)) => Err(bad(format!(
            "{flag} does not apply to a {} picture ({})",
            args.kind.as_str(),
            if tradeoff {
                "a trade-off sweeps --budgets or --points with --solvers"
            } else {
                "it draws one schedule: --schedule, or a solve at --budget with --solver"
            }
        ))),
        None => Ok(()),
    }
}

/// The `--schedule` file's name, or nothing.
fn schedule_name(args: &PlotArgs) -> String {
    args.schedule
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// A schedule that cannot be drawn, named by its file.
fn schedule_error(args: &PlotArgs, e: impl std::fmt::Display) -> CliError {
    match &args.schedule {
        Some(path) => bad(format!("{}: {e}", path.display())),
        None => bad(e),
    }
}

/// Writes the picture to `--output`.
fn write(args: &PlotArgs, svg: &str) -> Result<i32, CliError> {
    write_file(&args.output, svg.as_bytes())?;
    crate::shell::to_stderr(format_args!(
        "wrote {}",
        super::printable(&args.output.display().to_string())
    ));
    Ok(0)
}

/// The trade-off sweep with a progress bar on stderr, and its picture.
fn tradeoff(g: &Graph, request: &sweep::Request) -> Result<String, CliError> {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}")
            .expect("valid template"),
    );
    let unit = g.cost_unit().unwrap_or("");
    let result = sweep::run(g, request, &|done, total, p| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        let cost = p.cost.map_or(p.status.to_string(), |c| {
            format!("{} {unit}", plot::svg::short(c))
        });
        bar.set_message(format!("{} at {}: {cost}", p.solver, human_bytes(p.budget)));
    });
    bar.finish_and_clear();
    let sweep = result.map_err(bad)?;
    Ok(plot::tradeoff::render(g, &sweep))
}
