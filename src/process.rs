//! Running a program (Slurm's commands, for the source and the executor): no shell, a timeout,
//! output capped (and held against the sources' memory budget), and the program in its own
//! process group so that a timeout or a flood kills everything it started, not only itself (a
//! hung wrapper would leave its child behind), also when the caller stops waiting and drops the
//! run. The signal calls live here too: the console's
//! Ctrl-Z stops this process the same way.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

/// What a run printed and how it ended.
#[derive(Debug)]
pub struct Output {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    /// The first `STDERR_LIMIT` bytes of it.
    pub stderr: Vec<u8>,
}

/// Why a run gave no output.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("not found")]
    NotFound,
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("printed more than {0} bytes: stopped")]
    TooLong(u64),
    #[error("stopped: {0}")]
    Budget(crate::budget::Exhausted),
    /// The program file is open for writing elsewhere (ETXTBSY: a script still being
    /// written, or a fork holding it): running it again a moment later may work.
    #[error("{0}")]
    Busy(String),
    #[error("{0}")]
    Io(String),
}

/// Standard error is read this far (a first line is all anyone quotes).
pub const STDERR_LIMIT: u64 = 64 << 10;

/// Run `program` with `args`; at most `limit` bytes of standard output are taken, and at
/// `timeout` or past `limit` the program and everything it started are killed. The output
/// read is held against the sources' memory budget (`budget`) while it runs.
pub async fn run(
    program: &str,
    args: &[&str],
    timeout: Duration,
    limit: u64,
    budget: Option<&crate::budget::Budget>,
) -> Result<Output, RunError> {
    started(program, args, timeout, limit, budget, Stdio::null()).await
}

/// `run` for an action's step: the program's standard input is `hold`, the action's lock file,
/// so the lock (the kernel's, on the open file) is held while the program runs, even past a
/// tessera that was killed. None: no lock, nothing on standard input.
pub async fn run_holding(
    program: &str,
    args: &[&str],
    timeout: Duration,
    limit: u64,
    hold: Option<&std::fs::File>,
) -> Result<Output, RunError> {
    let stdin = match hold.map(std::fs::File::try_clone) {
        Some(Ok(f)) => Stdio::from(f),
        Some(Err(e)) => return Err(RunError::Io(format!("cannot hand the action's lock to {program}: {e}"))),
        None => Stdio::null(),
    };
    started(program, args, timeout, limit, None, stdin).await
}

async fn started(
    program: &str,
    args: &[&str],
    timeout: Duration,
    limit: u64,
    budget: Option<&crate::budget::Budget>,
    stdin: Stdio,
) -> Result<Output, RunError> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).stdin(stdin).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).process_group(0);
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => RunError::NotFound,
        std::io::ErrorKind::ExecutableFileBusy => RunError::Busy(e.to_string()),
        _ => RunError::Io(e.to_string()),
    })?;
    // Until the program is waited for, leaving this function in any way (an error, a timeout,
    // the caller dropping the run) kills its group.
    let group = Group { pid: child.id(), waited: std::sync::atomic::AtomicBool::new(false) };
    let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(RunError::Io("no pipes to the program".into()));
    };
    // Standard error on its own task: a program flooding standard output while its standard
    // error stays open must not keep the limit from being noticed.
    let stderr = tokio::spawn(async move {
        let mut v = Vec::new();
        let _ = err.take(STDERR_LIMIT).read_to_end(&mut v).await;
        v
    });
    let work = async {
        // Without a budget of the sources' (the executor's commands, at most 1 MiB), one
        // that bounds nothing but keeps the reading the same.
        let unbounded;
        let budget = match budget {
            Some(b) => b,
            None => {
                unbounded = crate::budget::Budget::new(usize::MAX);
                &unbounded
            }
        };
        let mut stdout = crate::budget::Chunks::new(budget);
        let mut out = out.take(limit + 1);
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            let n = out.read(&mut chunk).await.map_err(|e| RunError::Io(e.to_string()))?;
            if n == 0 {
                break;
            }
            // Past the limit it stops before keeping more.
            if (stdout.len() + n) as u64 > limit {
                return Err(RunError::TooLong(limit));
            }
            stdout.extend(&chunk[..n]).map_err(RunError::Budget)?;
        }
        let stdout = stdout.join().map_err(RunError::Budget)?;
        let status = child.wait().await.map_err(|e| RunError::Io(e.to_string()))?;
        group.waited.store(true, std::sync::atomic::Ordering::Relaxed);
        let stderr = stderr.await.unwrap_or_default();
        Ok(Output { status, stdout, stderr })
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(RunError::Timeout(timeout)),
    }
}

/// The program's process group, killed when dropped before the program was waited for: a
/// timeout, a flood, or a caller that stopped waiting (the program has not been reaped, so
/// the group id is still its own).
struct Group {
    pid: Option<u32>,
    waited: std::sync::atomic::AtomicBool,
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.waited.load(std::sync::atomic::Ordering::Relaxed) {
            kill_group(self.pid);
        }
    }
}

/// Stop this process (SIGSTOP: it cannot be caught) until a SIGCONT: the console's Ctrl-Z,
/// after it gave the terminal back.
pub fn stop_self() {
    group::stop_self();
}

/// SIGKILL to the process group `pid` leads (the program was started as its leader).
fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()).filter(|&p| p > 1) {
        group::kill(pid);
    }
}

/// The FFI calls here: signals to a process group, and to this process.
#[allow(unsafe_code)]
mod group {
    /// SIGSTOP to this process; returns once it is continued.
    pub fn stop_self() {
        // SAFETY: raise takes an integer and touches no memory of ours; SIGSTOP stops the
        // process until SIGCONT, then raise returns.
        unsafe {
            libc::raise(libc::SIGSTOP);
        }
    }

