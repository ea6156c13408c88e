//! `tessera simulate`: read a demand (the demo's arrivals, a recording, the Alibaba trace,
//! the project's CSV) and a fleet, run the what-if engine under each policy, print the table
//! (or JSON), draw the picture, answer the capacity question. The IO around the pure engine.

mod plot;
mod table;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;

use super::settings;
use crate::cli::Global;
use crate::error::CmdError;
use crate::out;
use chrono::Timelike;

use crate::simulate::{self, Fleet, Job, Packing, Placement, Policy, Report, Settings, input};

/// `simulate --json`'s contract version (docs/json.md).
pub const SCHEMA_VERSION: u32 = 1;

/// The demo's demand starts on a Monday at midnight UTC, whatever today is: the same seed
/// gives the same answer.
pub const DEMO_START: &str = "2026-01-05T00:00:00Z";

/// What `simulate` was asked, as the command line gives it.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub recording: Vec<PathBuf>,
    pub trace: Option<PathBuf>,
    pub nodes: Option<PathBuf>,
    pub demand: Option<PathBuf>,
    pub span: Option<String>,
    pub fleet: Option<String>,
    pub as_model: Option<String>,
    pub layout: Vec<String>,
    pub policy: Vec<String>,
    pub placement: Option<String>,
    pub replicas: Option<u32>,
    pub pack: Option<String>,
    pub target_p90_wait: Option<String>,
    pub horizon: Option<String>,
    pub compress: Option<f64>,
    pub json: bool,
    pub plot: Option<PathBuf>,
    pub skip_bad: bool,
}

/// The demand with where it came from and what reading it said.
struct Demand {
    source: String,
    jobs: Vec<Job>,
    without_gpu: u64,
    skipped: u64,
    notes: Vec<String>,
    /// Where the demand's second 0 falls in the UTC day.
    day_offset_s: i64,
    /// The fleet the input brings (the demo's, a recording's, the trace's node list).
    fleet: Option<Fleet>,
    /// The simulated cluster's arrivals (its example schedule stands in where none is set).
    demo: bool,
}

fn usage(what: &str) -> CmdError {
    CmdError::Usage(what.to_string())
}

fn duration_s(flag: &str, text: &str) -> Result<i64, CmdError> {
    crate::units::duration::parse(text).map(|d| d.as_secs() as i64).map_err(|e| usage(&format!("{flag} {text}: {e}")))
}

/// The demo's arrivals over `span` and its fleet.
fn demo(g: &Global, cfg: &crate::config::Config, span: Option<&str>) -> Result<Demand, CmdError> {
    use crate::sources::sim::{Sim, SimConfig};
    let span_s = span.map(|s| duration_s("--for", s)).transpose()?.unwrap_or(86_400);
    if !(3600..=31 * 86_400).contains(&span_s) {
        return Err(usage(&format!("--for {}: from 1h to 31d", span.unwrap_or(""))));
    }
    let start = chrono::DateTime::parse_from_rfc3339(DEMO_START).map_or_else(|_| chrono::Utc::now(), |t| t.to_utc());
    let seed = g.seed.unwrap_or(cfg.demo.seed);
    let sim_cfg = SimConfig { size: cfg.demo.size, ..SimConfig::new(seed, start) };
    let fleet = {
        let mut sim = Sim::new(sim_cfg.clone());
        let p = sim.snapshot();
        simulate::from_model::fleet(&crate::model::Fleet { nodes: p.nodes, ..crate::model::Fleet::default() })
    };
    let arrivals = Sim::demand(&sim_cfg, std::time::Duration::from_secs(span_s as u64));
    let mut without_gpu = 0;
    let jobs = arrivals
        .iter()
        .filter_map(|a| {
            let j = simulate::from_model::job(
                &a.w,
                (a.at - start).num_seconds(),
                a.duration.num_seconds().max(1),
                Some(a.peak_pct),
            );
            if j.is_none() {
                without_gpu += 1;
            }
            j
        })
        .collect();
    Ok(Demand {
        source: format!(
            "the simulated cluster (seed {seed}), {} of arrivals",
            crate::units::duration::format(std::time::Duration::from_secs(span_s as u64))
        ),
        jobs,
        without_gpu,
        skipped: 0,
        notes: Vec::new(),
        day_offset_s: 0,
        fleet: Some(fleet),
        demo: true,
    })
}

