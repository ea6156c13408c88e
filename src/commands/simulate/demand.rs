//! Where a simulation's demand comes from: the demo's arrivals, a recording, the Alibaba
//! trace or the project's CSV (streamed, a bad line naming file, line and field), and the
//! live fleet where a file brings none.

use std::path::{Path, PathBuf};

use chrono::Timelike;

use super::options::{Options, duration_s};
use super::{DEMO_START, usage};
use crate::cli::Global;
use crate::error::CmdError;
use crate::simulate::{self, Fleet, Job, input};

/// The demand with where it came from and what reading it said.
pub(super) struct Demand {
    pub source: String,
    pub jobs: Vec<Job>,
    pub without_gpu: u64,
    pub skipped: u64,
    pub notes: Vec<String>,
    /// Where the demand's second 0 falls in the UTC day.
    pub day_offset_s: i64,
    /// The fleet the input brings (the demo's, a recording's, the trace's node list).
    pub fleet: Option<Fleet>,
    /// The simulated cluster's arrivals (its example schedule stands in where none is set).
    pub demo: bool,
    /// The input's jobs without a GPU where it keeps them (the trace's CPU-only pods, for a
    /// packing), each with the index of the GPU job it came before.
    pub cpu_only: Vec<(usize, Job)>,
    /// The input has no times: it can be packed, not replayed.
    pub timeless: bool,
}

/// The demo's arrivals over `span` and its fleet.
pub(super) fn demo(g: &Global, cfg: &crate::config::Config, span: Option<&str>) -> Result<Demand, CmdError> {
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
            let j = simulate::input::recording::job(
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
        cpu_only: Vec::new(),
        timeless: false,
    })
}

/// The live fleet, collected once, where sources are configured (not the simulated cluster):
/// a file's demand on the cards there are.
pub(super) fn live_fleet(cfg: &crate::config::Config, notes: &mut Vec<String>) -> Result<Option<Fleet>, CmdError> {
    if cfg.sources.demo || !cfg.sources.any_real() {
        return Ok(None);
    }
    let (fleet, simulated) = crate::commands::collect_once(cfg)?;
    if simulated || fleet.nodes.is_empty() {
        return Ok(None);
    }
    notes.push(format!("fleet: the live one, collected once ({} cards)", fleet.cards().count()));
    Ok(Some(simulate::from_model::fleet(&fleet)))
}

pub(super) fn read_demand(g: &Global, cfg: &crate::config::Config, o: &Options) -> Result<Demand, CmdError> {
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
        notes.push(format!(
            "{} skipped (--skip-bad); the first:",
            crate::units::count(parsed.skipped, "malformed line", "malformed lines")
        ));
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
        cpu_only: parsed.cpu_only,
        timeless: parsed.timeless,
    })
}

/// Open `path` and hand it, streamed line by line, to `parse`; a bad line is a usage error
/// (exit 2) naming the file, the line and the field.
pub(super) fn read_lines<T>(
    path: &Path,
    parse: impl FnOnce(&str, std::io::BufReader<std::fs::File>) -> Result<T, input::LineError>,
) -> Result<T, CmdError> {
    let name = path.display().to_string();
    let file = crate::files::open_regular(path).map_err(|e| usage(&format!("{name}: {e}")))?;
    parse(&name, std::io::BufReader::with_capacity(1 << 16, file)).map_err(|e| usage(&e.to_string()))
}

/// A recording's workloads and its last fleet.
pub(super) fn from_recording(paths: &[PathBuf]) -> Result<Demand, CmdError> {
    use crate::record::reader::{Player, Recording};
    let rec = Recording::open(paths).map_err(|e| usage(&format!("--recording: {e}")))?;
    let mut player = Player::new(rec);
    let (jobs, n) = input::jobs_from_recording(&mut player);
    let fleet = input::recording::fleet_from_recording(&mut player).map_err(|e| usage(&format!("--recording: {e}")))?;
    let mut notes = Vec::new();
    let counted = [
        (n.unreadable_frames, "frame could not be read (skipped)", "frames could not be read (skipped)"),
        (
            n.never_started,
            "workload never seen running (its duration is unknown: left out)",
            "workloads never seen running (their duration is unknown: left out)",
        ),
        (
            n.cut_at_end,
            "workload still running at the end (cut there)",
            "workloads still running at the end (cut there)",
        ),
        (
            n.shares_guessed,
            "share of a card whose replicas are unknown (a quarter card)",
            "shares of cards whose replicas are unknown (a quarter card each)",
        ),
        (
            n.taken_as_one,
            "workload asking several instances or shares (taken as one)",
            "workloads asking several instances or shares (taken as one)",
        ),
        (
            n.unknown_profile,
            "workload with a MIG profile no catalog model has (left out)",
            "workloads with a MIG profile no catalog model has (left out)",
        ),
    ];
    notes.extend(counted.iter().filter(|(c, ..)| *c > 0).map(|(c, one, many)| crate::units::count(*c, one, many)));
    notes.extend(n.first_errors.iter().map(|e| format!("  {e}")));
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    Ok(Demand {
        source: format!("recording {} ({})", names.join(" "), crate::units::count(n.frames, "frame", "frames")),
        jobs,
        without_gpu: n.without_gpu,
        skipped: 0,
        notes,
        day_offset_s: n.start.map_or(0, |t| i64::from(t.num_seconds_from_midnight())),
        fleet: Some(fleet),
        demo: false,
        cpu_only: Vec::new(),
        timeless: false,
    })
}

/// Arrivals brought closer together by `factor` (a trace replayed on a faster clock).
pub(super) fn compress(jobs: &mut [Job], factor: f64) {
    let t0 = jobs.first().map_or(0, |j| j.submit);
    for j in jobs {
        j.submit = t0 + ((j.submit - t0) as f64 / factor) as i64;
    }
}
