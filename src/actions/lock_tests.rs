//! Tests of the action lock: who holds it, the places it accepts, and a holder named at once.

use std::io::Write;

use super::*;

/// A fresh directory for one test, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("tessera-lock-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        Self(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn private(dir: &Dir) -> Place {
    place(&dir.0, None).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_second_taker_is_told_who_holds_the_lock_until_it_is_released() {
    let dir = Dir::new("second");
    let p = private(&dir);
    assert_eq!(p.shared, Shared::Private);
    let holder =
        serde_json::json!({"user": "alice", "host": "login-1", "pid": 4242, "action": "drain", "since": "10:02:11Z"});
    let first = take(&p, "gpu-a100-01/0", &holder);
    assert!(first.is_ok(), "{first:?}");
    // A second open file is a second holder, in this process as in another.
    let second = take(&p, "gpu-a100-01/0", &serde_json::json!({"user": "bob"}));
    assert_eq!(
        second.err().map(|e| e.to_string()).as_deref(),
        Some(
            "gpu-a100-01/0 is being acted on by alice@login-1 (pid 4242, drain, since 10:02:11Z): wait for it to end, then plan again"
        )
    );
    assert!(take(&p, "gpu-a100-01/1", &holder).is_ok(), "another card is free");
    drop(first);
    let text = std::fs::read_to_string(dir.0.join(key("gpu-a100-01/0"))).unwrap_or_default();
    assert_eq!(text, "{\"free\":true}\n", "a released lock does not read as held by someone gone");
    assert!(take(&p, "gpu-a100-01/0", &holder).is_ok(), "released with its holder");
    assert_eq!(key("../../etc/passwd"), "tessera..._.._etc_passwd.lock");
}

/// The holder writes its line just after taking the lock: a taker in between still names it
/// (16 of 37 refusals said "another tessera").
#[test]
fn the_holder_is_named_even_when_asked_at_the_moment_it_took_the_lock() {
    let dir = Dir::new("at-once");
    let p = private(&dir);
    let path = p.dir.join(key("n1"));
    let file = std::fs::File::create(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(file.try_lock().is_ok());
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(60));
        let _ = (&file).write_all(b"{\"user\":\"carol\",\"pid\":7}\n");
        std::thread::sleep(Duration::from_millis(300));
        drop(file);
    });
    let e = take(&p, "n1", &serde_json::json!({})).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("carol (pid 7)"), "{e}");
    let _ = writer.join();
}

/// A place tessera does not trust is refused with the reason: a symbolic link (it was
/// followed), a directory others can write without the sticky bit (a 0777 one was accepted).
#[test]
fn a_lock_place_others_could_swap_files_in_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = Dir::new("untrusted");
    std::fs::create_dir_all(dir.0.join("real")).unwrap_or_else(|e| panic!("{e}"));
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    mode(&dir.0.join("real"), 0o700).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(dir.0.join("real"), dir.0.join("link")).unwrap_or_else(|e| panic!("{e}"));
    let e = place(&dir.0.join("link"), None).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("symbolic link") && e.ends_with("refused"), "{e}");
    let open = dir.0.join("open");
    std::fs::create_dir_all(&open).unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap_or_else(|e| panic!("{e}"));
    let e = place(&open, None).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("mode 0777") && e.contains("root-owned sticky"), "{e}");
    // The configured group's directory, others unable to write: shared with the group.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o2770)).unwrap_or_else(|e| panic!("{e}"));
    let gid = std::fs::metadata(&open).map(|m| m.gid()).unwrap_or_default();
    let p = place(&open, Some(&gid.to_string())).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.shared, Shared::Group(gid));
    let e = place(&open, Some("no-such-group-here")).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("not a group of this host"), "{e}");
    // A lock file that is a symbolic link is not opened.
    let real = Dir(dir.0.join("real"));
    let p = private(&real);
    std::os::unix::fs::symlink("/etc/passwd", p.dir.join(key("n2"))).unwrap_or_else(|e| panic!("{e}"));
    let e = take(&p, "n2", &serde_json::json!({})).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("symbolic link"), "{e}");
}

/// The host's own place: /tmp is root-owned and sticky, so any user's tessera shares it.
#[test]
fn a_root_owned_sticky_directory_is_shared() {
    let p = place(Path::new("/tmp"), None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.shared, Shared::Sticky);
    let target = format!("lock-test-{}", std::process::id());
    let held = take(&p, &target, &serde_json::json!({"user": "dave"})).unwrap_or_else(|e| panic!("{e}"));
    let mode = held.file().metadata().map(|m| m.permissions().mode() & 0o777).unwrap_or_default();
    assert_eq!(mode, 0o666, "whoever takes it next may say so in it");
    drop(held);
    let _ = std::fs::remove_file(p.dir.join(key(&target)));
}

/// A FIFO planted under a lock file's name is refused at once (the open waited for a writer
/// for ever, and the console's loop with it).
#[test]
fn a_planted_fifo_is_refused_without_waiting() {
    let dir = Dir::new("fifo");
    let p = private(&dir);
    let path = p.dir.join(key("n3"));
    let made = std::process::Command::new("mkfifo").args(["-m", "444"]).arg(&path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let began = std::time::Instant::now();
    let e = take(&p, "n3", &serde_json::json!({})).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(began.elapsed() < Duration::from_secs(2), "it waited");
    assert!(e.contains("not a regular file") || e.contains("n3"), "{e}");
}

/// The host's default place is /run/lock only where everyone may make lock files there.
#[test]
fn the_default_place_is_one_every_user_can_use() {
    let d = default_dir();
    let m = std::fs::symlink_metadata(&d).unwrap_or_else(|e| panic!("{e}"));
    assert!(m.uid() == 0 && m.permissions().mode() & 0o1002 == 0o1002, "{}", d.display());
}
