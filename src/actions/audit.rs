//! The audit log: JSON lines at `$XDG_STATE_HOME/tessera/audit.jsonl` (mode 0600). An intent
//! record before execution and an outcome record after: who, where from, the plan, the result.
//! Plans hold no credentials (tokens stay in files and headers), so none is ever written.

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{SecondsFormat, Utc};
use serde_json::{Value, json};

use super::Plan;
use super::execute::Outcome;
use crate::model::ComputeMode;

/// `$XDG_STATE_HOME/tessera/audit.jsonl`, else `~/.local/state/tessera/audit.jsonl`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(base.join("tessera").join("audit.jsonl"))
}

/// The user acting: `$USER`, `$LOGNAME`, else the name of this process's uid in /etc/passwd.
pub fn user() -> String {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    env("USER").or_else(|| env("LOGNAME")).or_else(passwd_name).unwrap_or_else(|| "unknown".into())
}

fn passwd_name() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uid = status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().next()?.to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[2] == uid).then(|| f[0].to_string())
    })
}

/// Who acts and from where.
fn who() -> Value {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_string());
    json!({
        "user": user(),
        "host": host,
        // Only the client address and ports: never anything else of the SSH environment.
        "ssh_client": env("SSH_CLIENT"),
        // Under sudo, who asked.
        "sudo_user": env("SUDO_USER"),
    })
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub fn intent(plan: &Plan) -> Value {
    json!({ "record": "intent", "at": now(), "who": who(), "plan": plan })
}

/// The console was left while the action ran: where each step stood (`done`, `failed`,
/// `running`, `not run`), in the same fields as an outcome's steps.
pub fn interrupted(plan: &Plan, steps: &[super::execute::StepResult]) -> Value {
    json!({ "record": "interrupted", "at": now(), "who": who(), "plan": plan, "steps": steps })
}

/// An action whose target was already as asked: nothing ran.
pub fn nothing_to_do(plan: &Plan) -> Value {
    json!({ "record": "nothing_to_do", "at": now(), "who": who(), "plan": plan })
}

/// An attempt the guards refused: nothing ran.
pub fn refused(plan: &Plan) -> Value {
    json!({ "record": "refused", "at": now(), "who": who(), "plan": plan })
}

pub fn outcome(plan: &Plan, o: &Outcome) -> Value {
    json!({
        "record": "outcome", "at": now(), "who": who(),
        "action": plan.action, "backend": plan.backend, "target": plan.target,
        "card": plan.card.as_ref().map(ToString::to_string), "result": o,
    })
}

/// Append one record, creating the file (0600) and its directory (0700) if needed.
pub fn append(path: &Path, record: &Value) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let shown = path.display();
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("audit log {}: {e}", dir.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("audit log {shown}: {e}"))?;
    // A file created by something else keeps its mode: tighten it.
    let _ = f.set_permissions(std::fs::Permissions::from_mode(0o600));
    let line = serde_json::to_string(record).map_err(|e| format!("audit log {shown}: {e}"))?;
    f.write_all(format!("{line}\n").as_bytes()).map_err(|e| format!("audit log {shown}: {e}"))
}

/// The compute mode a card had before tessera last drained it through NVML, from the log.
pub fn previous_compute_mode(path: &Path, card: &str) -> Option<ComputeMode> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().rev().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find_map(|v| {
        let is = v.get("record")?.as_str()? == "outcome"
            && v.get("card")?.as_str()? == card
            && v.pointer("/action/action")?.as_str()? == "drain";
        if !is {
            return None;
        }
        // A drain of a card already drained recorded PROHIBITED, and a failed one nothing: the
        // mode to restore is the one before the first drain still in force.
        let mode: ComputeMode = serde_json::from_value(v.pointer("/result/previous_mode")?.clone()).ok()?;
        (mode != ComputeMode::Prohibited).then_some(mode)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn appends_private_lines_and_finds_the_previous_mode() {
        let dir = std::env::temp_dir().join(format!("tessera-audit-{}", std::process::id()));
        let path = dir.join("nested/audit.jsonl");
        let rec = json!({"record": "outcome", "card": "n1/0", "action": {"action": "drain", "target": "n1/0"},
            "result": {"previous_mode": "exclusive_process"}});
        assert!(append(&path, &json!({"record": "intent"})).is_ok());
        assert!(append(&path, &rec).is_ok());
        // Drained twice, then a failed drain: still the mode before the first.
        let twice = json!({"record": "outcome", "card": "n1/0", "action": {"action": "drain", "target": "n1/0"},
            "result": {"previous_mode": "prohibited"}});
        let failed = json!({"record": "outcome", "card": "n1/0", "action": {"action": "drain", "target": "n1/0"},
            "result": {"previous_mode": null}});
        assert!(append(&path, &twice).is_ok() && append(&path, &failed).is_ok());
        let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
        assert_eq!(mode, 0o600);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(text.lines().count(), 4);
        assert_eq!(previous_compute_mode(&path, "n1/0"), Some(ComputeMode::ExclusiveProcess));
        assert_eq!(previous_compute_mode(&path, "n1/1"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
