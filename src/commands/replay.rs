//! `tessera replay` and `snapshot --at`: a recording (or Prometheus history rebuilt into one)
//! in the console, or one recorded moment printed.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::settings;
use crate::cli::Global;
use crate::config::{Config, moment};
use crate::error::CmdError;
use crate::out;
use crate::record::reader::{Player, Recording};
use crate::units::duration;

/// The step between rebuilt moments unless `--step` says otherwise.
pub const DEFAULT_STEP: Duration = Duration::from_secs(60);

fn open(files: &[PathBuf]) -> Result<Player, CmdError> {
    let rec = Recording::open(files).map_err(CmdError::failed)?;
    if rec.frames().is_empty() {
        let why = rec.problems.first().map(|p| format!(": {p}")).unwrap_or_default();
        return Err(CmdError::Failed(format!("{}: no frame to show{why}", files[0].display())));
    }
    Ok(Player::new(rec))
}

/// The sources besides Prometheus cannot look back: say they are left out.
fn left_out(cfg: &Config) -> Option<String> {
    let s = &cfg.sources;
    let mut names = Vec::new();
    if s.slurm {
        names.push("slurm");
    }
    if s.kubernetes.is_some() {
        names.push("kubernetes");
    }
    if s.nvml.is_some() {
        names.push("nvml");
    }
    if !s.scrape.is_empty() {
        names.push("scrape");
    }
    (!names.is_empty()).then(|| {
        format!("{} cannot look back (only Prometheus keeps history): left out of past moments", names.join(", "))
    })
}

/// A temporary recording of Prometheus history, removed when dropped.
struct Rebuilt(PathBuf);

impl Drop for Rebuilt {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Moments from `from` to `to`, `step` apart, rebuilt from Prometheus into a temporary
/// recording.
fn rebuild(cfg: &Config, from: DateTime<Utc>, to: DateTime<Utc>, step: Duration) -> Result<Rebuilt, CmdError> {
    let Some(base) = cfg.sources.prometheus.clone() else {
        return Err(CmdError::Usage("looking back needs a recording FILE, or --prometheus URL".into()));
    };
    let moments = crate::record::prometheus::moments(from, to, step).map_err(CmdError::usage)?;
    if let Some(note) = left_out(cfg) {
        super::to_stderr(&format!("tessera: {note}"));
    }
    let path = std::env::temp_dir().join(format!(
        "tessera-prometheus-{}-{}.tsrec",
        std::process::id(),
        Utc::now().timestamp_millis()
    ));
    let kept = Rebuilt(path.clone());
    let settings = crate::engine::prometheus_settings(cfg, &base);
    let client = crate::engine::http_client(&cfg.sources, Some(&base))?;
    let rt = crate::engine::runtime()?;
    let n = moments.len();
    if n > 1 {
        let shown = crate::url::redact(&base);
        super::to_stderr(&format!("tessera: rebuilding {n} moments from Prometheus ({shown})"));
    }
    let mut told = std::time::Instant::now();
    let summary = rt
        .block_on(crate::record::prometheus::rebuild(&settings, &client, &moments, step, &path, |done, of| {
            if told.elapsed() >= Duration::from_secs(2) {
                super::to_stderr(&format!("tessera: {done}/{of}"));
                told = std::time::Instant::now();
            }
        }))
        .map_err(CmdError::failed)?;
    if summary.frames < n as u64 {
        super::to_stderr(&format!(
            "tessera: Prometheus stopped answering ({} moments in a row): replaying the first {} of {n} moments",
            crate::record::prometheus::UNANSWERED_IN_A_ROW,
            summary.frames
        ));
    }
    Ok(kept)
}

fn parse_at(
    flag: &str,
    text: &str,
    reference: DateTime<Utc>,
    span: Option<(DateTime<Utc>, DateTime<Utc>)>,
) -> Result<DateTime<Utc>, CmdError> {
    moment::parse(text, reference, span).map_err(|e| CmdError::Usage(format!("{flag} {e}")))
}

/// `tessera replay FILE...`, or `--prometheus URL --from .. --to ..` without files.
pub fn replay(
    g: &Global,
    files: &[PathBuf],
    from: Option<String>,
    to: Option<String>,
    step: Option<String>,
) -> Result<(), CmdError> {
    let cfg = settings(g)?;
    let theme = crate::ui::theme::Theme::load(cfg.theme.as_deref(), crate::ui::theme::Depth::detect(), g.ascii)
        .map_err(|e| CmdError::Usage(e.to_string()))?;
    let speed = g.speed.unwrap_or(1.0);
    let now = Utc::now();
    if files.is_empty() && from.is_none() && g.at.is_none() {
        return Err(CmdError::Usage(
            "replay needs a recording FILE, or --prometheus URL --from TIME [--to TIME]".into(),
        ));
    }
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return Err(CmdError::Usage("replay needs a terminal (snapshot --at TIME FILE prints one moment)".into()));
    }
    if from.is_some() && g.at.is_some() {
        return Err(CmdError::Usage("--from and --at say the same: give one".into()));
    }
    let (player, from, what, _kept) = if files.is_empty() {
        let Some(from) = from.or_else(|| g.at.clone()) else {
            return Err(CmdError::Usage(
                "replay needs a recording FILE, or --prometheus URL --from TIME [--to TIME]".into(),
            ));
        };
        let from = parse_at("--from", &from, now, None)?;
        let to = match to.or_else(|| g.at.clone()) {
            Some(t) => parse_at("--to", &t, now, None)?,
            None => now,
        };
        let step = match &step {
            Some(s) => duration::parse(s).map_err(|e| CmdError::Usage(format!("--step {s}: {e}")))?,
            None => DEFAULT_STEP,
        };
        let kept = rebuild(&cfg, from, to, step)?;
        let player = open(std::slice::from_ref(&kept.0))?;
        (player, None, "Prometheus history".to_string(), Some(kept))
    } else {
        if to.is_some() || step.is_some() {
            return Err(CmdError::Usage("--to and --step are for replaying Prometheus history (no FILE)".into()));
        }
        let player = open(files)?;
        let span = player.rec.span();
        let end = span.map_or(now, |s| s.1);
        let from = from.or_else(|| g.at.clone()).map(|t| parse_at("--from", &t, end, span)).transpose()?;
        if let (Some(t), Some((a, b))) = (from, span)
            && (t < a || t > b)
        {
            return Err(CmdError::Usage(format!(
                "--from {}: outside the recording ({} to {})",
                t.to_rfc3339(),
                a.to_rfc3339(),
                b.to_rfc3339()
            )));
        }
        let name = files[0].file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let what = if files.len() > 1 { format!("{name} (+{} parts)", files.len() - 1) } else { name };
        (player, from, what, None)
    };
    crate::app::replay::run(&cfg, theme, g.ascii, crate::app::replay::Replaying { player, from, speed, what })
}

