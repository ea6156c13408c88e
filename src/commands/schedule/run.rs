//! `tessera schedule run`: unattended schedules, headless.

use chrono::{DateTime, Utc};

use super::super::settings;
use crate::cli::Global;
use crate::error::CmdError;

/// `tessera schedule run`: the unattended loop. Refuses to start read-only or without an
/// `unattended = true` schedule; each refresh it applies `unattended::decide`'s actions through
/// the runner (audited), printing a line for each with its outcome, and tells the decisions how
/// each went. SIGTERM, SIGINT, SIGHUP, SIGQUIT or `--for` end it after the action under way
/// (a second signal leaves at once, audited); it then undrains the cards it drained for changes
/// that did not come. An open intent in the audit log refuses actions on its target unless
/// `despite_open_intent`.
pub fn run(g: &Global, limit: Option<std::time::Duration>, despite_open_intent: bool) -> Result<(), CmdError> {
    use crate::out::say;
    use crate::schedule::unattended::State;
    let cfg = settings(g)?;
    may_start(&cfg)?;
    let rt = crate::engine::runtime()?;
    rt.block_on(async {
        // Signals are caught from the start, so one never lands in the middle of an action.
        let mut interrupts = super::super::interrupts::Interrupts::watch()?;
        let mut engine = start_engine(&cfg, despite_open_intent).await?;
        // Real sources: the cards an earlier run drained and did not give back (it was killed)
        // are this run's to give back or change. The simulator's go with its process.
        let keep = if engine.store.simulated() { None } else { drained_path() };
        let mut state = State::default();
        state.drained = earlier_drained(keep.as_deref());
        let mut kept = state.drained.clone();
        let began = std::time::Instant::now();
        let tick = cfg.refresh.max(std::time::Duration::from_secs(1));
        say(&format!("schedule run: {} unattended schedules\n", cfg.schedules.iter().filter(|s| s.unattended).count()));
        let mut stale_said = false;
        // The demand by hour is kept for the suggestion, at each new sample (real sources).
        let mut demand_saved = engine.store.demand().last;
        while interrupts.received().is_none() && limit.is_none_or(|l| began.elapsed() < l) {
            engine.catch_up();
            if let Err(e) = crate::engine::save_demand(&engine.store, &mut demand_saved) {
                say(&format!("demand by hour not kept: {e}\n"));
                demand_saved = engine.store.demand().last;
            }
            decide_and_act(&cfg, &mut engine, &mut interrupts, &mut state, &mut stale_said)
                .await
                .map_err(|e| left_drained(e, keep.as_deref(), &state.drained))?;
            if let Some(path) = keep.as_ref().filter(|_| state.drained != kept) {
                match save_drained(path, &state.drained) {
                    Ok(()) => kept.clone_from(&state.drained),
                    Err(e) => say(&format!("{e}: the cards it drained are not kept for a restart\n")),
                }
            }
            tokio::select! {
                () = tokio::time::sleep(tick) => {}
                _ = interrupts.next() => {}
            }
        }
        stop(&mut engine, &mut interrupts, &mut state, keep.as_deref()).await
    })
}

/// Refuse to start read-only or without an `unattended = true` schedule.
fn may_start(cfg: &crate::config::Config) -> Result<(), CmdError> {
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
    Ok(())
}

/// Start the sources and the runner (asking nobody: an open intent refuses its target unless
/// `despite_open_intent`), say what starting had to say, and wait for the first answers.
async fn start_engine(
    cfg: &crate::config::Config,
    despite_open_intent: bool,
) -> Result<crate::engine::Engine, CmdError> {
    use crate::out::say;
    let mut engine = crate::engine::Engine::start(cfg)?;
    let asking = crate::actions::run::Asking::Nobody { despite: despite_open_intent };
    engine.runner = engine.runner.clone().asking(asking);
    super::super::act::say_open_intents(&engine.runner);
    for n in &engine.notes {
        say(&format!("{n}\n"));
    }
    engine.first_answers().await;
    Ok(engine)
}

/// One tick: decide on the fleet as it is now and act on the decisions, where some source is
/// live (said once while none is). `Err` when a second signal left at once.
async fn decide_and_act(
    cfg: &crate::config::Config,
    engine: &mut crate::engine::Engine,
    interrupts: &mut super::super::interrupts::Interrupts,
    state: &mut crate::schedule::unattended::State,
    stale_said: &mut bool,
) -> Result<(), CmdError> {
    use crate::out::say;
    let stamp = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
    let fleet = engine.store.fleet().clone();
    // The simulator's clock is its own; real sources are judged at the wall clock, and
    // with no live source nothing is decided on stale data.
    let live = fleet.sources.iter().any(|s| matches!(s.health, crate::model::SourceHealth::Live { .. }));
    let now = if engine.store.simulated() { fleet.taken_at.unwrap_or_else(Utc::now) } else { Utc::now() };
    if !live {
        if !*stale_said {
            say(&format!("{} no source is live: waiting before deciding anything\n", stamp(now)));
        }
        *stale_said = true;
        return Ok(());
    }
    *stale_said = false;
    let todo = crate::schedule::unattended::decide(&cfg.schedules, &fleet, now, cfg.policy.min_runtime, state);
    act_on(engine, interrupts, state, todo, now).await
}

