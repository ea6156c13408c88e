//! The recording's bytes: the file header, the record header with its two checksums, the
//! index and the trailer (`docs/recording.md` describes each field).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The first eight bytes of every recording (PNG's trick: a text-mode transfer that mangles
/// line ends or the high bit breaks the magic, not the frames).
pub const MAGIC: &[u8; 8] = b"\x89TSR\r\n\x1a\n";
/// The format this tessera writes. A reader refuses a newer major version and reads a newer
/// minor one (skipping record kinds it does not know).
pub const MAJOR: u16 = 1;
pub const MINOR: u16 = 0;
/// The last sixteen bytes of a file closed cleanly: the index record's offset, then this.
pub const TRAILER_MAGIC: &[u8; 8] = b"TSRINDEX";
/// Bytes of a record header.
pub const RECORD_HEADER: usize = 22;
/// The largest payload and the largest decoded record a reader accepts: a corrupt length or a
/// hostile file cannot make it read or decode more (held as JSON values, a decoded record
/// takes a small multiple of its bytes).
pub const MAX_PAYLOAD: u32 = 256 << 20;
pub const MAX_DECODED: usize = 256 << 20;
/// The most JSON values a record or a frame built from deltas may hold: what bounds its tree
/// in memory (bytes do not: 64 MiB of `[0,0,...]` is 32 million values, 2 GB as a tree). A real
/// frame holds about 85 values a card (the 65,536-card simulated cluster about 5.6 million).
pub const MAX_VALUES: usize = 16_000_000;
/// Below this many values any text is read; past it, a text must carry at least
/// `MIN_BYTES_PER_VALUE` bytes a value, as real frames do (about 15 compact): a bomb of tiny
/// values (2 bytes each) stops here.
pub const FREE_VALUES: usize = 4_000_000;
pub const MIN_BYTES_PER_VALUE: usize = 6;

/// Whether `values` values in `bytes` bytes of text are more than a record may hold.
pub fn too_many_values(values: usize, bytes: usize) -> bool {
    values > MAX_VALUES || (values > FREE_VALUES && values.saturating_mul(MIN_BYTES_PER_VALUE) > bytes)
}

/// What a JSON tree takes in memory, estimated from its text (`ValueCount::cost`): an object
/// (a map's first node) `OBJECT_COST`, every value `VALUE_COST` (its slot, with room to grow),
/// every string and key `TEXT_COST` and its length. Values alone do not bound it: a keyframe
/// of 7.9 million one-key objects (18 KB on disk) is 15.8 million values, under `MAX_VALUES`,
/// and took 5.3 GB.
pub const OBJECT_COST: usize = 640;
pub const VALUE_COST: usize = 64;
pub const TEXT_COST: usize = 32;
/// Below this cost any record or frame is decoded; past it, a record may cost at most
/// `COST_PER_STORED_BYTE` bytes of memory a byte it takes in the file (real keyframes cost about
/// 150: the 32,768-card simulated cluster's 3.2 MB keyframe about 500 MB; a bomb of repeated
/// small items tens of thousands), and never more than `MAX_COST` (about 1.5 times the
/// 65,536-card cluster's keyframe).
pub const FREE_COST: usize = 64 << 20;
pub const COST_PER_STORED_BYTE: usize = 2_000;
pub const MAX_COST: usize = 1536 << 20;

/// Whether a tree of `cost` (estimated) decoded from `stored` bytes of the file is more than a
/// record or frame may take.
pub fn too_costly(cost: usize, stored: usize) -> bool {
    cost > MAX_COST || (cost > FREE_COST && cost > stored.saturating_mul(COST_PER_STORED_BYTE))
}

/// An upper bound on the values a JSON text holds, fed as it is decompressed: one more than
/// its commas and opening brackets outside strings; and `cost`, what its tree takes.
#[derive(Debug, Clone, Copy)]
pub struct ValueCount {
    pub n: usize,
    pub cost: usize,
    in_string: bool,
    escaped: bool,
}

impl Default for ValueCount {
    fn default() -> Self {
        Self { n: 1, cost: VALUE_COST, in_string: false, escaped: false }
    }
}

impl ValueCount {
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.in_string {
                // Each byte of a string or key is a byte of its heap copy.
                self.cost += 1;
                match (self.escaped, b) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
            } else {
                match b {
                    b'"' => {
                        self.in_string = true;
                        self.cost += TEXT_COST;
                    }
                    b',' | b'[' => {
                        self.n += 1;
                        self.cost += VALUE_COST;
                    }
                    b'{' => {
                        self.n += 1;
                        self.cost += VALUE_COST + OBJECT_COST;
                    }
                    _ => {}
                }
            }
        }
    }
}

