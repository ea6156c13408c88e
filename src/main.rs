//! The `tessera` binary: parse arguments, load config, dispatch, exit with the contract's codes
//! (0 done, 1 failed, 2 usage or config error, 3 refused by a guard).

use std::process::ExitCode;

use tessera::cli::{Cli, Command};
use tessera::commands;

// mimalloc hands freed pages back to the kernel (at once: `allocator::purge_at_once`), where
// glibc's malloc kept over 100 MiB of freed memory resident at 32,768 cards
// (docs/benchmarks.md); `no_thp`: no transparent huge pages, which made a small console twice
// the size.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    tessera::allocator::purge_at_once();
    let parsed =
        tessera::cli::command().try_get_matches().and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // Flags that belong to some commands only.
    let usage = if cli.global.record.is_some() && cli.command.is_some() {
        Some("--record is the console's (tessera --record FILE); headless: tessera record --out FILE")
    } else if cli.global.at.is_some()
        && !matches!(cli.command, None | Some(Command::Snapshot { .. }) | Some(Command::Replay { .. }))
    {
        Some("--at is for the console, snapshot and replay")
    } else {
        None
    };
    if let Some(u) = usage {
        commands::to_stderr(&format!("tessera: {u}"));
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Some(Command::Layouts { model, json }) => commands::layouts(&model, json),
        Some(Command::CheckConfig { path, example }) => {
            commands::check_config(path.as_deref().or(cli.global.config.as_deref()), example)
        }
        Some(Command::Snapshot { json, files }) => commands::snapshot_cmd(&cli.global, json, &files),
        Some(Command::Record { out, every, run_for, rotate_size, rotate_every, keep }) => commands::record(
            &cli.global,
            commands::RecordOptions { out, every, run_for, rotate_size, rotate_every, keep },
        ),
        Some(Command::Replay { files, from, to, step }) => commands::replay(&cli.global, &files, from, to, step),
        Some(Command::Simulate(a)) => commands::simulate(&cli.global, &commands::SimulateOptions::from(*a)),
        Some(Command::Advise { json, fail_on }) => commands::advise(&cli.global, json, fail_on.map(|f| f.severity())),
        Some(Command::Schedule { json, what }) => commands::schedule(&cli.global, json, what),
        Some(Command::DeviceCheck { what }) => commands::device_check(&cli.global, what),
        Some(Command::Act(a)) => {
            let (action, how) = a.into_action();
            commands::act(&cli.global, action, how)
        }
        None => commands::console(&cli.global),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(tessera::error::CmdError::Closed) => ExitCode::SUCCESS,
        Err(e) => {
            // Errors can quote a file or a source: nothing of them reaches the terminal raw.
            let text: String =
                e.to_string().chars().map(|c| if c.is_control() && c != '\n' { '?' } else { c }).collect();
            commands::to_stderr(&format!("tessera: {text}"));
            ExitCode::from(e.code())
        }
    }
}
