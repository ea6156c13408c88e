//! The one action runner, for the console and the command line alike: plan (a refusal is
//! audited), the caller's confirmation (a dialog or the terminal question), plan again and go
//! on only with an unchanged plan, audit the intent, execute with progress, audit the outcome;
//! and the record of an action left while it ran. Each stage returns the value the next one
//! takes, so no caller can skip one: only `approve` makes an `Approved`, and only an `Approved`
//! runs.

use std::path::PathBuf;

use chrono::Utc;
use tokio::sync::mpsc;

use super::lock::LockError;
use super::plan::PlanError;
use super::{Action, Env, Options, Outcome, Plan, Progress, StepResult, Target, audit, execute, plan};
use crate::config::Config;
use crate::model::Fleet;

/// Plans and runs actions with the guards, re-planning and audit in one place.
#[derive(Debug, Clone)]
pub struct Runner {
    cfg: Config,
    env: Env,
    audit: Option<PathBuf>,
    /// Whether an operator confirms each plan (else an open intent on its target refuses it).
    asking: Asking,
    /// The audit log's open intents, read again only when the log changed.
    open: std::sync::Arc<std::sync::Mutex<Option<OpenSeen>>>,
}

/// Who answers a plan's questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asking {
    /// An operator, who is asked before acting on a target with an open intent.
    Operator,
    /// Nobody (`--yes`, `schedule run`): an open intent refuses the plan unless `despite`.
    Nobody { despite: bool },
}

/// The audit log's length and change time: its open intents are read again when either moves.
type LogStamp = (u64, Option<std::time::SystemTime>);

/// The open intents read at a log stamp.
type OpenSeen = (LogStamp, Vec<audit::Open>);

/// What `approve` decided after the operator confirmed.
#[derive(Debug)]
pub enum Approval {
    /// The plan is unchanged and its intent is in the audit log: run it.
    Go(Box<Approved>),
    /// The cluster moved while the operator read the plan: this is the plan now.
    Changed(Box<Plan>),
    /// The target is gone (a usage error).
    Gone(PlanError),
    /// The plan is refused: nothing runs.
    Refused(Refused),
    /// Not started: the intent could not be audited (no audit, no action).
    NotStarted(NotStarted),
}

/// Why a confirmed plan is refused.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// By the guards, each said in turn.
    #[error("{}", super::guard::joined(.0))]
    Guards(Vec<super::guard::Refusal>),
    /// Another action holds what it acts on.
    #[error(transparent)]
    Locked(#[from] LockError),
}

/// Why a confirmed plan was not started: its intent could not be audited.
#[derive(Debug, thiserror::Error)]
pub enum NotStarted {
    #[error("no audit log path (set XDG_STATE_HOME or HOME)")]
    NoAuditLog,
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
}

/// A confirmed, re-planned and audited plan, ready to run.
#[derive(Debug)]
pub struct Approved {
    plan: Plan,
    audit: PathBuf,
    env: Env,
    /// The target's lock across processes, held until the outcome is audited (none for the
    /// simulator: each process has a cluster of its own).
    lock: Option<super::lock::Held>,
}

/// How a run ended: the executor's outcome, and whether its audit record could be written.
#[derive(Debug)]
pub struct Finished {
    pub outcome: Outcome,
    pub audit_error: Option<audit::AuditError>,
}

impl Runner {
    pub fn new(cfg: &Config, env: Env) -> Self {
        Self {
            cfg: cfg.clone(),
            env,
            audit: audit::default_path(),
            asking: Asking::Operator,
            open: std::sync::Arc::default(),
        }
    }

    /// The same runner for plans nobody confirms (`--yes`, `schedule run`).
    pub fn asking(mut self, asking: Asking) -> Self {
        self.asking = asking;
        self
    }

    /// Actions the audit log has no outcome for, newest first (none without a log).
    pub fn open_intents(&self) -> Vec<audit::Open> {
        let Some(path) = &self.audit else { return Vec::new() };
        let stamp = std::fs::metadata(path).map(|m| (m.len(), m.modified().ok())).unwrap_or_default();
        let mut cache = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((s, open)) = cache.as_ref()
            && *s == stamp
        {
            return open.clone();
        }
        let open = audit::open_intents(path);
        *cache = Some((stamp, open.clone()));
        open
    }

