//! One action at a time on a card, across processes and users: a console, `schedule run` and a
//! command line on one host each take the target's lock before the intent is audited, and hold
//! it until the outcome is. The locks live in one place per host (`[actions] lock_dir`, by
//! default /run/lock, else /tmp), so operators with different state directories share them.
//! The lock is the kernel's (`flock`, released when the last process holding it ends, however
//! it ends: a command an action started holds it too); the file says who holds it, so the
//! second operator is told who and since when.
//!
//! A place is accepted only when nobody outside its users can swap a lock file in it: this
//! user's own directory that no one else can write, a root-owned sticky directory (as /run/lock
//! and /tmp are: each lock file stays its maker's), or a directory of the configured
//! `lock_group` that others cannot write. Anything else is refused with the reason.

use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a target's lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The lock's directory or file cannot be made or opened, or the kernel's lock failed.
    #[error("action lock {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// Another process holds it; `holder` is who and what, as its lock file says.
    #[error("{target} is being acted on by {holder}: wait for it to end, then plan again")]
    Busy { target: String, holder: String },
    /// The lock place (or a file in it) is not one tessera trusts.
    #[error("action lock place {}: {why}: refused", path.display())]
    Untrusted { path: PathBuf, why: String },
}

/// What kind of place the locks are in: who else may make files there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shared {
    /// This user's own directory: nobody else acts here.
    Private,
    /// A root-owned sticky directory: everyone may make lock files, only their makers remove them.
    Sticky,
    /// A directory of the configured group, which others cannot write.
    Group(u32),
}

/// A checked lock place.
#[derive(Debug, Clone)]
pub struct Place {
    pub dir: PathBuf,
    pub shared: Shared,
}

/// The host's lock place when none is configured: /run/lock where it is root-owned, sticky and
/// open to everyone (Debian's), else /tmp; the same choice for every user, root included (a
/// 0755 /run/lock, as systemd makes it elsewhere, would refuse everyone but root).
pub fn default_dir() -> PathBuf {
    let run = Path::new("/run/lock");
    let shared = std::fs::symlink_metadata(run)
        .is_ok_and(|m| m.is_dir() && m.uid() == 0 && m.permissions().mode() & 0o1002 == 0o1002);
    if shared { run.to_path_buf() } else { PathBuf::from("/tmp") }
}

/// This process's user id (the owner of /proc/self).
fn my_uid() -> std::io::Result<u32> {
    Ok(std::fs::metadata("/proc/self")?.uid())
}

/// A group's id from its name (in /etc/group) or its number.
pub fn group_id(name: &str) -> Option<u32> {
    if let Ok(n) = name.parse::<u32>() {
        return Some(n);
    }
    let text = std::fs::read_to_string("/etc/group").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

/// Check `dir` as a lock place (made 0700 for this user when it does not exist): never
/// followed through a symbolic link, and refused unless it is one of the three kinds `Shared`
/// names. `group`: the configured `lock_group`.
pub fn place(dir: &Path, group: Option<&str>) -> Result<Place, LockError> {
    use std::os::unix::fs::DirBuilderExt;
    let refuse = |why: String| LockError::Untrusted { path: dir.to_path_buf(), why };
    let io = |source| LockError::Io { path: dir.to_path_buf(), source };
    let m = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(io)?;
            std::fs::symlink_metadata(dir).map_err(io)?
        }
        Err(e) => return Err(io(e)),
    };
    if m.file_type().is_symlink() {
        return Err(refuse("is a symbolic link (tessera does not follow one)".into()));
    }
    if !m.is_dir() {
        return Err(refuse("not a directory".into()));
    }
    let me = my_uid().map_err(io)?;
    let mode = m.permissions().mode();
    let gid = match group {
        Some(g) => Some(group_id(g).ok_or_else(|| refuse(format!("lock_group {g:?} is not a group of this host")))?),
        None => None,
    };
    if m.uid() == me && mode & 0o022 == 0 {
        return Ok(Place { dir: dir.to_path_buf(), shared: Shared::Private });
    }
    if m.uid() == 0 && mode & 0o1000 != 0 {
        return Ok(Place { dir: dir.to_path_buf(), shared: Shared::Sticky });
    }
    // The group's: others cannot write it, and setgid, so each lock file takes the group and
    // every member may say in it who holds it.
    if let Some(g) = gid
        && m.gid() == g
        && mode & 0o002 == 0
        && mode & 0o2000 != 0
    {
        return Ok(Place { dir: dir.to_path_buf(), shared: Shared::Group(g) });
    }
    let group_said =
        group.map_or_else(String::new, |g| format!(", one of group {g} with the setgid bit that others cannot write"));
    Err(refuse(format!(
        "owned by uid {} (group {}, mode {:04o}); a lock place is this user's own directory that nobody else can \
         write, a root-owned sticky directory (as /run/lock is){group_said}",
        m.uid(),
        m.gid(),
        mode & 0o7777
    )))
}

/// A held lock: released when dropped (its file then says it is free), or when the process
/// and every command it started with the lock end.
#[derive(Debug)]
pub struct Held {
    file: File,
    writable: bool,
}