    /// SIGKILL to process group `pgid`.
    pub fn kill(pgid: i32) {
        // SAFETY: killpg takes two integers and touches no memory of ours; a group that is
        // already gone makes it return -1 (ESRCH), which is fine here.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &std::path::Path, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
        p.to_string_lossy().into_owned()
    }

    /// The process whose pid is in `pidfile` is gone (or a zombie about to be reaped by
    /// init): not sleeping on.
    fn assert_gone(pidfile: &std::path::Path) {
        let pid = std::fs::read_to_string(pidfile).unwrap_or_default().trim().to_string();
        assert!(!pid.is_empty());
        std::thread::sleep(Duration::from_millis(200));
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = state.rsplit(") ").next().and_then(|s| s.chars().next());
        assert!(matches!(state, None | Some('Z') | Some('X')), "the child {pid} still runs: {state:?}");
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"))
    }

    /// An action's command holds the action's lock while it runs: tessera gone (its own copy
    /// of the lock closed), a second taker is still refused until the command ends.
    #[test]
    fn a_command_given_the_lock_holds_it_until_it_ends() {
        let dir = std::env::temp_dir().join(format!("tessera-proc-hold-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        // It says what its standard input is (the lock file), then runs a while.
        let slow = script(&dir, "scontrol", "readlink /proc/$$/fd/0; sleep 1");
        let path = dir.join("n1.lock");
        let lock = std::fs::File::create(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(lock.try_lock().is_ok());
        let second = || std::fs::File::open(&path).map(|f| f.try_lock().is_ok()).unwrap_or(false);
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build();
        let rt = rt.unwrap_or_else(|e| panic!("{e}"));
        rt.block_on(async {
            let held = lock.try_clone().unwrap_or_else(|e| panic!("{e}"));
            let task = tokio::spawn(async move {
                run_holding(&slow, &[], Duration::from_secs(20), 1 << 20, Some(&held))
                    .await
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            });
            tokio::time::sleep(Duration::from_millis(300)).await;
            drop(lock);
            assert!(!second(), "the command holds the lock");
            assert_eq!(task.await.ok(), Some(Ok(path.display().to_string())));
        });
        assert!(second(), "free once the command ended");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn output_that_never_ends_is_stopped_at_the_limit() {
        let dir = std::env::temp_dir().join(format!("tessera-proc-flood-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let flood = script(&dir, "squeue", "yes 'a line of output that never ends'");
        let r = rt().block_on(run(&flood, &[], Duration::from_secs(20), 1 << 20, None));
        assert_eq!(r.err(), Some(RunError::TooLong(1 << 20)));
        // Below its own limit, the output still counts against the sources' budget.
        let budget = crate::budget::Budget::new(256 << 10);
        let r = rt().block_on(run(&flood, &[], Duration::from_secs(20), 1 << 20, Some(&budget)));
        assert!(matches!(r, Err(RunError::Budget(_))), "{r:?}");
        assert!(budget.peak() <= 256 << 10 && budget.used() == 0, "given back: {}", budget.used());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What a read holds against the budget is the memory its output takes, not only its
    /// length: a buffer grown by doubling took up to twice what was held.
    #[test]
    fn the_output_held_is_the_memory_it_takes() {
        let dir = std::env::temp_dir().join(format!("tessera-proc-held-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let three = script(&dir, "squeue", "head -c 3145729 /dev/zero");
        let budget = crate::budget::Budget::new(64 << 20);
        // A script just written can be busy for a moment while another test forks.
        let out = (0..5)
            .find_map(|_| match rt().block_on(run(&three, &[], Duration::from_secs(20), 256 << 20, Some(&budget))) {
                Err(RunError::Busy(_)) => None,
                r => Some(r),
            })
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!("{three} did not run"));
        assert_eq!(out.stdout.len(), 3 << 20 | 1);
        assert!(
            budget.peak() >= out.stdout.capacity(),
            "held at most {} for an output taking {}",
            budget.peak(),
            out.stdout.capacity()
        );
        // At most the last chunk, partly filled, and the one being joined more.
        let most = out.stdout.len() + 2 * crate::budget::CHUNK;
        assert!(budget.peak() <= most, "held {} for {} bytes", budget.peak(), out.stdout.len());
        assert_eq!(budget.used(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A caller that stops waiting (the console quits, `snapshot` ends at its own limit) drops
    /// the run: what the program started goes with it, not on under PID 1.
    #[test]
    fn a_dropped_run_kills_what_the_program_started() {
        let dir = std::env::temp_dir().join(format!("tessera-proc-dropped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let pidfile = dir.join("child.pid");
        let body = format!("sleep 300 & echo $! > {}\nwait", pidfile.display());
        let hung = script(&dir, "squeue", &body);
        let rt = rt();
        // The run's own timeout is 60 s; the caller gives up after 500 ms.
        let outer = rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(500), run(&hung, &[], Duration::from_secs(60), 1 << 20, None))
                .await
        });
        assert!(outer.is_err(), "the caller gave up first");
        assert_gone(&pidfile);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_timeout_kills_what_the_program_started_too() {
        let dir = std::env::temp_dir().join(format!("tessera-proc-orphan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let pidfile = dir.join("child.pid");
        // A wrapper that starts a child and hangs.
        let body = format!("sleep 300 & echo $! > {}\nwait", pidfile.display());
        let hung = script(&dir, "scontrol", &body);
        let r = rt().block_on(run(&hung, &[], Duration::from_millis(500), 1 << 20, None));
        assert_eq!(r.err(), Some(RunError::Timeout(Duration::from_millis(500))));
        assert_gone(&pidfile);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