/// The end: give back what was drained for changes that did not come, and keep what could
/// not be given back for the next run.
async fn stop(
    engine: &mut crate::engine::Engine,
    interrupts: &mut super::super::interrupts::Interrupts,
    state: &mut crate::schedule::unattended::State,
    keep: Option<&std::path::Path>,
) -> Result<(), CmdError> {
    use crate::out::say;
    give_back_all(engine, interrupts, state).await.map_err(|e| left_drained(e, keep, &state.drained))?;
    if let Some(path) = keep
        && let Err(e) = save_drained(path, &state.drained)
    {
        say(&format!("{e}\n"));
    }
    say("schedule run: stopped\n");
    Ok(())
}

/// The cards an earlier run drained and did not give back, read from `keep` (none for the
/// simulator, or when unreadable: said).
fn earlier_drained(keep: Option<&std::path::Path>) -> std::collections::BTreeSet<crate::model::CardRef> {
    use crate::out::say;
    let Some(path) = keep else { return Default::default() };
    match load_drained(path) {
        Ok(cards) if !cards.is_empty() => {
            let names: Vec<String> = cards.iter().map(ToString::to_string).collect();
            say(&format!(
                "cards an earlier schedule run drained: {} (given back unless a change is due)\n",
                names.join(", ")
            ));
            cards
        }
        Ok(_) => Default::default(),
        Err(e) => {
            say(&format!("{e}: ignored; cards an earlier run drained stay as they are\n"));
            Default::default()
        }
    }
}

/// One tick's decisions, each action run through the runner and its outcome told back (which
/// may add decisions); reports printed. `Err` when a second signal left at once.
async fn act_on(
    engine: &mut crate::engine::Engine,
    interrupts: &mut super::super::interrupts::Interrupts,
    state: &mut crate::schedule::unattended::State,
    mut todo: Vec<crate::schedule::unattended::Decision>,
    now: DateTime<Utc>,
) -> Result<(), CmdError> {
    use crate::out::say;
    use crate::schedule::unattended::Decision;
    let stamp = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
    let mut i = 0;
    while i < todo.len() && interrupts.received().is_none() {
        let d = todo[i].clone();
        i += 1;
        let Decision::Act { action, why, .. } = &d else {
            if let Decision::Report(text) = &d {
                say(&format!("{} {text}\n", stamp(now)));
            }
            continue;
        };
        // Left at once: the caller keeps what this run drained for the next (a restart gives
        // it back), and says so.
        let went = execute(engine, interrupts, action, why, &stamp(now)).await?;
        todo.extend(state.record(&d, went, now));
    }
    Ok(())
}

/// Undrain every card this run drained for a change that did not come.
async fn give_back_all(
    engine: &mut crate::engine::Engine,
    interrupts: &mut super::super::interrupts::Interrupts,
    state: &mut crate::schedule::unattended::State,
) -> Result<(), CmdError> {
    let stamp = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
    let drained: Vec<_> = state.drained.iter().cloned().collect();
    for card in drained {
        let action = crate::actions::Action::Undrain { target: card.to_string(), force: false };
        let went = execute(engine, interrupts, &action, "schedule run is ending", &stamp(Utc::now())).await?;
        if went != crate::schedule::unattended::Went::NotDone {
            state.drained.remove(&card);
        }
    }
    Ok(())
}

