//! The demand inputs of a what-if, each a pure function over lines (`impl BufRead` and the
//! file's name for messages): the Alibaba GPU trace v2023 (`openb`), the project's own demand
//! CSV (`csv`), and a tessera recording's workloads and fleet (`recording`). The command opens
//! the files; these read them line by line (a line is at most `MAX_LINE` bytes, a file is
//! never read whole). A bad line names the file, the line and the field and stops the parse,
//! or with `skip_bad` is counted and skipped (the first `KEPT_ERRORS` kept to show).
//! docs/simulate.md ("Feeding your own history") gives each input's field mapping.

pub mod csv;
pub mod openb;
pub mod recording;

use std::io::BufRead;

use chrono::{DateTime, Utc};

pub use csv::demand_csv;
pub use openb::{openb_nodes, openb_pods};
pub use recording::{Notes, Walk, jobs_from_recording};

use super::job::Job;

/// The longest line read; a longer one is a bad line (a file that is not a table, or damage).
pub const MAX_LINE: usize = 64 * 1024;
/// Bad lines kept to show when they are skipped.
pub const KEPT_ERRORS: usize = 5;

/// One bad line: `FILE:LINE: field NAME: why` (a line that cannot be read at all, too long
/// or not UTF-8, has no field: `FILE:LINE: why`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {}{why}", field_part(.field))]
pub struct LineError {
    pub file: String,
    /// From 1; 0 where the file could not be read at all.
    pub line: u64,
    /// The column's name as the header writes it; empty for the whole line.
    pub field: String,
    pub why: String,
}

/// A demand as read: its GPU jobs and what was left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// The jobs that ask for a GPU, in file order (`simulate::prepare` sorts them).
    pub jobs: Vec<Job>,
    /// Rows that ask for no GPU (left out of a replay).
    pub without_gpu: u64,
    /// Those rows as jobs where the input keeps them (the trace's CPU-only pods, for a
    /// packing), each with the index of the GPU job it came before.
    pub cpu_only: Vec<(usize, Job)>,
    /// The input has no times (a pod list for packing only).
    pub timeless: bool,
    /// Bad lines skipped (`skip_bad`).
    pub skipped: u64,
    /// The first `KEPT_ERRORS` of them.
    pub first_errors: Vec<LineError>,
    /// Data rows read (not the header, comments or blank lines): jobs + without_gpu + skipped.
    pub rows: u64,
    /// The wall-clock time of second zero, where the input gives absolute times (RFC 3339
    /// submits: the earliest of them); `None`: the times are seconds from the demand's start.
    pub start: Option<DateTime<Utc>>,
}

/// `field NAME: ` where a line names one.
fn field_part(field: &str) -> String {
    if field.is_empty() { String::new() } else { format!("field {field}: ") }
}

/// Reads lines of at most `MAX_LINE` bytes, counting them; a longer one is read past and
/// reported bad.
pub(crate) struct Lines<R> {
    r: R,
    file: String,
    pub line: u64,
    buf: Vec<u8>,
}

impl<R: BufRead> Lines<R> {
    pub fn new(file: &str, r: R) -> Self {
        Self { r, file: file.to_string(), line: 0, buf: Vec::new() }
    }

    pub fn error(&self, field: &str, why: impl Into<String>) -> LineError {
        LineError { file: self.file.clone(), line: self.line, field: field.to_string(), why: why.into() }
    }

