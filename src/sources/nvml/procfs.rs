//! Process names and users from /proc, for the processes NVML lists by pid.

use std::collections::HashMap;

/// `comm` of a process, if it still exists and is visible.
pub fn name(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
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
    }
}
