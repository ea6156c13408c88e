//! `tessera record`: headless, the merged fleet and every audited action to a recording until
//! `--for` passes or a signal comes; the index is written at the end.

use std::path::PathBuf;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::mpsc;

use crate::cli::Global;
use crate::error::CmdError;
use crate::record::session::Session;
use crate::record::writer::{Settings, WriteError};
use crate::sources::SourceUpdate;
use crate::store::Store;
use crate::units::duration;
use crate::units::{parse_size, size};

/// `tessera record`'s options as typed.
#[derive(Debug, Clone, Default)]
pub struct RecordOptions {
    pub out: Option<PathBuf>,
    pub every: Option<String>,
    pub run_for: Option<String>,
    pub rotate_size: Option<String>,
    pub rotate_every: Option<String>,
    pub keep: Option<u32>,
}

/// The shortest time between frames.
pub const MIN_EVERY: Duration = Duration::from_millis(100);

fn dur(flag: &str, v: &Option<String>) -> Result<Option<Duration>, CmdError> {
    v.as_ref().map(|t| duration::parse(t).map_err(|e| CmdError::Usage(format!("{flag} {t}: {e}")))).transpose()
}

/// The writer's settings from the options and the config's sources.
pub fn writer_settings(o: &RecordOptions, cfg: &crate::config::Config) -> Result<Settings, CmdError> {
    let every = dur("--every", &o.every)?.unwrap_or(Duration::from_secs(1));
    if every < MIN_EVERY {
        return Err(CmdError::Usage(format!("--every {}: at least 100ms", o.every.clone().unwrap_or_default())));
    }
    let rotate_size = o
        .rotate_size
        .as_ref()
        .map(|t| parse_size(t).map_err(|e| CmdError::Usage(format!("--rotate-size {e}"))))
        .transpose()?;
    let rotate_every = dur("--rotate-every", &o.rotate_every)?;
    if rotate_every.is_some_and(|d| d < Duration::from_secs(60)) {
        return Err(CmdError::Usage("--rotate-every: at least 1m".into()));
    }
    if rotate_size.is_some_and(|s| s < 1 << 20) {
        return Err(CmdError::Usage("--rotate-size: at least 1MiB".into()));
    }
    match o.keep {
        Some(0) => return Err(CmdError::Usage("--keep 0: keep at least one part".into())),
        Some(_) if rotate_every.is_none() && rotate_size.is_none() => {
            return Err(CmdError::Usage("--keep counts rotated parts: add --rotate-size or --rotate-every".into()));
        }
        _ => {}
    }
    let path = o
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("tessera-{}.tsrec", Utc::now().format("%Y%m%dT%H%M%SZ"))));
    Ok(Settings { path, every, rotate_size, rotate_every, keep: o.keep, sources: source_names(cfg) })
}

/// The sources a config names, for the recording's header.
fn source_names(cfg: &crate::config::Config) -> Vec<String> {
    let s = &cfg.sources;
    let mut out = Vec::new();
    if s.nvml.is_some() {
        out.push("nvml".to_string());
    }
    if s.slurm {
        out.push("slurm".into());
    }
    if s.kubernetes.is_some() {
        out.push("kubernetes".into());
    }
    if s.prometheus.is_some() {
        out.push("prometheus".into());
    }
    out.extend(s.scrape.iter().map(|u| crate::sources::scrape::source_name(u)));
    if s.demo || out.is_empty() {
        out.push("sim".into());
    }
    out
}

pub fn record(g: &Global, o: RecordOptions) -> Result<(), CmdError> {
    let cfg = super::settings(g)?;
    let settings = writer_settings(&o, &cfg)?;
    let run_for = dur("--for", &o.run_for)?;
    let rt = crate::engine::runtime()?;
    rt.block_on(async move {
        let crate::engine::Engine { mut store, mut updates, runner, notes, .. } = crate::engine::Engine::start(&cfg)?;
        for n in &notes {
            super::to_stderr(&format!("tessera: {n}"));
        }
        let path = settings.path.clone();
        let every = settings.every;
        let mut session = Session::start(settings, runner.audit_path().map(std::path::Path::to_path_buf))
            .map_err(CmdError::failed)?;
        super::to_stderr(&format!(
            "tessera: recording to {} every {} ({}; Ctrl-C stops)",
            path.display(),
            duration::format(every),
            run_for.map_or_else(|| "until stopped".into(), |d| format!("for {}", duration::format(d)))
        ));
        let failed = take_frames(&mut store, &mut updates, &mut session, every, run_for).await?;
        finish(session, failed, o.keep)
    })
}

