//! `remat plot {timeline|stages|tradeoff}`: an SVG picture written atomically to
//! `--output`, through `crate::plot` as the service draws it. A timeline or stage picture
//! is drawn from `--schedule` (a schedule file or a `remat solve` result), or from a solve
//! run on the spot at `--budget`; a trade-off runs a budget sweep with a progress bar.

use super::args::GraphArg;
use super::solve::solve_with_progress;
use super::{load, resolve_budget, write_file, CliError};
use crate::budget::human_bytes;
use crate::front::OptionsInput;
use crate::graph::Graph;
use crate::plot::{self, input, sweep, Kind};
use crate::solve::SolveOptions;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

fn points(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(v) if (2..=sweep::MAX_POINTS).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected an integer from 2 to {}, got '{s}'",
            sweep::MAX_POINTS
        )),
    }
}

#[derive(clap::Args, Debug)]
pub(super) struct PlotArgs {
    /// The picture: timeline (memory after each event), stages (Checkmate's R and S) or
    /// tradeoff (cost against budget, one curve per solver).
    #[arg(value_parser = |s: &str| s.parse::<Kind>())]
    pub kind: Kind,
    #[command(flatten)]
    pub graph: GraphArg,
    /// The SVG file to write (atomically).
    #[arg(short, long)]
    pub output: PathBuf,
    /// timeline, stages: a schedule ({"events": [...]}, a bare event list) or a `remat
    /// solve` result to draw. Without it the graph is solved at --budget.
    #[arg(long)]
    pub schedule: Option<PathBuf>,
    /// The budget to solve at, or to draw beside a schedule file (a result's own budget
    /// otherwise): bytes, a size (6GiB) or a share of the checkpoint-all peak (80%).
    #[arg(short, long)]
    pub budget: Option<String>,
    /// timeline, stages: the solver of a solve on the spot.
    #[arg(short, long, default_value = "auto")]
    pub solver: String,
    /// tradeoff: the solvers swept, comma-separated (see `remat solvers`).
    #[arg(long, value_delimiter = ',', default_values_t = sweep::DEFAULT_SOLVERS.map(String::from))]
    pub solvers: Vec<String>,
    /// tradeoff: the number of budgets, evenly spaced from the minimum feasible budget to
    /// the checkpoint-all peak (2 to 200).
    #[arg(long, default_value_t = sweep::DEFAULT_POINTS, value_parser = points)]
    pub points: usize,
    /// tradeoff: the budgets to sweep instead (comma-separated; bytes, sizes or shares).
    #[arg(long, value_delimiter = ',')]
    pub budgets: Vec<String>,
    /// Time limit of each solve, in seconds (a sweep's default: 5 per point).
    #[arg(long, allow_negative_numbers = true)]
    pub time_limit: Option<f64>,
    /// Seed for randomised solvers.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Draws and writes the picture; exit code 1 when a solve on the spot finds no schedule.
pub(super) fn run(args: &PlotArgs) -> Result<i32, CliError> {
    let g = load(&args.graph)?;
    let mut options = OptionsInput {
        time_limit_s: args.time_limit,
        mip_gap: None,
        seed: args.seed,
        threads: None,
        memory_limit: Some(crate::front::solve_memory_limit(None, 1)),
        effort: None,
    }
    .validate()?;
    let svg = match args.kind {
        Kind::Tradeoff => {
            options.time_limit = options.time_limit.or(Some(sweep::DEFAULT_TIME_LIMIT));
            tradeoff(&g, args, options)?
        }
        kind => match picture(&g, args, kind, options)? {
            Some(svg) => svg,
            None => return Ok(1),
        },
    };
    write_file(&args.output, svg.as_bytes())?;
    eprintln!("wrote {}", args.output.display());
    Ok(0)
}

/// A timeline or stage picture, of `--schedule` or of a solve at `--budget`; `None` when
/// the solve found no schedule (the reason printed).
fn picture(
    g: &Graph,
    args: &PlotArgs,
    kind: Kind,
    options: SolveOptions,
) -> Result<Option<String>, CliError> {
    let budget = args
        .budget
        .as_deref()
        .map(|b| resolve_budget(b, g))
        .transpose()?;
    let (drawn, source) = match &args.schedule {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| super::bad(format!("cannot read {}: {e}", path.display())))?;
            serde_json::from_str::<serde::de::IgnoredAny>(&text)
                .map_err(|e| super::bad(format!("{}: not JSON: {e}", path.display())))?;
            let mut drawn = input::read(g, &text)
                .map_err(|e| super::bad(format!("{}: {e}", path.display())))?;
            drawn.budget = budget.or(drawn.budget);
            (drawn, path.display().to_string())
        }
        None => {
            let budget = budget
                .ok_or_else(|| super::bad("give --schedule, or --budget to solve on the spot"))?;
            let result = solve_with_progress(g, budget, &args.solver, options)?;
            match input::from_result(g, &result) {
                Ok(drawn) => (drawn, String::new()),
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(None);
                }
            }
        }
    };
    plot::draw(kind, g, &drawn, &source)
        .map(Some)
        .map_err(super::bad)
}

/// The trade-off sweep with a progress bar on stderr, and its picture.
fn tradeoff(g: &Graph, args: &PlotArgs, options: SolveOptions) -> Result<String, CliError> {
    let budgets = if args.budgets.is_empty() {
        sweep::default_budgets(g, args.points)
    } else {
        args.budgets
            .iter()
            .map(|b| resolve_budget(b, g))
            .collect::<Result<_, _>>()?
    };
    let request = sweep::Request {
        solvers: args.solvers.clone(),
        budgets,
        options,
    };
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}")
            .expect("valid template"),
    );
    let unit = g.cost_unit().unwrap_or("");
    let result = sweep::run(g, &request, &|done, total, p| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        let cost = p.cost.map_or(p.status.to_string(), |c| {
            format!("{} {unit}", plot::svg::short(c))
        });
        bar.set_message(format!("{} at {}: {cost}", p.solver, human_bytes(p.budget)));
    });
    bar.finish_and_clear();
    let sweep = result.map_err(super::bad)?;
    Ok(plot::tradeoff::render(g, &sweep))
}
