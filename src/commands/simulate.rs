//! `tessera simulate`: read a demand (the demo's arrivals, a recording, the Alibaba trace,
//! the project's CSV) and a fleet, run the what-if engine under each policy, print the table
//! (or JSON), draw the picture, answer the capacity question. The IO around the pure engine.

mod demand;
mod options;
mod output;
mod pack;
mod pack_table;
mod plot;
mod settings;
mod table;

use std::io::IsTerminal;
use std::time::Instant;

use super::settings;
use crate::cli::Global;
use crate::error::CmdError;
use crate::simulate::{self, Fleet, Policy, names};
use crate::units::count;

use demand::{compress, live_fleet, read_demand};
pub use options::Options;
use options::{duration_s, policies};
use output::{finish_packing, finish_replay};
use settings::engine_settings;

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
        let name = names::require(m, names::resolve(m)).map_err(|e| usage(&format!("--as-model {m}: {e}")))?;
        f = f.as_model(&name);
    }
    for l in &o.layout {
        let (model, layout) = l.split_once('=').ok_or_else(|| usage(&format!("--layout {l}: write MODEL=LAYOUT")))?;
        f.set_layout(model.trim(), layout.trim()).map_err(|e| usage(&format!("--layout: {e}")))?;
    }
    Ok(f)
}

/// The demand's model names as the fleet's (`a100` on a fleet of A100-80GB is that model);
/// an unknown or ambiguous one is a usage error naming it and how many jobs ask for it.
fn resolve_models(jobs: &mut [simulate::Job], fleet: &Fleet) -> Result<(), CmdError> {
    let have: Vec<&str> = fleet.models.iter().map(|m| &*m.name).collect();
    let mut seen: std::collections::BTreeMap<Box<str>, Box<str>> = std::collections::BTreeMap::new();
    for j in jobs.iter() {
        for m in &j.models {
            if seen.contains_key(m) {
                continue;
            }
            let name = names::require(m, names::resolve_among(m, &have)).map_err(|e| {
                let asking = jobs.iter().filter(|j| j.models.contains(m)).count();
                usage(&format!(
                    "the demand's model: {e} ({asking} {} it)",
                    if asking == 1 { "job asks for" } else { "jobs ask for" }
                ))
            })?;
            seen.insert(m.clone(), name);
        }
    }
    for j in jobs.iter_mut() {
        for m in &mut j.models {
            if let Some(name) = seen.get(m) {
                m.clone_from(name);
            }
        }
    }
    Ok(())
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

/// The fleet the demand runs on (`--fleet`, what the input brings, else the live one), and
/// the demand's models as that fleet's (or none, `--as-model`: every card is that model).
fn fleet_of(cfg: &crate::config::Config, o: &Options, d: &mut demand::Demand) -> Result<Fleet, CmdError> {
    let brought = match d.fleet.take() {
        Some(f) => Some(f),
        None if o.fleet.is_none() => live_fleet(cfg, &mut d.notes)?,
        None => None,
    };
    let fleet = fleet(o, brought)?;
    if o.as_model.is_none() {
        resolve_models(&mut d.jobs, &fleet)?;
    } else {
        // Every card is the other model now: the demand's model constraints cannot hold.
        let constrained = d.jobs.iter().filter(|j| !j.models.is_empty()).count();
        d.jobs.iter_mut().for_each(|j| j.models.clear());
        if constrained > 0 {
            d.notes.push(format!("{constrained} jobs named the models they may run on: on one model, any card does"));
        }
    }
    Ok(fleet)
}

/// `--pack`: the paper's experiment on the demand's pods (the trace's CPU-only ones among
/// them), in the trace's order as read.
fn packing(g: &Global, cfg: &crate::config::Config, o: &Options, mut d: demand::Demand) -> Result<(), CmdError> {
    let fleet = fleet_of(cfg, o, &mut d)?;
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
        // A file's jobs are its lines; a recording's (or the simulator's) are workloads in the
        // order they were first seen.
        let n = prepared.out_of_order;
        d.notes.push(if o.trace.is_some() || o.demand.is_some() {
            format!("{} before the line above them: put in time order", count(n, "job arrived", "jobs arrived"))
        } else {
            format!("{} submitted before one seen ahead of them: put in time order", count(n, "job was", "jobs were"))
        });
    }
    if let Some(c) = o.compress {
        if !(c.is_finite() && c >= 1.0) {
            return Err(usage(&format!("--compress {c}: a factor of 1 or more")));
        }
        compress(&mut d.jobs, c);
        d.notes.push(format!("arrivals {c}x closer together"));
    }
    let fleet = fleet_of(&cfg, o, &mut d)?;
    hosts_some(&d.jobs, &fleet)?;
    let s = engine_settings(o, &cfg, &fleet, &d)?;
    let policies = policies(o)?;
    let mut progress = Progress::new();
    let target = o.target_p90_wait.as_deref().map(|t| duration_s("--target-p90-wait", t)).transpose()?;
    policy_notes(&policies, &fleet, &s, &mut d.notes);
    let replays = simulate::replay_all(&d.jobs, &fleet, &policies, &s, &mut |p, f| {
        progress.show(&format!("replaying {}", p.as_str()), f);
    });
    let mut answers = Vec::new();
    if let Some(t) = target {
        for (i, p) in policies.iter().enumerate() {
            progress.show(&format!("searching {}", p.as_str()), i as f64 / policies.len() as f64);
            answers.push(simulate::fewest_gpus(&d.jobs, &fleet, *p, &s, t));
        }
    }
    progress.clear();
    finish_replay(o, &cfg, &d, &fleet, &s, &replays, &answers)
}

