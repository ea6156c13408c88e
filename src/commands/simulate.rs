//! `tessera simulate`: read a demand (the demo's arrivals, a recording, the Alibaba trace,
//! the project's CSV) and a fleet, run the what-if engine under each policy, print the table
//! (or JSON), draw the picture, answer the capacity question. The IO around the pure engine.

mod demand;
mod options;
mod output;
mod pack;
mod pack_table;
mod plot;
mod table;

use std::io::IsTerminal;
use std::time::Instant;

use super::settings;
use crate::cli::Global;
use crate::error::CmdError;
use crate::simulate::{self, Fleet};

use demand::{compress, live_fleet, read_demand};
pub use options::Options;
use options::{duration_s, engine_settings, policies};
use output::{finish_packing, finish_replay};

/// `simulate --json`'s contract version (docs/json.md).
pub const SCHEMA_VERSION: u32 = 1;

/// The demo's demand starts on a Monday at midnight UTC, whatever today is: the same seed
/// gives the same answer.
pub const DEMO_START: &str = "2026-01-05T00:00:00Z";

pub(super) fn usage(what: &str) -> CmdError {
    CmdError::Usage(what.to_string())
}

/// The fleet to run on: `--fleet`, else what the input brings; then `--as-model`, `--layout`.
fn fleet(o: &Options, brought: Option<Fleet>) -> Result<Fleet, CmdError> {
    let mut f = match (&o.fleet, brought) {
        (Some(spec), _) => Fleet::from_spec(spec).map_err(|e| usage(&format!("--fleet: {e}")))?,
        (None, Some(f)) => f,
        (None, None) => {
            return Err(usage(
                "this demand brings no fleet: give one with --fleet COUNTxMODEL,... (e.g. 64xA100-80GB)",
            ));
        }
    };
    if f.gpus() == 0 {
        return Err(usage("the fleet has no GPUs"));
    }
    if let Some(m) = &o.as_model {
        let model = simulate::Model::named(m);
        if model.mig.is_none() && model.memory_mib == 0 {
            let known = crate::model::mig::suggest(m).join(", ");
            return Err(usage(&format!(
                "--as-model {m}: not a model tessera knows{}",
                if known.is_empty() { String::new() } else { format!(" (did you mean {known}?)") }
            )));
        }
        f = f.as_model(m);
    }
    for l in &o.layout {
        let (model, layout) = l.split_once('=').ok_or_else(|| usage(&format!("--layout {l}: write MODEL=LAYOUT")))?;
        f.set_layout(model.trim(), layout.trim()).map_err(|e| usage(&format!("--layout: {e}")))?;
    }
    Ok(f)
}

/// A progress bar on standard error for runs past a second, where it is a terminal.
struct Progress {
    started: Instant,
    tty: bool,
    shown: bool,
}

impl Progress {
    fn new() -> Self {
        Self { started: Instant::now(), tty: std::io::stderr().is_terminal(), shown: false }
    }

    fn show(&mut self, what: &str, done: f64) {
        if !self.tty || self.started.elapsed().as_secs_f64() < 1.0 {
            return;
        }
        let filled = (done.clamp(0.0, 1.0) * 30.0).round() as usize;
        eprint!("\r{what:<24} [{}{}] {:>3.0}%", "#".repeat(filled), " ".repeat(30 - filled), done * 100.0);
        self.shown = true;
    }

    fn clear(&mut self) {
        if self.shown {
            eprint!("\r{:<70}\r", "");
            self.shown = false;
        }
    }
}

/// `--pack`: the paper's experiment on the demand's pods (the trace's CPU-only ones among
/// them), in the trace's order as read.
fn packing(g: &Global, cfg: &crate::config::Config, o: &Options, mut d: demand::Demand) -> Result<(), CmdError> {
    let brought = match d.fleet.take() {
        Some(f) => Some(f),
        None if o.fleet.is_none() => live_fleet(cfg, &mut d.notes)?,
        None => None,
    };
    let fleet = fleet(o, brought)?;
    if o.as_model.is_some() {
        let constrained = d.jobs.iter().filter(|j| !j.models.is_empty()).count();
        d.jobs.iter_mut().for_each(|j| j.models.clear());
        if constrained > 0 {
            d.notes.push(format!("{constrained} jobs named the models they may run on: on one model, any card does"));
        }
    }
    let packed = pack::run(o, g.seed, &d, &fleet)?;
    finish_packing(o, &d, &fleet, &packed)
}

pub fn simulate(g: &Global, o: &Options) -> Result<(), CmdError> {
    let cfg = settings(g)?;
    let mut d = read_demand(g, &cfg, o)?;
    if o.pack.is_some() {
        return packing(g, &cfg, o, d);
    }
    if d.timeless {
        return Err(usage(&format!(
            "{}: a pod list without times (no creation_time column) can be packed (--pack), not replayed",
            d.source
        )));
    }
    if !o.levels.is_empty() || o.runs.is_some() || o.order.is_some() {
        return Err(usage("--runs, --levels and --order are for a packing (--pack)"));
    }
    let prepared = simulate::prepare(&mut d.jobs, d.without_gpu).map_err(|e| usage(&e.to_string()))?;
    if prepared.out_of_order > 0 {
        d.notes.push(format!("{} jobs arrived before the line above them: put in time order", prepared.out_of_order));
    }
    if let Some(c) = o.compress {
        if !(c.is_finite() && c >= 1.0) {
            return Err(usage(&format!("--compress {c}: a factor of 1 or more")));
        }
        compress(&mut d.jobs, c);
        d.notes.push(format!("arrivals {c}x closer together"));
    }
    let brought = match d.fleet.take() {
        Some(f) => Some(f),
        None if o.fleet.is_none() => live_fleet(&cfg, &mut d.notes)?,
        None => None,
    };
    let fleet = fleet(o, brought)?;
    if o.as_model.is_some() {
        // Every card is the other model now: the demand's model constraints cannot hold.
        let constrained = d.jobs.iter().filter(|j| !j.models.is_empty()).count();
        d.jobs.iter_mut().for_each(|j| j.models.clear());
        if constrained > 0 {
            d.notes.push(format!("{constrained} jobs named the models they may run on: on one model, any card does"));
        }
    }
    let s = engine_settings(o, &cfg, &fleet, &d)?;
    let policies = policies(o)?;
    let mut progress = Progress::new();
    let target = o.target_p90_wait.as_deref().map(|t| duration_s("--target-p90-wait", t)).transpose()?;
    let mut reports = Vec::new();
    for p in &policies {
        let name = format!("replaying {}", p.as_str());
        reports.push(simulate::replay(&d.jobs, &fleet, *p, &s, &mut |f| progress.show(&name, f)));
    }
    let mut answers = Vec::new();
    if let Some(t) = target {
        for (i, p) in policies.iter().enumerate() {
            progress.show(&format!("searching {}", p.as_str()), i as f64 / policies.len() as f64);
            answers.push(simulate::fewest_gpus(&d.jobs, &fleet, *p, &s, t));
        }
    }
    progress.clear();
    finish_replay(o, &cfg, &d, &fleet, &s, &reports, &answers)
}