    /// The actions left half-done: open intents whose action is not under way.
    pub fn left_open(&self) -> Vec<audit::Open> {
        self.open_intents().into_iter().filter(|o| !self.under_way(o)).collect()
    }

    /// An intent whose action is under way is not left: its process still runs here and the
    /// node's lock is held (a pid reused by another tessera does not hide one that was left;
    /// the simulated cluster, one per process, takes no lock).
    fn under_way(&self, o: &audit::Open) -> bool {
        o.still_running() && (o.simulated || self.lock_busy(&o.subject))
    }

    /// `action` planned with the guards, and with what an open intent on its target asks.
    fn plan(&self, action: &Action, fleet: &Fleet) -> Result<Plan, PlanError> {
        self.plan_waiting(action, fleet, false)
    }

    /// As `plan`; with `wait_idle`, a repartition of a busy card holds it and waits for its
    /// work to end (where the backend can).
    fn plan_waiting(&self, action: &Action, fleet: &Fleet, wait_idle: bool) -> Result<Plan, PlanError> {
        let mut o = self.options(action);
        o.wait_idle = wait_idle;
        let mut p = plan::plan(action, fleet, &o)?;
        if p.nothing_to_do.is_some() || p.steps.is_empty() {
            return Ok(p);
        }
        let subject = p.subject();
        if let Some(open) = self.left_open().into_iter().find(|o| o.subject == subject) {
            p.warnings.push(format!("an earlier action on {subject} was left half-done: {open}"));
            match self.asking {
                Asking::Nobody { despite: false } => {
                    p.blockers.push(super::guard::Refusal::OpenIntent { open: open.to_string() });
                }
                Asking::Nobody { despite: true } => {}
                Asking::Operator => {
                    let q = "an earlier action on it was left half-done (see the warning): checked, go on?";
                    p.second_confirmation = Some(match p.second_confirmation.take() {
                        Some(before) => format!("{q} and {before}"),
                        None => q.to_string(),
                    });
                }
            }
        }
        Ok(p)
    }

    /// The same runner writing its audit log at `path` (`None`: nowhere, so nothing can run).
    pub fn with_audit(mut self, path: Option<PathBuf>) -> Self {
        self.audit = path;
        self
    }

    /// Where its audit log is (a recording follows it).
    pub fn audit_path(&self) -> Option<&std::path::Path> {
        self.audit.as_deref()
    }

    fn options(&self, action: &Action) -> Options {
        let mut opts = Options::new(&self.cfg, action.forced(), Utc::now());
        // For an undrain of a card: the compute mode it had before tessera drained it.
        if let (Action::Undrain { target, .. }, Some(path)) = (action, &self.audit)
            && let Target::Card(r) = Target::parse(target)
        {
            opts.previous_mode = audit::previous_compute_mode(path, &r.to_string());
        }
        opts
    }

    /// Plan `action` on `fleet`. A refused plan, and one with nothing to do, is audited as
    /// such (best effort: the answer stands either way). `Err` when the target or workload
    /// does not exist.
    pub fn propose(&self, action: &Action, fleet: &Fleet) -> Result<Plan, PlanError> {
        let p = self.plan(action, fleet)?;
        let record = if p.nothing_to_do.is_some() {
            Some(audit::nothing_to_do(&p))
        } else {
            (!p.allowed()).then(|| audit::refused(&p))
        };
        if let (Some(r), Some(path)) = (record, &self.audit) {
            let _ = audit::append(path, &r);
        }
        Ok(p)
    }

    /// Plan `action` on `fleet` with the guards, recording nothing: what a group change would
    /// do, shown before anything is asked (each action is proposed again when it runs).
    pub fn check(&self, action: &Action, fleet: &Fleet) -> Result<Plan, PlanError> {
        self.plan(action, fleet)
    }

