//! `tessera schedule [--json]`: the next 24 h of MIG schedule changes per card, from one
//! collection; `tessera schedule export --format mig-parted`: the schedules as a mig-parted
//! config with the GPU Operator steps. Without `[[schedule]]` in the config it says so, except
//! on the simulated cluster, which has an example schedule of its own (`DEMO`) to show.

use chrono::{DateTime, Utc};

use super::{CmdError, collect_once, out, settings};
use crate::cli::{ExportFormat, Global, ScheduleCommand};
use crate::config::duration;
use crate::schedule::{Timeline, export, timelines};

/// The timeline covers this many hours.
pub const HOURS: i64 = 24;

/// The simulated cluster's example: its H100 nodes in small instances by day, whole at night.
pub const DEMO: &str = r#"
[[schedule]]
name = "demo-h100-day-night"
nodes = ["gpu-h100-*"]
model = "H100-80GB"
timezone = "UTC"
lead = "15m"
min_hold = "4h"
running = "wait"
[[schedule.window]]
name = "day"
hours = "08:00-20:00"
days = ["mon-fri"]
mig_config = "all-1g.10gb"
[[schedule.window]]
name = "night"
hours = "20:00-08:00"
days = ["all"]
layout = "whole"
"#;

/// The configured schedules, or on the simulated cluster with none configured its example
/// (said on stderr); `None` when there are none to use.
fn effective(cfg: &crate::config::Config, simulated: bool) -> Option<Vec<crate::model::schedule::Schedule>> {
    if !cfg.schedules.is_empty() {
        return Some(cfg.schedules.clone());
    }
    if !simulated {
        return None;
    }
    // On stderr: stdout stays the timeline or its JSON.
    eprintln!(
        "no [[schedule]] configured: showing the simulated cluster's example (tessera check-config --example has the form)"
    );
    crate::config::parse(DEMO, "the built-in demo schedule").ok().map(|c| c.schedules)
}

fn no_schedules(cfg: &crate::config::Config) -> CmdError {
    let file = cfg.path.as_ref().map_or_else(|| "the config (none loaded)".to_string(), |p| p.display().to_string());
    CmdError::Usage(format!("no [[schedule]] in {file}: add one (tessera check-config --example shows the form)"))
}

pub fn schedule(g: &Global, json_out: bool, what: Option<ScheduleCommand>) -> Result<(), CmdError> {
    let cfg = settings(g)?;
    // Only the simulated cluster can stand in for a missing [[schedule]].
    let maybe_demo = cfg.sources.demo || !cfg.sources.any_real();
    // (`run` applies only schedules that say unattended = true; the example does not.)
    let demo_stands_in = maybe_demo && !matches!(what, Some(ScheduleCommand::Run { .. }));
    if cfg.schedules.is_empty() && !demo_stands_in {
        return Err(no_schedules(&cfg));
    }
    if let Some(ScheduleCommand::Apply { name, how }) = &what {
        return apply(g, name, *how);
    }
    if let Some(ScheduleCommand::Run { run_for }) = &what {
        let limit = run_for.as_deref().map(duration::parse).transpose().map_err(CmdError::Usage)?;
        return run(g, limit);
    }
    if let Some(ScheduleCommand::Export { format: ExportFormat::MigParted }) = what {
        // The nodes each change applies to, where a source answers; the config alone otherwise.
        let collected = collect_once(&cfg).ok();
        let simulated = collected.as_ref().is_some_and(|(_, s)| *s);
        let schedules = effective(&cfg, simulated).ok_or_else(|| no_schedules(&cfg))?;
        let text = export::mig_parted(&schedules, collected.as_ref().map(|(f, _)| f)).map_err(CmdError::Usage)?;
        return out::print(&text);
    }
    let (fleet, simulated) = collect_once(&cfg)?;
    let schedules = effective(&cfg, simulated).ok_or_else(|| no_schedules(&cfg))?;
    let now = fleet.taken_at.unwrap_or_else(Utc::now);
    let t = timelines(&schedules, &fleet, now, cfg.policy.min_runtime, HOURS);
    let text = if json_out {
        let v = serde_json::json!({
            "schema_version": super::snapshot::SCHEMA_VERSION,
            "taken_at": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "simulated": simulated,
            "hours": HOURS,
            "schedules": t,
        });
        serde_json::to_string_pretty(&v).map_err(|e| CmdError::Failed(e.to_string()))? + "\n"
    } else {
        text(&schedules, &t, now)
    };
    out::print(&text)
}

