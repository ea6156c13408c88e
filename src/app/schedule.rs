//! The console's schedule work, for the console object: the banner's due change, driving a
//! confirmed group change through the runner, the advisor with its cached schedule suggestion,
//! and unattended schedules on the simulated cluster (the simulator lives in the console's
//! process, so the console is the only one that can run them there).

use std::collections::VecDeque;

use chrono::Utc;
use tokio::sync::mpsc;

use super::{ActEvent, spawn_run};
use crate::actions::run::{Approval, Asking, Runner};
use crate::config::Config;
use crate::schedule::unattended::{Decision, State, Went, decide};
use crate::store::Store;
use crate::ui::dialogs::{self as dialogs, Modal, StepState};
use crate::ui::state::UiState;

/// The first schedule change due now or within its lead, for the banner.
pub(super) fn due_change(
    schedules: &[crate::model::schedule::Schedule],
    cfg: &Config,
    store: &Store,
) -> Option<crate::schedule::group::Banner> {
    let fleet = store.fleet();
    let now = fleet.taken_at?;
    // Far enough ahead to see every change within its lead.
    let lead = schedules.iter().map(|s| s.lead.as_secs()).max().unwrap_or(0);
    let hours = i64::try_from(lead / 3600 + 1).unwrap_or(24).min(24);
    let t = crate::schedule::timelines(schedules, fleet, now, cfg.policy.min_runtime, hours);
    let mut b = crate::schedule::group::banner(&t, now)?;
    // An unattended schedule's changes are made without `m`: here, or by `schedule run`.
    if schedules.iter().any(|s| s.name == b.schedule && s.unattended) {
        b.note = Some(if Auto::applies(cfg, store, schedules) {
            // What decide does: idle cards now, busy ones kept drained and changed once idle.
            "unattended: the console changes idle cards now, busy ones once idle (drained meanwhile); m plans them now"
                .into()
        } else {
            "unattended: tessera schedule run applies it".into()
        });
    }
    Some(b)
}

/// A running group change's action reported: its progress, or how it ended.
pub(super) fn group_event(st: &mut UiState, ev: ActEvent, now: chrono::DateTime<Utc>) {
    let Some(Modal::GroupRunning { run, current }) = &mut st.dialog.modal else { return };
    match ev {
        ActEvent::Progress(p) => {
            if let Some(m) = &mut st.dialog.modal {
                dialogs::on_progress(m, p, Utc::now());
            }
        }
        ActEvent::Finished(o) => {
            *current = None;
            let went = if o.ok { Went::Done } else { Went::NotDone };
            let msg = o.error.clone().map_or_else(|| o.reached.clone(), |e| format!("{}: {e}", o.reached));
            // The fleet's clock, as the run's waits are judged (the simulator's own on --demo).
            run.record(went, &msg, now);
        }
    }
}

/// Drive a running group change: while no action of it is under way, ask it what comes next
/// and hand that to the runner (planned and approved on the fleet as it is now). A hidden run
/// that ended closes with its summary in the footer.
pub(super) fn pump(st: &mut UiState, store: &Store, runner: &Runner, tx: &mpsc::UnboundedSender<ActEvent>) {
    use crate::schedule::group::Next;
    // An unattended schedule's action runs: the group's next waits for it.
    if st.dialog.auto_busy {
        return;
    }
    let fleet = store.fleet();
    let now = fleet.taken_at.unwrap_or_else(Utc::now);
    // The group's own actions were confirmed as a group: nobody answers a question of one of
    // them (an open intent on its card refuses it).
    let unasked = runner.clone().asking(Asking::Nobody { despite: false });
    loop {
        let Some(Modal::GroupRunning { run, current }) = &mut st.dialog.modal else { return };
        let mut runner = runner;
        let shown = match run.next(fleet, now) {
            Next::Busy | Next::Wait(_) => return,
            Next::Finished => {
                if st.dialog.hidden {
                    let summary = run.summary();
                    st.close_hidden_dialog(Some(summary));
                }
                return;
            }
            Next::RunShown(p) => *p,
            Next::Run(action) => {
                runner = &unasked;
                match runner.propose(&action, fleet) {
                    Ok(p) if p.nothing_to_do.is_some() => {
                        run.record(Went::NothingToDo, p.nothing_to_do.as_deref().unwrap_or_default(), now);
                        continue;
                    }
                    Ok(p) => p,
                    Err(e) => {
                        run.record(Went::NotDone, &e.to_string(), now);
                        continue;
                    }
                }
            }
        };
        match runner.approve(&shown, fleet) {
            Approval::Go(approved) => {
                let plan = Box::new(approved.plan().clone());
                let status = vec![StepState::Waiting; plan.steps.len()];
                *current = Some((plan, status));
                spawn_run(*approved, tx.clone());
                return;
            }
            Approval::Changed(now_plan) => {
                run.record(Went::NotDone, &format!("the card changed since the plan: {}", now_plan.summary), now);
            }
            Approval::Refused(e) => run.record(Went::NotDone, &format!("refused: {e}"), now),
            Approval::Gone(e) => run.record(Went::NotDone, &e.to_string(), now),
            Approval::NotStarted(e) => run.record(Went::NotDone, &e.to_string(), now),
        }
    }
}

/// The advisor's schedule suggestions, made again when a new demand sample came (every ten
/// minutes of data time) and at least once a minute (the fleet's layouts and health move
/// too): they take ~60 ms at 4096 cards, too much for every advice.
#[derive(Default)]
pub(super) struct Suggestions {
    made_for: Option<chrono::DateTime<Utc>>,
    made_at: Option<std::time::Instant>,
    found: Vec<crate::advisor::schedule::Suggested>,
}

impl Suggestions {
    /// Made again at the next advice (a replay moved to another moment).
    pub(super) fn forget(&mut self) {
        *self = Self::default();
    }
}