    /// The next line without its end: `None` at the end of the file; `Err` where the file
    /// cannot be read further (fatal); `Ok(Err)` for a line that cannot be read as text.
    pub fn next_line(&mut self) -> Option<Result<Result<String, LineError>, LineError>> {
        self.buf.clear();
        let read = std::io::Read::take(&mut self.r, MAX_LINE as u64 + 1).read_until(b'\n', &mut self.buf);
        match read {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) => {
                self.line += 1;
                return Some(Err(self.error("", format!("cannot be read: {e}"))));
            }
        }
        self.line += 1;
        if self.buf.last() != Some(&b'\n') && self.buf.len() > MAX_LINE {
            if let Err(e) = self.skip_rest() {
                return Some(Err(self.error("", format!("cannot be read: {e}"))));
            }
            return Some(Ok(Err(self.error("", format!("a line longer than {} KiB", MAX_LINE / 1024)))));
        }
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        match std::str::from_utf8(&self.buf) {
            Ok(t) => Some(Ok(Ok(t.to_string()))),
            Err(e) => Some(Ok(Err(self.error("", format!("not UTF-8 text (byte {})", e.valid_up_to() + 1))))),
        }
    }

    /// Reads past the rest of an overlong line.
    fn skip_rest(&mut self) -> std::io::Result<()> {
        loop {
            let chunk = self.r.fill_buf()?;
            if chunk.is_empty() {
                return Ok(());
            }
            if let Some(i) = chunk.iter().position(|&b| b == b'\n') {
                self.r.consume(i + 1);
                return Ok(());
            }
            let n = chunk.len();
            self.r.consume(n);
        }
    }
}

/// What is wrong with a line's fields, before any field is read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    #[error("a quote is not closed")]
    OpenQuote,
    #[error("missing: the line has {has} of {of} fields (cut short?)")]
    CutShort { has: usize, of: usize },
}

/// Blank lines and `#` comments carry no row.
pub(crate) fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim_start();
    t.is_empty() || t.starts_with('#')
}

/// One CSV line's fields, trimmed: commas separate, double quotes keep commas in a field (`""`
/// is a quote); a quoted field does not span lines.
pub(crate) fn split(line: &str) -> Result<Vec<String>, FieldError> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if cur.trim().is_empty() => {
                cur.clear();
                quoted = true;
            }
            (',', false) => out.push(std::mem::take(&mut cur).trim().to_string()),
            (c, _) => cur.push(c),
        }
    }
    if quoted {
        return Err(FieldError::OpenQuote);
    }
    out.push(cur.trim().to_string());
    Ok(out)
}

/// A header's columns, found by name (case and spaces aside).
pub(crate) struct Header {
    names: Vec<String>,
}

impl Header {
    /// The header line (a byte-order mark before it aside, as spreadsheets write one); a
    /// column named twice is an error naming it.
    pub fn parse(line: &str) -> Result<Self, (String, String)> {
        let names: Vec<String> = split(line.trim_start_matches('\u{feff}'))
            .map_err(|why| (String::new(), why.to_string()))?
            .into_iter()
            .map(|n| n.to_ascii_lowercase())
            .collect();
        for (i, n) in names.iter().enumerate() {
            if !n.is_empty() && names[..i].contains(n) {
                return Err((n.clone(), "named twice in the header".into()));
            }
        }
        Ok(Self { names })
    }

    pub fn col(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }
}

/// A data row's fields by column.
pub(crate) struct Row<'a> {
    pub fields: &'a [String],
    pub columns: usize,
}

impl Row<'_> {
    /// The field of column `col` (`None` where the header has no such column, or the field
    /// is empty); `Err(why)` where the line ends before it (truncated).
    pub fn get(&self, col: Option<usize>) -> Result<Option<&str>, FieldError> {
        let Some(i) = col else { return Ok(None) };
        match self.fields.get(i) {
            Some(f) if f.is_empty() => Ok(None),
            Some(f) => Ok(Some(f.as_str())),
            None => Err(FieldError::CutShort { has: self.fields.len(), of: self.columns }),
        }
    }
}

/// Skipped bad lines: counted, the first few kept; without `skip_bad` the first one stops.
pub(crate) struct Tally {
    skip_bad: bool,
    pub skipped: u64,
    pub first: Vec<LineError>,
}

impl Tally {
    pub fn new(skip_bad: bool) -> Self {
        Self { skip_bad, skipped: 0, first: Vec::new() }
    }

    pub fn bad(&mut self, e: LineError) -> Result<(), LineError> {
        if !self.skip_bad {
            return Err(e);
        }
        self.skipped += 1;
        if self.first.len() < KEPT_ERRORS {
            self.first.push(e);
        }
        Ok(())
    }
}

