//! `[actions]`: where actions take their locks. One place per host, shared by its operators
//! (and a `schedule run` service), so two of them never act on one card at once whatever their
//! state directories.

use std::path::PathBuf;

use toml::Table;

use super::{ConfigError, Reader};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Actions {
    /// The lock place; `None`: /run/lock, else /tmp.
    pub lock_dir: Option<PathBuf>,
    /// A group whose members share `lock_dir` (a directory of that group others cannot write).
    pub lock_group: Option<String>,
}

pub(super) fn read_actions(r: &Reader, t: &Table, a: &mut Actions) -> Result<(), ConfigError> {
    for (k, v) in t {
        let key = format!("actions.{k}");
        match k.as_str() {
            "lock_dir" => {
                let dir = r.string(&key, v)?;
                if !dir.starts_with('/') {
                    return Err(r.bad(&key, v, "expected an absolute path (one place for every operator of the host)"));
                }
                a.lock_dir = Some(PathBuf::from(dir));
            }
            "lock_group" => {
                let g = r.string(&key, v)?;
                if g.is_empty() || g.contains([':', '\n', '/']) {
                    return Err(r.bad(&key, v, "expected a group name or number"));
                }
                a.lock_group = Some(g);
            }
            _ => return Err(r.unknown(&key, &["lock_dir", "lock_group"])),
        }
    }
    Ok(())
}

/// The `[actions]` part of the example config.
pub(super) fn example() -> &'static str {
    r#"[actions]
# Where actions take their locks: one place for every operator of the host (and a schedule run
# service), so two never act on one node at once. Default /run/lock where it is root-owned,
# sticky and open to all (else /tmp). Accepted: a root-owned sticky directory, a setgid
# directory of lock_group that others cannot write, or your own that nobody else can write
# (then it is yours alone).
# lock_dir = "/run/lock"
# lock_group = "gpu-ops"
"#
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_lock_place_is_an_absolute_path_and_the_group_a_name() {
        let ok = crate::config::parse("[actions]\nlock_dir = \"/srv/locks\"\nlock_group = \"ops\"\n", "c.toml");
        let a = ok.map(|c| c.actions).unwrap_or_default();
        assert_eq!(a.lock_dir.as_deref(), Some(std::path::Path::new("/srv/locks")));
        assert_eq!(a.lock_group.as_deref(), Some("ops"));
        let e = crate::config::parse("[actions]\nlock_dir = \"locks\"\n", "c.toml").err().map(|e| e.to_string());
        assert!(e.as_deref().is_some_and(|e| e.contains("actions.lock_dir") && e.contains("absolute")), "{e:?}");
        let e = crate::config::parse("[actions]\nlock_group = \"a:b\"\n", "c.toml").err().map(|e| e.to_string());
        assert!(e.as_deref().is_some_and(|e| e.contains("actions.lock_group")), "{e:?}");
    }
}
