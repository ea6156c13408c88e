//! Files tessera is handed (a config, a token, a CA, a theme, a recording, an input): opened
//! without waiting (a FIFO with no writer would block the open itself), regular files only
//! (a FIFO, a device such as /dev/zero, or a directory is refused by kind), read within a
//! bound. Errors say what is wrong without the path; callers name the file. And the one way
//! tessera writes a file it keeps (`write_atomic`): whole, synced, then renamed over; and where
//! it keeps them (`state_dir`).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What a file is when it is not a regular one.
fn kind(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Why a file tessera was handed could not be read. Says nothing of the path: callers name it.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The system refused the open or the read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Not a regular file; says which kind it is.
    #[error("{0} is not a file tessera reads")]
    NotRegular(&'static str),
    /// Larger than the limit given; not read.
    #[error("larger than {} (not read)", size(*.0))]
    TooLarge(u64),
    #[error("not UTF-8 text")]
    NotText,
}

/// Open `path` for reading if it is a regular file (symlinks to one are followed).
pub fn open_regular(path: &Path) -> Result<File, ReadError> {
    // O_NONBLOCK: opening a FIFO never waits for a writer; on a regular file it changes nothing.
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let t = file.metadata()?.file_type();
    if !t.is_file() {
        return Err(ReadError::NotRegular(kind(t)));
    }
    Ok(file)
}

/// The bytes of a regular file of at most `limit` bytes.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let file = open_regular(path)?;
    let mut out = Vec::new();
    file.take(limit + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(ReadError::TooLarge(limit));
    }
    Ok(out)
}

/// `read_bounded` as UTF-8 text.
pub fn read_text(path: &Path, limit: u64) -> Result<String, ReadError> {
    String::from_utf8(read_bounded(path, limit)?).map_err(|_| ReadError::NotText)
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// Where tessera keeps what outlives a run (the audit log, the demand by hour, the cards
/// `schedule run` drained): `$XDG_STATE_HOME/tessera`, else `~/.local/state/tessera`; `None`
/// without either variable. Not created here.
pub fn state_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(base.join("tessera"))
}

/// Write `bytes` to `path` whole: into a new file beside it under a random name (created
/// exclusively, so nothing planted there is followed or overwritten), synced, then renamed
/// over `path`. A crash never leaves half a file, and two processes (the console and
/// `schedule run`) never write into each other's. A `path` that exists and is not a regular
/// file (a FIFO, a device, a symlink, a directory) is refused, never replaced; a regular one
/// keeps its permissions. The directory must exist.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let Some(file) = path.file_name() else {
        let why = format!("{}: not a file name to write", path.display());
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, why));
    };
    let mode = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => Some(m.permissions().mode() & 0o7777),
        Ok(m) => {
            let what = if m.file_type().is_symlink() { "a symbolic link" } else { kind(m.file_type()) };
            let why = format!("it exists and is {what}: only a regular file is replaced");
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, why));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let (tmp, mut f) = create_beside(path, file)?;
    let written = f
        .write_all(bytes)
        .and_then(|()| mode.map_or(Ok(()), |m| f.set_permissions(std::fs::Permissions::from_mode(m))))
        .and_then(|()| f.sync_all());
    drop(f);
    let done = written.and_then(|()| std::fs::rename(&tmp, path));
    if done.is_err() {
        // Nothing half-written is left beside the target.
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// Refuse `dir` when another user owns it: a file planted there could be swapped or read
/// (the check the audit log's directory has, for the state tessera keeps beside it).
pub fn check_own_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = std::fs::metadata("/proc/self")?.uid();
    let owner = std::fs::metadata(dir)?.uid();
    if owner != me {
        let why =
            format!("the directory belongs to uid {owner}, not to this user (uid {me}): nothing is written there");
        return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, why));
    }
    Ok(())
}

