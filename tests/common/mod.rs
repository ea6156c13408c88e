//! Helpers shared by the integration tests: the fake NVML library, a tmux driver, and
//! `tessera snapshot --json` with its sources.
#![allow(dead_code)]

pub mod http;
pub mod k8s;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Whether `program` runs. Without it a test prints SKIPPED and passes, unless
/// TESSERA_REQUIRE_SERVICES=1 (CI), where it fails.
pub fn have(program: &str) -> bool {
    have_with(program, "-V")
}

/// `have`, asking the program's version with `flag`.
pub fn have_with(program: &str, flag: &str) -> bool {
    let found = Command::new(program).arg(flag).output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(std::env::var("TESSERA_REQUIRE_SERVICES").as_deref() != Ok("1"), "{program} is required but missing");
        println!("SKIPPED: {} needs {program}", std::thread::current().name().unwrap_or("test"));
    }
    found
}

/// A private tmux server driving one session named `e2e`.
pub struct Tmux {
    pub socket: String,
}

impl Tmux {
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux").args(["-L", &self.socket]).args(args).output().unwrap_or_else(|e| panic!("tmux: {e}"))
    }

    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "e2e"]).stdout).into_owned()
    }

    pub fn display(&self, format: &str) -> String {
        String::from_utf8_lossy(&self.run(&["display-message", "-p", "-t", "e2e", format]).stdout).trim().to_string()
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "e2e"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Wait until the screen satisfies `ok`; panic with the screen after a timeout.
    pub fn wait(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "timed out waiting for {what}; screen:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The fake library: `FAKE_NVML_LIB` if set, else built into its own target directory (a
/// nested cargo must not wait on the lock of the build running these tests).
pub fn fake_lib() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        if let Some(p) = std::env::var_os("FAKE_NVML_LIB") {
            return PathBuf::from(p);
        }
        let target = root().join("target").join("fake-nvml");
        let status = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "fake-nvml", "--target-dir"])
            .arg(&target)
            .current_dir(root())
            .status()
            .unwrap_or_else(|e| panic!("cannot run cargo: {e}"));
        assert!(status.success(), "building the fake NVML library failed");
        target.join("debug").join("libfake_nvml.so")
    })
    .clone()
}

pub fn scenario(name: &str) -> PathBuf {
    root().join("tests/fixtures/nvml").join(name)
}

/// A JSON fixture under `tests/fixtures/kubernetes`.
pub fn k8s_fixture(name: &str) -> serde_json::Value {
    let p = root().join("tests/fixtures/kubernetes").join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A temporary directory for one test, removed when dropped.
pub struct Temp(pub PathBuf);

impl Temp {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("tessera-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        Self(dir)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl std::ops::Deref for Temp {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

/// `tessera snapshot --json ARGS` with `env` and no config of the user's: exit code, the JSON
/// (Null when none), stderr.
pub fn snapshot(args: &[&str], env: &[(&str, &str)]) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["snapshot", "--json"])
        .args(args)
        .envs(env.iter().copied())
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap_or(-1), v, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The source named `name` in a snapshot's JSON (Null when absent).
pub fn source<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["sources"].as_array().and_then(|s| s.iter().find(|x| x["name"] == name)).unwrap_or(&serde_json::Value::Null)
}

/// Past this (KiB) a child being measured is killed: it has passed any ceiling a test checks,
/// and a flood left to run takes the machine's memory.
const KILL_KIB: u64 = 1 << 20;

/// The most memory a process took, sampled from /proc while it ran (KiB); a process past
/// 1 GiB is killed there.
pub fn peak_rss_kib(child: &mut std::process::Child) -> u64 {
    let mut peak = 0;
    loop {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        let hwm = status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        peak = peak.max(hwm);
        if peak > KILL_KIB {
            let _ = child.kill();
        }
        if child.try_wait().ok().flatten().is_some() {
            return peak;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Run `cmd` with its output piped and read as it comes (a child writing more than a pipe
/// holds would wait for ever on a reader that only reads after it ended): its peak RSS (KiB,
/// `VmHWM` sampled from /proc; 0 for a child that ended before the first sample) and its
/// output. (`wait4`'s `ru_maxrss` would not do: a child started by vfork or posix_spawn
/// carries its parent's high-water mark across exec.)
pub fn run_peak(mut cmd: Command) -> (u64, Output) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("{e}"));
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let peak = peak_rss_kib(&mut child);
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    (peak, Output { status, stdout, stderr })
}
