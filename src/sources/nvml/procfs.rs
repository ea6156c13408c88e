//! Process names and users from /proc, for the processes NVML lists by pid.

use std::collections::HashMap;

/// The kernel keeps `comm` to 15 bytes: `nvidia-cuda-mps-server` reads `nvidia-cuda-mps`.
const COMM_MAX: usize = 15;

/// A process's name: `comm`, or where the kernel cut it short, the program name from
/// `cmdline` that it begins (so the MPS server and control daemon are told apart).
pub fn name(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())?;
    if comm.len() < COMM_MAX {
        return Some(comm);
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok().unwrap_or_default();
    Some(full_name(&comm, &cmdline))
}

/// The program in a `cmdline` (NUL-separated) that a cut-short `comm` begins, else `comm`.
fn full_name(comm: &str, cmdline: &[u8]) -> String {
    let argv0 = cmdline.split(|&b| b == 0).next().unwrap_or_default();
    let base = String::from_utf8_lossy(argv0.rsplit(|&b| b == b'/').next().unwrap_or_default()).into_owned();
    if base.starts_with(comm) && base.len() <= 64 { base } else { comm.to_string() }
}

/// The first process named `program` (as `name` reads it), scanning at most 100,000 entries
/// of /proc.
pub fn find(program: &str) -> Option<u32> {
    let prefix: String = program.chars().take(COMM_MAX).collect();
    let dir = std::fs::read_dir("/proc").ok()?;
    for e in dir.take(100_000).flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim() == prefix && name(pid).as_deref() == Some(program) {
            return Some(pid);
        }
    }
    None
}

/// The real uid of a process, from `/proc/PID/status`.
pub fn uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_uid(&status)
}

fn parse_uid(status: &str) -> Option<u32> {
    status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// uid -> user name from an /etc/passwd text.
pub fn users(passwd: &str) -> HashMap<u32, String> {
    passwd
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let uid = f.nth(1)?.parse().ok()?;
            Some((uid, name.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_and_passwd() {
        assert_eq!(parse_uid("Name:\tpython\nUid:\t1000\t1000\t1000\t1000\n"), Some(1000));
        assert_eq!(parse_uid("Name:\tx\n"), None);
        let u = users("root:x:0:0:root:/root:/bin/bash\n# comment\nalice:x:1000:1000::/home/alice:/bin/sh\nbroken\n");
        assert_eq!(u.get(&1000).map(String::as_str), Some("alice"));
        assert_eq!(u.len(), 2);
        assert!(name(std::process::id()).is_some());
        assert_eq!(full_name("nvidia-cuda-mps", b"/usr/bin/nvidia-cuda-mps-server\0"), "nvidia-cuda-mps-server");
        assert_eq!(full_name("nvidia-cuda-mps", b"nvidia-cuda-mps-control\0-d\0"), "nvidia-cuda-mps-control");
        assert_eq!(full_name("python3.11-train", b"/opt/other\0"), "python3.11-train");
        assert_eq!(find("no-such-program-tessera"), None);
    }
}
