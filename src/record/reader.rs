//! The reader: opens one or more parts (by their index, else by scanning them), reports
//! damaged records and a torn tail and skips them, and decodes the frame at any moment
//! (`Player`: one keyframe and the deltas after it).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::format::{self, Entry, Header, Index, Kind, OpenError, RECORD_HEADER, RecordHeader};
use super::{ActionRecord, Frame, patch};

/// Why a recording could not be opened, or a frame in it decoded. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A part could not be read at all.
    #[error("{}: {why}", path.display())]
    Part { path: PathBuf, why: PartError },
    /// Two recordings' frames interleave: they are not parts of one.
    #[error("{} overlaps {} in time: replay them one at a time", later.display(), earlier.display())]
    Overlap { later: PathBuf, earlier: PathBuf },
    /// A damaged record.
    #[error("{}: the record at byte {offset}: {why}", path.display())]
    Damaged { path: PathBuf, offset: u64, why: Damage },
    #[error("no frame {0}")]
    NoFrame(usize),
    #[error("the frame at {} has no keyframe before it", .0.to_rfc3339())]
    NoKeyframe(DateTime<Utc>),
    #[error("the recording has no frames")]
    NoFrames,
    /// The decoder could not be started.
    #[error("{0}")]
    Decoder(std::io::Error),
}

/// Why a part could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum PartError {
    #[error(transparent)]
    File(#[from] crate::files::ReadError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Format(#[from] OpenError),
}

/// What is wrong with a damaged record.
#[derive(Debug, thiserror::Error)]
pub enum Damage {
    #[error("{0}")]
    Io(std::io::Error),
    #[error("damaged header")]
    Header,
    #[error("fails its checksum")]
    Checksum,
    #[error("is not what the index says")]
    NotIndexed,
    #[error(transparent)]
    Payload(#[from] format::PayloadError),
    #[error("zstd: {0}")]
    Zstd(std::io::Error),
    #[error(
        "a record of more than {} values (or over {} of values under {} bytes each)",
        format::MAX_VALUES,
        format::FREE_VALUES,
        format::MIN_BYTES_PER_VALUE
    )]
    TooManyValues,
    #[error("a frame of more than {} bytes", format::MAX_DECODED)]
    TooLarge,
    #[error("a frame of more than {} values", format::MAX_VALUES)]
    FrameTooManyValues,
    #[error(
        "a record or frame whose JSON would take more than {} MiB in memory, or more than {} MiB and over {} bytes a byte of the file",
        format::MAX_COST >> 20,
        format::FREE_COST >> 20,
        format::COST_PER_STORED_BYTE
    )]
    TooCostly,
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Patch(#[from] patch::PatchError),
}

/// How far past a damaged record header the reader looks for the next good one.
const RESYNC_LIMIT: u64 = 64 << 20;

struct PartFile {
    path: PathBuf,
    file: std::fs::File,
    header: Header,
}

/// One frame as the recording lists it.
#[derive(Debug, Clone, Copy)]
pub struct FrameRef {
    part: usize,
    entry: Entry,
    /// The frame list's position of the keyframe it builds on; `None`: it has none it can use
    /// (that keyframe or a delta before it was damaged).
    key: Option<usize>,
}

impl FrameRef {
    pub fn at(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(self.entry.at_ms).unwrap_or_default()
    }

    /// Some source was not live at this frame.
    pub fn outage(&self) -> bool {
        self.entry.flags & format::FLAG_OUTAGE != 0
    }
}

/// An opened recording: its frames in time order, its actions, what was wrong with it.
pub struct Recording {
    parts: Vec<PartFile>,
    frames: Vec<FrameRef>,
    actions: Vec<ActionRecord>,
    /// Damage found and skipped, each naming the file and where.
    pub problems: Vec<String>,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording").field("frames", &self.frames.len()).field("problems", &self.problems).finish()
    }
}