/// Reads the header (the first line that is neither blank nor a comment) and checks that it
/// has every `required` column; then hands each data row to `row`, which returns the field
/// and why for a bad one. Bad lines stop the parse or, with `skip_bad`, are counted.
pub(crate) fn rows<R: BufRead>(
    file: &str,
    r: R,
    required: &[&str],
    skip_bad: bool,
    mut row: impl FnMut(&Header, &Row, u64) -> Result<(), (String, String)>,
) -> Result<(Tally, u64), LineError> {
    let mut lines = Lines::new(file, r);
    let mut tally = Tally::new(skip_bad);
    let header = loop {
        match lines.next_line() {
            None => return Err(lines.error("", "empty: no header line")),
            Some(Err(e)) | Some(Ok(Err(e))) => return Err(e),
            Some(Ok(Ok(l))) if is_blank_or_comment(&l) => continue,
            Some(Ok(Ok(l))) => match Header::parse(&l) {
                Ok(h) => break h,
                Err((field, why)) => return Err(lines.error(&field, why)),
            },
        }
    };
    if let Some(missing) = required.iter().find(|c| header.col(c).is_none()) {
        return Err(
            lines.error(missing, format!("the header has no {missing} column (it needs {})", required.join(", ")))
        );
    }
    let mut n = 0u64;
    while let Some(next) = lines.next_line() {
        let text = match next? {
            Ok(t) => t,
            Err(e) => {
                n += 1;
                tally.bad(e)?;
                continue;
            }
        };
        if is_blank_or_comment(&text) {
            continue;
        }
        n += 1;
        let result = split(&text)
            .map_err(|why| (String::new(), why.to_string()))
            .and_then(|fields| row(&header, &Row { fields: &fields, columns: header.len() }, lines.line));
        if let Err((field, why)) = result {
            tally.bad(lines.error(&field, why))?;
        }
    }
    Ok((tally, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_split_on_commas_and_quotes_keep_them() {
        assert_eq!(split("a, b ,c").unwrap_or_default(), vec!["a", "b", "c"]);
        assert_eq!(split("\"x,y\",\"say \"\"hi\"\"\",").unwrap_or_default(), vec!["x,y", "say \"hi\"", ""]);
        assert!(split("\"open").is_err());
    }

    #[test]
    fn a_header_after_a_byte_order_mark_reads_and_a_column_named_twice_does_not() {
        let h = Header::parse("\u{feff}Submit, duration").map_err(|e| e.1);
        assert_eq!(h.map(|h| (h.col("submit"), h.col("duration"))), Ok((Some(0), Some(1))));
        assert_eq!(
            Header::parse("gpus,GPUS").err(),
            Some(("gpus".to_string(), "named twice in the header".to_string()))
        );
    }

    #[test]
    fn a_line_error_names_file_line_and_field() {
        let e = LineError { file: "f.csv".into(), line: 7, field: "gpus".into(), why: "not a number".into() };
        assert_eq!(e.to_string(), "f.csv:7: field gpus: not a number");
        let whole = LineError { field: String::new(), ..e };
        assert_eq!(whole.to_string(), "f.csv:7: not a number");
    }

    #[test]
    fn an_overlong_line_is_bad_and_the_next_one_reads() {
        let mut data = vec![b'x'; MAX_LINE + 10];
        data.extend_from_slice(b"\nnext\r\n");
        let mut l = Lines::new("f", &data[..]);
        let first = l.next_line();
        assert!(matches!(first, Some(Ok(Err(ref e))) if e.why.contains("longer than") && e.line == 1), "{first:?}");
        let second = l.next_line();
        assert!(matches!(second, Some(Ok(Ok(ref t))) if t == "next"), "{second:?}");
        assert!(l.next_line().is_none());
    }

    #[test]
    fn a_line_of_exactly_the_limit_reads() {
        let mut data = vec![b'y'; MAX_LINE];
        data.push(b'\n');
        let mut l = Lines::new("f", &data[..]);
        assert!(matches!(l.next_line(), Some(Ok(Ok(ref t))) if t.len() == MAX_LINE));
    }

    #[test]
    fn bytes_that_are_not_text_are_a_bad_line() {
        let mut l = Lines::new("f", &b"ok\n\xff\xfe\n"[..]);
        assert!(matches!(l.next_line(), Some(Ok(Ok(_)))));
        assert!(matches!(l.next_line(), Some(Ok(Err(ref e))) if e.why.contains("UTF-8") && e.line == 2));
    }
}
