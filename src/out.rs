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

/// `text` with every control character but line ends and tabs escaped. (JSON is already safe:
/// serde escapes control characters inside strings.)
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    use std::fmt::Write as _;
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
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

/// Write `text` to stdout if anyone still reads it: for progress while an action runs.
pub fn say(text: &str) {
    let _ = print(text);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_go_out_escaped_and_lines_stay() {
        assert_eq!(printable("a\u{1b}]0;x\u{7}b\n\tc\u{9b}"), "a\\u001b]0;x\\u0007b\n\tc\\u009b");
        // In JSON a raw C1 control or DEL (serde leaves them) becomes a valid escape.
        let json = serde_json::to_string(&serde_json::json!({"n": "x\u{9b}\u{7f}"})).unwrap_or_default();
        let back: serde_json::Value = serde_json::from_str(&printable(&json)).unwrap_or_default();
        assert_eq!(back["n"], "x\u{9b}\u{7f}");
        assert!(matches!(printable("plain\n"), std::borrow::Cow::Borrowed(_)));
    }
}