impl Held {
    /// The lock's file: a command given it (as its standard input) holds the lock as long as
    /// it runs, even if tessera is gone.
    pub fn file(&self) -> &File {
        &self.file
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Not left reading as held by someone gone (a file that looks stale invites a delete,
        // which would break the lock of whoever takes it next).
        if self.writable {
            let _ = self.file.set_len(0);
            let _ = std::os::unix::fs::FileExt::write_all_at(&self.file, b"{\"free\":true}\n", 0);
        }
    }
}

/// The file name for a target: letters, digits, `-`, `.` and `_` kept, anything else `_`.
fn key(target: &str) -> String {
    let k: String =
        target.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '.') { c } else { '_' }).collect();
    // Bounded: a file name has at most 255 bytes.
    format!("tessera.{}.lock", k.chars().take(200).collect::<String>())
}

/// Open (or make) the lock file at `path`: never through a symbolic link; an existing file is
/// opened without O_CREAT (a sticky directory refuses that for another user's file), read-only
/// when it is not ours to write (a lock needs no more; its holder is then not said).
fn open(path: &Path, place: &Place) -> Result<(File, bool), LockError> {
    let io = |source| LockError::Io { path: path.to_path_buf(), source };
    let mode = match place.shared {
        Shared::Private => 0o600,
        // Anyone who takes it may say so in it.
        Shared::Sticky => 0o666,
        Shared::Group(_) => 0o664,
    };
    for _ in 0..8 {
        // Never waiting on the open: a FIFO planted under the name is opened at once (and then
        // refused as not a regular file), not waited on for a writer.
        let base = || {
            let mut o = std::fs::OpenOptions::new();
            o.read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
            o
        };
        match base().write(true).open(path) {
            Ok(f) => return Ok((f, true)),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return base().open(path).map(|f| (f, false)).map_err(|e| {
                    // Named with its owner: a file someone planted there that nobody may read.
                    let owner = std::fs::symlink_metadata(path).map(|m| format!(" (owned by uid {})", m.uid()));
                    LockError::Untrusted {
                        path: path.to_path_buf(),
                        why: format!("cannot be opened{}: {e}", owner.unwrap_or_default()),
                    }
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(LockError::Untrusted {
                    path: path.to_path_buf(),
                    why: "is a symbolic link (tessera does not follow one)".into(),
                });
            }
            Err(e) => return Err(io(e)),
        }
        match base().write(true).create_new(true).mode(mode).open(path) {
            Ok(f) => {
                // Past the umask: the group's members must be able to write it.
                let _ = f.set_permissions(std::fs::Permissions::from_mode(mode));
                return Ok((f, true));
            }
            // Made by another process in between: open that one.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
    }
    Err(io(std::io::Error::other("the lock file kept changing while it was opened")))
}

/// Take the lock of `target` in `place`, writing `holder` (one line of JSON) into it; when
/// another process holds it, why not, with what its holder wrote.
pub fn take(place: &Place, target: &str, holder: &serde_json::Value) -> Result<Held, LockError> {
    let path = place.dir.join(key(target));
    let io = |source| LockError::Io { path: path.clone(), source };
    let me = my_uid().map_err(io)?;
    // A file removed or replaced between the open and the lock is not the lock: again.
    for _ in 0..8 {
        let (file, writable) = open(&path, place)?;
        let m = file.metadata().map_err(io)?;
        if !m.is_file() {
            return Err(LockError::Untrusted { path: path.clone(), why: "not a regular file".into() });
        }
        if place.shared == Shared::Private && m.uid() != me {
            return Err(LockError::Untrusted { path: path.clone(), why: format!("belongs to uid {}", m.uid()) });
        }
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(LockError::Busy { target: target.to_string(), holder: holder_of(&file) });
            }
            Err(std::fs::TryLockError::Error(source)) => return Err(io(source)),
        }
        let same = std::fs::symlink_metadata(&path).is_ok_and(|p| p.ino() == m.ino() && p.dev() == m.dev());
        if !same {
            continue;
        }
        // Ours now: say who holds it.
        if writable {
            let _ = file.set_len(0);
            let _ = std::os::unix::fs::FileExt::write_all_at(&file, format!("{holder}\n").as_bytes(), 0);
        }
        return Ok(Held { file, writable });
    }
    Err(io(std::io::Error::other("the lock file kept being replaced while it was taken")))
}

/// Whether another process holds `target`'s lock in `place` now (its action is under way).
/// Nothing is made or written: a lock file that is not there is nobody's.
pub fn busy(place: &Place, target: &str) -> bool {
    let path = place.dir.join(key(target));
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&path)
    else {
        return false;
    };
    match file.try_lock_shared() {
        Ok(()) => false,
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(std::fs::TryLockError::Error(_)) => false,
    }
}

/// Who holds a lock, from its file: "alice@gpu-login (pid 4242, drain, since ...)". Its holder
/// writes it just after taking the lock, so a few tries are given for the line to be whole.
fn holder_of(file: &File) -> String {
    let mut said = serde_json::Value::Null;
    for _ in 0..20 {
        let mut buf = [0u8; 4096];
        let n = std::os::unix::fs::FileExt::read_at(file, &mut buf, 0).unwrap_or(0);
        let text = String::from_utf8_lossy(&buf[..n]);
        if text.ends_with('\n')
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(text.trim())
            && v.get("free").is_none()
        {
            said = v;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let v = said;
    let s = |k: &str| v[k].as_str().map(|t| crate::out::printable(&crate::config::shown_at(t, 80)).into_owned());
    let who = match (s("user"), s("host")) {
        (Some(u), Some(h)) => format!("{u}@{h}"),
        (Some(u), None) => u,
        _ => "another tessera (its lock file does not say who)".into(),
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
#[path = "lock_tests.rs"]
mod tests;
