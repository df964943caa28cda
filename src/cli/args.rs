//! The command line's arguments: every command, flag and default, as clap reads them.
//! Nothing here runs a command; `super::execute` dispatches to one file per command.
//!
//! Every numeric flag has a stated range; a value outside it exits 2 naming the flag and
//! the range (clap's `value_parser` ranges here, or `crate::front::options` for the
//! solver options the service shares: `--time-limit`, `--mip-gap`, `--threads`). Sizes of
//! generated graphs and tables are capped (`MAX_GEN_NODES`, `MAX_TIERS_N`) so that a typo
//! cannot ask for more memory than the machine has.

use crate::front::options::MAX_THREADS;
use crate::graph::generate::{TRANSFORMER_NODES_OUTSIDE, TRANSFORMER_NODES_PER_LAYER};
use crate::graph::load::Format;
use std::path::PathBuf;

/// The most nodes `remat gen` writes (Checkmate's linear graph has `2 * layers + 1`).
pub(super) const MAX_GEN_NODES: usize = 1_000_000;

/// The largest snapshot count, interval and sequence length of `remat bench-tiers` (the
/// simulated check builds a linear graph of `n` steps).
pub(super) const MAX_TIERS_N: u64 = 1_000_000;

/// The most solves `remat batch` runs at once.
const MAX_JOBS: usize = 1024;

/// The default sequence lengths: 10 .. 10^4 in 1-2-5 steps.
pub const DEFAULT_LENGTHS: &[u64] = &[10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000];

fn threads(s: &str) -> Result<u32, String> {
    in_range(s, 1, MAX_THREADS as u64).map(|t| t as u32)
}

fn layers(s: &str) -> Result<usize, String> {
    in_range(s, 1, (MAX_GEN_NODES as u64 - 1) / 2).map(|n| n as usize)
}

/// A transformer's layers: `31 L + 8` nodes within `MAX_GEN_NODES`.
fn transformer_layers(s: &str) -> Result<usize, String> {
    let most = (MAX_GEN_NODES - TRANSFORMER_NODES_OUTSIDE) / TRANSFORMER_NODES_PER_LAYER;
    in_range(s, 1, most as u64).map(|n| n as usize)
}

fn gen_nodes(s: &str) -> Result<usize, String> {
    in_range(s, 3, MAX_GEN_NODES as u64).map(|n| n as usize)
}

fn branch(s: &str) -> Result<usize, String> {
    in_range(s, 1, (MAX_GEN_NODES as u64 - 1) / 2).map(|n| n as usize)
}

fn tiers_n(s: &str) -> Result<u64, String> {
    in_range(s, 1, MAX_TIERS_N)
}

fn jobs(s: &str) -> Result<usize, String> {
    in_range(s, 1, MAX_JOBS as u64).map(|n| n as usize)
}

/// An integer in `lo..=hi`; the message states the range.
fn in_range(s: &str, lo: u64, hi: u64) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(format!("expected an integer from {lo} to {hi}, got '{s}'")),
    }
}

#[derive(clap::Parser, Debug)]
#[command(
    name = "remat",
    version,
    about = "Optimal rematerialization (activation checkpointing) schedules"
)]
pub struct Cli {
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(clap::Subcommand, Debug)]
pub(super) enum Command {
    /// Size, cost and memory bounds of a graph.
    Inspect(InspectArgs),
    /// Compute a schedule within a memory budget.
    Solve(SolveArgs),
    /// Check a schedule file (events, or a result JSON) against a graph.
    Simulate(SimulateArgs),
    /// Write a generated training graph (native JSON).
    Gen {
        #[command(subcommand)]
        kind: GenKind,
    },
    /// Run a solver over graphs and budget fractions and print a table.
    Bench(BenchArgs),
    /// Recompute factors of Revolve and two-level checkpointing against the sequence
    /// length (the table behind Kukreja et al.'s Figure 3).
    BenchTiers(BenchTiersArgs),
    /// List the solvers.
    Solvers {
        #[arg(long)]
        json: bool,
    },
    /// Serve the HTTP/JSON API (see api/openapi.yaml).
    Serve(crate::service::Config),
    /// Solve many graphs at several budgets, one result file each, with summaries.
    Batch(BatchArgs),
    /// The largest batch whose schedule fits a memory under an overhead cap.
    MaxBatch(MaxBatchArgs),
    /// Draw SVG pictures: the memory timeline, the stage matrices, the budget trade-off.
    Plot(PlotArgs),
    /// Check that a `remat serve` answers (a container's health check): exit 0 on a 2xx
    /// answer, 1 otherwise.
    Probe(ProbeArgs),
}

