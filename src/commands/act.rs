//! `tessera drain|undrain|repartition|preempt`: collect once, plan, show the plan, refuse (exit
//! 3) or stop (`--dry-run`), ask y/N unless `--yes`; the action runner then plans again, audits,
//! executes and audits. Progress prints as it happens.

use std::io::{BufRead, IsTerminal};

use super::settings;
use crate::actions::run::{Approval, Asking};
use crate::actions::{Action, Progress, guard};
use crate::cli::{ActOptions, Global};
use crate::engine::{Engine, runtime};
use crate::error::CmdError;
use crate::out::say;

pub fn act(g: &Global, action: Action, how: ActOptions) -> Result<(), CmdError> {
    let cfg = settings(g)?;
    let rt = runtime()?;
    rt.block_on(async {
        let mut engine = Engine::start(&cfg)?;
        engine.runner = engine.runner.clone().asking(asking(&how));
        say_open_intents(&engine.runner);
        engine.first_answers().await;
        let p = engine.runner.propose(&action, engine.store.fleet())?;
        if let Some(why) = &p.nothing_to_do {
            say(&format!("nothing to do: {why}\n"));
            return Ok(());
        }
        say(&p.render());
        if !p.allowed() {
            // A layout that is not one is a mistake on the command line (exit 2), not a
            // refusal of a valid request (exit 3).
            if p.blockers.iter().any(|b| matches!(b, guard::Refusal::InvalidLayout { .. })) {
                return Err(CmdError::Usage(guard::joined(&p.blockers)));
            }
            return Err(CmdError::Refused(guard::joined(&p.blockers)));
        }
        if how.dry_run {
            say("dry run: nothing done\n");
            return Ok(());
        }
        if !how.yes {
            confirm(&format!("{}?", p.question()))?;
            if let Some(q) = &p.second_confirmation {
                confirm(q)?;
            }
        }
        // The sources kept reporting while the operator read the plan: the runner plans again
        // on what they say now (each live source's answer collected after the yes) and runs
        // only what was confirmed. (With --yes nobody read it: the plan is checked again on
        // the same data.)
        if !how.yes {
            fresh_answers(&mut engine).await;
        }
        // From the intent on, a quit signal lets the action finish (a second leaves at once).
        let mut interrupts = super::interrupts::Interrupts::watch()?;
        let approved = match engine.runner.approve(&p, engine.store.fleet()) {
            Approval::Go(a) => a,
            Approval::Changed(again) => {
                say(&format!("the cluster changed while you read the plan; the plan now:\n{}", again.render()));
                return Err(CmdError::Failed("not run: the plan changed; run the command again".into()));
            }
            Approval::Gone(e) => return Err(CmdError::usage(e)),
            Approval::NotStarted(e) => return Err(CmdError::failed(e)),
            Approval::Refused(e) => return Err(CmdError::Refused(e.to_string())),
        };
        let (ptx, mut prx) = tokio::sync::mpsc::unbounded_channel();
        let steps = p.steps.clone();
        let printer = tokio::spawn(async move {
            while let Some(ev) = prx.recv().await {
                match ev {
                    Progress::Started { step, .. } => {
                        let what = steps.get(step).map_or("", |s| s.what.as_str());
                        say(&format!("  [{}/{}] {what} ...\n", step + 1, steps.len()));
                    }
                    Progress::Done { message, .. } => say(&format!("        done: {message}\n")),
                    Progress::Failed { message, .. } => say(&format!("        FAILED: {message}\n")),
                }
            }
        });
        let finished = interrupts.run(&engine.runner, *approved, Some(ptx)).await;
        let _ = printer.await;
        let finished = finished?;
        let outcome = finished.outcome;
        say(&format!("{}: {}\n", if outcome.ok { "done" } else { "failed" }, outcome.reached));
        if let Some(e) = finished.audit_error {
            return Err(CmdError::Failed(format!("{e} (the action's result: {})", outcome.reached)));
        }
        match outcome.error {
            None => Ok(()),
            Some(e) => Err(CmdError::Failed(e)),
        }
    })
}

/// Who answers a plan's questions: the operator, unless `--yes` said nobody will.
pub(super) fn asking(how: &ActOptions) -> Asking {
    if how.yes { Asking::Nobody { despite: how.despite_open_intent } } else { Asking::Operator }
}

/// Actions the audit log has no outcome for, said on stderr at the start (each is asked about,
/// or refused unattended, when its target is acted on again).
pub(super) fn say_open_intents(runner: &crate::actions::run::Runner) {
    for o in runner.left_open() {
        crate::out::to_stderr(&format!(
            "tessera: left half-done, from the audit log: {o}; check {} before acting on it",
            o.subject
        ));
    }
}

/// After a yes: wait for what every live source says now, saying so, and name those that
/// failed since (shown stale: the plan's guards see it) or did not answer again in time (their
/// earlier answers are used, shown stale once three intervals old).
pub(super) async fn fresh_answers(engine: &mut Engine) {
    let since = chrono::Utc::now();
    if !engine.store.live_sources().is_empty() {
        say("checking the plan against what the sources say now ...\n");
    }
    let heard = engine.catch_up_since(since).await;
    if !heard.failed.is_empty() {
        say(&format!("failing since the plan was shown: {}\n", heard.failed.join(", ")));
    }
    if !heard.silent.is_empty() {
        say(&format!(
            "not answered again within {} s of the yes (their earlier answers are used): {}\n",
            crate::engine::COLLECT_TIMEOUT.as_secs(),
            heard.silent.join(", ")
        ));
    }
}

/// Ask y/N on the terminal; anything but y/yes is no. Without a terminal, `--yes` is needed.
pub(super) fn confirm(question: &str) -> Result<(), CmdError> {
    if !std::io::stdin().is_terminal() {
        return Err(CmdError::Usage("no terminal to confirm on: pass --yes (after a --dry-run)".into()));
    }
    say(&format!("{question} [y/N] "));
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(CmdError::Failed("not confirmed: nothing done".into())),
    }
}
