//! Prometheus text exposition: a zero-copy line parser, the hot path of every scrape.
//!
//! [`parse`] walks the text once and hands each sample to a callback. Names and label values
//! borrow from the text; a label value is copied only when it holds an escape (`\\`, `\"`,
//! `\n`). [`parse_wanted`] is the scrape's form: it reads no further than the name of a
//! family its reader does not keep, and reuses one `Vec` for every sample's labels. Lines
//! that do not parse are counted and skipped, never fatal: one bad series must not cost the
//! whole scrape.
//!
//! Accepted: the text format 0.0.4 as Prometheus' Go parser reads it (spaces or tabs between
//! tokens and around `=` and `,`, a trailing comma before `}`, `NaN`, `+Inf`, `-Inf`, `Inf`,
//! scientific notation, an optional integer millisecond timestamp that may be negative,
//! `\r\n` line ends, a missing final newline) plus OpenMetrics text (`# EOF` is a comment and an
//! exemplar ` # {...} v [ts]` after the value or timestamp is ignored).
//!
//! Rejected, counted in [`ParseStats::bad_lines`] (by [`parse_wanted`] only in the families it
//! reads: a refused name's line is not checked past the name): an invalid metric name (`...`, `met-ric`,
//! `@x`, a line starting with `{`), an invalid or quoted label name, a label value without
//! quotes, an unterminated label value or label set, `__name__` as a label, a missing value, a
//! fractional or non-numeric timestamp (so OpenMetrics' float-second sample timestamps are
//! rejected), and any token after the timestamp other than an exemplar. A value that is not a
//! number (dcgm-exporter's `ERROR - FAILED TO CONVERT TO STRING`) is counted in
//! [`ParseStats::bad_values`].
//!
//! Deliberately not checked (the Go parser rejects some of these): HELP/TYPE lines are comments
//! and never validated (duplicates, TYPE after samples, unknown types); `le` and `quantile`
//! values are not checked; duplicate label names are kept; an unknown escape such as `\t` is
//! kept as written (backslash and all), because dcgm-exporter does not escape label values.
//! The UTF-8 syntax of text format 1.0 (quoted metric and label names, `{"my.dotted.metric",
//! ...}`) is not supported: such lines count as bad lines.

use std::borrow::Cow;

/// One sample line: borrowed from the text except for label values that held escapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    /// Labels in the order written.
    pub labels: Vec<(&'a str, Cow<'a, str>)>,
    pub value: f64,
    /// Milliseconds since the epoch, where the line carries a timestamp.
    pub timestamp_ms: Option<i64>,
}

impl<'a> Sample<'a> {
    /// The value of the first label called `name`.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_ref())
    }
}

/// What one parse saw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParseStats {
    /// Physical lines, blank and comment lines included.
    pub lines: usize,
    /// Sample lines that parsed and went to the callback.
    pub samples: usize,
    /// Lines starting with `#` (after optional whitespace): HELP, TYPE, EOF and any other.
    pub comments: usize,
    /// Sample lines of families the reader does not keep ([`parse_wanted`]): read no further
    /// than their name.
    pub skipped: usize,
    /// Lines that are not valid exposition (see the module docs), of the families read.
    pub bad_lines: usize,
    /// Sample lines whose value is not a number.
    pub bad_values: usize,
    /// The first problem, as `line N: what: the line` (a long line cut in the middle).
    pub first_error: Option<String>,
}

/// Calls `on_sample` for every sample line that parses; counts the rest. Never panics.
pub fn parse<'a>(text: &'a str, mut on_sample: impl FnMut(Sample<'a>)) -> ParseStats {
    parse_wanted(
        text,
        |_| true,
        |s| {
            let labels = std::mem::take(&mut s.labels);
            on_sample(Sample { name: s.name, labels, value: s.value, timestamp_ms: s.timestamp_ms });
        },
    )
}