#[derive(clap::Args, Debug)]
pub(super) struct GraphArg {
    /// A training graph: native JSON, networkx node-link JSON or a chain (fw, bw, x, xbar).
    pub graph: PathBuf,
    /// Input format: auto, native, node-link or chain.
    #[arg(long, default_value = "auto", value_parser = parse_format)]
    pub format: Format,
    /// A slow storage tier as JSON, replacing the graph's `storage` (e.g. '{"transfer_time": 8}').
    #[arg(long)]
    pub storage: Option<String>,
}

#[derive(clap::Args, Debug)]
pub(super) struct InspectArgs {
    #[command(flatten)]
    pub graph: GraphArg,
    /// Budget for the storage-tier verdict (default: the least two-level can run in).
    #[arg(short, long)]
    pub budget: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub(super) struct SolveArgs {
    #[command(flatten)]
    pub graph: GraphArg,
    /// Bytes (17179869184), a size (6GiB, 512MB, "1.5 GB") or a share of the checkpoint-all peak (80%).
    #[arg(short, long)]
    pub budget: String,
    /// Solver name (see `remat solvers`).
    #[arg(short, long, default_value = "auto")]
    pub solver: String,
    /// Write the result JSON to this file (atomically).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Print the result JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Time limit in seconds.
    #[arg(long, allow_negative_numbers = true)]
    pub time_limit: Option<f64>,
    #[command(flatten)]
    pub solver_flags: SolverFlags,
}

/// The solver options every command that solves takes (`super::solve_options` builds them
/// into `SolveOptions`, with one memory policy); each command states its own time limit.
#[derive(clap::Args, Debug, Default)]
pub(super) struct SolverFlags {
    /// Relative MIP gap at which the MILP may stop.
    #[arg(long, allow_negative_numbers = true)]
    pub mip_gap: Option<f64>,
    /// Seed for randomised steps.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Threads for the MILP solver (1 to 1024). `auto` runs HiGHS on one thread unless
    /// set.
    #[arg(long, value_parser = threads)]
    pub threads: Option<u32>,
    /// `auto`'s effort: a multiple of its default work (1; deterministic: the same
    /// schedule on any machine, the time limit only a safety cap), or `time` to spend the
    /// whole time limit (not reproducible).
    #[arg(long, value_parser = parse_effort)]
    pub effort: Option<crate::solve::Effort>,
    /// Memory one solve may use for its model: bytes, a size (2GiB) or a share of the
    /// machine's memory (50%; the cgroup limit in a container) split among the solves run
    /// at once (`batch --jobs`). Default: 75%. A larger model is refused (exit 2, or an
    /// error row of `batch`) before it is allocated.
    #[arg(long, env = "REMAT_SOLVE_MEMORY", value_parser = parse_solve_memory)]
    pub solve_memory: Option<crate::front::SolveMemory>,
}

#[derive(clap::Args, Debug)]
pub(super) struct SimulateArgs {
    #[command(flatten)]
    pub graph: GraphArg,
    /// Schedule: {"events": [...]}, a bare event list, or a `remat solve` result.
    pub schedule: PathBuf,
    /// Also check the peak against this budget.
    #[arg(short, long)]
    pub budget: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Subcommand, Debug)]