fn read_at(file: &std::fs::File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

/// The records of one part: from its index where it was closed cleanly, else by a scan. The
/// second list holds the offsets of records that follow a skipped one (a delta there has lost
/// the frame it builds on).
fn entries(
    path: &Path,
    file: &std::fs::File,
    start: u64,
    problems: &mut Vec<String>,
) -> std::io::Result<(Vec<Entry>, Vec<u64>)> {
    let len = file.metadata()?.len();
    let shown = path.display();
    if let Some(index) = from_index(file, start, len) {
        return Ok((index.entries, Vec::new()));
    }
    let mut out = Vec::new();
    let mut gaps = Vec::new();
    let mut offset = start;
    let mut closed = false;
    while offset < len {
        // A trailer whose index did not check out (the scan decides instead).
        if len - offset == 16 && read_at(file, offset + 8, 8)? == format::TRAILER_MAGIC {
            closed = true;
            break;
        }
        if len - offset < RECORD_HEADER as u64 {
            problems.push(format!(
                "{shown}: the last {} bytes are the start of a record cut short (tessera stopped while writing it): skipped",
                len - offset
            ));
            return Ok((out, gaps));
        }
        let h = read_at(file, offset, RECORD_HEADER)?;
        // A time outside what a date can hold is damage, however the checksum came out.
        let Some(h) = RecordHeader::decode(&h).filter(|h| sane_time(h.at_ms)) else {
            match resync(file, offset + 1, len)? {
                Some(next) => {
                    problems.push(format!("{shown}: damaged record at byte {offset}: {} bytes skipped", next - offset));
                    gaps.push(next);
                    offset = next;
                    continue;
                }
                None => {
                    problems.push(format!(
                        "{shown}: damaged or torn tail at byte {offset}: the last {} bytes skipped",
                        len - offset
                    ));
                    return Ok((out, gaps));
                }
            }
        };
        let end = offset + RECORD_HEADER as u64 + u64::from(h.len);
        if end > len {
            problems.push(format!(
                "{shown}: the last record (byte {offset}) is cut short (tessera stopped while writing it): skipped"
            ));
            return Ok((out, gaps));
        }
        let payload = read_at(file, offset + RECORD_HEADER as u64, h.len as usize)?;
        let at = DateTime::from_timestamp_millis(h.at_ms).map(|t| t.to_rfc3339()).unwrap_or_default();
        match h.kind() {
            _ if crc32fast::hash(&payload) != h.payload_crc => {
                problems.push(format!("{shown}: the record at byte {offset} ({at}) fails its checksum: skipped"));
                // A lost action leaves the frames whole; a lost frame breaks its deltas' chain.
                if h.kind() != Some(Kind::Action) {
                    gaps.push(end);
                }
            }
            Some(Kind::Index) => {}
            Some(kind) => out.push(Entry { offset, len: h.len, kind, flags: h.flags, at_ms: h.at_ms }),
            // A newer minor version's record: not for this reader.
            None => {}
        }
        offset = end;
    }
    if !closed && offset == len {
        problems.push(format!("{shown}: not closed (tessera stopped while recording): read without its index"));
    }
    Ok((out, gaps))
}

/// Milliseconds that are a real moment (years 1970 to 9999).
fn sane_time(ms: i64) -> bool {
    (0..=format::MAX_TIME_MS).contains(&ms)
}

/// The index a cleanly closed part ends with, when it checks out.
fn from_index(file: &std::fs::File, start: u64, len: u64) -> Option<Index> {
    if len < start + 16 + RECORD_HEADER as u64 {
        return None;
    }
    let trailer = read_at(file, len - 16, 16).ok()?;
    if &trailer[8..] != format::TRAILER_MAGIC {
        return None;
    }
    let at = u64::from_le_bytes(trailer[..8].try_into().ok()?);
    let h = RecordHeader::decode(&read_at(file, at, RECORD_HEADER).ok()?)?;
    if h.kind() != Some(Kind::Index) || at + RECORD_HEADER as u64 + u64::from(h.len) + 16 != len {
        return None;
    }
    let payload = read_at(file, at + RECORD_HEADER as u64, h.len as usize).ok()?;
    if crc32fast::hash(&payload) != h.payload_crc {
        return None;
    }
    let index: Index = serde_json::from_slice(&format::unzstd(&payload, format::MAX_DECODED).ok()?).ok()?;
    // Every entry inside the file, in order: else the scan decides.
    let mut prev = start;
    for e in &index.entries {
        let end = e.offset.checked_add(RECORD_HEADER as u64 + u64::from(e.len))?;
        if e.offset < prev || end > at || !sane_time(e.at_ms) || e.len > format::MAX_PAYLOAD {
            return None;
        }
        prev = end;
    }
    Some(index)
}

/// The next offset after `from` where a record header and its payload check out, looked for
/// a mebibyte at a time up to `RESYNC_LIMIT` on.
fn resync(file: &std::fs::File, from: u64, len: u64) -> std::io::Result<Option<u64>> {
    const CHUNK: u64 = 1 << 20;
    let stop = len.min(from.saturating_add(RESYNC_LIMIT));
    let mut at = from;
    while at + RECORD_HEADER as u64 <= stop {
        let n = (stop - at).min(CHUNK + RECORD_HEADER as u64);
        let window = read_at(file, at, n as usize)?;
        for i in 0..=window.len().saturating_sub(RECORD_HEADER) {
            let Some(h) = RecordHeader::decode(&window[i..]).filter(|h| sane_time(h.at_ms)) else { continue };
            let offset = at + i as u64;
            let end = offset + RECORD_HEADER as u64 + u64::from(h.len);
            if end <= len
                && crc32fast::hash(&read_at(file, offset + RECORD_HEADER as u64, h.len as usize)?) == h.payload_crc
            {
                return Ok(Some(offset));
            }
        }
        at += CHUNK;
    }
    Ok(None)
}

impl Recording {
    /// Open the parts of a recording (any order: they are put in time order). A file that is
    /// not a recording, or one of a newer major version, is an error naming it; damage inside
    /// is listed in `problems` and skipped.
    pub fn open(paths: &[PathBuf]) -> Result<Self, ReplayError> {
        let mut parts = Vec::new();
        let mut problems = Vec::new();
        let mut lists = Vec::new();
        for path in paths {
            let named = |e: PartError| ReplayError::Part { path: path.clone(), why: e };
            let file = crate::files::open_regular(path).map_err(|e| named(e.into()))?;
            let len = file.metadata().map_err(|e| named(e.into()))?.len();
            let head = read_at(&file, 0, len.min(16 + u64::from(format::MAX_HEADER) + 4) as usize)
                .map_err(|e| named(e.into()))?;
            let (header, _minor, start) = format::decode_header(&head).map_err(|e| named(e.into()))?;
            let list = entries(path, &file, start as u64, &mut problems).map_err(|e| named(e.into()))?;
            lists.push(list);
            parts.push(PartFile { path: path.clone(), file, header });
        }
        // Parts in the order of their first record.
        let mut order: Vec<usize> = (0..parts.len()).collect();
        order.sort_by_key(|&i| lists[i].0.first().map_or(i64::MAX, |e| e.at_ms));
        let mut rec = Self { parts, frames: Vec::new(), actions: Vec::new(), problems };
        let mut last_ms = i64::MIN;
        for &p in &order {
            let mut key = None;
            let (list, gaps) = &lists[p];
            let gaps: std::collections::HashSet<u64> = gaps.iter().copied().collect();
            for e in list {
                // A record after a skipped one: deltas have nothing to build on until the
                // next keyframe (the scan's problems name the gap).
                if gaps.contains(&e.offset) {
                    key = None;
                }
                match e.kind {
                    Kind::Key | Kind::Delta => {
                        if e.at_ms <= last_ms {
                            let before = rec.frames.last().map(|f| f.part);
                            if before.is_some_and(|b| b != p) && key.is_none() && e.kind == Kind::Key {
                                let earlier = before.map(|b| rec.parts[b].path.clone()).unwrap_or_default();
                                return Err(ReplayError::Overlap { later: rec.parts[p].path.clone(), earlier });
                            }
                            // A frame not after the one before it: damage; what builds on it
                            // cannot be trusted either.
                            rec.problems.push(format!(
                                "{}: the frame at byte {} is not after the one before it: skipped",
                                rec.parts[p].path.display(),
                                e.offset
                            ));
                            key = None;
                            continue;
                        }
                        last_ms = e.at_ms;
                        if e.kind == Kind::Key {
                            key = Some(rec.frames.len());
                        } else if key.is_some_and(|k| rec.frames.len() - k > format::MAX_GROUP) {
                            rec.problems.push(format!(
                                "{}: more than {} deltas after one keyframe at byte {}: the rest of the group skipped",
                                rec.parts[p].path.display(),
                                format::MAX_GROUP,
                                e.offset
                            ));
                            key = None;
                        }
                        rec.frames.push(FrameRef { part: p, entry: *e, key });
                    }
                    Kind::Action => match rec.read_action(p, e) {
                        Ok(a) => rec.actions.push(a),
                        Err(err) => rec.problems.push(err.to_string()),
                    },
                    Kind::Index => {}
                }
            }
        }
        rec.actions.sort_by_key(|a| a.at);
        Ok(rec)
    }

    fn read_action(&self, p: usize, e: &Entry) -> Result<ActionRecord, ReplayError> {
        let bytes = self.payload(p, e)?;
        let json = format::unzstd(&bytes, format::MAX_ACTION).map_err(|x| self.bad(p, e, x.into()))?;
        serde_json::from_slice(&json).map_err(|x| self.bad(p, e, x.into()))
    }

    fn bad(&self, p: usize, e: &Entry, why: Damage) -> ReplayError {
        ReplayError::Damaged { path: self.parts[p].path.clone(), offset: e.offset, why }
    }

    /// A record's payload, its checksums checked.
    fn payload(&self, p: usize, e: &Entry) -> Result<Vec<u8>, ReplayError> {
        let file = &self.parts[p].file;
        let h = read_at(file, e.offset, RECORD_HEADER).map_err(|x| self.bad(p, e, Damage::Io(x)))?;
        let h = RecordHeader::decode(&h).ok_or_else(|| self.bad(p, e, Damage::Header))?;
        let payload = read_at(file, e.offset + RECORD_HEADER as u64, h.len as usize)
            .map_err(|x| self.bad(p, e, Damage::Io(x)))?;
        if crc32fast::hash(&payload) != h.payload_crc || h.len != e.len {
            return Err(self.bad(p, e, Damage::Checksum));
        }
        if h.kind() != Some(e.kind) || h.at_ms != e.at_ms {
            return Err(self.bad(p, e, Damage::NotIndexed));
        }
        Ok(payload)
    }

    pub fn frames(&self) -> &[FrameRef] {
        &self.frames
    }

    pub fn actions(&self) -> &[ActionRecord] {
        &self.actions
    }

    pub fn headers(&self) -> impl Iterator<Item = &Header> {
        self.parts.iter().map(|p| &p.header)
    }

    /// The first and last frame's time.
    pub fn span(&self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        Some((self.frames.first()?.at(), self.frames.last()?.at()))
    }

    /// The last frame at or before `t` (the first frame for a time before it).
    pub fn index_at(&self, t: DateTime<Utc>) -> Option<usize> {
        if self.frames.is_empty() {
            return None;
        }
        let ms = t.timestamp_millis();
        Some(self.frames.partition_point(|f| f.entry.at_ms <= ms).saturating_sub(1))
    }

    /// Spans of frames where some source was not live, as (first, last) frame times.
    pub fn outages(&self) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
        let mut out: Vec<(DateTime<Utc>, DateTime<Utc>)> = Vec::new();
        let mut open = false;
        for f in &self.frames {
            match (f.outage(), open) {
                (true, true) => {
                    if let Some(last) = out.last_mut() {
                        last.1 = f.at();
                    }
                }
                (true, false) => out.push((f.at(), f.at())),
                _ => {}
            }
            open = f.outage();
        }
        out
    }
}