/// [`parse`] for a reader that keeps some families and reads each sample in place: a line
/// whose metric name `wanted` refuses is skipped after its name (not checked further, counted
/// in [`ParseStats::skipped`]), and the labels are one `Vec`, handed to `on_sample` line after
/// line (it may take from it; what it leaves is cleared): no allocation per sample. Never
/// panics.
pub fn parse_wanted<'a>(
    text: &'a str,
    mut wanted: impl FnMut(&str) -> bool,
    mut on_sample: impl FnMut(&mut Sample<'a>),
) -> ParseStats {
    let mut stats = ParseStats::default();
    // Most series of one scrape have the same number of labels: size a new Vec like the last.
    let mut label_hint = 0usize;
    let mut labels = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (raw, next) = match rest.find('\n') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        rest = next;
        stats.lines += 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if labels.capacity() == 0 {
            labels.reserve(label_hint);
        }
        match parse_line(line, &mut labels, &mut wanted) {
            Line::Blank => {}
            Line::Comment => stats.comments += 1,
            Line::Skipped => stats.skipped += 1,
            Line::Sample { name, value, timestamp_ms } => {
                label_hint = labels.len();
                stats.samples += 1;
                let mut s = Sample { name, labels, value, timestamp_ms };
                on_sample(&mut s);
                labels = s.labels;
            }
            Line::BadValue(what) => {
                stats.bad_values += 1;
                note(&mut stats.first_error, stats.lines, what, line);
            }
            Line::Bad(what) => {
                stats.bad_lines += 1;
                note(&mut stats.first_error, stats.lines, what, line);
            }
        }
        labels.clear();
    }
    stats
}

fn note(first: &mut Option<String>, line_no: usize, what: &str, line: &str) {
    if first.is_some() {
        return;
    }
    // A long line shows its start (the series) and its end (the value).
    const HALF: usize = 48;
    let shown = if line.len() > 2 * HALF + 8 {
        let mut head = HALF;
        while !line.is_char_boundary(head) {
            head -= 1;
        }
        let mut tail = line.len() - HALF;
        while !line.is_char_boundary(tail) {
            tail += 1;
        }
        format!("{}…{}", &line[..head], &line[tail..])
    } else {
        line.to_string()
    };
    *first = Some(format!("line {line_no}: {what}: {shown}"));
}

enum Line<'a> {
    Blank,
    Comment,
    Skipped,
    /// A sample; its labels are in the caller's `Vec`.
    Sample {
        name: &'a str,
        value: f64,
        timestamp_ms: Option<i64>,
    },
    BadValue(&'static str),
    Bad(&'static str),
}

#[inline]
fn is_ws(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

#[inline]
fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

#[inline]
fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

#[inline]
fn is_label_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

#[inline]
fn is_label_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// A cursor over one line. Every position it stops at is next to an ASCII byte, so slicing
/// the `&str` there is always on a character boundary.
struct Cursor<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn skip_ws(&mut self) {
        while self.peek().is_some_and(is_ws) {
            self.i += 1;
        }
    }

    #[inline]
    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let start = self.i;
        while self.peek().is_some_and(&f) {
            self.i += 1;
        }
        &self.s[start..self.i]
    }

    /// The next run of non-whitespace.
    #[inline]
    fn token(&mut self) -> &'a str {
        self.take_while(|b| !is_ws(b))
    }

    /// A label value after its opening quote; leaves the cursor past the closing quote.
    fn quoted(&mut self) -> Result<Cow<'a, str>, &'static str> {
        const UNTERMINATED: &str = "unterminated label value";
        let start = self.i;
        let rest = self.b.get(start..).unwrap_or_default();
        // The closing quote or the first escape, whichever comes first.
        let Some(at) = memchr::memchr2(b'"', b'\\', rest) else { return Err(UNTERMINATED) };
        let mut j = start + at;
        if self.b.get(j) == Some(&b'"') {
            self.i = j + 1;
            return Ok(Cow::Borrowed(&self.s[start..j]));
        }
        // An escape: copy from here on. `seg` is the start of the pending unescaped run.
        let mut out = String::with_capacity(j - start + 16);
        out.push_str(&self.s[start..j]);
        let mut seg = j;
        while let Some(&c) = self.b.get(j) {
            match c {
                b'"' => {
                    out.push_str(&self.s[seg..j]);
                    self.i = j + 1;
                    return Ok(Cow::Owned(out));
                }
                b'\\' => {
                    out.push_str(&self.s[seg..j]);
                    match self.b.get(j + 1) {
                        Some(b'\\') => out.push('\\'),
                        Some(b'"') => out.push('"'),
                        Some(b'n') => out.push('\n'),
                        Some(_) => {
                            // Not an escape the format defines: keep the backslash, and let
                            // the next character (perhaps multi-byte) be copied as written.
                            out.push('\\');
                            j += 1;
                            seg = j;
                            continue;
                        }
                        None => return Err(UNTERMINATED),
                    }
                    j += 2;
                    seg = j;
                }
                _ => j += 1,
            }
        }
        Err(UNTERMINATED)
    }
}

