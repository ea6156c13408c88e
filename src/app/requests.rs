//! What the operator asked for in the console, answered: an action planned (its confirmation
//! opened), a confirmed plan approved by the runner and run on a task that streams its
//! progress back, a schedule's group change planned and planned again before it runs.

use chrono::Utc;
use tokio::sync::mpsc;

use super::ActEvent;
use crate::actions::run::{Approval, Runner};
use crate::config::Config;
use crate::store::Store;
use crate::ui::dialogs::{self as dialogs, Request};
use crate::ui::state::UiState;

/// Plan an action (opening its confirmation) or hand a confirmed plan to the runner, which
/// plans again, audits and runs it on a task that streams progress back.
pub(super) fn on_request(
    st: &mut UiState,
    store: &Store,
    runner: &Runner,
    tx: &mpsc::UnboundedSender<ActEvent>,
    req: Request,
    schedules: Option<&[crate::model::schedule::Schedule]>,
    cfg: &Config,
) {
    if st.action_running() {
        st.say("an action is running: start the next when it ends");
        return;
    }
    match req {
        Request::PlanGroup(name) => match group_plan(&name, store, runner, schedules, cfg) {
            Some(p) => st.show_dialog(crate::ui::dialogs::group::confirm(p)),
            None => st.say(format!("schedule {name}: nothing is due now")),
        },
        Request::RunGroup(plan) => {
            // The plan as it would be now: a window that began, a card that changed, a
            // preemption that became possible since it was shown: confirm the new one.
            match group_plan(&plan.schedule, store, runner, schedules, cfg) {
                Some(p) if crate::schedule::group::same_run(&p, &plan) => {
                    st.show_dialog(crate::ui::dialogs::group::running(*plan));
                }
                Some(p) => {
                    st.say("the cluster changed since the plan was shown: confirm the new plan");
                    st.show_dialog(crate::ui::dialogs::group::confirm(p));
                }
                None => {
                    st.close_dialog();
                    st.say(format!("schedule {}: nothing is due any more: nothing done", plan.schedule));
                }
            }
        }
        Request::Plan(action) => match runner.propose(&action, store.fleet()) {
            Ok(p) if p.nothing_to_do.is_some() => {
                st.close_dialog();
                st.say(format!(
                    "{} {}: nothing to do: {}",
                    action.verb(),
                    p.target,
                    p.nothing_to_do.unwrap_or_default()
                ));
            }
            Ok(p) => st.show_dialog(dialogs::confirm(p)),
            Err(e) => {
                st.close_dialog();
                st.say(format!("{}: {e}", action.verb()));
            }
        },
        Request::Execute(plan) => execute(st, store, runner, tx, &plan),
    }
}

/// A confirmed plan: the runner plans it again; unchanged and audited, it runs on a task;
/// changed, the new plan is confirmed; else the dialog closes with why.
fn execute(
    st: &mut UiState,
    store: &Store,
    runner: &Runner,
    tx: &mpsc::UnboundedSender<ActEvent>,
    plan: &crate::actions::Plan,
) {
    match runner.approve(plan, store.fleet()) {
        Approval::Go(approved) => {
            st.show_dialog(dialogs::running(Box::new(approved.plan().clone())));
            spawn_run(*approved, tx.clone());
        }
        Approval::Changed(now) => {
            let taken = now.wait_idle && !plan.wait_idle;
            let say = if taken {
                "the card was taken while you confirmed: the new plan drains it first and waits for that work"
            } else {
                "the cluster changed since the plan was shown: confirm the new plan"
            };
            st.say(say);
            st.show_dialog(dialogs::confirm(*now));
        }
        Approval::Gone(e) => {
            st.close_dialog();
            st.say(format!("{}: {e}", plan.action.verb()));
        }
        Approval::NotStarted(e) => {
            st.close_dialog();
            st.say(format!("{} not started: {e}", plan.action.verb()));
        }
        Approval::Refused(e) => {
            st.close_dialog();
            st.say(format!("{} refused: {e}", plan.action.verb()));
        }
    }
}

/// Schedule `name`'s group change as it would be on the fleet now (each card's action checked
/// by the runner), or `None` where nothing is due.
fn group_plan(
    name: &str,
    store: &Store,
    runner: &Runner,
    schedules: Option<&[crate::model::schedule::Schedule]>,
    cfg: &Config,
) -> Option<crate::schedule::group::GroupPlan> {
    let fleet = store.fleet();
    let now = fleet.taken_at.unwrap_or_else(Utc::now);
    let s = schedules.unwrap_or_default().iter().find(|s| s.name == name)?;
    let t = crate::schedule::timelines(std::slice::from_ref(s), fleet, now, cfg.policy.min_runtime, 24);
    crate::schedule::group::plan(t.first()?, fleet, now, &|a: &crate::actions::Action| runner.check(a, fleet))
}

/// Run an approved plan on a task that streams its progress and outcome back to the loop.
pub(super) fn spawn_run(approved: crate::actions::run::Approved, tx: mpsc::UnboundedSender<ActEvent>) {
    tokio::spawn(async move {
        let (ptx, mut prx) = mpsc::unbounded_channel();
        let forward = {
            let tx = tx.clone();
            tokio::spawn(async move {
                while let Some(p) = prx.recv().await {
                    let _ = tx.send(ActEvent::Progress(p));
                }
            })
        };
        let finished = approved.run(Some(ptx)).await;
        let _ = forward.await;
        let mut outcome = finished.outcome;
        if let Some(e) = finished.audit_error {
            outcome.reached = format!("{} (and the audit outcome could not be written: {e})", outcome.reached);
        }
        let _ = tx.send(ActEvent::Finished(outcome));
    });
}