/// The cost (`OBJECT_COST`, `VALUE_COST`, `TEXT_COST`) of a JSON tree: what `ValueCount`
/// estimates from its text, less a little (the text also counts closing quotes and the first
/// value of an empty list or object).
pub fn cost_in(v: &serde_json::Value) -> usize {
    let mut cost = 0;
    let mut stack = vec![v];
    while let Some(x) = stack.pop() {
        cost += VALUE_COST;
        match x {
            serde_json::Value::Array(a) => stack.extend(a),
            serde_json::Value::Object(m) => {
                cost += OBJECT_COST;
                cost += m.keys().map(|k| TEXT_COST + k.len()).sum::<usize>();
                stack.extend(m.values());
            }
            serde_json::Value::String(s) => cost += TEXT_COST + s.len(),
            _ => {}
        }
    }
    cost
}

/// The values a JSON tree holds (each key's value counted, and the containers themselves).
pub fn values_in(v: &serde_json::Value) -> usize {
    let mut n = 0;
    let mut stack = vec![v];
    while let Some(x) = stack.pop() {
        n += 1;
        match x {
            serde_json::Value::Array(a) => stack.extend(a),
            serde_json::Value::Object(m) => stack.extend(m.values()),
            _ => {}
        }
    }
    n
}
/// The largest decoded action (an audit line is a few KiB).
pub const MAX_ACTION: usize = 1 << 20;
/// The latest frame time a date can hold (9999-12-31T23:59:59.999Z), in milliseconds.
pub const MAX_TIME_MS: i64 = 253_402_300_799_999;
/// The most deltas after one keyframe a reader follows (the writer starts a group every 120).
pub const MAX_GROUP: usize = 4096;
/// The largest file header (JSON) a reader accepts.
pub const MAX_HEADER: u32 = 1 << 20;

/// What a record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// A whole frame (the JSON of `Frame`), the first record of its group's zstd stream.
    Key,
    /// The JSON patch from the previous frame (`patch.rs`), on its group's stream.
    Delta,
    /// An audited action (zstd JSON of `ActionRecord`).
    Action,
    /// The index of every record before it (zstd JSON of `Index`).
    Index,
}

impl Kind {
    pub fn byte(self) -> u8 {
        match self {
            Self::Key => b'K',
            Self::Delta => b'D',
            Self::Action => b'A',
            Self::Index => b'X',
        }
    }

    pub fn from_byte(b: u8) -> Option<Self> {
        match b {
            b'K' => Some(Self::Key),
            b'D' => Some(Self::Delta),
            b'A' => Some(Self::Action),
            b'X' => Some(Self::Index),
            _ => None,
        }
    }
}

/// Flag bit: some source was not live at this frame (drawn on the replay's timeline).
pub const FLAG_OUTAGE: u8 = 1;

/// The JSON after the version: what was recorded, by whom, how often.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    /// The tessera that wrote it.
    pub tessera: String,
    pub created_at: DateTime<Utc>,
    /// How often a frame was taken, milliseconds.
    pub every_ms: u64,
    /// The sources configured, by name.
    pub sources: Vec<String>,
    /// Which file of a rotated recording this is (1, 2, ...).
    pub part: u32,
}

impl Header {
    pub fn encode(&self) -> Vec<u8> {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let mut out = Vec::with_capacity(json.len() + 20);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&MAJOR.to_le_bytes());
        out.extend_from_slice(&MINOR.to_le_bytes());
        out.extend_from_slice(&u32::try_from(json.len()).unwrap_or(u32::MAX).to_le_bytes());
        out.extend_from_slice(&json);
        out.extend_from_slice(&crc32fast::hash(&json).to_le_bytes());
        out
    }
}

/// Why a file cannot be read at all (as opposed to a damaged frame, which is skipped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("not a tessera recording")]
    NotRecording,
    #[error(
        "recorded by a newer tessera (recording format {major}.{minor}); this tessera reads format {MAJOR}.x: replay it with a newer tessera"
    )]
    Newer { major: u16, minor: u16 },
    #[error("the file header is damaged: {0}")]
    BadHeader(String),
    #[error("{0}")]
    Io(String),
}

/// The fixed part of a file before its first record: magic, version, header.
pub fn decode_header(bytes: &[u8]) -> Result<(Header, u16, usize), OpenError> {
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(OpenError::NotRecording);
    }
    let major = u16::from_le_bytes([bytes[8], bytes[9]]);
    let minor = u16::from_le_bytes([bytes[10], bytes[11]]);
    if major > MAJOR {
        return Err(OpenError::Newer { major, minor });
    }
    if major == 0 {
        return Err(OpenError::BadHeader(format!("version {major}.{minor}")));
    }
    let len = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    if len > MAX_HEADER {
        return Err(OpenError::BadHeader(format!("a header of {len} bytes")));
    }
    let end = 16 + len as usize;
    let Some(json) = bytes.get(16..end) else { return Err(OpenError::BadHeader("cut short".into())) };
    let Some(crc) = bytes.get(end..end + 4) else { return Err(OpenError::BadHeader("cut short".into())) };
    if crc32fast::hash(json).to_le_bytes() != crc {
        return Err(OpenError::BadHeader("checksum mismatch".into()));
    }
    let header: Header = serde_json::from_slice(json).map_err(|e| OpenError::BadHeader(e.to_string()))?;
    Ok((header, minor, end + 4))
}