/// A new file beside `path` under a name nobody can guess (`.NAME.RANDOM.tmp`), created
/// exclusively (`O_EXCL`: an existing file or symlink of that name is never opened).
fn create_beside(path: &Path, file: &std::ffi::OsStr) -> std::io::Result<(PathBuf, File)> {
    use std::hash::{BuildHasher, Hasher};
    let mut last = None;
    for attempt in 0u32..16 {
        // A per-process random key (std seeds it from the OS), mixed with the pid, the time
        // and the attempt.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u32(attempt);
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        let mut name = std::ffi::OsString::from(".");
        name.push(file);
        name.push(format!(".{:016x}.tmp", h.finish()));
        let tmp = path.with_file_name(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary name")))
}

/// The largest config or theme file read (a real one is a few KiB).
pub const CONFIG_LIMIT: u64 = 4 << 20;
/// The largest token or password file read.
pub const SECRET_LIMIT: u64 = 64 << 10;
/// The largest CA bundle read (the system bundle is about 200 KiB).
pub const CA_LIMIT: u64 = 16 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_replaces_only_a_regular_file_and_follows_nothing_planted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("tessera-atomic-kinds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        // A FIFO and a symlink at the target: refused, both left as they were.
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().map(|s| s.success());
        if made.unwrap_or(false) {
            let e = write_atomic(&fifo, b"x").err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("a FIFO"), "{e}");
            assert!(std::fs::symlink_metadata(&fifo).is_ok_and(|m| m.file_type().is_fifo()));
        }
        let victim = dir.join("victim");
        std::fs::write(&victim, b"keep").unwrap_or_else(|e| panic!("{e}"));
        let link = dir.join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap_or_else(|e| panic!("{e}"));
        let e = write_atomic(&link, b"x").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("a symbolic link"), "{e}");
        // The temp name of old (`NAME.<pid>.tmp`) planted as a symlink to the victim: not
        // followed, the victim untouched.
        let target = dir.join("plot.svg");
        std::os::unix::fs::symlink(&victim, dir.join(format!("plot.svg.{}.tmp", std::process::id())))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(write_atomic(&target, b"new").is_ok());
        assert_eq!(std::fs::read(&victim).unwrap_or_default(), b"keep");
        assert_eq!(std::fs::read(&target).unwrap_or_default(), b"new");
        // A regular file keeps its permissions.
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap_or_else(|e| panic!("{e}"));
        assert!(write_atomic(&target, b"again").is_ok());
        let mode = std::fs::metadata(&target).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
        assert_eq!(mode, 0o640);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A state directory another user owns is refused (where the test may hand one over: as
    /// root).
    #[test]
    fn a_directory_another_user_owns_is_refused() {
        let dir = std::env::temp_dir().join(format!("tessera-owned-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert!(check_own_dir(&dir).is_ok());
        if std::os::unix::fs::chown(&dir, Some(65534), None).is_ok() {
            let e = check_own_dir(&dir).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("belongs to uid 65534"), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_atomic_write_needs_a_file_name_and_leaves_no_temp_file_behind() {
        let e = write_atomic(Path::new("/"), b"x").err().map(|e| e.kind());
        assert_eq!(e, Some(std::io::ErrorKind::InvalidInput));
        let dir = std::env::temp_dir().join(format!("tessera-atomic-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("taken")).unwrap_or_else(|e| panic!("{e}"));
        // The target is a directory: the rename fails, and the temp file goes.
        assert!(write_atomic(&dir.join("taken"), b"x").is_err());
        let left: Vec<_> = std::fs::read_dir(&dir).into_iter().flatten().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("taken")]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_fifo_a_device_and_a_directory_are_refused_at_once() {
        let dir = std::env::temp_dir().join(format!("tessera-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
        assert!(made, "mkfifo");
        let started = std::time::Instant::now();
        assert_eq!(
            read_text(&fifo, 100).err().map(|e| e.to_string()).as_deref(),
            Some("a FIFO is not a file tessera reads")
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "the open waited for a writer");
        assert_eq!(
            read_text(Path::new("/dev/zero"), 100).err().map(|e| e.to_string()).as_deref(),
            Some("a character device is not a file tessera reads")
        );
        assert_eq!(
            read_text(&dir, 100).err().map(|e| e.to_string()).as_deref(),
            Some("a directory is not a file tessera reads")
        );
        let big = dir.join("big");
        std::fs::write(&big, vec![b'a'; 2048]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_text(&big, 1024).err().map(|e| e.to_string()).as_deref(), Some("larger than 1 KiB (not read)"));
        assert_eq!(read_text(&big, 2048).map(|t| t.len()).map_err(|e| e.to_string()), Ok(2048));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_atomic_write_replaces_the_file_whole_and_leaves_nothing_beside_it() {
        let dir = std::env::temp_dir().join(format!("tessera-files-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.join("kept.json");
        std::fs::write(&path, "a longer old text").unwrap_or_else(|e| panic!("{e}"));
        write_atomic(&path, b"new").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read_to_string(&path).ok().as_deref(), Some("new"));
        let names: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert_eq!(names, ["kept.json"], "no temporary file left");
        assert!(write_atomic(&dir.join("missing/kept.json"), b"x").is_err(), "the directory must exist");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
