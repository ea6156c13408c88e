//! The writer: frames as keyframes and deltas, actions as they come, each record flushed as
//! written (a crash loses at most the frame being written), the index and trailer at close,
//! rotation to a new part by size or age.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::format::{self, Entry, Header, Index, Kind, RecordHeader};
use super::{ActionRecord, Frame, patch};

/// A keyframe at least every this many frames: the most a seek decodes is one keyframe and
/// this many deltas, however far apart the frames are (two minutes at a frame a second; the
/// simulator at `--speed 600` puts ten minutes of its time between frames).
pub const KEY_EVERY_FRAMES: u32 = 120;

/// Why a recording could not be started or written on. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{}: exists (a part of an earlier recording; tessera never overwrites one): choose another --out", .0.display())]
    EarlierPart(PathBuf),
    #[error("{}: exists (tessera never overwrites a recording)", .0.display())]
    Exists(PathBuf),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: {source}", path.display())]
    Encode { path: PathBuf, source: serde_json::Error },
    #[error("{}: zstd: {source}", path.display())]
    Zstd { path: PathBuf, source: std::io::Error },
    /// What a reader would take for damage is not written.
    #[error("a frame at {}: before 1970 or after 9999", .0.to_rfc3339())]
    OutOfRange(DateTime<Utc>),
    #[error("the recording is closed")]
    Closed,
    /// An earlier write failed (its message): nothing more is written.
    #[error("the recording stopped after an error: {0}")]
    Stopped(String),
}

impl WriteError {
    /// What a failed write to `path` becomes.
    fn io(path: &Path) -> impl Fn(std::io::Error) -> Self + Copy + '_ {
        move |source| Self::Io { path: path.to_path_buf(), source }
    }
}

/// `value` as JSON in one zstd frame: the payload of an action or of the index.
fn whole_payload(path: &Path, value: &impl serde::Serialize) -> Result<Vec<u8>, WriteError> {
    let json = serde_json::to_vec(value).map_err(|source| WriteError::Encode { path: path.to_path_buf(), source })?;
    zstd::bulk::compress(&json, format::LEVEL).map_err(|source| WriteError::Zstd { path: path.to_path_buf(), source })
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// The first part's file; later parts add `-2`, `-3`, ... before the extension.
    pub path: PathBuf,
    pub every: Duration,
    /// Start a new part past this many bytes.
    pub rotate_size: Option<u64>,
    /// Start a new part when this one spans this long (data time).
    pub rotate_every: Option<Duration>,
    /// Keep at most this many parts, removing the oldest.
    pub keep: Option<u32>,
    pub sources: Vec<String>,
}

/// What was written, for the closing line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub frames: u64,
    pub keyframes: u64,
    pub actions: u64,
    /// Bytes written, every part together (removed parts included).
    pub bytes: u64,
    /// Every part written, in order (removed ones too).
    pub parts: Vec<PathBuf>,
    /// Parts removed to keep `keep`.
    pub removed: Vec<PathBuf>,
    /// What went wrong without stopping the recording.
    pub warnings: Vec<String>,
}

impl Summary {
    /// The parts still on disk.
    pub fn kept(&self) -> Vec<&PathBuf> {
        self.parts.iter().filter(|p| !self.removed.contains(p)).collect()
    }
}

/// A keyframe and the deltas after it: one zstd stream, flushed at each record, so a delta
/// is compressed against everything before it in its group.
struct Group {
    stream: zstd::stream::write::Encoder<'static, Vec<u8>>,
    key_len: usize,
    frames: u32,
    prev: serde_json::Value,
}

impl Group {
    /// `json` compressed on the group's stream, flushed: one record's payload.
    fn push(&mut self, json: &[u8]) -> std::io::Result<Vec<u8>> {
        self.stream.write_all(json)?;
        self.stream.flush()?;
        Ok(std::mem::take(self.stream.get_mut()))
    }
}

struct Part {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    offset: u64,
    index: Vec<Entry>,
    started: Option<DateTime<Utc>>,
    group: Option<Group>,
}

pub struct Recorder {
    settings: Settings,
    part: Option<Part>,
    number: u32,
    summary: Summary,
    last_at: Option<DateTime<Utc>>,
    /// The next frame is a keyframe (a delta grew past half of its keyframe).
    key_next: bool,
    /// A write failed: the file and the writer's state no longer agree, so nothing more is
    /// written (a delta on a frame the file lacks would replay as a wrong fleet).
    failed: Option<String>,
}

