//! Standard output for commands. A reader that leaves early (`tessera layouts H100 | head -1`)
//! closes the pipe: the command ends quietly, as Unix tools do, instead of panicking. During
//! an action the progress lines are best effort, so a closed pipe never stops the action.
//! Everything goes out printable: names and texts from sources (a node name, a label, an
//! error) cannot drive the terminal; a control character is written `\u001b`, as JSON writes
//! it (so JSON stays valid: serde leaves DEL and the C1 controls raw).

use std::io::{ErrorKind, Write};

use crate::error::CmdError;

/// A line on stderr, which may be a terminal that is gone: a failed write is dropped (the
/// std print macros panic on one).
pub fn to_stderr(line: &str) {
    let _ = writeln!(std::io::stderr(), "{}", printable(line));
}

/// Characters that change how text around them reads without showing themselves: bidi
/// embeddings, overrides and isolates (a name can read reversed), zero-width spaces and joiners
/// and the byte-order mark (two names look alike).
pub fn invisible(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// `text` with every control character but line ends escaped, tabs (a tab from a name breaks a
/// table's columns) and the invisible characters too. In JSON the escape is JSON's own, so it
/// reads back the same.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    use std::fmt::Write as _;
    let bad = |c: char| (c.is_control() && c != '\n') || invisible(c);
    if !text.chars().any(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if bad(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Write `text` to stdout, printable, and flush. A closed pipe is `CmdError::Closed` (exit 0,
/// no message).
pub fn print(text: &str) -> Result<(), CmdError> {
    let text = printable(text);
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Err(CmdError::Closed),
        Err(e) => Err(CmdError::Failed(format!("cannot write to standard output: {e}"))),
    }
}

/// Write `v` to stdout as pretty JSON and a line end, as it is serialised (nothing is built
/// whole first), printable as `print` writes it, and flush. A closed pipe is `CmdError::Closed`.
pub fn print_json(v: &impl serde::Serialize) -> Result<(), CmdError> {
    let mut out = Printable(std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock()));
    let written = serde_json::to_writer_pretty(&mut out, v).map_err(std::io::Error::from);
    match written.and_then(|()| out.write_all(b"\n")).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Err(CmdError::Closed),
        Err(e) => Err(CmdError::Failed(format!("cannot write to standard output: {e}"))),
    }
}

/// A writer that passes what it is given through `printable`. serde_json writes whole
/// characters in each call (a string's runs end at a character to escape, which is ASCII).
struct Printable<W: Write>(W);

impl<W: Write> Write for Printable<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match std::str::from_utf8(buf) {
            Ok(text) => self.0.write_all(printable(text).as_bytes()),
            Err(_) => self.0.write_all(printable(&String::from_utf8_lossy(buf)).as_bytes()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Write `text` to stdout if anyone still reads it: for progress while an action runs.
pub fn say(text: &str) {
    let _ = print(text);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_go_out_escaped_and_lines_stay() {
        assert_eq!(printable("a\u{1b}]0;x\u{7}b\n\tc\u{9b}"), "a\\u001b]0;x\\u0007b\n\\u0009c\\u009b");
        // A name that reads reversed, or looks like another, shows what it holds.
        assert_eq!(printable("gpu-\u{202e}10-a\u{200b}"), "gpu-\\u202e10-a\\u200b");
        let json = serde_json::to_string(&serde_json::json!({"n": "a\u{202e}b\u{2066}"})).unwrap_or_default();
        let back: serde_json::Value = serde_json::from_str(&printable(&json)).unwrap_or_default();
        assert_eq!(back["n"], "a\u{202e}b\u{2066}");
        // In JSON a raw C1 control or DEL (serde leaves them) becomes a valid escape.
        let json = serde_json::to_string(&serde_json::json!({"n": "x\u{9b}\u{7f}"})).unwrap_or_default();
        let back: serde_json::Value = serde_json::from_str(&printable(&json)).unwrap_or_default();
        assert_eq!(back["n"], "x\u{9b}\u{7f}");
        assert!(matches!(printable("plain\n"), std::borrow::Cow::Borrowed(_)));
    }
}