pub(super) fn advise(cfg: &Config, store: &Store, cache: &mut Suggestions) -> Vec<crate::advisor::Finding> {
    let fleet = store.fleet();
    let demand = store.demand();
    let stale = cache.made_at.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(60));
    if cache.made_for != demand.last || stale {
        // Cards a configured schedule covers are not suggested again.
        let skip = |n: &crate::model::Node, c: &crate::model::Card| cfg.schedules.iter().any(|s| s.covers(n, c));
        cache.found = crate::advisor::schedule::suggest(fleet, demand, &skip);
        cache.made_for = demand.last;
        cache.made_at = Some(std::time::Instant::now());
    }
    let mut cx = crate::advisor::Context::new(cfg, fleet.taken_at.unwrap_or_else(Utc::now));
    cx.demand = Some(demand);
    cx.suggested = Some(&cache.found);
    crate::advisor::advise(fleet, &cx)
}

/// Unattended schedules on the simulated cluster, applied by the console as `schedule run`
/// would: decisions once per fleet update, one action at a time through the runner (audited),
/// each said in the footer; never while the operator's own action runs.
#[derive(Default)]
pub(super) struct Auto {
    state: State,
    todo: VecDeque<Decision>,
    /// The decision under way and the plan the runner approved for it.
    in_flight: Option<(Decision, crate::actions::Plan)>,
    decided_at: Option<chrono::DateTime<Utc>>,
    /// Decide again only on a fleet taken after the last action ended (its effect seen).
    after: Option<chrono::DateTime<Utc>>,
}

impl Auto {
    /// Whether the console runs `schedules` itself: every source is the simulator (never real
    /// cards: those are `tessera schedule run`'s, one actor), actions on, one unattended.
    pub(super) fn applies(cfg: &Config, store: &Store, schedules: &[crate::model::schedule::Schedule]) -> bool {
        let sources = &store.fleet().sources;
        store.simulated()
            && !sources.is_empty()
            && sources.iter().all(|s| s.kind == crate::model::SourceKind::Simulated)
            && !cfg.read_only
            && schedules.iter().any(|s| s.unattended)
    }

    /// Leaving at once while its action runs: the runner records where it stood (the
    /// simulator's cards go with the process).
    pub(super) fn interrupted(&self, runner: &Runner) {
        if let Some((_, plan)) = &self.in_flight {
            let steps: Vec<crate::actions::StepResult> = plan
                .steps
                .iter()
                .map(|s| crate::actions::StepResult {
                    what: s.what.clone(),
                    call: s.call.clone(),
                    status: "unknown",
                    message: None,
                })
                .collect();
            runner.interrupted(plan, &steps);
        }
    }

    /// Decide if the fleet moved, and start the next action if none is under way.
    pub(super) fn step(
        &mut self,
        st: &mut UiState,
        store: &Store,
        schedules: &[crate::model::schedule::Schedule],
        cfg: &Config,
        runner: &Runner,
        tx: &mpsc::UnboundedSender<ActEvent>,
    ) {
        if self.in_flight.is_some() || st.action_running() || st.dialog.quit_after {
            return;
        }
        let fleet = store.fleet();
        let Some(now) = fleet.taken_at else { return };
        let runner = &runner.clone().asking(Asking::Nobody { despite: false });
        // New decisions only on a fleet taken after the last action ended (what is left of the
        // last ones goes on: the runner plans each on the fleet as it is).
        let fresh = self.after.is_none_or(|a| now > a);
        if self.todo.is_empty() && fresh && self.decided_at != Some(now) {
            self.decided_at = Some(now);
            self.todo.extend(decide(schedules, fleet, now, cfg.policy.min_runtime, &mut self.state));
        }
        let mut said: Vec<String> = Vec::new();
        while let Some(d) = self.todo.pop_front() {
            let Decision::Act { action, why, .. } = &d else {
                if let Decision::Report(text) = &d {
                    said.push(text.clone());
                }
                continue;
            };
            let went = match runner.propose(action, fleet) {
                Ok(p) if p.nothing_to_do.is_some() => Went::NothingToDo,
                Ok(p) => match runner.approve(&p, fleet) {
                    Approval::Go(approved) => {
                        said.push(format!("({why}) {} ...", p.summary));
                        Self::say(st, &said);
                        self.in_flight = Some((d, approved.plan().clone()));
                        st.dialog.set_auto_busy(true);
                        spawn_run(*approved, tx.clone());
                        return;
                    }
                    _ => Went::NotDone,
                },
                Err(_) => Went::NotDone,
            };
            let more = self.state.record(&d, went, now);
            self.todo.extend(more);
        }
        Self::say(st, &said);
    }

    /// What it did, in the footer (every action is in the audit log too); not over the
    /// operator's own dialog.
    fn say(st: &mut UiState, said: &[String]) {
        if !said.is_empty() && st.dialog.modal.is_none() {
            st.say(format!("unattended: {}", said.join("; ")));
        }
    }

    /// The action under way ended.
    pub(super) fn finished(&mut self, st: &mut UiState, ev: ActEvent, now: chrono::DateTime<Utc>) {
        let ActEvent::Finished(o) = ev else { return };
        let Some((d, _)) = self.in_flight.take() else { return };
        st.dialog.set_auto_busy(false);
        self.after = Some(now);
        let went = if o.ok { Went::Done } else { Went::NotDone };
        if let Decision::Act { action, why, .. } = &d {
            let how = if o.ok { "done".to_string() } else { format!("FAILED: {}", o.reached) };
            Self::say(st, &[format!("({why}) {} {}: {how}", action.verb(), action.target())]);
        }
        let more = self.state.record(&d, went, now);
        self.todo.extend(more);
    }
}