/// Where decoding stands in a group: its stream and the frame so far, as JSON.
struct Cursor {
    key: usize,
    pos: usize,
    stream: zstd::stream::raw::Decoder<'static>,
    value: serde_json::Value,
    /// At least the values `value` holds: what it was counted at, plus every patch since (a
    /// patch adds at most its own values). Counted again only when it passes the bound.
    values: usize,
    /// The same for its cost in memory (`format::cost_in`).
    cost: usize,
    /// The bytes of the file the frame was decoded from: its keyframe and deltas.
    stored: usize,
}

/// Decodes frames by position: from the group's keyframe, each delta in order; stepping
/// forward decodes one more.
pub struct Player {
    pub rec: Recording,
    cursor: Option<Cursor>,
    shown: Option<(usize, Frame)>,
}

impl Player {
    pub fn new(rec: Recording) -> Self {
        Self { rec, cursor: None, shown: None }
    }

    /// The next record of a group's stream, decoded (at most `MAX_DECODED` bytes, within its
    /// bounds of values and cost), with its counts and its size in the file.
    fn next(
        &self,
        stream: &mut zstd::stream::raw::Decoder<'static>,
        i: usize,
    ) -> Result<(serde_json::Value, format::ValueCount, usize), ReplayError> {
        use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
        let f = self.rec.frames[i];
        let bad = |x: Damage| self.rec.bad(f.part, &f.entry, x);
        let payload = self.rec.payload(f.part, &f.entry)?;
        let mut input = InBuffer::around(&payload);
        let mut out = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        // The tree a text becomes is bounded by its values, not its bytes: counted as it is
        // decompressed, so a bomb stops within a block of its bound.
        let mut values = format::ValueCount::default();
        loop {
            let mut o = OutBuffer::around(&mut buf[..]);
            stream.run(&mut input, &mut o).map_err(|e| bad(Damage::Zstd(e)))?;
            let n = o.pos();
            values.feed(&buf[..n]);
            out.extend_from_slice(&buf[..n]);
            if format::too_many_values(values.n, out.len()) {
                return Err(bad(Damage::TooManyValues));
            }
            if format::too_costly(values.cost, payload.len()) {
                return Err(bad(Damage::TooCostly));
            }
            if out.len() > format::MAX_DECODED {
                return Err(bad(Damage::TooLarge));
            }
            if input.pos() == payload.len() && n < buf.len() {
                break;
            }
        }
        let value = serde_json::from_slice(&out).map_err(|e| bad(e.into()))?;
        Ok((value, values, payload.len()))
    }