/// A record's header: what it is, when, and checksums of the payload and of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub len: u32,
    /// The kind byte as written (a newer minor version may add kinds).
    pub kind: u8,
    pub flags: u8,
    /// Milliseconds since the Unix epoch, on the data's clock.
    pub at_ms: i64,
    pub payload_crc: u32,
}

impl RecordHeader {
    pub fn new(kind: Kind, flags: u8, at_ms: i64, payload: &[u8]) -> Self {
        Self {
            len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
            kind: kind.byte(),
            flags,
            at_ms,
            payload_crc: crc32fast::hash(payload),
        }
    }

    pub fn encode(&self) -> [u8; RECORD_HEADER] {
        let mut b = [0u8; RECORD_HEADER];
        b[0..4].copy_from_slice(&self.len.to_le_bytes());
        b[4] = self.kind;
        b[5] = self.flags;
        b[6..14].copy_from_slice(&self.at_ms.to_le_bytes());
        b[14..18].copy_from_slice(&self.payload_crc.to_le_bytes());
        let own = crc32fast::hash(&b[0..18]);
        b[18..22].copy_from_slice(&own.to_le_bytes());
        b
    }

    /// `None` when its own checksum fails or its length is impossible.
    pub fn decode(b: &[u8]) -> Option<Self> {
        let b: &[u8; RECORD_HEADER] = b.get(..RECORD_HEADER)?.try_into().ok()?;
        let own = u32::from_le_bytes([b[18], b[19], b[20], b[21]]);
        if crc32fast::hash(&b[0..18]) != own {
            return None;
        }
        let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if len > MAX_PAYLOAD {
            return None;
        }
        let mut at = [0u8; 8];
        at.copy_from_slice(&b[6..14]);
        Some(Self {
            len,
            kind: b[4],
            flags: b[5],
            at_ms: i64::from_le_bytes(at),
            payload_crc: u32::from_le_bytes([b[14], b[15], b[16], b[17]]),
        })
    }

    pub fn kind(&self) -> Option<Kind> {
        Kind::from_byte(self.kind)
    }
}

/// One record as the index lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub offset: u64,
    pub len: u32,
    pub kind: Kind,
    pub flags: u8,
    pub at_ms: i64,
}

/// The index record's payload: every record before it, in file order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Index {
    pub entries: Vec<Entry>,
}

/// zstd of `bytes` (the level writers use: fast, and most of the gain).
pub const LEVEL: i32 = 3;

/// Decode a whole zstd payload (an action, the index), refusing one that claims more than
/// `limit` bytes.
pub fn unzstd(payload: &[u8], limit: usize) -> Result<Vec<u8>, PayloadError> {
    let size = zstd::zstd_safe::get_frame_content_size(payload)
        .map_err(|_| PayloadError::NotZstd)?
        .ok_or(PayloadError::NoSize)?;
    if size > limit as u64 {
        return Err(PayloadError::TooLarge { size, limit });
    }
    zstd::bulk::Decompressor::new().and_then(|mut d| d.decompress(payload, size as usize)).map_err(PayloadError::Zstd)
}

/// Why a whole zstd payload was not decoded.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("not a zstd frame")]
    NotZstd,
    #[error("a zstd frame without its size")]
    NoSize,
    #[error("a record of {size} bytes (at most {limit})")]
    TooLarge { size: u64, limit: usize },
    #[error("zstd: {0}")]
    Zstd(std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_header_round_trips_and_detects_a_flipped_bit() {
        let h = RecordHeader::new(Kind::Delta, FLAG_OUTAGE, 1_764_470_000_123, b"payload");
        let b = h.encode();
        assert_eq!(RecordHeader::decode(&b), Some(h));
        for i in 0..RECORD_HEADER {
            let mut bad = b;
            bad[i] ^= 0x10;
            assert_eq!(RecordHeader::decode(&bad), None, "byte {i}");
        }
    }

    #[test]
    fn a_newer_major_version_is_refused_by_name() {
        let h = Header {
            format: "tessera-recording".into(),
            tessera: "0.1.0".into(),
            created_at: Utc::now(),
            every_ms: 1000,
            sources: vec!["sim".into()],
            part: 1,
        };
        let mut b = h.encode();
        assert_eq!(decode_header(&b).map(|x| x.0), Ok(h));
        b[8] = 2;
        let e = decode_header(&b).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("newer tessera (recording format 2.0)") && e.contains("reads format 1.x"), "{e}");
        assert_eq!(decode_header(b"not a recording at all"), Err(OpenError::NotRecording));
    }

    #[test]
    fn a_frame_claiming_more_than_the_limit_is_refused() {
        let small = zstd::bulk::compress(b"{}", LEVEL).unwrap_or_default();
        assert_eq!(unzstd(&small, 2).map_err(|e| e.to_string()).as_deref(), Ok(&b"{}"[..]));
        assert!(unzstd(&small, 1).is_err());
        assert!(unzstd(b"garbage", 100).is_err());
    }
}