/// A fleet none of whose nodes can host any job of the demand is a usage error: every row
/// would read NOT RUN for all of it.
fn hosts_some(jobs: &[simulate::Job], fleet: &Fleet) -> Result<(), CmdError> {
    let types = simulate::node_types::Types::of(fleet);
    if jobs.iter().any(|j| (0..types.kinds.len()).any(|t| types.hosts(t, j))) {
        return Ok(());
    }
    let why = jobs.first().map(|j| simulate::not_run::too_big(fleet, j).1).unwrap_or_default();
    Err(usage(&format!(
        "no node of the fleet can host any of the demand's {} jobs (the first needs {why})",
        jobs.len()
    )))
}

/// Notes for rows that are not what their name alone says: `schedule` with no windows is
/// `mig`; time-sliced cards stay time-sliced under the MIG policies.
fn policy_notes(policies: &[Policy], fleet: &Fleet, s: &simulate::Settings, notes: &mut Vec<String>) {
    if policies.contains(&Policy::Schedule) && s.windows.is_empty() {
        notes.push("schedule: no [[schedule]] window covers this fleet's MIG cards, so it runs as mig".into());
    }
    let sliced: u64 = fleet.nodes.iter().filter(|n| n.replicas.is_some_and(|r| r > 1)).map(|n| u64::from(n.gpus)).sum();
    let mig: Vec<&str> = policies.iter().filter(|p| p.uses_mig()).map(|p| p.as_str()).collect();
    if sliced > 0 && !mig.is_empty() {
        notes.push(format!(
            "{sliced} time-sliced {} stay time-sliced under {} (as the fleet shares them today)",
            if sliced == 1 { "card" } else { "cards" },
            mig.join(", ")
        ));
    }
    if !mig.is_empty() && policies.iter().any(|p| p.uses_mig() && p.whole_only(fleet)) {
        notes.push(format!(
            "no card of this fleet can do MIG: under {} every request holds whole cards, as under exclusive{}",
            mig.join(", "),
            if policies.contains(&Policy::Adaptive) { " (adaptive still preempts)" } else { "" }
        ));
    }
}
