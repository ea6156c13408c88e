//! The command line's rule for signals while actions run, the console's rule: the first SIGINT,
//! SIGTERM, SIGHUP (a dropped SSH session) or SIGQUIT lets the action under way finish and be
//! audited, saying so on stderr, and no further action starts; a second leaves at once, with
//! the audit log saying where each step stood (`interrupted`) and what ran stopped with it.

use tokio::sync::mpsc;

use crate::actions::run::{Approved, Finished, Runner};
use crate::actions::{Plan, Progress, StepResult};
use crate::error::CmdError;
use crate::out::to_stderr;

/// The quit signals received since `watch`.
pub struct Interrupts {
    rx: mpsc::UnboundedReceiver<&'static str>,
    /// The first one, and how many came.
    first: Option<&'static str>,
    count: u32,
}

impl Interrupts {
    /// Catch SIGINT, SIGTERM, SIGHUP and SIGQUIT from now on (inside the runtime): from here a
    /// signal no longer kills the process where it stands.
    pub fn watch() -> Result<Self, CmdError> {
        use tokio::signal::unix::{SignalKind, signal};
        let (tx, rx) = mpsc::unbounded_channel();
        for (kind, name) in [
            (SignalKind::interrupt(), "SIGINT"),
            (SignalKind::terminate(), "SIGTERM"),
            (SignalKind::hangup(), "SIGHUP"),
            (SignalKind::quit(), "SIGQUIT"),
        ] {
            let mut s = signal(kind).map_err(|e| CmdError::Failed(format!("cannot watch {name}: {e}")))?;
            let tx = tx.clone();
            tokio::spawn(async move {
                while s.recv().await.is_some() {
                    if tx.send(name).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(Self { rx, first: None, count: 0 })
    }

    fn note(&mut self, name: &'static str) {
        self.first.get_or_insert(name);
        self.count += 1;
    }

    /// The first signal received so far: when there is one, no further action starts.
    pub fn received(&mut self) -> Option<&'static str> {
        while let Ok(name) = self.rx.try_recv() {
            self.note(name);
        }
        self.first
    }

    /// Wait for the next signal (a loop between actions, `schedule run`).
    pub async fn next(&mut self) -> &'static str {
        match self.rx.recv().await {
            Some(name) => {
                self.note(name);
                name
            }
            // The watchers never end while the runtime lives.
            None => std::future::pending().await,
        }
    }

    /// Run an approved action under the rule; its progress goes on to `progress`. `Err` when a
    /// second signal left it at once (the audit log then has where each step stood).
    pub async fn run(
        &mut self,
        runner: &Runner,
        approved: Approved,
        progress: Option<mpsc::UnboundedSender<Progress>>,
    ) -> Result<Finished, CmdError> {
        let plan = approved.plan().clone();
        let mut steps = Steps::new(&plan);
        if let Some(name) = self.received() {
            if self.count >= 2 {
                // Asked twice already: nothing is started (its intent is in the log: say so).
                let left = steps.results();
                runner.interrupted(&plan, &left);
                drop(approved);
                return Err(CmdError::Failed(format!(
                    "{name} twice: {} not started (the audit log says so)",
                    plan.action.doing()
                )));
            }
            finishing(name, &plan);
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        let run = approved.run(Some(tx));
        tokio::pin!(run);
        let forward = |p: Progress, steps: &mut Steps| {
            steps.track(&p);
            if let Some(out) = &progress {
                let _ = out.send(p);
            }
        };
        loop {
            tokio::select! {
                biased;
                Some(p) = rx.recv() => forward(p, &mut steps),
                finished = &mut run => {
                    while let Ok(p) = rx.try_recv() {
                        forward(p, &mut steps);
                    }
                    return Ok(finished);
                }
                Some(name) = self.rx.recv() => {
                    self.note(name);
                    if self.count == 1 {
                        finishing(name, &plan);
                        continue;
                    }
                    // Leaving drops the run: a command under way is stopped with its process
                    // group, and the lock goes with it.
                    let left = steps.results();
                    runner.interrupted(&plan, &left);
                    let each: Vec<String> = left.iter().map(|s| format!("{}: {}", s.status, s.what)).collect();
                    return Err(CmdError::Failed(format!(
                        "{name} again: left at once while {}: {} (the audit log has where each step stood; check \
                         the target before acting again)",
                        plan.action.doing(),
                        each.join("; ")
                    )));
                }
            }
        }
    }
}

/// Said on stderr at the first signal while an action runs.
fn finishing(name: &str, plan: &Plan) {
    to_stderr(&format!(
        "tessera: {name}: finishing {} first (its outcome goes to the audit log), then leaving; {name} again \
         leaves at once",
        plan.action.doing()
    ));
}

/// Where each step of a running plan stands, from its progress.
struct Steps {
    results: Vec<StepResult>,
}

impl Steps {
    fn new(plan: &Plan) -> Self {
        let results = plan
            .steps
            .iter()
            .map(|s| StepResult { what: s.what.clone(), call: s.call.clone(), status: "not run", message: None })
            .collect();
        Self { results }
    }

    fn track(&mut self, p: &Progress) {
        let (i, status, message) = match p {
            Progress::Started { step, .. } => (*step, "running", None),
            Progress::Done { step, message } => (*step, "done", Some(message.clone())),
            Progress::Failed { step, message } => (*step, "failed", Some(message.clone())),
        };
        if let Some(r) = self.results.get_mut(i) {
            r.status = status;
            r.message = message;
        }
    }

    fn results(&self) -> Vec<StepResult> {
        self.results.clone()
    }
}
