//! One action at a time on a card, across processes: a console, `schedule run` and a command
//! line on one host each take the target's lock in the state directory (`locks/`, beside the
//! audit log) before the intent is audited, and hold it until the outcome is. The lock is the
//! kernel's (`flock`, released when the process ends, however it ends); the file says who
//! holds it, so the second operator is told who and since when.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why a target's lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The lock's directory or file cannot be made or opened, or the kernel's lock failed.
    #[error("action lock {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// Another process holds it; `holder` is who and what, as its lock file says.
    #[error("{target} is being acted on by {holder}: wait for it to end, then plan again")]
    Busy { target: String, holder: String },
}

/// A held lock: released when dropped (or when the process ends).
#[derive(Debug)]
pub struct Held {
    _file: File,
}

/// The file name for a target: letters, digits, `-`, `.` and `_` kept, anything else `_`.
fn key(target: &str) -> String {
    let k: String =
        target.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '.') { c } else { '_' }).collect();
    // Bounded: a file name has at most 255 bytes.
    k.chars().take(200).collect()
}

/// Take the lock of `target` in `dir`, writing `holder` (one line of JSON) into it; when
/// another process holds it, why not, with what its holder wrote.
pub fn take(dir: &Path, target: &str, holder: &serde_json::Value) -> Result<Held, LockError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| LockError::Io { path: dir.to_path_buf(), source })?;
    let path = dir.join(format!("{}.lock", key(target)));
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|source| LockError::Io { path: path.clone(), source })?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = (&file).take(4096).read_to_string(&mut text);
            return Err(LockError::Busy { target: target.to_string(), holder: holder_of(&text) });
        }
        Err(std::fs::TryLockError::Error(source)) => return Err(LockError::Io { path, source }),
    }
    // Ours now: say who holds it.
    let _ = file.set_len(0);
    let _ = file.write_all(format!("{holder}\n").as_bytes());
    let _ = file.flush();
    Ok(Held { _file: file })
}

/// Who holds a lock, from its file: "alice@gpu-login (pid 4242, drain, since ...)".
fn holder_of(text: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_default();
    let s = |k: &str| v[k].as_str().map(str::to_string);
    let who = match (s("user"), s("host")) {
        (Some(u), Some(h)) => format!("{u}@{h}"),
        (Some(u), None) => u,
        _ => "another tessera".into(),
    };
    let mut what = Vec::new();
    if let Some(p) = v["pid"].as_u64() {
        what.push(format!("pid {p}"));
    }
    if let Some(a) = s("action") {
        what.push(a);
    }
    if let Some(t) = s("since") {
        what.push(format!("since {t}"));
    }
    let what = if what.is_empty() { String::new() } else { format!(" ({})", what.join(", ")) };
    format!("{who}{what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_told_who_holds_the_lock_until_it_is_released() {
        let dir = std::env::temp_dir().join(format!("tessera-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let holder = serde_json::json!({"user": "alice", "host": "login-1", "pid": 4242, "action": "drain", "since": "10:02:11Z"});
        let first = take(&dir, "gpu-a100-01/0", &holder);
        assert!(first.is_ok(), "{first:?}");
        // A second open file is a second holder, in this process as in another.
        let second = take(&dir, "gpu-a100-01/0", &serde_json::json!({"user": "bob"}));
        assert_eq!(
            second.err().map(|e| e.to_string()).as_deref(),
            Some(
                "gpu-a100-01/0 is being acted on by alice@login-1 (pid 4242, drain, since 10:02:11Z): wait for it to end, then plan again"
            )
        );
        assert!(take(&dir, "gpu-a100-01/1", &holder).is_ok(), "another card is free");
        drop(first);
        assert!(take(&dir, "gpu-a100-01/0", &holder).is_ok(), "released with its holder");
        assert_eq!(key("../../etc/passwd"), ".._.._etc_passwd");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