/// `tessera snapshot [--at TIME] [FILE...]`: one recorded moment (the last without `--at`),
/// or with `--prometheus URL --at TIME` one moment of Prometheus history; else a collection now.
pub fn snapshot_cmd(g: &Global, json: bool, files: &[PathBuf]) -> Result<(), CmdError> {
    if files.is_empty() && g.at.is_none() {
        return super::snapshot(g, json);
    }
    let cfg = settings(g)?;
    let now = Utc::now();
    let (frame, problems, from) = if files.is_empty() {
        let at = parse_at("--at", g.at.as_deref().unwrap_or_default(), now, None)?;
        let Some(base) = cfg.sources.prometheus.clone() else {
            return Err(CmdError::Usage("--at needs a recording FILE, or --prometheus URL".into()));
        };
        if let Some(note) = left_out(&cfg) {
            super::to_stderr(&format!("tessera: {note}"));
        }
        let settings = crate::engine::prometheus_settings(&cfg, &base);
        let client = crate::engine::http_client(&cfg.sources, Some(&base))?;
        // A time Prometheus cannot have is a usage error, as in the console.
        crate::record::prometheus::moments(at, at, DEFAULT_STEP).map_err(CmdError::usage)?;
        let rt = crate::engine::runtime()?;
        let frame = rt.block_on(crate::record::prometheus::moment(&settings, &client, at)).map_err(CmdError::failed)?;
        (frame, Vec::new(), "prometheus".to_string())
    } else {
        let mut player = open(files)?;
        let span = player.rec.span();
        let (start, end) = span.unwrap_or((now, now));
        let at = match &g.at {
            Some(t) => parse_at("--at", t, end, span)?,
            None => end,
        };
        if at < start || at > end {
            return Err(CmdError::Usage(format!(
                "--at {}: outside the recording ({} to {})",
                at.to_rfc3339(),
                start.to_rfc3339(),
                end.to_rfc3339()
            )));
        }
        let frame = player.at(at).map_err(CmdError::failed)?.clone();
        (frame, player.rec.problems.clone(), shown(files))
    };
    for p in &problems {
        super::to_stderr(&format!("tessera: {p}"));
    }
    let mut fleet = frame.fleet;
    fleet.index_workloads();
    let pair = (fleet, frame.simulated);
    if json {
        let recorded =
            serde_json::json!({ "from": from, "at": frame.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true) });
        return out::print_json(&super::snapshot::SnapshotJson::new(&pair, Some(recorded)));
    }
    let table = super::snapshot::snapshot_table_at(&pair, frame.at);
    out::print(&format!("recorded at {} ({from})\n{table}\n", frame.at.format("%Y-%m-%d %H:%M:%S UTC")))
}

fn shown(files: &[PathBuf]) -> String {
    files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}