/// `Tue 20:00 CET` in the schedule's zone.
fn local(t: DateTime<Utc>, tz: &jiff::tz::TimeZone) -> String {
    jiff::Timestamp::from_second(t.timestamp())
        .map(|ts| ts.to_zoned(tz.clone()).strftime("%a %H:%M %Z").to_string())
        .unwrap_or_else(|_| t.to_rfc3339())
}

fn text(schedules: &[crate::model::schedule::Schedule], timelines: &[Timeline], now: DateTime<Utc>) -> String {
    let mut out = format!("MIG schedules, the next {HOURS} h from {}\n", now.format("%Y-%m-%d %H:%M UTC"));
    for (s, t) in schedules.iter().zip(timelines) {
        let window = t.window_now.clone().unwrap_or_else(|| "none".into());
        out.push_str(&format!(
            "\nschedule {} ({}; lead {}, min_hold {}, running: {}): {} cards, window now: {window}\n",
            t.schedule,
            t.timezone,
            duration::format(s.lead),
            duration::format(s.min_hold),
            match t.running {
                crate::model::schedule::Running::Wait => "wait",
                crate::model::schedule::Running::Preempt => "preempt eligible training",
            },
            t.cards.len()
        ));
        if t.cards.is_empty() {
            out.push_str("  no card any source reports matches its nodes and model\n");
        }
        for c in &t.conflicts {
            out.push_str(&format!("  conflict: {c}: the first schedule that covers a card should be the only one\n"));
        }
        for c in &t.cards {
            out.push_str(&format!("  {}  {}  now {}\n", c.card, c.model, c.layout_now));
            if c.steps.is_empty() {
                out.push_str("    no change in the next 24 h\n");
            }
            for st in &c.steps {
                let when = local(st.at, &s.tz);
                if let Some(why) = &st.skipped {
                    out.push_str(&format!("    {when}  {}: skipped, {why}\n", st.window));
                    continue;
                }
                if st.no_op {
                    out.push_str(&format!("    {when}  {}: {} already\n", st.window, st.layout));
                    continue;
                }
                out.push_str(&format!(
                    "    {when}  {} -> {}  (no new work from {}; {}; waiting work it would start: {} -> {})\n",
                    st.window,
                    st.layout,
                    local(st.drain_at, &s.tz),
                    st.readiness,
                    st.serves_now,
                    st.serves_after
                ));
                for n in &st.requires {
                    out.push_str(&format!("        {} {} ({}): {}\n", n.workload, n.name, n.kind, n.verdict));
                }
            }
        }
    }
    out
}

