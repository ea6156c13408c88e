//! Actions left open in the audit log: an intent with no outcome for its subject after it,
//! read backwards from the log's end.

use std::path::Path;

use serde_json::Value;

use super::{LOOK_BACK, lines_backwards};

/// An action begun and never ended: an intent with no outcome for its subject after it (the
/// process was killed, the host went down, or it was left at once by a second signal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    /// What it acts on (`Plan::subject`).
    pub subject: String,
    /// When it began, who began it, and what it was, as the intent says.
    pub at: String,
    pub who: String,
    pub summary: String,
    /// Where it stood when it was left, if an `interrupted` record says.
    pub reached: Option<String>,
    /// The process that began it, on this host (to tell an action still running from one left).
    pub pid_here: Option<u32>,
    /// On the simulated cluster, which takes no lock.
    pub simulated: bool,
}

impl Open {
    /// The process that began it still runs here: the action is under way, not left.
    pub fn still_running(&self) -> bool {
        self.pid_here.is_some_and(|pid| {
            // (A test binary's name is tessera-HASH.)
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.starts_with("tessera"))
        })
    }
}

impl std::fmt::Display for Open {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = self.at.get(..19).unwrap_or(&self.at).replace('T', " ");
        write!(f, "{} began \"{}\" at {at} UTC and no outcome was recorded", self.who, self.summary)?;
        match &self.reached {
            Some(r) => write!(f, " ({r})"),
            None => write!(f, " (tessera was killed or its host went down)"),
        }
    }
}

/// The actions left open in the log's last `LOOK_BACK` bytes, newest first: one per subject,
/// the latest intent after which no outcome for its subject was written. A later outcome on
/// the subject (an operator acted on it since) closes every intent before it.
pub fn open_intents(path: &Path) -> Vec<Open> {
    open_intents_within(path, LOOK_BACK)
}

fn open_intents_within(path: &Path, max: u64) -> Vec<Open> {
    use std::collections::{HashMap, HashSet};
    // Records written before tessera kept a subject are not judged: their target cannot be
    // told apart from the node an action on it locks (an old intent would be open for ever).
    let subject = |v: &Value| v["subject"].as_str().map(str::to_string);
    let mut closed: HashSet<String> = HashSet::new();
    let mut left: HashMap<String, String> = HashMap::new();
    let mut open = Vec::new();
    for v in lines_backwards(path, max).filter_map(|l| serde_json::from_str::<Value>(&l).ok()) {
        let Some(s) = subject(&v) else { continue };
        match v["record"].as_str() {
            Some("outcome") => {
                closed.insert(s);
            }
            Some("interrupted") if !closed.contains(&s) => {
                let reached = v["reached"].as_str().unwrap_or("left at once").chars().take(300).collect();
                left.entry(s).or_insert(reached);
            }
            Some("intent") if closed.insert(s.clone()) => {
                let w = &v["who"];
                let who = match (w["user"].as_str(), w["host"].as_str()) {
                    (Some(u), Some(h)) => format!("{u}@{h}"),
                    (Some(u), None) => u.to_string(),
                    _ => "someone".into(),
                };
                let text = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("?").chars().take(200).collect();
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
                let here = host.is_some_and(|h| w["host"].as_str() == Some(h.trim()));
                let pid_here = v["pid"].as_u64().and_then(|p| u32::try_from(p).ok()).filter(|_| here);
                let summary = text("/plan/summary");
                let simulated = v.pointer("/plan/backend").and_then(Value::as_str) == Some("simulated");
                open.push(Open {
                    reached: left.remove(&s),
                    subject: s,
                    at: text("/at"),
                    who,
                    summary,
                    pid_here,
                    simulated,
                });
            }
            _ => {}
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::super::append;
    use super::*;
    use serde_json::json;

    /// An intent with no outcome for its subject after it is open, newest first and one per
    /// subject; a later outcome on the subject closes it, an `interrupted` record says where it
    /// stood; records from before the subject field are not judged.
    #[test]
    fn open_intents_are_intents_no_outcome_followed() {
        let dir = std::env::temp_dir().join(format!("tessera-audit-open-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("audit.jsonl");
        let who = json!({"user": "alice", "host": "elsewhere"});
        let intent = |subject: &str, summary: &str| {
            json!({"record": "intent", "at": "2026-12-07T10:00:00.000Z", "who": who, "pid": 1, "subject": subject,
                   "plan": {"summary": summary, "target": subject}})
        };
        let outcome = |subject: &str| json!({"record": "outcome", "subject": subject, "target": subject});
        for r in [
            intent("gpu-01", "Drain node gpu-01"),
            outcome("gpu-01"),
            intent("gpu-02", "Preempt slurm:7"),
            json!({"record": "interrupted", "subject": "gpu-02", "reached": "left while step 2 of 3 ran (Wait)"}),
            intent("gpu-03", "Drain node gpu-03"),
            intent("gpu-04", "Drain node gpu-04"),
            outcome("gpu-04"),
            // An older tessera's intent, without a subject: not judged (it could never be closed).
            json!({"record": "intent", "at": "2026-12-07T11:00:00.000Z", "who": who, "plan": {"summary": "old", "target": "n9/0"}}),
        ] {
            assert!(append(&path, &r).is_ok());
        }
        let open = open_intents(&path);
        let subjects: Vec<&str> = open.iter().map(|o| o.subject.as_str()).collect();
        assert_eq!(subjects, ["gpu-03", "gpu-02"]);
        assert_eq!(
            open[1].to_string(),
            "alice@elsewhere began \"Preempt slurm:7\" at 2026-12-07 10:00:00 UTC and no outcome was recorded (left while \
             step 2 of 3 ran (Wait))"
        );
        assert!(open[0].to_string().ends_with("(tessera was killed or its host went down)"), "{}", open[0]);
        assert!(!open[1].still_running(), "begun on another host");
        // Acted on since: closed.
        assert!(append(&path, &outcome("gpu-02")).is_ok());
        assert_eq!(open_intents(&path).len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
