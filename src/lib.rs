//! tessera: a terminal operations console for GPU clusters.
//!
//! Layers with mirrored names: `sources` collect, `model` holds state, `store` merges,
//! `ui` draws. See docs/ and the design notes for the data flow.

pub mod actions;
pub mod cli;
pub mod commands;
pub mod config;
pub mod model;
pub mod sources;
pub mod store;
pub mod ui;
