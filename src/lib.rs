//! tessera: a terminal operations console for GPU clusters.
//!
//! # The map
//!
//! Layers with mirrored names, from the ground floor up (docs/architecture.md has the data
//! flow and the rules each layer keeps: the model and the advisor are pure, sources never
//! draw, the ui never does IO). The advisor and the schedules take the `Action` vocabulary and
//! planning from `act`, the actions' pure floor below them; `actions` runs the plans. The
//! ground floor, `config` and `model` import nothing above them
//! (`scripts/imports.sh` lists every use; docs/architecture.md keeps its output). `inputs` (the fuzzing doors) reaches up
//! to `simulate::input`'s parsers, and `simulate::input::recording` decodes frames through
//! `record`'s player; the what-if engine's core (`simulate/` but `input/`) imports only the
//! model, the MIG catalog and the layout planner.
//! URL checks (`url`), sizes and durations (`units`), `CmdError` (`error`) and the memory
//! budget (`budget`) have moved down to the ground floor.
//!
//! | module | layer | what it holds |
//! |---|---|---|
//! | `units` | ground floor | words for numbers (counts with their noun), sizes and durations read and shown |
//! | `error` | ground floor | the error a command ends with, and its exit codes |
//! | `url` | ground floor | URLs shown redacted, checked for the config, and their origin |
//! | `files` | ground floor | files tessera is handed, opened without waiting and read bounded; the state directory and the atomic write for files it keeps |
//! | `out` | ground floor | standard output and error, printable (control characters escaped), a closed pipe ending quietly |
//! | `process` | ground floor | running a program: no shell, a timeout, bounded output |
//! | `allocator` | ground floor | the binary's allocator settings |
//! | `budget` | ground floor | the memory budget every bounded read (HTTP answers, program output) draws from |
//! | `model` | model (pure) | the fleet, workloads, queue, free capacity, the MIG catalog, schedules' windows |
//! | `config` | model (it reads its file: the one part of this layer that is not pure) | the config file (read here), its defaults and its errors |
//! | `sources` | sources | one collector per backend; each sends whole updates |
//! | `inputs` | sources | every parser of outside input behind one door each (fuzzed) |
//! | `store` | sources | merges the updates into one fleet; each source's health |
//! | `record` | sources | recordings: writing, reading, rebuilding from Prometheus |
//! | `advisor` | advisor (pure) | rules over the fleet: findings, and one plan of their actions |
//! | `schedule` | advisor (pure) | MIG schedules against the fleet: changes, guards, exports |
//! | `simulate` | advisor (pure) | the what-if engine: a demand replayed on a fleet under each sharing policy; packing; the capacity search |
//! | `act` | sources | the actions' pure floor: `Action`, `Target`, `Backend`, `Plan`, `Op`, the guards, planning and each backend's step writer, from the fleet alone |
//! | `actions` | actions | the runner, the lock, execution and the audit; one file per backend's execution |
//! | `ui` | ui | the console's state (`ui/state/`: one owner per view, the dialog, the footer), keys to requests, the dialogs (`ui/dialogs/`), views; never does IO |
//! | `engine` | engine | the composition root: sources, store, runner |
//! | `app` | engine | the console: one object, one method per event it serves |
//! | `commands` | engine | each subcommand |
//! | `cli` | engine | the command-line contract |
//!
//! # Where a new thing goes
//!
//! - **A source** (a new backend): `sources/NAME.rs` sends `SourceUpdate`s; register it in
//!   `engine.rs`; its config in `config.rs`; tests against the real server in `tests/NAME.rs`.
//! - **An exporter dialect** (metrics named another way): `sources/NAME.rs` implementing
//!   `series::Dialect`, one line in `DIALECTS` in `sources/scrape.rs`; a fixture with its source
//!   in `tests/fixtures/NAME/`.
//! - **An action** (a new verb), in the order the compiler points to them: a variant of
//!   `act::Action` with its verb and target (`act.rs`); its plan and guards (`act/plan.rs`,
//!   a method on `act::Capabilities`, default: cannot); what it claims and how the fleet shows
//!   it under way (`act/claims.rs`); its subcommand in `cli::ActCommand` (`cli.rs`); its key
//!   and `Intent` (`ui/keymap.rs`), what the key plans (`ui/state/action_keys.rs`) and its arm
//!   in `UiState::apply` (`ui/state/intents.rs`). Seven files; a verb that needs a new
//!   operation adds it to each backend that can do it (`act/NAME.rs` writes the step,
//!   `actions/NAME.rs` runs it). `scripts/structure.py` counts the files an existing verb names.
//! - **An advisor rule**: `advisor/NAME.rs`, called from `advisor::advise_with_plan`; its kind
//!   in `advisor::Kind` and its rank in `advisor/reconcile.rs`; a row in docs/advisor.md.
//! - **A view**: its state in `ui/state/NAME.rs` (a `List` of its rows, and what else it
//!   keeps), its drawing in `ui/views/NAME.rs`, and a `Tab` variant in `ui/state.rs` (the
//!   compiler then points to the arms that name the view: its list, its title, its draw, its
//!   key); snapshots at 80×24 and 160×48 in `tests/ui_snapshots.rs`.
//! - **A what-if demand input**: `simulate/input/NAME.rs`, a pure parser over `BufRead` to
//!   `simulate::Job`s (errors name file, line and field), its door in `inputs.rs`, its flag in
//!   `cli.rs` and `commands/simulate.rs`; a section in docs/simulate.md.
//! - **A what-if policy**: a variant of `simulate::Policy`; what a card gives under it in
//!   `simulate/state.rs`, its own moves in `simulate/adapt.rs`; a row in docs/simulate.md.

pub mod act;
pub mod actions;
pub mod advisor;
pub mod allocator;
pub mod app;
pub mod budget;
pub mod cli;
pub mod commands;
pub mod config;
pub mod engine;
pub mod error;
pub mod files;
pub mod inputs;
pub mod model;
pub mod out;
pub mod process;
pub mod record;
pub mod schedule;
pub mod simulate;
pub mod sources;
pub mod store;
pub mod ui;
pub mod units;
pub mod url;

#[cfg(test)]
mod map_tests {
    /// Every top-level module is on the map above: a new one that is not fails here.
    #[test]
    fn every_module_is_on_the_map() {
        let text = include_str!("lib.rs");
        let map: Vec<&str> = text.lines().filter(|l| l.starts_with("//! | `")).collect();
        let modules: Vec<&str> =
            text.lines().filter_map(|l| l.strip_prefix("pub mod ")).map(|m| m.trim_end_matches(';')).collect();
        assert!(modules.len() > 10, "{modules:?}");
        for m in modules {
            let row = format!("//! | `{m}` |");
            assert!(map.iter().any(|l| l.starts_with(&row)), "src/lib.rs: module {m} is not on the map");
        }
    }
}
