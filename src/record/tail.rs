//! Follows the audit log while recording: every record appended since the recording began
//! (by the console, the CLI or `schedule run`, on this host), whole lines only.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

/// At most this much of the log is read per poll, and a line longer than this is skipped:
/// a runaway log never floods the recorder.
const MAX_READ: u64 = 4 << 20;

/// The audit log could not be read (it names the log).
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct TailError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

#[derive(Debug)]
pub struct AuditTail {
    path: PathBuf,
    offset: u64,
    /// A line begun but not yet ended.
    partial: Vec<u8>,
}

impl AuditTail {
    /// Start at the log's current end: only what happens from now on is recorded.
    pub fn new(path: PathBuf) -> Self {
        let offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        Self { path, offset, partial: Vec::new() }
    }

    /// The records appended since the last poll; lines that are not JSON objects are skipped
    /// and counted in the second value.
    pub fn poll(&mut self) -> Result<(Vec<serde_json::Value>, usize), TailError> {
        let failed = |source| TailError { path: self.path.clone(), source };
        let mut f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
            Err(e) => return Err(failed(e)),
        };
        let len = f.metadata().map_err(failed)?.len();
        if len < self.offset {
            // Truncated or replaced: start again at its beginning.
            self.offset = 0;
            self.partial.clear();
        }
        f.seek(SeekFrom::Start(self.offset)).map_err(failed)?;
        let mut buf = Vec::new();
        f.take(MAX_READ).read_to_end(&mut buf).map_err(failed)?;
        self.offset += buf.len() as u64;
        let mut out = Vec::new();
        let mut bad = 0;
        self.partial.extend_from_slice(&buf);
        let Some(last) = self.partial.iter().rposition(|&b| b == b'\n') else {
            if self.partial.len() as u64 > MAX_READ {
                self.partial.clear();
                bad += 1;
            }
            return Ok((out, bad));
        };
        let rest = self.partial.split_off(last + 1);
        for line in self.partial.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            match serde_json::from_slice::<serde_json::Value>(line) {
                Ok(v) if v.is_object() => out.push(v),
                _ => bad += 1,
            }
        }
        self.partial = rest;
        Ok((out, bad))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn only_whole_new_lines_are_read() {
        let dir = std::env::temp_dir().join(format!("tessera-tail-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("audit.jsonl");
        std::fs::write(&path, "{\"record\":\"old\"}\n").unwrap_or_else(|e| panic!("{e}"));
        let mut t = AuditTail::new(path.clone());
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap_or_else(|e| panic!("{e}"));
        write!(f, "{{\"record\":\"intent\"}}\nnot json\n{{\"record\":\"out").unwrap_or_else(|e| panic!("{e}"));
        let (got, bad) = t.poll().unwrap_or_default();
        assert_eq!((got.len(), bad), (1, 1));
        assert_eq!(got[0]["record"], "intent");
        writeln!(f, "come\"}}").unwrap_or_else(|e| panic!("{e}"));
        let (got, _) = t.poll().unwrap_or_default();
        assert_eq!(got[0]["record"], "outcome");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