/// The live fleet, collected once, where sources are configured (not the simulated cluster):
/// a file's demand on the cards there are.
fn live_fleet(cfg: &crate::config::Config, notes: &mut Vec<String>) -> Result<Option<Fleet>, CmdError> {
    if cfg.sources.demo || !cfg.sources.any_real() {
        return Ok(None);
    }
    let (fleet, simulated) = super::collect_once(cfg)?;
    if simulated || fleet.nodes.is_empty() {
        return Ok(None);
    }
    notes.push(format!("fleet: the live one, collected once ({} cards)", fleet.cards().count()));
    Ok(Some(simulate::from_model::fleet(&fleet)))
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

/// The engine's settings from the config and the flags.
fn engine_settings(o: &Options, cfg: &crate::config::Config, fleet: &Fleet, d: &Demand) -> Result<Settings, CmdError> {
    let (day_offset_s, first_submit) = (d.day_offset_s, d.jobs.first().map_or(0, |j| j.submit));
    let mut s =
        Settings { min_runtime_s: cfg.policy.min_runtime.as_secs() as i64, day_offset_s, ..Settings::default() };
    if let Some(p) = &o.placement {
        s.placement =
            Placement::parse(p).ok_or_else(|| usage(&format!("--placement {p}: first-fit, best-fit or frag-aware")))?;
    }
    if let Some(r) = o.replicas {
        if !(1..=64).contains(&r) {
            return Err(usage(&format!("--replicas {r}: from 1 to 64")));
        }
        s.replicas = r;
    }
    if let Some(h) = &o.horizon {
        s.horizon_s = Some(first_submit + duration_s("--horizon", h)?);
    }
    s.prices = cfg.advisor.prices.clone();
    // The demo's example schedule stands in on the demo only, as in the console.
    let schedules = crate::schedule::demo::effective(cfg, d.demo).map(|(s, _)| s).unwrap_or_default();
    s.windows = windows(&schedules, fleet);
    if let Some(first) = schedules.first() {
        s.lead_s = first.lead.as_secs() as i64;
        s.min_hold_s = first.min_hold.as_secs() as i64;
    }
    Ok(s)
}

/// The schedules' windows for the engine: per MIG model of the fleet the schedule covers,
/// in UTC at the offset its time zone has now (days of the week and DST are not modelled).
fn windows(schedules: &[crate::model::schedule::Schedule], fleet: &Fleet) -> Vec<simulate::Window> {
    let mut out = Vec::new();
    for sch in schedules {
        let offset = sch.tz.to_offset(jiff::Timestamp::now()).seconds();
        for m in fleet.models.iter().filter(|m| m.mig.is_some()) {
            if sch.model.as_deref().is_some_and(|x| simulate::Model::named(x).name != m.name) {
                continue;
            }
            let Some(gm) = m.mig else { continue };
            for w in &sch.windows {
                let layout = match crate::model::mig::parse_layout(gm, &w.layout) {
                    Ok(crate::model::mig::LayoutSpec::Mig(l)) => Some(l),
                    Ok(crate::model::mig::LayoutSpec::Whole) => None,
                    Err(_) => continue,
                };
                let utc = |min: u16| (i64::from(min) * 60 - i64::from(offset)).rem_euclid(86_400) as u32;
                out.push(simulate::Window {
                    model: Some(m.name.clone()),
                    start_s: utc(w.start_min),
                    end_s: utc(w.end_min % 1440),
                    layout,
                });
            }
        }
    }
    out
}

/// The policies asked for, in the order given (all five by default).
fn policies(o: &Options) -> Result<Vec<Policy>, CmdError> {
    if o.policy.is_empty() {
        return Ok(Policy::ALL.to_vec());
    }
    o.policy
        .iter()
        .map(|p| {
            Policy::parse(p).ok_or_else(|| usage(&format!("--policy {p}: exclusive, mig, share, schedule or adaptive")))
        })
        .collect()
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

fn read_demand(g: &Global, cfg: &crate::config::Config, o: &Options) -> Result<Demand, CmdError> {
    let given = [!o.recording.is_empty(), o.trace.is_some(), o.demand.is_some()].iter().filter(|b| **b).count();
    if given > 1 {
        return Err(usage("one demand at a time: --recording, --trace or --demand (or --demo)"));
    }
    if given == 0 {
        return demo(g, cfg, o.span.as_deref());
    }
    if o.span.is_some() {
        return Err(usage("--for sets the demo's span; a file's demand spans what it holds (see --horizon)"));
    }
    if !o.recording.is_empty() {
        return from_recording(&o.recording);
    }
    if o.nodes.is_some() && o.trace.is_none() {
        return Err(usage("--nodes is the trace's node list: give --trace too"));
    }
    let (path, parsed) = match (&o.trace, &o.demand) {
        (Some(t), _) => (t, read_lines(t, |name, r| input::openb_pods(name, r, o.skip_bad))?),
        (None, Some(d)) => (d, read_lines(d, |name, r| input::demand_csv(name, r, o.skip_bad))?),
        (None, None) => unreachable!("one demand is given"),
    };
    let fleet = match &o.nodes {
        Some(n) => Some(read_lines(n, input::openb_nodes)?),
        None => None,
    };
    let mut notes = Vec::new();
    if parsed.skipped > 0 {
        notes.push(format!("{} malformed lines skipped (--skip-bad); the first:", parsed.skipped));
        notes.extend(parsed.first_errors.iter().map(|e| format!("  {e}")));
    }
    let kind = if o.trace.is_some() { "Alibaba GPU trace v2023" } else { "demand CSV" };
    Ok(Demand {
        source: format!("{kind} {}", path.display()),
        jobs: parsed.jobs,
        without_gpu: parsed.without_gpu,
        skipped: parsed.skipped,
        notes,
        day_offset_s: parsed.start.map_or(0, |t| i64::from(t.num_seconds_from_midnight())),
        fleet,
        demo: false,
    })
}

/// Open `path` and hand it, streamed line by line, to `parse`; a bad line is a usage error
/// (exit 2) naming the file, the line and the field.
fn read_lines<T>(
    path: &Path,
    parse: impl FnOnce(&str, std::io::BufReader<std::fs::File>) -> Result<T, input::LineError>,
) -> Result<T, CmdError> {
    let name = path.display().to_string();
    let file = crate::files::open_regular(path).map_err(|e| usage(&format!("{name}: {e}")))?;
    parse(&name, std::io::BufReader::with_capacity(1 << 16, file)).map_err(|e| usage(&e.to_string()))
}

/// A recording's workloads and its last fleet.
fn from_recording(paths: &[PathBuf]) -> Result<Demand, CmdError> {
    use crate::record::reader::{Player, Recording};
    let rec = Recording::open(paths).map_err(|e| usage(&format!("--recording: {e}")))?;
    let mut player = Player::new(rec);
    let (jobs, n) = input::jobs_from_recording(&mut player);
    let fleet = input::recording::fleet_from_recording(&mut player).map_err(|e| usage(&format!("--recording: {e}")))?;
    let mut notes = Vec::new();
    let counted = [
        (n.unreadable_frames, "frames could not be read (skipped)"),
        (n.never_started, "workloads never seen running (their duration is unknown: left out)"),
        (n.cut_at_end, "workloads still running at the end (cut there)"),
        (n.shares_guessed, "shares of cards whose replicas are unknown (a quarter card each)"),
        (n.taken_as_one, "workloads asking several instances or shares (taken as one)"),
        (n.unknown_profile, "workloads with a MIG profile no catalog model has (left out)"),
    ];
    notes.extend(counted.iter().filter(|(c, _)| *c > 0).map(|(c, what)| format!("{c} {what}")));
    notes.extend(n.first_errors.iter().map(|e| format!("  {e}")));
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    Ok(Demand {
        source: format!("recording {} ({} frames)", names.join(" "), n.frames),
        jobs,
        without_gpu: n.without_gpu,
        skipped: 0,
        notes,
        day_offset_s: n.start.map_or(0, |t| i64::from(t.num_seconds_from_midnight())),
        fleet: Some(fleet),
        demo: false,
    })
}

/// Arrivals brought closer together by `factor` (a trace replayed on a faster clock).
fn compress(jobs: &mut [Job], factor: f64) {
    let t0 = jobs.first().map_or(0, |j| j.submit);
    for j in jobs {
        j.submit = t0 + ((j.submit - t0) as f64 / factor) as i64;
    }
}

pub fn simulate(g: &Global, o: &Options) -> Result<(), CmdError> {
    let cfg = settings(g)?;
    let mut d = read_demand(g, &cfg, o)?;
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
    if let Some(p) = &o.pack {
        let share = parse_share(p)?;
        let placements = if o.placement.is_some() { vec![s.placement] } else { Placement::ALL.to_vec() };
        let pols = if o.policy.is_empty() { vec![Policy::Share] } else { policies };
        let seed = g.seed.unwrap_or(cfg.demo.seed);
        let mut runs = Vec::new();
        for policy in &pols {
            for placement in &placements {
                progress.show(
                    &format!("packing {} {}", policy.as_str(), placement.as_str()),
                    runs.len() as f64 / (pols.len() * placements.len()) as f64,
                );
                runs.push(simulate::packing(
                    &d.jobs,
                    &fleet,
                    *policy,
                    simulate::PackWith { placement: *placement, target: share, seed, replicas: s.replicas },
                ));
            }
        }
        progress.clear();
        return finish_packing(o, &d, &fleet, &runs, share);
    }
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

fn parse_share(p: &str) -> Result<f64, CmdError> {
    let v: f64 = p
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| usage(&format!("--pack {p}: a share of the fleet, e.g. 100%")))?;
    let v = if p.trim().ends_with('%') || v > 1.0 { v / 100.0 } else { v };
    if !(0.01..=2.0).contains(&v) {
        return Err(usage(&format!("--pack {p}: from 1% to 200% of the fleet")));
    }
    Ok(v)
}

fn fleet_json(f: &Fleet) -> serde_json::Value {
    let models: Vec<serde_json::Value> = f
        .models
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let gpus: u64 = f.nodes.iter().filter(|n| n.model as usize == i).map(|n| u64::from(n.gpus)).sum();
            json!({ "model": &*m.name, "gpus": gpus, "mig": m.mig.is_some() })
        })
        .collect();
    json!({ "gpus": f.gpus(), "nodes": f.nodes.len(), "models": models })
}

