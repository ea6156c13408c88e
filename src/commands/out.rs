//! Standard output for commands. A reader that leaves early (`tessera layouts H100 | head -1`)
//! closes the pipe: the command ends quietly, as Unix tools do, instead of panicking. During
//! an action the progress lines are best effort, so a closed pipe never stops the action.

use std::io::{ErrorKind, Write};

use super::CmdError;

/// Write `text` to stdout and flush. A closed pipe is `CmdError::Closed` (exit 0, no message).
pub fn print(text: &str) -> Result<(), CmdError> {
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
