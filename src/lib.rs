//! tessera: a terminal operations console for GPU clusters.
//!
//! Layers with mirrored names: `sources` collect, `model` holds state, `store` merges,
//! `actions` plan, guard and execute, `ui` draws; `engine` wires them and `app` is the
//! console's loop. See docs/architecture.md for the data flow.

pub mod actions;
pub mod advisor;
pub mod allocator;
pub mod app;
pub mod cli;
pub mod commands;
pub mod config;
pub mod engine;
pub mod files;
pub mod inputs;
pub mod model;
pub mod process;
pub mod record;
pub mod schedule;
pub mod sources;
pub mod store;
pub mod ui;
pub mod units;
