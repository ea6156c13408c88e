//! `tessera schedule run`: unattended schedules, headless.

use chrono::{DateTime, Utc};

use super::super::{CmdError, settings};
use crate::cli::Global;

/// `tessera schedule run`: the unattended loop. Refuses to start read-only or without an
/// `unattended = true` schedule; each refresh it applies `unattended::decide`'s actions through
/// the runner (audited), printing a line for each with its outcome, and tells the decisions how
/// each went. SIGTERM, Ctrl-C or `--for` end it after the action under way; it then undrains
/// the cards it drained for changes that did not come.
pub fn run(g: &Global, limit: Option<std::time::Duration>) -> Result<(), CmdError> {
    use super::out::say;
    use crate::schedule::unattended::{Decision, State, decide};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let cfg = settings(g)?;
    if cfg.read_only {
        return Err(CmdError::Refused(
            "tessera runs read-only: schedule run changes cards, so it does not start".into(),
        ));
    }
    if !cfg.schedules.iter().any(|s| s.unattended) {
        return Err(CmdError::Usage(
            "no [[schedule]] has unattended = true: schedule run applies only schedules that allow it".into(),
        ));
    }
    let rt = crate::engine::runtime().map_err(CmdError::Failed)?;
    rt.block_on(async {
        // Signals are caught from the start, so one never lands in the middle of an action.
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(tokio::sync::Notify::new());
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| CmdError::Failed(format!("cannot watch SIGTERM: {e}")))?;
        let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .map_err(|e| CmdError::Failed(format!("cannot watch SIGINT: {e}")))?;
        {
            let (stop, wake) = (stop.clone(), wake.clone());
            tokio::spawn(async move {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
                stop.store(true, Ordering::SeqCst);
                wake.notify_one();
            });
        }
        let mut engine = crate::engine::Engine::start(&cfg).map_err(CmdError::Usage)?;
        for n in &engine.notes {
            say(&format!("{n}\n"));
        }
        engine.first_answers().await;
        let mut state = State::default();
        let began = std::time::Instant::now();
        let tick = cfg.refresh.max(std::time::Duration::from_secs(1));
        let stamp = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
        say(&format!("schedule run: {} unattended schedules\n", cfg.schedules.iter().filter(|s| s.unattended).count()));
        let mut stale_said = false;
        // The demand by hour is kept for the suggestion, at each new sample (real sources).
        let mut demand_saved = engine.store.demand().last;
        while !stop.load(Ordering::SeqCst) && limit.is_none_or(|l| began.elapsed() < l) {
            engine.catch_up();
            if let Err(e) = crate::engine::save_demand(&engine.store, &mut demand_saved) {
                say(&format!("demand by hour not kept: {e}\n"));
                demand_saved = engine.store.demand().last;
            }
            let fleet = engine.store.fleet().clone();
            // The simulator's clock is its own; real sources are judged at the wall clock, and
            // with no live source nothing is decided on stale data.
            let live = fleet.sources.iter().any(|s| matches!(s.health, crate::model::SourceHealth::Live { .. }));
            let now = if engine.store.simulated() { fleet.taken_at.unwrap_or_else(Utc::now) } else { Utc::now() };
            if !live {
                if !stale_said {
                    say(&format!("{} no source is live: waiting before deciding anything\n", stamp(now)));
                }
                stale_said = true;
            } else {
                stale_said = false;
                let mut todo = decide(&cfg.schedules, &fleet, now, cfg.policy.min_runtime, &mut state);
                let mut i = 0;
                while i < todo.len() && !stop.load(Ordering::SeqCst) {
                    let d = todo[i].clone();
                    i += 1;
                    let Decision::Act { action, why, .. } = &d else {
                        if let Decision::Report(text) = &d {
                            say(&format!("{} {text}\n", stamp(now)));
                        }
                        continue;
                    };
                    let went = execute(&mut engine, action, why, &stamp(now)).await;
                    todo.extend(state.record(&d, went, now));
                }
            }
            tokio::select! {
                () = tokio::time::sleep(tick) => {}
                () = wake.notified() => {}
            }
        }
        // Give back what was drained for changes that did not come.
        let drained: Vec<_> = state.drained.iter().cloned().collect();
        for card in drained {
            let action = crate::actions::Action::Undrain { target: card.to_string(), force: false };
            execute(&mut engine, &action, "schedule run is ending", &stamp(Utc::now())).await;
        }
        say("schedule run: stopped\n");
        Ok(())
    })
}

/// Plan, approve and run one action through the runner, printing what happened; how it went.
pub(super) async fn execute(
    engine: &mut crate::engine::Engine,
    action: &crate::actions::Action,
    why: &str,
    at: &str,
) -> crate::schedule::unattended::Went {
    use super::out::say;
    use crate::actions::run::Approval;
    use crate::schedule::unattended::Went;
    let p = match engine.runner.propose(action, engine.store.fleet()) {
        Ok(p) => p,
        Err(e) => {
            say(&format!("{at} {} {} ({why}): {e}\n", action.verb(), action_target(action)));
            return Went::NotDone;
        }
    };
    if let Some(n) = &p.nothing_to_do {
        say(&format!("{at} {} ({why}): nothing to do: {n}\n", p.summary));
        return Went::NothingToDo;
    }
    let finished = match engine.runner.approve(&p, engine.store.fleet()) {
        Approval::Go(a) => a.run(None).await,
        Approval::Changed(again) => {
            say(&format!(
                "{at} {} ({why}): not run, the cluster changed since the plan: {}\n",
                p.summary, again.summary
            ));
            return Went::NotDone;
        }
        Approval::Refused(e) => {
            say(&format!("{at} {} ({why}): refused: {e}\n", p.summary));
            return Went::NotDone;
        }
        Approval::Gone(e) | Approval::NotStarted(e) => {
            say(&format!("{at} {} ({why}): not run: {e}\n", p.summary));
            return Went::NotDone;
        }
    };
    let o = finished.outcome;
    let error = o.error.map(|e| format!(" ({e})")).unwrap_or_default();
    say(&format!("{at} {} ({why}): {}: {}{error}\n", p.summary, if o.ok { "done" } else { "failed" }, o.reached));
    if let Some(e) = finished.audit_error {
        say(&format!("{at}   the audit log could not be written: {e}\n"));
    }
    engine.catch_up();
    if o.ok { Went::Done } else { Went::NotDone }
}

fn action_target(a: &crate::actions::Action) -> &str {
    use crate::actions::Action;
    match a {
        Action::Drain { target } | Action::Undrain { target, .. } | Action::Repartition { target, .. } => target,
        Action::Preempt { workload, .. } => workload,
    }
}
