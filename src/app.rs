//! The console: one task owns the engine (store, updates, action runner) and the UI state,
//! as the console object (`app/console.rs`), which selects over terminal input, source
//! updates, action progress, a clock and signals, serves each with its own method, drains
//! queued updates before one draw, and draws only when something changed.
//! The terminal (`app/terminal.rs`) is restored on quit, signals and panics; how it leaves
//! while an action runs is `app/leave.rs`; the operator's requests are answered in
//! `app/requests.rs`.

use crate::actions::{Outcome, Progress};
use crate::config::Config;
use crate::error::CmdError;
use crate::ui::theme::Theme;

mod console;
mod leave;
pub mod replay;
mod requests;
mod schedule;
mod terminal;
use console::Console;
use requests::spawn_run;
pub(crate) use terminal::{draw, keys, open_terminal, signals, suspend};

/// The console; with `record`, it records what it shows while you watch.
pub fn run(
    cfg: &Config,
    theme: Theme,
    ascii: bool,
    record: Option<crate::record::writer::Settings>,
) -> Result<(), CmdError> {
    let rt = crate::engine::runtime()?;
    rt.block_on(async { Console::open(cfg, theme, ascii, record)?.run().await })
}

/// What a running action reports to the loop.
#[derive(Debug)]
enum ActEvent {
    Progress(Progress),
    Finished(Outcome),
}