/// `tessera schedule apply NAME`: the change due now, on every covered card that is ready (idle):
/// each card's repartition planned and guarded by the one action runner, all shown, confirmed
/// once, then run card by card, stopping at the first failure. Cards with work are listed with
/// why and left: nothing is preempted here.
pub fn apply(g: &Global, name: &str, how: crate::cli::ActOptions) -> Result<(), CmdError> {
    use super::out::say;
    use crate::actions::Action;
    use crate::actions::run::Approval;
    let cfg = settings(g)?;
    let rt = crate::engine::runtime().map_err(CmdError::Failed)?;
    rt.block_on(async {
        let mut engine = crate::engine::Engine::start(&cfg).map_err(CmdError::Usage)?;
        engine.first_answers().await;
        let schedules = effective(&cfg, engine.store.simulated()).ok_or_else(|| no_schedules(&cfg))?;
        let Some(s) = schedules.iter().find(|s| s.name == name) else {
            let names: Vec<&str> = schedules.iter().map(|s| s.name.as_str()).collect();
            return Err(CmdError::Usage(format!("no schedule {name:?}; there is {}", names.join(", "))));
        };
        let fleet = engine.store.fleet().clone();
        let now = fleet.taken_at.unwrap_or_else(Utc::now);
        let t = timelines(std::slice::from_ref(s), &fleet, now, cfg.policy.min_runtime, HOURS).remove(0);
        let due: Vec<(&crate::schedule::CardPlan, &crate::schedule::Step)> = t
            .cards
            .iter()
            .filter_map(|c| c.steps.iter().find(|st| st.due && !st.no_op && st.skipped.is_none()).map(|st| (c, st)))
            .collect();
        let window = t.window_now.clone().unwrap_or_else(|| "none".into());
        for c in &t.conflicts {
            say(&format!("  conflict: {c}\n"));
        }
        if due.is_empty() {
            say(&format!("schedule {name}: nothing due now (window {window}: every covered card has its layout)\n"));
            return Ok(());
        }
        let mut plans = Vec::new();
        // Cards whose holders are all eligible training (`running = "preempt"`): drained,
        // preempted after their own confirmation, emptied, then changed.
        let mut by_preempting: Vec<(&crate::schedule::CardPlan, &crate::schedule::Step)> = Vec::new();
        for (c, st) in &due {
            if st.readiness.starts_with("preempts") {
                // The runner's own plans now, so a guard (read-only, a stale source) says no here.
                let drain = Action::Drain { target: c.card.to_string() };
                let mut blocked: Vec<String> = Vec::new();
                for a in std::iter::once(drain)
                    .chain(st.requires.iter().map(|n| Action::Preempt { workload: n.workload.clone(), force: false }))
                {
                    match engine.runner.propose(&a, &fleet) {
                        Ok(p) if !p.allowed() => blocked.push(crate::actions::guard::joined(&p.blockers)),
                        Ok(_) => {}
                        Err(e) => blocked.push(e),
                    }
                }
                if !blocked.is_empty() {
                    say(&format!("  {}: left for later: {}\n", c.card, blocked.join("; ")));
                    continue;
                }
                let who: Vec<String> = st.requires.iter().map(|n| format!("{} {}", n.workload, n.name)).collect();
                say(&format!(
                    "  {}: drain, preempt {} (checkpoint, requeue), wait for it to empty, repartition to {}, undrain\n",
                    c.card,
                    who.join(", "),
                    st.layout
                ));
                by_preempting.push((c, st));
                continue;
            }
            if !st.readiness.starts_with("ready") {
                say(&format!("  {}: left for later: {}\n", c.card, st.readiness));
                continue;
            }
            let action = Action::Repartition { target: c.card.to_string(), layout: st.layout.clone() };
            let p = engine.runner.propose(&action, &fleet).map_err(CmdError::Usage)?;
            if !p.allowed() {
                say(&format!("  {}: refused: {}\n", c.card, crate::actions::guard::joined(&p.blockers)));
                continue;
            }
            say(&p.render());
            plans.push(p);
        }
        if plans.is_empty() && by_preempting.is_empty() {
            return Err(CmdError::Refused(format!("schedule {name}: no covered card can take window {window} now")));
        }
        if how.dry_run {
            say("dry run: nothing done\n");
            return Ok(());
        }
        let mut preempted: Vec<&str> =
            by_preempting.iter().flat_map(|(_, st)| st.requires.iter().map(|n| n.workload.as_str())).collect();
        preempted.sort_unstable();
        preempted.dedup();
        if !how.yes {
            let cards = plans.len() + by_preempting.len();
            super::act::confirm(&format!("apply window {window} of schedule {name} to {cards} cards?"))?;
            if !preempted.is_empty() {
                // Preemption is asked for on its own: nothing is preempted without a yes to it.
                super::act::confirm(&format!(
                    "preempt {} (training past the minimum runtime: checkpoint, requeue) for it?",
                    preempted.join(", ")
                ))?;
            }
            engine.catch_up();
        }
        for (i, p) in plans.iter().enumerate() {
            let stopped = |why: String| {
                CmdError::Failed(format!("stopped before {} ({i} of {} done): {why}", p.target, plans.len()))
            };
            let approved = match engine.runner.approve(p, engine.store.fleet()) {
                Approval::Go(a) => a,
                Approval::Changed(_) => return Err(stopped("the card changed since the plan; run it again".into())),
                Approval::Refused(e) => return Err(stopped(format!("refused: {e}"))),
                Approval::Gone(e) | Approval::NotStarted(e) => return Err(stopped(e)),
            };
            say(&format!("[{}/{}] {} ...\n", i + 1, plans.len(), p.summary));
            let finished = approved.run(None).await;
            let o = finished.outcome;
            say(&format!("        {}: {}\n", if o.ok { "done" } else { "failed" }, o.reached));
            if let Some(e) = finished.audit_error.or(o.error) {
                return Err(CmdError::Failed(format!("stopped at {} ({} of {} done): {e}", p.target, i, plans.len())));
            }
            engine.catch_up();
        }
        let mut changed = plans.len();
        // Drain every card first: a job on several of them frees the others when preempted,
        // and nothing else may land there meanwhile. Only cards this run drained are undrained.
        let mut ours: Vec<crate::model::CardRef> = Vec::new();
        for (c, st) in &by_preempting {
            let drain = Action::Drain { target: c.card.to_string() };
            let why = format!("schedule {name}: window {}", st.window);
            let at = Utc::now().format("%H:%M:%S").to_string();
            match execute(&mut engine, &drain, &why, &at).await {
                crate::schedule::unattended::Went::Done => ours.push(c.card.clone()),
                crate::schedule::unattended::Went::NothingToDo => {}
                crate::schedule::unattended::Went::NotDone => {
                    give_back(&mut engine, &ours, name).await;
                    return Err(CmdError::Failed(format!(
                        "stopped at {} (the drain did not happen); {changed} cards changed",
                        c.card
                    )));
                }
            }
        }
        for (k, (c, st)) in by_preempting.iter().enumerate() {
            match preempt_then_change(&mut engine, c, st, name).await {
                Ok(true) => changed += 1,
                Ok(false) => {}
                Err(e) => {
                    let rest: Vec<_> =
                        by_preempting[k..].iter().map(|(c, _)| c.card.clone()).filter(|r| ours.contains(r)).collect();
                    give_back(&mut engine, &rest, name).await;
                    return Err(CmdError::Failed(format!("{e}; {changed} cards changed")));
                }
            }
            if ours.contains(&c.card) {
                give_back(&mut engine, std::slice::from_ref(&c.card), name).await;
            }
        }
        say(&format!("schedule {name}: window {window} applied to {changed} cards\n"));
        Ok(())
    })
}