/// `night.tsrec` part 3 is `night-3.tsrec`.
pub fn part_path(first: &Path, n: u32) -> PathBuf {
    if n <= 1 {
        return first.to_path_buf();
    }
    let stem = first.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match first.extension() {
        Some(e) => format!("{stem}-{n}.{}", e.to_string_lossy()),
        None => format!("{stem}-{n}"),
    };
    first.with_file_name(name)
}

impl Recorder {
    /// Create the first part. An existing file is never overwritten, nor started beside the
    /// parts of an earlier recording of the same name (a rotation would run into them).
    pub fn create(settings: Settings) -> Result<Self, WriteError> {
        if let Some(old) = earlier_part(&settings.path) {
            return Err(WriteError::EarlierPart(old));
        }
        let mut r = Self {
            settings,
            part: None,
            number: 0,
            summary: Summary::default(),
            last_at: None,
            key_next: false,
            failed: None,
        };
        r.open_part(Utc::now())?;
        Ok(r)
    }

    fn open_part(&mut self, now: DateTime<Utc>) -> Result<(), WriteError> {
        self.number += 1;
        let path = part_path(&self.settings.path, self.number);
        let file =
            // 0600: a recording carries the audit lines (user, host, SSH client).
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => WriteError::Exists(path.clone()),
                _ => WriteError::io(&path)(e),
            })?;
        let header = Header {
            format: "tessera-recording".into(),
            tessera: env!("CARGO_PKG_VERSION").into(),
            created_at: now,
            every_ms: u64::try_from(self.settings.every.as_millis()).unwrap_or(u64::MAX),
            sources: self.settings.sources.clone(),
            part: self.number,
        };
        let bytes = header.encode();
        let mut out = std::io::BufWriter::new(file);
        out.write_all(&bytes).and_then(|()| out.flush()).map_err(WriteError::io(&path))?;
        self.summary.parts.push(path.clone());
        self.part = Some(Part { path, out, offset: bytes.len() as u64, index: Vec::new(), started: None, group: None });
        if let Some(keep) = self.settings.keep.filter(|&k| k > 0)
            && self.number > keep
        {
            let old = part_path(&self.settings.path, self.number - keep);
            // A part that cannot be removed stays; recording goes on, and the end says so.
            match std::fs::remove_file(&old) {
                Ok(()) => self.summary.removed.push(old),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => self.summary.warnings.push(format!("{} not removed: {e}", old.display())),
            }
        }
        Ok(())
    }

    /// The path of the part being written.
    pub fn path(&self) -> Option<&Path> {
        self.part.as_ref().map(|p| p.path.as_path())
    }

    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// Write one frame. A frame not after the last one (the data's clock did not move) is
    /// skipped: returns false.
    pub fn frame(&mut self, frame: &Frame) -> Result<bool, WriteError> {
        if let Some(e) = &self.failed {
            return Err(WriteError::Stopped(e.clone()));
        }
        if self.last_at.is_some_and(|t| frame.at <= t) {
            return Ok(false);
        }
        let r = self.write_frame(frame);
        if let Err(e) = &r {
            self.failed = Some(e.to_string());
        }
        r
    }

    fn write_frame(&mut self, frame: &Frame) -> Result<bool, WriteError> {
        // What a reader would take for damage is not written.
        if !(0..=format::MAX_TIME_MS).contains(&frame.at.timestamp_millis()) {
            return Err(WriteError::OutOfRange(frame.at));
        }
        self.rotate_if_due(frame.at)?;
        let Some(part) = self.part.as_mut() else { return Err(WriteError::Closed) };
        let flags = if frame.outage() { format::FLAG_OUTAGE } else { 0 };
        let at_ms = frame.at.timestamp_millis();
        let key_due = self.key_next || part.group.as_ref().is_none_or(|g| g.frames >= KEY_EVERY_FRAMES);
        let path = part.path.clone();
        let encode = |e| WriteError::Encode { path: path.clone(), source: e };
        let io = WriteError::io(&path);
        let zstd = |e| WriteError::Zstd { path: path.clone(), source: e };
        let value = serde_json::to_value(frame).map_err(encode)?;
        if key_due {
            let json = serde_json::to_vec(&value).map_err(encode)?;
            let stream = zstd::stream::write::Encoder::new(Vec::new(), format::LEVEL).map_err(zstd)?;
            let mut g = Group { stream, key_len: 0, frames: 1, prev: value };
            let payload = g.push(&json).map_err(zstd)?;
            g.key_len = payload.len();
            write_record(part, Kind::Key, flags, at_ms, &payload).map_err(io)?;
            part.group = Some(g);
            self.summary.keyframes += 1;
            self.key_next = false;
        } else if let Some(g) = part.group.as_mut() {
            let p = patch::diff(&g.prev, &value).unwrap_or_else(|| serde_json::json!({ "o": {} }));
            let json = serde_json::to_vec(&p).map_err(encode)?;
            let payload = g.push(&json).map_err(zstd)?;
            // A delta as big as half its keyframe: the next frame starts a new group.
            self.key_next = payload.len() > g.key_len / 2;
            g.frames += 1;
            g.prev = value;
            write_record(part, Kind::Delta, flags, at_ms, &payload).map_err(io)?;
        }
        part.started.get_or_insert(frame.at);
        self.summary.frames += 1;
        self.last_at = Some(frame.at);
        Ok(true)
    }

    /// Write an audited action.
    pub fn action(&mut self, a: &ActionRecord) -> Result<(), WriteError> {
        if let Some(e) = &self.failed {
            return Err(WriteError::Stopped(e.clone()));
        }
        let r = self.write_action(a);
        if let Err(e) = &r {
            self.failed = Some(e.to_string());
        }
        r
    }

    fn write_action(&mut self, a: &ActionRecord) -> Result<(), WriteError> {
        let Some(part) = self.part.as_mut() else { return Err(WriteError::Closed) };
        let path = part.path.clone();
        let payload = whole_payload(&path, a)?;
        write_record(part, Kind::Action, 0, a.at.timestamp_millis(), &payload).map_err(WriteError::io(&path))?;
        self.summary.actions += 1;
        Ok(())
    }

    fn rotate_if_due(&mut self, at: DateTime<Utc>) -> Result<(), WriteError> {
        let Some(part) = &self.part else { return Ok(()) };
        let big = self.settings.rotate_size.is_some_and(|s| part.offset >= s);
        let old = match (self.settings.rotate_every, part.started) {
            (Some(every), Some(start)) => (at - start).to_std().is_ok_and(|d| d >= every),
            _ => false,
        };
        if big || old {
            self.close_part()?;
            self.open_part(at)?;
        }
        Ok(())
    }

    fn close_part(&mut self) -> Result<(), WriteError> {
        let Some(mut part) = self.part.take() else { return Ok(()) };
        let path = part.path.clone();
        let io = WriteError::io(&path);
        let index = Index { entries: std::mem::take(&mut part.index) };
        let payload = whole_payload(&path, &index)?;
        let at_ms = self.last_at.map_or(0, |t| t.timestamp_millis());
        let index_at = part.offset;
        write_record(&mut part, Kind::Index, 0, at_ms, &payload).map_err(io)?;
        let mut trailer = index_at.to_le_bytes().to_vec();
        trailer.extend_from_slice(format::TRAILER_MAGIC);
        part.out.write_all(&trailer).map_err(io)?;
        self.summary.bytes += part.offset + trailer.len() as u64;
        part.out.flush().map_err(io)?;
        part.out.get_ref().sync_all().map_err(io)?;
        Ok(())
    }

    /// Write the index and close. Without it (a crash), a reader scans the file instead.
    pub fn finish(mut self) -> Result<Summary, WriteError> {
        self.close_part()?;
        Ok(std::mem::take(&mut self.summary))
    }
}

/// A later part of `first` already on disk (`night-2.tsrec` for `night.tsrec`).
fn earlier_part(first: &Path) -> Option<PathBuf> {
    let stem = first.file_stem()?.to_string_lossy().into_owned();
    let ext = first.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    let dir = match first.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::read_dir(&dir).ok()?.flatten().map(|e| e.path()).find(|p| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        name.strip_prefix(&format!("{stem}-"))
            .and_then(|rest| rest.strip_suffix(ext.as_str()))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

fn write_record(part: &mut Part, kind: Kind, flags: u8, at_ms: i64, payload: &[u8]) -> std::io::Result<()> {
    let h = RecordHeader::new(kind, flags, at_ms, payload);
    part.out.write_all(&h.encode())?;
    part.out.write_all(payload)?;
    // Each record reaches the file as written: a crash tears at most the one being written.
    part.out.flush()?;
    if kind != Kind::Index {
        part.index.push(Entry { offset: part.offset, len: h.len, kind, flags, at_ms });
    }
    part.offset += (format::RECORD_HEADER + payload.len()) as u64;
    Ok(())
}