fn parse_line<'a>(
    line: &'a str,
    labels: &mut Vec<(&'a str, Cow<'a, str>)>,
    wanted: &mut impl FnMut(&str) -> bool,
) -> Line<'a> {
    let mut c = Cursor { s: line, b: line.as_bytes(), i: 0 };
    c.skip_ws();
    match c.peek() {
        None => return Line::Blank,
        Some(b'#') => return Line::Comment,
        Some(b) if is_name_start(b) => {}
        Some(b'{') => return Line::Bad("no metric name (quoted names are not supported)"),
        Some(_) => return Line::Bad("invalid metric name"),
    }
    let name = c.take_while(is_name_char);
    let name_end = c.i;
    if !wanted(name) {
        return Line::Skipped;
    }
    c.skip_ws();
    if c.peek() == Some(b'{') {
        c.i += 1;
        if let Err(what) = parse_labels(&mut c, labels) {
            return Line::Bad(what);
        }
        c.skip_ws();
    } else if c.i == name_end && c.i < c.b.len() {
        return Line::Bad("invalid metric name");
    }
    let value = c.token();
    if value.is_empty() || value.starts_with('#') {
        return Line::Bad("missing value");
    }
    let Ok(value) = value.parse::<f64>() else {
        return Line::BadValue("value is not a number");
    };
    c.skip_ws();
    let mut timestamp_ms = None;
    match c.peek() {
        None | Some(b'#') => {}
        Some(_) => {
            let Ok(ts) = c.token().parse::<i64>() else {
                return Line::Bad("invalid timestamp (must be integer milliseconds)");
            };
            timestamp_ms = Some(ts);
            c.skip_ws();
            match c.peek() {
                None | Some(b'#') => {}
                Some(_) => return Line::Bad("unexpected text after the timestamp"),
            }
        }
    }
    Line::Sample { name, value, timestamp_ms }
}

/// Labels after the opening `{`, through the closing `}`.
fn parse_labels<'a>(c: &mut Cursor<'a>, labels: &mut Vec<(&'a str, Cow<'a, str>)>) -> Result<(), &'static str> {
    loop {
        c.skip_ws();
        match c.peek() {
            None => return Err("unterminated label set"),
            Some(b'}') => {
                c.i += 1;
                return Ok(());
            }
            Some(b'"') => return Err("quoted label names are not supported"),
            Some(b) if is_label_start(b) => {}
            Some(_) => return Err("invalid label name"),
        }
        let key = c.take_while(is_label_char);
        if key == "__name__" {
            return Err("__name__ is not allowed as a label");
        }
        c.skip_ws();
        if c.peek() != Some(b'=') {
            return Err("expected '=' after a label name");
        }
        c.i += 1;
        c.skip_ws();
        if c.peek() != Some(b'"') {
            return Err("label value is not quoted");
        }
        c.i += 1;
        let value = c.quoted()?;
        labels.push((key, value));
        c.skip_ws();
        match c.peek() {
            Some(b',') => c.i += 1,
            Some(b'}') => {
                c.i += 1;
                return Ok(());
            }
            None => return Err("unterminated label set"),
            Some(_) => return Err("expected ',' or '}' after a label value"),
        }
    }
}

#[cfg(test)]
#[path = "exposition_tests.rs"]
mod tests;