fn demand_json(d: &Demand) -> serde_json::Value {
    let gpu_hours: f64 = d.jobs.iter().map(Job::gpu_seconds).sum::<f64>() / 3600.0;
    json!({
        "source": d.source,
        "jobs": d.jobs.len(),
        "without_gpu": d.without_gpu,
        "skipped_lines": d.skipped,
        "gpu_hours": gpu_hours,
        "notes": d.notes,
    })
}

/// The lines above the table: the demand, the fleet, the notes.
fn header(d: &Demand, f: &Fleet, extra: &str) -> String {
    let gpu_hours: f64 = d.jobs.iter().map(Job::gpu_seconds).sum::<f64>() / 3600.0;
    let models: Vec<String> = f
        .models
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let gpus: u64 = f.nodes.iter().filter(|n| n.model as usize == i).map(|n| u64::from(n.gpus)).sum();
            format!("{gpus}x{}", m.name)
        })
        .collect();
    let mut s = format!(
        "Demand: {}: {} GPU jobs, {:.1} GPU-hours asked{}\nFleet:  {} GPUs on {} nodes ({}){extra}\n",
        d.source,
        d.jobs.len(),
        gpu_hours,
        if d.without_gpu > 0 { format!(" ({} without a GPU left out)", d.without_gpu) } else { String::new() },
        f.gpus(),
        f.nodes.len(),
        models.join(", ")
    );
    for n in &d.notes {
        s.push_str(&format!("Note:   {n}\n"));
    }
    s.push_str("(a simulation: a what-if on this demand, not a measurement)\n\n");
    s
}