    /// The operator confirmed `shown`: plan again on the fleet as it is now, and go on only if
    /// nothing changed, after the intent is in the audit log.
    pub fn approve(&self, shown: &Plan, fleet: &Fleet) -> Approval {
        let now = match self.plan_waiting(&shown.action, fleet, shown.wait_idle) {
            Ok(p) => p,
            Err(e) => return Approval::Gone(e),
        };
        if now.steps != shown.steps || now.blockers != shown.blockers {
            // Refused at the re-check after the yes (a new arrival took the idle card): audited
            // as every refusal is (best effort: the answer stands either way).
            if !now.allowed()
                && let Some(path) = &self.audit
            {
                let why =
                    format!("the cluster changed after the plan was shown: {}", super::guard::joined(&now.blockers));
                let _ = audit::append(path, &audit::refused_because(&now, &why));
            }
            // A card taken while the operator confirmed: offer the plan that holds it first
            // and changes it once its work ends (where the backend can wait).
            if shown.allowed()
                && !shown.wait_idle
                && !now.blockers.is_empty()
                && now.blockers.iter().all(super::guard::Refusal::is_card_busy)
                && let Ok(held) = self.plan_waiting(&shown.action, fleet, true)
                && held.wait_idle
                && held.allowed()
            {
                return Approval::Changed(Box::new(held));
            }
            return Approval::Changed(Box::new(now));
        }
        if !now.allowed() {
            return Approval::Refused(Refused::Guards(now.blockers));
        }
        self.begin(shown)
    }

    /// Take the lock of a checked plan and audit its intent (a lock refusal is audited too).
    fn begin(&self, shown: &Plan) -> Approval {
        let Some(path) = self.audit.clone() else {
            return Approval::NotStarted(NotStarted::NoAuditLog);
        };
        let lock = match self.lock(shown) {
            Ok(l) => l,
            Err(why) => {
                // Every refusal is audited, this one too (best effort: the refusal stands).
                let _ = audit::append(&path, &audit::refused_because(shown, &why.to_string()));
                return Approval::Refused(why.into());
            }
        };
        if let Err(e) = audit::append(&path, &audit::intent(shown)) {
            return Approval::NotStarted(e.into());
        }
        Approval::Go(Box::new(Approved { plan: shown.clone(), audit: path, env: self.env.clone(), lock }))
    }

    /// Whether the lock of `subject` is held now (an action on it under way).
    fn lock_busy(&self, subject: &str) -> bool {
        let dir = self.cfg.actions.lock_dir.clone().unwrap_or_else(super::lock::default_dir);
        super::lock::place(&dir, self.cfg.actions.lock_group.as_deref())
            .is_ok_and(|place| super::lock::busy(&place, subject))
    }

    /// The lock of the card the plan acts on (else its target), in the host's lock place
    /// (`[actions] lock_dir`); none for the simulated cluster.
    fn lock(&self, plan: &Plan) -> Result<Option<super::lock::Held>, LockError> {
        if plan.backend == super::Backend::Simulated {
            return Ok(None);
        }
        let dir = self.cfg.actions.lock_dir.clone().unwrap_or_else(super::lock::default_dir);
        let place = super::lock::place(&dir, self.cfg.actions.lock_group.as_deref())?;
        let target = plan.subject();
        let mut holder = audit::who();
        holder["pid"] = serde_json::json!(std::process::id());
        holder["action"] = serde_json::json!(plan.summary.chars().take(200).collect::<String>());
        holder["since"] = serde_json::json!(Utc::now().format("%Y-%m-%d %H:%M:%SZ").to_string());
        super::lock::take(&place, &target, &holder).map(Some)
    }

    /// Leaving while an action runs: say in the audit log where each step stood.
    pub fn interrupted(&self, plan: &Plan, steps: &[StepResult]) {
        if let Some(path) = &self.audit {
            let _ = audit::append(path, &audit::interrupted(plan, steps));
        }
    }
}

impl Approved {
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Execute the plan, progress going to `progress` as it happens, then audit the outcome.
    pub async fn run(self, progress: Option<mpsc::UnboundedSender<Progress>>) -> Finished {
        let mut env = self.env.clone();
        env.hold = self.lock.as_ref().and_then(|l| l.file().try_clone().ok()).map(std::sync::Arc::new);
        let outcome = execute::execute(&self.plan, &env, progress).await;
        let audit_error = audit::append(&self.audit, &audit::outcome(&self.plan, &outcome)).err();
        Finished { outcome, audit_error }
    }
}