/// Plan, approve and run one action through the runner, printing what happened; how it went.
/// `Err` when a second signal left it at once.
pub(super) async fn execute(
    engine: &mut crate::engine::Engine,
    interrupts: &mut super::super::interrupts::Interrupts,
    action: &crate::actions::Action,
    why: &str,
    at: &str,
) -> Result<crate::schedule::unattended::Went, CmdError> {
    use crate::actions::run::Approval;
    use crate::out::say;
    use crate::schedule::unattended::Went;
    let p = match engine.runner.propose(action, engine.store.fleet()) {
        Ok(p) => p,
        Err(e) => {
            say(&format!("{at} {} {} ({why}): {e}\n", action.verb(), action.target()));
            return Ok(Went::NotDone);
        }
    };
    if let Some(n) = &p.nothing_to_do {
        say(&format!("{at} {} ({why}): nothing to do: {n}\n", p.summary));
        return Ok(Went::NothingToDo);
    }
    let not_run = |e: &dyn std::fmt::Display| {
        say(&format!("{at} {} ({why}): not run: {e}\n", p.summary));
        Went::NotDone
    };
    let finished = match engine.runner.approve(&p, engine.store.fleet()) {
        Approval::Go(a) => interrupts.run(&engine.runner, *a, None).await?,
        Approval::Changed(again) => {
            say(&format!(
                "{at} {} ({why}): not run, the cluster changed since the plan: {}\n",
                p.summary, again.summary
            ));
            return Ok(Went::NotDone);
        }
        Approval::Refused(e) => {
            say(&format!("{at} {} ({why}): refused: {e}\n", p.summary));
            return Ok(Went::NotDone);
        }
        Approval::Gone(e) => return Ok(not_run(&e)),
        Approval::NotStarted(e) => return Ok(not_run(&e)),
    };
    let o = finished.outcome;
    let error = o.error.map(|e| format!(" ({e})")).unwrap_or_default();
    say(&format!("{at} {} ({why}): {}: {}{error}\n", p.summary, if o.ok { "done" } else { "failed" }, o.reached));
    if let Some(e) = finished.audit_error {
        say(&format!("{at}   the audit log could not be written: {e}\n"));
    }
    engine.catch_up();
    Ok(if o.ok { Went::Done } else { Went::NotDone })
}

/// Leaving at once (a second signal): the cards this run drained are written for the next run
/// to give back (real sources), and named in the error either way.
fn left_drained(
    e: CmdError,
    keep: Option<&std::path::Path>,
    drained: &std::collections::BTreeSet<crate::model::CardRef>,
) -> CmdError {
    if drained.is_empty() {
        return e;
    }
    let kept = keep.map(|p| save_drained(p, drained));
    let names: Vec<String> = drained.iter().map(ToString::to_string).collect();
    let how = match kept {
        Some(Ok(())) => "the next schedule run gives them back",
        Some(Err(_)) | None => "undrain them with tessera undrain",
    };
    CmdError::Failed(format!("{e}; left drained: {} ({how})", names.join(", ")))
}

/// Where `schedule run` keeps the cards it drained, so a restart after a crash gives them
/// back: `schedule-run.json` in the state directory, beside the audit log.
fn drained_path() -> Option<std::path::PathBuf> {
    crate::files::state_dir().map(|d| d.join("schedule-run.json"))
}

/// The cards an earlier run kept as drained (none without a file).
fn load_drained(path: &std::path::Path) -> Result<std::collections::BTreeSet<crate::model::CardRef>, String> {
    let named = |e: String| format!("{}: {e}", path.display());
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(named(e.to_string())),
    };
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| named(e.to_string()))?;
    let list = v["drained"].as_array().ok_or_else(|| named("no \"drained\" list".into()))?;
    list.iter()
        .map(|x| match x.as_str().map(crate::actions::Target::parse) {
            Some(crate::actions::Target::Card(r)) => Ok(r),
            _ => Err(named(format!("{x} is not a NODE/INDEX card"))),
        })
        .collect()
}

/// Keep `cards` (written whole, synced, then renamed).
fn save_drained(
    path: &std::path::Path,
    cards: &std::collections::BTreeSet<crate::model::CardRef>,
) -> Result<(), String> {
    let named = |e: std::io::Error| format!("{}: {e}", path.display());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(named)?;
        crate::files::check_own_dir(dir).map_err(named)?;
    }
    let list: Vec<String> = cards.iter().map(ToString::to_string).collect();
    crate::files::write_atomic(path, serde_json::json!({ "drained": list }).to_string().as_bytes()).map_err(named)
}

#[cfg(test)]
mod tests {
    #[test]
    fn drained_cards_are_kept_for_a_restart_and_a_bad_file_is_named() {
        let dir = std::env::temp_dir().join(format!("tessera-run-state-{}", std::process::id()));
        let path = dir.join("tessera/schedule-run.json");
        assert_eq!(super::load_drained(&path), Ok(Default::default()), "no file: nothing drained");
        let cards: std::collections::BTreeSet<_> =
            [crate::model::CardRef::new("gpu-h100-01", 3), crate::model::CardRef::new("gpu-h100-02", 0)].into();
        super::save_drained(&path, &cards).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(super::load_drained(&path), Ok(cards));
        std::fs::write(&path, r#"{"drained": ["gpu-h100-01"]}"#).unwrap_or_else(|e| panic!("{e}"));
        let e = super::load_drained(&path).err().unwrap_or_default();
        assert!(e.contains("schedule-run.json") && e.contains("not a NODE/INDEX card"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
