//! The audit log: JSON lines at `$XDG_STATE_HOME/tessera/audit.jsonl` (mode 0600). An intent
//! record before execution and an outcome record after: who, where from, the plan, the result.
//! Plans hold no credentials (tokens stay in files and headers), so none is ever written.

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{SecondsFormat, Utc};
use serde_json::{Value, json};

use super::{Outcome, Plan, StepResult};
use crate::model::ComputeMode;

mod open;
pub use open::{Open, open_intents};

/// Why a record could not be appended to the audit log.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The log or its directory cannot be made, opened or written.
    #[error("audit log {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// The directory belongs to another user: it could hold a planted file.
    #[error(
        "audit log {}: the directory belongs to uid {owner}, not to this user (uid {me}): refused",
        dir.display()
    )]
    ForeignDirectory { dir: PathBuf, owner: u32, me: u32 },
    /// A symbolic link is where the log goes.
    #[error("audit log {}: is a symbolic link: refused (tessera does not follow one)", path.display())]
    Symlink { path: PathBuf },
    /// Something other than a regular file is where the log goes.
    #[error("audit log {}: not a regular file: refused", path.display())]
    NotAFile { path: PathBuf },
    /// The record cannot be written as JSON.
    #[error("audit log {}: {source}", path.display())]
    Json { path: PathBuf, source: serde_json::Error },
}

/// `$XDG_STATE_HOME/tessera/audit.jsonl`, else `~/.local/state/tessera/audit.jsonl`.
pub fn default_path() -> Option<PathBuf> {
    crate::files::state_dir().map(|d| d.join("audit.jsonl"))
}

/// Who acts and from where.
pub fn who() -> Value {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_string());
    json!({
        "user": super::user(),
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

/// Before execution. `subject` is what the action acts on as the lock keys it (`Plan::subject`):
/// an intent with no outcome for its subject after it is an action left half-done.
pub fn intent(plan: &Plan) -> Value {
    let mut v = json!({
        "record": "intent", "at": now(), "who": who(), "pid": std::process::id(), "subject": plan.subject(), "plan": plan,
    });
    with_taint_rules(&mut v, plan);
    v
}

/// A plan that creates or deletes DeviceTaintRules (a drain through DRA): the card, how many
/// and their names, as their own field (`taint_rules`).
fn with_taint_rules(record: &mut Value, plan: &Plan) {
    let (created, deleted) = plan.taint_rules();
    if created.is_empty() && deleted.is_empty() {
        return;
    }
    record["taint_rules"] = json!({
        "card": plan.card.as_ref().map(ToString::to_string),
        "count": created.len() + deleted.len(),
        "created": created,
        "deleted": deleted,
    });
}

/// The console was left while the action ran: the same plain fields as an outcome (action,
/// backend, target, card), where each step stood (`done`, `failed`, `running`, `not run`) and
/// the state reached in words.
pub fn interrupted(plan: &Plan, steps: &[StepResult]) -> Value {
    let done = steps.iter().filter(|s| s.status == "done").count();
    let reached = match steps.iter().position(|s| s.status == "running") {
        Some(i) => format!(
            "left while step {} of {} ran ({}): {done} done before it, the rest not run",
            i + 1,
            steps.len(),
            steps[i].what
        ),
        None => format!("left with {done} of {} steps done", steps.len()),
    };
    json!({
        "record": "interrupted", "at": now(), "who": who(), "subject": plan.subject(),
        "action": plan.action, "backend": plan.backend, "target": plan.target,
        "card": plan.card.as_ref().map(ToString::to_string), "steps": steps, "reached": reached,
    })
}

/// An action whose target was already as asked: nothing ran.
pub fn nothing_to_do(plan: &Plan) -> Value {
    json!({ "record": "nothing_to_do", "at": now(), "who": who(), "plan": plan })
}

/// An attempt the guards refused: nothing ran.
pub fn refused(plan: &Plan) -> Value {
    json!({ "record": "refused", "at": now(), "who": who(), "plan": plan })
}

/// An attempt refused after the yes for `why` (another action holds the target, its lock
/// place is refused): nothing ran.
pub fn refused_because(plan: &Plan, why: &str) -> Value {
    json!({ "record": "refused", "at": now(), "who": who(), "plan": plan, "why": why })
}

pub fn outcome(plan: &Plan, o: &Outcome) -> Value {
    let mut v = json!({
        "record": "outcome", "at": now(), "who": who(), "subject": plan.subject(),
        "action": plan.action, "backend": plan.backend, "target": plan.target,
        "card": plan.card.as_ref().map(ToString::to_string), "result": o,
    });
    with_taint_rules(&mut v, plan);
    v
}

/// Append one record, creating the file (0600) and its directory (0700) if needed.
pub fn append(path: &Path, record: &Value) -> Result<(), AuditError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
    let io = |source| AuditError::Io { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| AuditError::Io { path: dir.to_path_buf(), source })?;
        // A directory someone else owns could hold a planted file: refused, not written into.
        let me = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
        if let (Some(me), Ok(m)) = (me, std::fs::metadata(dir))
            && m.uid() != me
        {
            return Err(AuditError::ForeignDirectory { dir: dir.to_path_buf(), owner: m.uid(), me });
        }
        // tessera's own state directory, made by something else (or an older tessera) with
        // room for others: tightened. (Not ours to change, it fails quietly.)
        if std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
    }
    // O_NOFOLLOW: a symlink planted where the log goes is refused, never followed (its target
    // would be written to and have its mode changed).
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => AuditError::Symlink { path: path.to_path_buf() },
            _ => io(e),
        })?;
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return Err(AuditError::NotAFile { path: path.to_path_buf() });
    }
    // A file created by something else keeps its mode: tighten it.
    let _ = f.set_permissions(std::fs::Permissions::from_mode(0o600));
    let line = serde_json::to_string(record).map_err(|source| AuditError::Json { path: path.to_path_buf(), source })?;
    let line = inert(&line);
    // An append that failed part-way (a full disk) and could not be cut back left a torn
    // line: the next record starts on a line of its own, after one that says so.
    let before = f.metadata().map(|m| m.len()).map_err(io)?;
    let mut text = String::new();
    if torn(&f, before) {
        let repair = json!({
            "record": "repaired", "at": now(), "who": who(),
            "what": "the line before this one was cut short (an append that failed part-way): it is not a record",
        });
        text.push('\n');
        text.push_str(&repair.to_string());
        text.push('\n');
    }
    text.push_str(&line);
    text.push('\n');
    f.write_all(text.as_bytes()).map_err(|e| {
        // Cut back what this append wrote, so the log ends on a whole line again.
        let _ = f.set_len(before);
        io(e)
    })
}

