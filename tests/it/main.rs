//! The integration tests, one crate: one link of the library (and HiGHS) for all of them
//! instead of one per file. Each module is one area; `common`, `dp` and `server` are the
//! helpers they share. Run one area with `cargo test --test it AREA::`.

mod common;
mod dp;
mod server;

mod admission;
mod api;
mod api_schema;
mod auto;
mod baselines;
mod batch;
mod body_limits;
mod browser;
mod chain_dp;
mod cli;
mod connections;
mod determinism;
mod docker;
mod dp_vs_milp;
mod exhaustive;
mod fuzz;
mod hardening_input;
mod hostile_page;
mod join_dp;
mod keras_chains;
mod load;
mod max_batch;
mod milp;
mod plot;
mod plot_api;
mod portfolio;
mod scope;
mod service;
mod simulator;
mod soak;
mod solve_limits;
mod sweep_scale;
mod validation;