    /// The frame at position `i`.
    pub fn frame(&mut self, i: usize) -> Result<&Frame, ReplayError> {
        if self.shown.as_ref().is_none_or(|(j, _)| *j != i) {
            let frame = self.decode(i)?;
            self.shown = Some((i, frame));
        }
        self.shown.as_ref().map(|(_, f)| f).ok_or(ReplayError::NoFrame(i))
    }

    fn decode(&mut self, i: usize) -> Result<Frame, ReplayError> {
        let f = *self.rec.frames.get(i).ok_or(ReplayError::NoFrame(i))?;
        let key = f.key.ok_or_else(|| ReplayError::NoKeyframe(f.at()))?;
        let mut c = match self.cursor.take() {
            Some(c) if c.key == key && c.pos <= i => c,
            _ => {
                let mut stream = zstd::stream::raw::Decoder::new().map_err(ReplayError::Decoder)?;
                let (value, count, stored) = self.next(&mut stream, key)?;
                let values = format::values_in(&value);
                Cursor { key, pos: key, stream, value, values, cost: count.cost, stored }
            }
        };
        // A failure leaves no cursor: the stream is not where it was.
        for j in c.pos + 1..=i {
            let (p, count, stored) = self.next(&mut c.stream, j)?;
            let fj = self.rec.frames[j];
            patch::apply(&mut c.value, &p).map_err(|x| self.rec.bad(fj.part, &fj.entry, x.into()))?;
            // Deltas can each add to the frame: what they built is bounded too, counted again
            // only when the running bound passes the limit.
            c.values += format::values_in(&p);
            if c.values > format::MAX_VALUES {
                c.values = format::values_in(&c.value);
                if c.values > format::MAX_VALUES {
                    return Err(self.rec.bad(fj.part, &fj.entry, Damage::FrameTooManyValues));
                }
            }
            // And so is what they cost, against the bytes of the file they came from.
            c.cost += count.cost;
            c.stored += stored;
            if format::too_costly(c.cost, c.stored) {
                c.cost = format::cost_in(&c.value);
                if format::too_costly(c.cost, c.stored) {
                    return Err(self.rec.bad(fj.part, &fj.entry, Damage::TooCostly));
                }
            }
            c.pos = j;
        }
        let mut frame: Frame =
            serde::Deserialize::deserialize(&c.value).map_err(|x| self.rec.bad(f.part, &f.entry, Damage::Json(x)))?;
        frame.fleet.index_workloads();
        self.cursor = Some(c);
        Ok(frame)
    }

    /// The frame shown at time `t`: the last one at or before it.
    pub fn at(&mut self, t: DateTime<Utc>) -> Result<&Frame, ReplayError> {
        let i = self.rec.index_at(t).ok_or(ReplayError::NoFrames)?;
        self.frame(i)
    }
}