fn write_plot(path: &Path, svg: &str) -> Result<(), CmdError> {
    crate::files::write_atomic(path, svg.as_bytes())
        .map_err(|e| CmdError::Failed(format!("--plot {}: {e}", path.display())))
}

fn finish_replay(
    o: &Options,
    cfg: &crate::config::Config,
    d: &Demand,
    f: &Fleet,
    s: &Settings,
    reports: &[Report],
    answers: &[simulate::Answer],
) -> Result<(), CmdError> {
    if let Some(path) = &o.plot {
        write_plot(path, &plot::replay(&format!("tessera simulate: {}", d.source), reports))?;
    }
    let text = if o.json {
        let v = json!({
            "schema_version": SCHEMA_VERSION,
            "mode": "replay",
            "simulated": true,
            "demand": demand_json(d),
            "fleet": fleet_json(f),
            "settings": {
                "placement": s.placement,
                "replicas": s.replicas,
                "min_runtime_s": s.min_runtime_s,
                "reconfigure_s": s.reconfigure_s,
                "interval_s": s.interval_s,
                "max_changes_per_hour": s.max_changes_per_hour,
                "horizon_s": s.horizon_s,
            },
            "currency": cfg.advisor.currency,
            "policies": reports,
            "capacity": answers,
        });
        serde_json::to_string_pretty(&v).map_err(|e| CmdError::Failed(e.to_string()))? + "\n"
    } else {
        let mut t = header(d, f, &format!("; placement {}", s.placement.as_str()));
        t.push_str(&table::replay(reports, &cfg.advisor.currency));
        t.push_str(&table::capacity(answers));
        if let Some(p) = &o.plot {
            t.push_str(&format!("\nPicture: {}\n", p.display()));
        }
        t
    };
    out::print(&text)
}