#[cfg(test)]
#[path = "run_hold_tests.rs"]
mod hold_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Fleet;

    fn at() -> chrono::DateTime<Utc> {
        chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 3, 2, 14, 30, 0).single().unwrap_or_default()
    }

    fn fleet() -> Fleet {
        crate::engine::simulated_store(42, at()).fleet().clone()
    }

    /// The audit log's record kinds, in order (the held-plan tests read them too).
    pub(super) fn records(path: &std::path::Path) -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| v["record"].as_str().unwrap_or("?").to_string())
            .collect()
    }

    /// A fresh directory for one test's audit log, removed at the end.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Self {
            let p = std::env::temp_dir().join(format!("tessera-run-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            let _ = std::fs::create_dir_all(&p);
            Self(p)
        }

        fn path(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn runner(dir: &std::path::Path) -> (Runner, PathBuf) {
        let path = dir.join("audit.jsonl");
        let mut cfg = Config::default();
        cfg.actions.lock_dir = Some(dir.join("locks"));
        (Runner::new(&cfg, Env::default()).with_audit(Some(path.clone())), path)
    }

    /// A scheduler acts on whole nodes: a card of a node and the node itself are one lock
    /// (`gpu-01/3` and `gpu-01` took two); so is an NVML change of one of its cards.
    #[test]
    fn the_lock_is_the_nodes_for_every_backend() {
        let dir = Dir::new("lock-keys");
        let (r, _) = runner(dir.path());
        let mut p = r
            .check(&Action::Drain { target: "gpu-a100-01/0".into(), evict: false }, &fleet())
            .unwrap_or_else(|e| panic!("{e}"));
        p.backend = crate::actions::Backend::Slurm;
        p.card = None;
        p.target = "gpu-a100-01/3".into();
        let held = r.lock(&p).unwrap_or_else(|e| panic!("{e}"));
        assert!(held.is_some());
        p.target = "gpu-a100-01".into();
        let err = r.lock(&p).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.starts_with("gpu-a100-01 is being acted on by "), "{err}");
        p.backend = crate::actions::Backend::Nvml;
        p.card = Some(crate::model::CardRef::new("gpu-a100-02", 1));
        assert!(r.lock(&p).is_ok_and(|l| l.is_some()), "another node's card");
        // An NVML change of a card of the node is the node's too: it must not run beside a
        // scheduler's drain of it.
        p.card = Some(crate::model::CardRef::new("gpu-a100-01", 1));
        assert!(r.lock(&p).is_err(), "a card of the node a drain holds");
        drop(held);
    }

    /// A plan refused after the yes because another action holds its target is audited, as
    /// every refusal is (86 such refusals wrote no line).
    #[test]
    fn a_refusal_by_the_lock_is_audited() {
        let dir = Dir::new("lock-refused");
        let (r, path) = runner(dir.path());
        let f = fleet();
        let mut p = r
            .check(&Action::Drain { target: "gpu-a100-01/0".into(), evict: false }, &f)
            .unwrap_or_else(|e| panic!("{e}"));
        p.backend = crate::actions::Backend::Slurm;
        let held = r.lock(&p).unwrap_or_else(|e| panic!("{e}"));
        let Approval::Refused(why) = r.begin(&p) else { panic!("not refused") };
        assert!(why.to_string().contains("is being acted on by"), "{why}");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_default();
        assert_eq!(v["record"], "refused", "{text}");
        assert!(v["why"].as_str().is_some_and(|w| w.contains("is being acted on by")), "{text}");
        drop(held);
    }

    #[test]
    fn refusals_are_audited_and_never_approved() {
        let dir = Dir::new("refused");
        let (r, path) = runner(dir.path());
        let f = fleet();
        let busy = f.cards().find(|(_, c)| !c.is_idle()).map(|(n, c)| format!("{}/{}", n.name, c.index));
        let action = Action::Repartition { target: busy.unwrap_or_default(), layout: "whole".into() };
        let p = r.propose(&action, &f).unwrap_or_else(|e| panic!("{e}"));
        assert!(!p.allowed());
        assert_eq!(records(&path), vec!["refused"]);
        assert!(matches!(r.approve(&p, &f), Approval::Refused(_)));
        assert_eq!(records(&path), vec!["refused"], "no intent for a refused plan");
    }

    #[test]
    fn an_unchanged_plan_runs_and_both_records_are_written() {
        let dir = Dir::new("go");
        let (r, path) = runner(dir.path());
        let f = fleet();
        let p = r
            .propose(&Action::Drain { target: "gpu-a100-01/0".into(), evict: false }, &f)
            .unwrap_or_else(|e| panic!("{e}"));
        let Approval::Go(approved) = r.approve(&p, &f) else { panic!("not approved") };
        assert_eq!(records(&path), vec!["intent"]);
        let rt = crate::engine::runtime().unwrap_or_else(|e| panic!("{e}"));
        // No simulator runs here, so the step fails: the outcome is audited all the same.
        let done = rt.block_on(approved.run(None));
        assert!(!done.outcome.ok && done.audit_error.is_none());
        assert_eq!(records(&path), vec!["intent", "outcome"]);
    }

    #[test]
    fn a_changed_cluster_or_a_missing_audit_log_stops_it() {
        let dir = Dir::new("changed");
        let (r, path) = runner(dir.path());
        let f = fleet();
        let p = r
            .propose(&Action::Drain { target: "gpu-a100-01/0".into(), evict: false }, &f)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut moved = f.clone();
        moved.sources[0].health = crate::model::SourceHealth::Connecting;
        assert!(matches!(r.approve(&p, &moved), Approval::Changed(_)));
        // Refused at the re-check after the yes: audited, as every refusal is (it was not).
        assert_eq!(records(&path), vec!["refused"]);
        let mut gone = f.clone();
        gone.nodes.retain(|n| n.name != "gpu-a100-01");
        assert!(matches!(r.approve(&p, &gone), Approval::Gone(_)));
        assert_eq!(records(&path), vec!["refused"]);
        let nowhere = r.clone().with_audit(None);
        assert!(matches!(nowhere.approve(&p, &f), Approval::NotStarted(_)), "no audit, no action");
    }

    #[test]
    fn an_interrupted_action_is_audited_in_plain_fields() {
        let dir = Dir::new("interrupted");
        let (r, path) = runner(dir.path());
        let f = fleet();
        let p = r
            .propose(&Action::Drain { target: "gpu-a100-01/0".into(), evict: false }, &f)
            .unwrap_or_else(|e| panic!("{e}"));
        let step = StepResult { what: "Drain the card".into(), call: "x".into(), status: "running", message: None };
        r.interrupted(&p, &[step]);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_default();
        assert_eq!(v["record"], "interrupted");
        assert_eq!(v["steps"][0]["status"], "running", "{text}");
        assert_eq!(v["steps"][0]["what"], "Drain the card");
        assert!(!text.contains("Running {"), "no Rust debug strings: {text}");
    }

    /// An open intent on the plan's target: an operator is asked a second time; nobody (`--yes`,
    /// `schedule run`) is refused, naming it, unless told to go on despite it.
    #[test]
    fn an_open_intent_on_the_target_asks_or_refuses() {
        let dir = Dir::new("open-intent");
        let (r, path) = runner(dir.path());
        let f = fleet();
        let drain = Action::Drain { target: "gpu-a100-01/0".into(), evict: false };
        let p = r.check(&drain, &f).unwrap_or_else(|e| panic!("{e}"));
        assert!(p.second_confirmation.is_none() && p.allowed());
        // An intent with no outcome, from a process that is gone.
        let mut open = audit::intent(&p);
        open["pid"] = serde_json::json!(u32::MAX);
        assert!(audit::append(&path, &open).is_ok());
        let asked = r.check(&drain, &f).unwrap_or_else(|e| panic!("{e}"));
        assert!(asked.allowed(), "{:?}", asked.blockers);
        assert!(asked.second_confirmation.as_deref().is_some_and(|q| q.contains("left half-done")), "{asked:?}");
        assert!(asked.warnings.iter().any(|w| w.contains("was left half-done")), "{:?}", asked.warnings);
        let unasked = r.clone().asking(Asking::Nobody { despite: false });
        let refused = unasked.check(&drain, &f).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(refused.blockers.as_slice(), [crate::actions::guard::Refusal::OpenIntent { .. }]));
        let despite = r.clone().asking(Asking::Nobody { despite: true });
        let p = despite.check(&drain, &f).unwrap_or_else(|e| panic!("{e}"));
        assert!(p.allowed() && p.second_confirmation.is_none());
        // Its own action under way (the process that wrote the intent still runs) is not one.
        assert!(audit::append(&path, &audit::intent(&p)).is_ok());
        let ours = unasked.check(&drain, &f).unwrap_or_else(|e| panic!("{e}"));
        assert!(ours.allowed(), "{:?}", ours.blockers);
    }
}