/// How long `apply` waits for a preempted card to empty.
const EMPTY_WITHIN: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Undrain `cards` (drained by this run), saying any that could not be.
async fn give_back(engine: &mut crate::engine::Engine, cards: &[crate::model::CardRef], schedule: &str) {
    use crate::actions::Action;
    for c in cards {
        let at = Utc::now().format("%H:%M:%S").to_string();
        let undrain = Action::Undrain { target: c.to_string(), force: false };
        if execute(engine, &undrain, &format!("schedule {schedule}: given back"), &at).await
            == crate::schedule::unattended::Went::NotDone
        {
            super::out::say(&format!("{at} {c} could not be undrained: run tessera undrain {c}\n"));
        }
    }
}

/// On a drained card: preempt the plan's holders that still hold it (the runner's guards apply:
/// eligible training only), wait for it to empty, repartition. `Ok(false)` when it is left for
/// later (a holder outside the plan, or not empty within 15 minutes); an error stops the group.
/// The caller undrains.
async fn preempt_then_change(
    engine: &mut crate::engine::Engine,
    c: &crate::schedule::CardPlan,
    st: &crate::schedule::Step,
    schedule: &str,
) -> Result<bool, CmdError> {
    use super::out::say;
    use crate::actions::Action;
    use crate::schedule::unattended::Went;
    let target = c.card.to_string();
    let why = format!("schedule {schedule}: window {}", st.window);
    let at = || Utc::now().format("%H:%M:%S").to_string();
    let planned: Vec<&str> = st.requires.iter().map(|n| n.workload.as_str()).collect();
    for n in &st.requires {
        engine.catch_up();
        let Some(card) = engine.store.fleet().card(&c.card) else {
            return Err(CmdError::Failed(format!("stopped at {target}: the card is gone from every source")));
        };
        // Someone not in the plan holds it now: nothing is preempted for them.
        if card.holders().any(|h| !planned.contains(&h)) {
            say(&format!("{} {target}: a holder not in the plan is on it: left for later\n", at()));
            return Ok(false);
        }
        // A job on several cards was preempted for an earlier one of them already.
        if !card.holders().any(|h| h == n.workload) {
            continue;
        }
        let action = Action::Preempt { workload: n.workload.clone(), force: false };
        if execute(engine, &action, &why, &at()).await == Went::NotDone {
            return Err(CmdError::Failed(format!("stopped at {target}: {} was not preempted", n.workload)));
        }
    }
    let began = std::time::Instant::now();
    loop {
        engine.catch_up();
        let idle = engine.store.fleet().card(&c.card).is_some_and(|k| k.is_idle() && k.processes.is_empty());
        if idle {
            break;
        }
        if began.elapsed() >= EMPTY_WITHIN {
            say(&format!("{} {target} did not empty within 15 min: left for later\n", at()));
            return Ok(false);
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let change = Action::Repartition { target: target.clone(), layout: st.layout.clone() };
    match execute(engine, &change, &why, &at()).await {
        Went::Done => Ok(true),
        Went::NothingToDo => Ok(false),
        Went::NotDone => Err(CmdError::Failed(format!("stopped at {target}: the repartition did not happen"))),
    }
}

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
        engine.first_answers().await;
        let mut state = State::default();
        let began = std::time::Instant::now();
        let tick = cfg.refresh.max(std::time::Duration::from_secs(1));
        let stamp = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
        say(&format!("schedule run: {} unattended schedules\n", cfg.schedules.iter().filter(|s| s.unattended).count()));
        let mut stale_said = false;
        while !stop.load(Ordering::SeqCst) && limit.is_none_or(|l| began.elapsed() < l) {
            engine.catch_up();
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
async fn execute(
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_demo_schedule_parses() {
        let c = crate::config::parse(super::DEMO, "demo").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.schedules.len(), 1);
    }
}