fn finish_packing(o: &Options, d: &Demand, f: &Fleet, runs: &[Packing], share: f64) -> Result<(), CmdError> {
    if let Some(path) = &o.plot {
        write_plot(path, &plot::packing(&format!("tessera simulate --pack: {}", d.source), runs))?;
    }
    let text = if o.json {
        let v = json!({
            "schema_version": SCHEMA_VERSION,
            "mode": "packing",
            "simulated": true,
            "demand": demand_json(d),
            "fleet": fleet_json(f),
            "target_share": share,
            "packing": runs,
        });
        serde_json::to_string_pretty(&v).map_err(|e| CmdError::Failed(e.to_string()))? + "\n"
    } else {
        let mut t = header(d, f, &format!("; packed until the GPUs asked reach {:.0}% of the fleet", share * 100.0));
        t.push_str(&table::packing(runs));
        t
    };
    out::print(&text)
}

impl From<crate::cli::SimulateArgs> for Options {
    fn from(a: crate::cli::SimulateArgs) -> Self {
        Self {
            recording: a.recording,
            trace: a.trace,
            nodes: a.nodes,
            demand: a.demand,
            span: a.span,
            fleet: a.fleet,
            as_model: a.as_model,
            layout: a.layout,
            policy: a.policy,
            placement: a.placement,
            replicas: a.replicas,
            pack: a.pack,
            target_p90_wait: a.target_p90_wait,
            horizon: a.horizon,
            compress: a.compress,
            json: a.json,
            plot: a.plot,
            skip_bad: a.skip_bad,
        }
    }
}
