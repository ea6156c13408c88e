//! Recording a running engine: a frame of the store's fleet at most every `every`, and the
//! audit log's new records as actions, stamped on the data's clock.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::tail::AuditTail;
use super::writer::{Recorder, Settings, Summary};
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
    pub audit_error: Option<String>,
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
    pub fn start(settings: Settings, audit: Option<std::path::PathBuf>) -> Result<Self, String> {
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
    pub fn take(&mut self, store: &Store, wall: DateTime<Utc>) -> Result<bool, String> {
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

    pub fn finish(self) -> Result<Summary, String> {
        self.recorder.finish()
    }
}

/// `12.3 MiB`.
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.2} GiB", b as f64 / f64::from(1u32 << 30)),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// `512MiB`, `2GiB`, `100MB`, `4096` as bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: f64 = n.parse().map_err(|_| format!("{t:?}: expected a size such as 512MiB or 2GiB"))?;
    let k = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1048576.0,
        "g" | "gb" => 1e9,
        "gib" => 1073741824.0,
        "t" | "tb" => 1e12,
        "tib" => 1099511627776.0,
        _ => return Err(format!("{t:?}: expected a size such as 512MiB or 2GiB")),
    };
    let bytes = n * k;
    if !(1.0..1e18).contains(&bytes) {
        return Err(format!("{t:?}: expected a size of at least one byte"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_and_print() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("2 GiB"), Ok(2 << 30));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("big").is_err() && parse_size("0").is_err() && parse_size("5 parsecs").is_err());
        assert_eq!(size(3 << 20), "3.0 MiB");
    }
}