/// Whether the file of `len` bytes ends inside a line (its last byte is not a newline).
fn torn(f: &std::fs::File, len: u64) -> bool {
    use std::os::unix::fs::FileExt;
    let mut last = [0u8; 1];
    len > 0 && f.read_at(&mut last, len - 1).is_ok_and(|n| n == 1 && last[0] != b'\n')
}

/// JSON with DEL and the C1 controls escaped too (serde escapes only those below 0x20): a
/// source name carrying U+009B (CSI) stays inert for whoever `cat`s or `tail`s the log, and
/// reads back the same.
fn inert(json: &str) -> std::borrow::Cow<'_, str> {
    use std::fmt::Write as _;
    let bad = |c: char| c == '\u{7f}' || ('\u{80}'..='\u{9f}').contains(&c) || crate::out::invisible(c);
    if !json.chars().any(bad) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if bad(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// How far back from its end the log is read for a card's last drain: an undrain reads at
/// most this much, however long the log has grown.
pub const LOOK_BACK: u64 = 64 << 20;

/// The longest audit line read back (a record with a long plan is a few KiB): a longer tail
/// is dropped, so at most this much is copied per block.
const MAX_LINE: usize = 256 << 10;

/// The compute mode a card had before tessera last drained it through NVML, from the log's
/// last `LOOK_BACK` bytes, newest first.
pub fn previous_compute_mode(path: &Path, card: &str) -> Option<ComputeMode> {
    previous_compute_mode_within(path, card, LOOK_BACK)
}

/// The last lines of `path`, newest first, from at most its last `max` bytes, read backwards
/// in blocks (a line cut by the bound is left out).
fn lines_backwards(path: &Path, max: u64) -> impl Iterator<Item = String> {
    use std::io::{Read, Seek, SeekFrom};
    const BLOCK: u64 = 64 << 10;
    let file = std::fs::File::open(path).ok();
    let len = file.as_ref().and_then(|f| f.metadata().ok()).map_or(0, |m| m.len());
    let stop = len.saturating_sub(max);
    let mut pos = len;
    let mut tail: Vec<u8> = Vec::new();
    let mut ready: Vec<String> = Vec::new();
    let mut file = file;
    std::iter::from_fn(move || {
        loop {
            if let Some(l) = ready.pop() {
                return Some(l);
            }
            let f = file.as_mut()?;
            if pos <= stop {
                // The first line of the bounded range is whole only at the file's start.
                file = None;
                let first = std::mem::take(&mut tail);
                return (stop == 0 && !first.is_empty()).then(|| String::from_utf8_lossy(&first).into_owned());
            }
            let start = pos.saturating_sub(BLOCK).max(stop);
            let mut block = vec![0u8; usize::try_from(pos - start).unwrap_or(0)];
            if f.seek(SeekFrom::Start(start)).is_err() || f.read_exact(&mut block).is_err() {
                file = None;
                return None;
            }
            pos = start;
            // A line longer than any record tessera writes is not one of them: dropped, so a
            // log without line ends is not copied over and over.
            if tail.len() > MAX_LINE {
                tail.clear();
            }
            block.extend_from_slice(&tail);
            let mut parts: Vec<&[u8]> = block.split(|b| *b == b'\n').collect();
            tail = parts.remove(0).to_vec();
            ready =
                parts.into_iter().filter(|p| !p.is_empty()).map(|p| String::from_utf8_lossy(p).into_owned()).collect();
        }
    })
}

fn previous_compute_mode_within(path: &Path, card: &str, max: u64) -> Option<ComputeMode> {
    lines_backwards(path, max).filter_map(|l| serde_json::from_str::<Value>(&l).ok()).find_map(|v| {
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

    /// A torn line (an append a full disk cut short and nothing could cut back): the next
    /// intent is not glued to it but starts a line of its own, after a record that says so.
    #[test]
    fn a_torn_line_is_not_glued_to_the_next_record() {
        let dir = std::env::temp_dir().join(format!("tessera-audit-torn-{}", std::process::id()));
        let path = dir.join("audit.jsonl");
        assert!(append(&path, &json!({"record": "intent", "n": 1})).is_ok());
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap_or_else(|e| panic!("{e}"));
            f.write_all(b"{\"record\":\"intent\",\"n\":2,\"pl").unwrap_or_else(|e| panic!("{e}"));
        }
        assert!(append(&path, &json!({"record": "intent", "n": 3})).is_ok());
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        let parsed: Vec<Option<Value>> = lines.iter().map(|l| serde_json::from_str(l).ok()).collect();
        assert!(parsed[1].is_none(), "the torn line stays, alone");
        assert_eq!(parsed[2].as_ref().and_then(|v| v["record"].as_str()), Some("repaired"));
        assert_eq!(parsed[3].as_ref().and_then(|v| v["n"].as_i64()), Some(3), "the next intent is whole");
        // A log that ends on a whole line needs no repair.
        assert!(append(&path, &json!({"record": "intent", "n": 4})).is_ok());
        assert_eq!(std::fs::read_to_string(&path).unwrap_or_default().lines().count(), 5);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The log is read from its end, in blocks, and no further back than the bound: a card's
    /// drain beyond it is not searched for (an undrain reads at most LOOK_BACK bytes).
    #[test]
    fn the_previous_mode_is_read_backwards_and_bounded() {
        let dir = std::env::temp_dir().join(format!("tessera-audit-back-{}", std::process::id()));
        let path = dir.join("audit.jsonl");
        let drain = |card: &str, mode: &str| {
            json!({"record": "outcome", "card": card, "action": {"action": "drain", "target": card},
                "result": {"previous_mode": mode}})
        };
        assert!(append(&path, &drain("old/0", "exclusive_process")).is_ok());
        // 200 KiB of other records after it: several blocks.
        let filler = json!({"record": "intent", "plan": {"summary": "x".repeat(1000)}});
        for _ in 0..200 {
            assert!(append(&path, &filler).is_ok());
        }
        assert!(append(&path, &drain("new/0", "default")).is_ok());
        let lines: Vec<String> = lines_backwards(&path, u64::MAX).collect();
        assert_eq!(lines.len(), 202, "every line, whole");
        assert!(lines[0].contains("new/0") && lines[201].contains("old/0"));
        assert_eq!(previous_compute_mode(&path, "new/0"), Some(ComputeMode::Default));
        assert_eq!(previous_compute_mode(&path, "old/0"), Some(ComputeMode::ExclusiveProcess));
        assert_eq!(previous_compute_mode_within(&path, "old/0", 100 << 10), None, "beyond the bound");
        assert_eq!(previous_compute_mode_within(&path, "new/0", 100 << 10), Some(ComputeMode::Default));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// DEL and the C1 controls (U+009B is a CSI on many terminals) reach the log escaped, and
    /// read back as they were.
    #[test]
    fn control_characters_from_sources_are_escaped_in_the_log() {
        let dir = std::env::temp_dir().join(format!("tessera-audit-c1-{}", std::process::id()));
        let path = dir.join("audit.jsonl");
        // C1 controls, DEL, ESC, and a bidi override that would show the name reversed.
        let name = "node\u{9b}2J\u{7f}\u{1b}[31m\u{202e}10-upg";
        assert!(append(&path, &json!({"record": "intent", "target": name})).is_ok());
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "raw control characters: {text:?}");
        assert!(!text.chars().any(crate::out::invisible), "raw bidi characters: {text:?}");
        assert!(text.contains("\\u009b") && text.contains("\\u007f") && text.contains("\\u202e"), "{text}");
        let back: Value = serde_json::from_str(text.trim()).unwrap_or_default();
        assert_eq!(back["target"], name);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A symlink planted where the log goes is refused: its target is neither written nor
    /// made 0600 (the log used to follow it).
    #[test]
    fn a_planted_symlink_is_not_followed() {
        let dir = std::env::temp_dir().join(format!("tessera-audit-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let target = dir.join("someone-elses-file");
        std::fs::write(&target, "theirs\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).is_ok());
        let log = dir.join("audit.jsonl");
        std::os::unix::fs::symlink(&target, &log).unwrap_or_else(|e| panic!("{e}"));
        let err = append(&log, &json!({"record": "intent"})).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("is a symbolic link: refused"), "{err}");
        assert_eq!(std::fs::read_to_string(&target).ok().as_deref(), Some("theirs\n"));
        let mode = std::fs::metadata(&target).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
        assert_eq!(mode, 0o644, "the target's mode is left alone");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A state directory that belongs to another user is not written into (checked where the
    /// tests run as root, the one user who can hand a directory to another).
    #[test]
    fn a_state_directory_of_another_user_is_refused() {
        use std::os::unix::fs::MetadataExt;
        if std::fs::metadata("/proc/self").map(|m| m.uid()).ok() != Some(0) {
            println!("SKIPPED: needs root to give a directory to another user");
            return;
        }
        let dir = std::env::temp_dir().join(format!("tessera-audit-owner-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap_or_else(|e| panic!("{e}"));
        let err = append(&dir.join("audit.jsonl"), &json!({"record": "intent"}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("belongs to uid 65534, not to this user (uid 0): refused"), "{err}");
        assert!(!dir.join("audit.jsonl").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_state_directory_open_to_others_is_tightened() {
        let dir = std::env::temp_dir().join(format!("tessera-audit-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert!(std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).is_ok());
        assert!(append(&dir.join("audit.jsonl"), &json!({"record": "intent"})).is_ok());
        let mode = std::fs::metadata(&dir).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
        assert_eq!(mode, 0o700, "it was 0755");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_interrupted_record_has_the_outcome_fields_and_says_where_it_stood() {
        use crate::actions::StepResult;
        let plan = Plan {
            action: crate::actions::Action::Preempt { workload: "sim:21".into(), force: false },
            backend: crate::actions::Backend::Simulated,
            source: "sim".into(),
            target: "sim:21".into(),
            summary: String::new(),
            steps: Vec::new(),
            warnings: Vec::new(),
            blockers: Vec::new(),
            destructive: true,
            second_confirmation: None,
            nothing_to_do: None,
            card: None,
            wait_idle: false,
        };
        let step = |what: &str, status| StepResult { what: what.into(), call: "c".into(), status, message: None };
        let v = interrupted(&plan, &[step("Ask", "done"), step("Wait 45 s", "running"), step("Requeue", "not run")]);
        assert_eq!(v["record"], "interrupted");
        assert_eq!(v["action"]["action"], "preempt");
        assert_eq!(v["target"], "sim:21");
        assert_eq!(v["steps"][1]["status"], "running");
        assert_eq!(v["reached"], "left while step 2 of 3 ran (Wait 45 s): 1 done before it, the rest not run");
        assert!(v.get("plan").is_none(), "the intent has the plan");
    }
}
