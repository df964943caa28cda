//! remat: optimal rematerialization (activation checkpointing) schedules for training
//! graphs. See `ARCHITECTURE.md` for the map; data flows one way:
//! graph -> solver -> schedule -> simulator -> result.

pub mod aside;
pub mod budget;
pub mod cli;
pub mod front;
pub mod graph;
pub mod plot;
pub mod schedule;
pub mod service;
pub mod shell;
pub mod solve;