/// Merge the sources' updates and take a frame at each tick (`every` at most 250 ms apart)
/// until `run_for` passes or a signal comes; the error of a frame that could not be taken,
/// which stops it too.
async fn take_frames(
    store: &mut Store,
    updates: &mut mpsc::Receiver<SourceUpdate>,
    session: &mut Session,
    every: Duration,
    run_for: Option<Duration>,
) -> Result<Option<WriteError>, CmdError> {
    let signal = |k| tokio::signal::unix::signal(k).map_err(|e| CmdError::Failed(format!("cannot watch signals: {e}")));
    use tokio::signal::unix::SignalKind;
    let (mut term, mut hup, mut int) =
        (signal(SignalKind::terminate())?, signal(SignalKind::hangup())?, signal(SignalKind::interrupt())?);
    let deadline = run_for.map(|d| tokio::time::Instant::now() + d);
    let mut tick = tokio::time::interval(every.min(Duration::from_millis(250)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut dirty = false;
    let started = tokio::time::Instant::now();
    let failed = loop {
        tokio::select! {
            Some(u) = updates.recv() => {
                dirty |= store.apply_deferred(u, Utc::now());
                while let Ok(more) = updates.try_recv() {
                    dirty |= store.apply_deferred(more, Utc::now());
                }
            }
            _ = tick.tick() => {
                let now = Utc::now();
                store.check_staleness(now);
                // Sources still connecting are given the first answer's time.
                if store.any_connecting() && started.elapsed() < crate::engine::COLLECT_TIMEOUT {
                    continue;
                }
                if std::mem::take(&mut dirty) {
                    store.rebuild();
                }
                if let Err(e) = session.take(store, now) {
                    break Some(e);
                }
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => break None,
            _ = term.recv() => break None,
            _ = hup.recv() => break None,
            _ = int.recv() => break None,
        }
    };
    Ok(failed)
}

/// Close the recording and say what it holds (the parts kept, `keep` of them, and what was
/// skipped); an error where `failed` stopped it or it could not be closed.
fn finish(mut session: Session, failed: Option<WriteError>, keep: Option<u32>) -> Result<(), CmdError> {
    let skipped = session.skipped_lines;
    let session_audit = session.audit_error.take();
    let summary = match session.finish() {
        Ok(s) => s,
        // The first error is the one that matters; the close's is said after it.
        Err(close) => {
            let first = failed.map_or_else(String::new, |e| format!("recording stopped: {e}; "));
            return Err(CmdError::Failed(format!("{first}the recording could not be closed: {close}")));
        }
    };
    for w in &summary.warnings {
        super::to_stderr(&format!("tessera: {w}"));
    }
    let parts: Vec<String> = summary.kept().iter().map(|p| p.display().to_string()).collect();
    let removed = match summary.removed.len() {
        0 => String::new(),
        n => format!(" ({n} older parts removed to keep {})", keep.unwrap_or_default()),
    };
    super::to_stderr(&format!(
        "tessera: recorded {} ({}) and {}, {}, in {}{removed}{}",
        crate::units::count(summary.frames, "frame", "frames"),
        crate::units::count(summary.keyframes, "keyframe", "keyframes"),
        crate::units::count(summary.actions, "action", "actions"),
        size(summary.bytes),
        parts.join(", "),
        if skipped > 0 {
            format!(
                " ({} of the audit log that were not records skipped)",
                crate::units::count(skipped as u64, "line", "lines")
            )
        } else {
            String::new()
        }
    ));
    if let Some(e) = session_audit {
        super::to_stderr(&format!("tessera: the audit log could not always be read ({e}): actions may be missing"));
    }
    match failed {
        Some(e) => Err(CmdError::Failed(format!("recording stopped: {e}"))),
        None => Ok(()),
    }
}