pub(super) enum GenKind {
    /// Checkmate's linear graph: 2N+1 nodes, unit costs and sizes.
    Linear {
        #[arg(long, value_parser = layers)]
        layers: usize,
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// A join graph (Beaumont et al.): chains of the given lengths meeting at the loss,
    /// with their backward chains; unit costs and sizes (the shape `join-dp` solves).
    Join {
        /// Branch lengths, e.g. `3,2,4`.
        #[arg(long, value_delimiter = ',', required = true, value_parser = branch)]
        branches: Vec<usize>,
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// A decoder-only transformer's training step: 31 ops per layer (attention, MLP,
    /// residuals, layernorms and their backward ops) and 8 around them; costs in FLOP,
    /// sizes in bytes (16-bit values).
    Transformer {
        #[command(flatten)]
        shape: TransformerFlags,
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// A random layered training graph (forward layers, loss, mirrored backward).
    RandomLayered {
        #[arg(long, value_parser = gen_nodes)]
        nodes: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

/// The dimensions of `remat gen transformer`.
#[derive(clap::Args, Debug)]
pub(super) struct TransformerFlags {
    #[arg(long, default_value_t = 12, value_parser = transformer_layers)]
    layers: usize,
    #[arg(long, default_value_t = 1024)]
    hidden: u64,
    #[arg(long, default_value_t = 1024)]
    seq: u64,
    #[arg(long, default_value_t = 16)]
    heads: u64,
    #[arg(long, default_value_t = 4)]
    batch: u64,
    #[arg(long, default_value_t = 32_000)]
    vocab: u64,
}

impl TransformerFlags {
    pub(super) fn shape(&self) -> crate::graph::generate::TransformerShape {
        crate::graph::generate::TransformerShape {
            layers: self.layers,
            hidden: self.hidden,
            seq: self.seq,
            heads: self.heads,
            batch: self.batch,
            vocab: self.vocab,
        }
    }
}

#[derive(clap::Args, Debug)]
pub(super) struct BenchArgs {
    /// Graph files, or directories whose `*.json` files are all benchmarked.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Solver name (see `remat solvers`).
    #[arg(short, long, default_value = "milp")]
    pub solver: String,
    /// Budgets as fractions of the checkpoint-all peak.
    #[arg(long, value_delimiter = ',', default_value = "0.9,0.8")]
    pub fractions: Vec<f64>,
    /// Budgets this far of the way from the minimum feasible budget (`inspect`'s) to the
    /// checkpoint-all peak, e.g. `0.5,0.25,0.1`; replace --fractions.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["budgets", "fractions"])]
    pub span: Vec<f64>,
    /// Budgets: bytes, sizes (6GiB) or shares of the checkpoint-all peak (80%),
    /// comma-separated; replace --fractions.
    #[arg(long, value_delimiter = ',', conflicts_with = "fractions")]
    pub budgets: Vec<String>,
    /// Time limit per case, in seconds.
    #[arg(long, allow_negative_numbers = true)]
    pub time_limit: Option<f64>,
    #[command(flatten)]
    pub solver_flags: SolverFlags,
    /// Skip graphs with more nodes than this.
    #[arg(long)]
    pub max_nodes: Option<usize>,
    /// Print one JSON result per line instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub(super) struct BenchTiersArgs {
    /// Snapshots s that fit in fast memory.
    #[arg(long, default_value_t = 100, value_parser = tiers_n)]
    pub snapshots: u64,
    /// Checkpointing intervals I.
    #[arg(long, value_delimiter = ',', default_values_t = [8u64, 64, 1024], value_parser = tiers_n)]
    pub intervals: Vec<u64>,
    /// Sequence lengths n (1 to 10^6).
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_LENGTHS.to_vec(), value_parser = tiers_n)]
    pub lengths: Vec<u64>,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub(super) struct BatchArgs {
    /// Graph files, or directories whose `*.json` files are graphs.
    #[arg(long, num_args = 1.., required = true)]
    pub graphs: Vec<PathBuf>,
    /// Budgets, comma-separated: shares of the checkpoint-all peak (90%,80%,70%), bytes or sizes.
    #[arg(long, value_delimiter = ',', num_args = 1.., required = true)]
    pub budgets: Vec<String>,
    /// Directory for the result files and the summaries (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Solver name (see `remat solvers`).
    #[arg(short, long, default_value = "auto")]
    pub solver: String,
    /// Solves run at once.
    #[arg(long, env = "REMAT_JOBS", default_value_t = 1, value_parser = jobs)]
    pub jobs: usize,
    /// Time limit of each solve, in seconds.
    #[arg(long, allow_negative_numbers = true)]
    pub time_limit: Option<f64>,
    /// Solve only slice K of N (K from 0 to N-1), e.g. 0/4.
    #[arg(long, value_parser = parse_shard)]
    pub shard: Option<Shard>,
    /// Input format of the graphs: auto, native, node-link or chain.
    #[arg(long, default_value = "auto", value_parser = parse_format)]
    pub format: Format,
    #[command(flatten)]
    pub solver_flags: SolverFlags,
}

/// Slice `k` of `n` of a batch's items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Shard {
    pub k: usize,
    pub n: usize,
}

fn parse_effort(s: &str) -> Result<crate::solve::Effort, String> {
    crate::front::parse_effort(s)
}

fn parse_solve_memory(s: &str) -> Result<crate::front::SolveMemory, String> {
    s.parse()
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
}

pub(super) fn parse_shard(s: &str) -> Result<Shard, String> {
    let err = || format!("expected K/N with 0 <= K < N, e.g. 0/4; got '{s}'");
    let (k, n) = s.split_once('/').ok_or_else(err)?;
    let (k, n) = (
        k.trim().parse().map_err(|_| err())?,
        n.trim().parse().map_err(|_| err())?,
    );
    if k < n {
        Ok(Shard { k, n })
    } else {
        Err(err())
    }
}

#[derive(clap::Args, Debug)]
pub(super) struct MaxBatchArgs {
    #[command(flatten)]
    pub graph: GraphArg,
    /// The memory to fit: bytes, a size (24GiB, 16GB) or a share of the checkpoint-all
    /// peak at the graph's own batch (80%).
    #[arg(short, long)]
    pub memory: String,
    /// The largest overhead accepted: total cost / cost without recomputation (>= 1).
    #[arg(
        long,
        allow_negative_numbers = true,
        conflicts_with = "max_extra_forward"
    )]
    pub max_overhead: Option<f64>,
    /// The most extra forward passes accepted (Checkmate's cap: 1); needs forward ops
    /// marked in the graph.
    #[arg(long, allow_negative_numbers = true)]
    pub max_extra_forward: Option<f64>,
    /// The solver that decides each batch (see `remat solvers`); `auto` is bracketed by
    /// sethi-ullman first.
    #[arg(short, long, default_value = "auto")]
    pub solver: String,
    /// Time limit of the whole search, in seconds [default: 120].
    #[arg(long, allow_negative_numbers = true)]
    pub time_limit: Option<f64>,
    #[command(flatten)]
    pub solver_flags: SolverFlags,
    /// Write the result JSON to this file (atomically).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Print the result JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub(super) struct PlotArgs {
    /// The picture: timeline (memory after each event), stages (Checkmate's R and S) or
    /// tradeoff (cost against budget, one curve per solver).
    #[arg(value_parser = |s: &str| s.parse::<crate::plot::Kind>())]
    pub kind: crate::plot::Kind,
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
    /// timeline, stages: the solver of a solve on the spot [default: auto].
    #[arg(short, long)]
    pub solver: Option<String>,
    /// tradeoff: the solvers swept, comma-separated (see `remat solvers`) [default:
    /// auto,dtr,chen-greedy].
    #[arg(long, value_delimiter = ',')]
    pub solvers: Vec<String>,
    /// tradeoff: the number of budgets, evenly spaced from the minimum feasible budget to
    /// the checkpoint-all peak (2 to 200) [default: 20].
    #[arg(long)]
    pub points: Option<usize>,
    /// tradeoff: the budgets to sweep instead of --points (comma-separated; bytes, sizes or
    /// shares).
    #[arg(long, value_delimiter = ',')]
    pub budgets: Vec<String>,
    /// Time limit of each solve, in seconds (a sweep's default: 5 per point).
    #[arg(long, allow_negative_numbers = true)]
    pub time_limit: Option<f64>,
    #[command(flatten)]
    pub solver_flags: SolverFlags,
}

#[derive(clap::Args, Debug)]
pub(super) struct ProbeArgs {
    /// The path to GET: /healthz (the process answers) or /readyz (it accepts solves).
    #[arg(default_value = "/healthz")]
    pub path: String,
    /// The server's address, as given to `remat serve`.
    #[arg(long, env = "REMAT_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: std::net::SocketAddr,
    /// Seconds the whole exchange may take (connect, request, status line).
    #[arg(long, default_value_t = 1.0, value_parser = crate::front::options::parse_seconds)]
    pub timeout: f64,
}
