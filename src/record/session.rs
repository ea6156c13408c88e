//! Recording a running engine: a frame of the store's fleet at most every `every`, and the
//! audit log's new records as actions, stamped on the data's clock.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::tail::AuditTail;
use super::writer::{Recorder, Settings, Summary, WriteError};
use super::{ActionRecord, Frame};
use crate::store::Store;

pub struct Session {
    recorder: Recorder,
    tail: Option<AuditTail>,
    every: Duration,
    last: Option<Instant>,
    /// Audit lines that were not records (counted for the closing line).
    pub skipped_lines: usize,
    /// The last time the audit log could not be read (the recording goes on without it).
    pub audit_error: Option<super::tail::TailError>,
}

/// The moment a frame of `store` stands for: the simulator's clock where the simulator is the
/// only source (it may run faster than the wall's), else the wall clock, when it was shown. The
/// rule holds for the whole recording (it depends on what is configured, not on who answers),
/// so the clock never switches between frames.
pub fn frame_time(store: &Store, wall: DateTime<Utc>) -> DateTime<Utc> {
    use crate::model::{SourceHealth, SourceKind};
    let f = store.fleet();
    // NVML registered as unavailable where it found no GPU and the simulator runs instead.
    let probe = |s: &crate::model::SourceStatus| {
        s.kind == SourceKind::Nvml && s.last_ok.is_none() && matches!(s.health, SourceHealth::Unavailable { .. })
    };
    let real = f.sources.iter().any(|s| s.kind != SourceKind::Simulated && !probe(s));
    let sim = f.sources.iter().any(|s| s.kind == SourceKind::Simulated);
    match f.taken_at {
        Some(t) if sim && !real => t,
        _ => wall,
    }
}

impl Session {
    /// Start recording to `settings.path`, following the audit log at `audit` from its end.
    pub fn start(settings: Settings, audit: Option<std::path::PathBuf>) -> Result<Self, WriteError> {
        let every = settings.every;
        Ok(Self {
            recorder: Recorder::create(settings)?,
            tail: audit.map(AuditTail::new),
            every,
            last: None,
            skipped_lines: 0,
            audit_error: None,
        })
    }

    /// Take a frame if one is due (and nothing is still connecting), with the actions audited
    /// since the last. Returns true when a frame was written.
    pub fn take(&mut self, store: &Store, wall: DateTime<Utc>) -> Result<bool, WriteError> {
        // (A caller ticking at `every` is a few milliseconds early now and then.)
        let early = |t: Instant| t.elapsed() + Duration::from_millis(50) < self.every;
        if self.last.is_some_and(early) || store.fleet().taken_at.is_none() {
            return Ok(false);
        }
        self.last = Some(Instant::now());
        let at = frame_time(store, wall);
        if let Some(tail) = &mut self.tail {
            match tail.poll() {
                Ok((records, bad)) => {
                    self.skipped_lines += bad;
                    for record in records {
                        self.recorder.action(&ActionRecord { at, record })?;
                    }
                }
                // Frames matter more than a missed action: go on, and say so at the end.
                Err(e) => self.audit_error = Some(e),
            }
        }
        self.recorder.frame(&Frame::from_store(store, at))
    }

    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    pub fn finish(self) -> Result<Summary, WriteError> {
        self.recorder.finish()
    }
}
