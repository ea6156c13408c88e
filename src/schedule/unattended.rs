//! Unattended schedules (`unattended = true` on a `[[schedule]]`, run by `tessera schedule
//! run`): what to do at an instant, as actions for the one runner, and what to remember from
//! how they went. `lead` before a change the card is drained (no new work lands); at the change
//! an idle card is repartitioned and, if tessera drained it, undrained; a card still busy at
//! the change stays drained and is changed once idle, one within `min_hold` once the hold ends;
//! one that cannot be changed here, or whose change the runner refuses or fails, is skipped for
//! that window, undrained, reported once, and tried again at the next one; a card tessera drained for a
//! change that no longer comes is given back. Never a preemption, never a card with holders,
//! and a card two unattended schedules cover is left to the first. Pure: the caller executes
//! the actions and reports each result with `State::record`.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::{CardPlan, Step};
use crate::act::Action;
use crate::model::schedule::Schedule;
use crate::model::{Card, CardRef, Fleet};

/// What the loop remembers between ticks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// Cards tessera drained ahead of a change (it undrains only these).
    pub drained: BTreeSet<CardRef>,
    /// Per card, the window start it gave up on (busy, refused or failed at the change).
    pub skipped: BTreeMap<CardRef, DateTime<Utc>>,
    /// Per card, when tessera last changed it (for `min_hold`).
    pub changed: BTreeMap<CardRef, DateTime<Utc>>,
    /// What was already said, so a report is made once.
    reported: BTreeSet<String>,
}

/// One thing to do now.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Act {
        card: CardRef,
        action: Action,
        why: String,
        window_start: Option<DateTime<Utc>>,
    },
    /// Something an operator should read (a skipped change), said once.
    Report(String),
}

/// How an action the loop asked for went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Went {
    Done,
    /// The runner found nothing to do (already drained, not drained, the layout in place).
    NothingToDo,
    /// Refused by a guard, failed, or not started.
    NotDone,
}

impl State {
    fn report(&mut self, text: String, out: &mut Vec<Decision>) {
        if self.reported.insert(text.clone()) {
            out.push(Decision::Report(text));
        }
    }

    /// Learn from how an action went: a drain is ours only when it did drain; a change that
    /// did not happen skips the window (reported once) and gives the card back.
    pub fn record(&mut self, d: &Decision, how: Went, now: DateTime<Utc>) -> Vec<Decision> {
        let mut out = Vec::new();
        let Decision::Act { card, action, window_start, .. } = d else { return out };
        match (action, how) {
            (Action::Drain { .. }, Went::Done) => {
                self.drained.insert(card.clone());
            }
            (Action::Undrain { .. }, Went::Done | Went::NothingToDo) => {
                self.drained.remove(card);
            }
            (Action::Repartition { .. }, Went::Done | Went::NothingToDo) => {
                self.changed.insert(card.clone(), now);
                self.skipped.remove(card);
            }
            (Action::Repartition { target, .. }, Went::NotDone) => {
                if let Some(start) = window_start {
                    self.skipped.insert(card.clone(), *start);
                }
                self.report(
                    format!("{target}: the change was not made (its reason is in the audit log); tried again at the next window"),
                    &mut out,
                );
                if self.drained.contains(card) {
                    out.push(give_back(card, "the change was not made"));
                }
            }
            (Action::Undrain { target, .. }, Went::NotDone) => {
                self.report(format!("{target}: could not be undrained; tried again next tick"), &mut out);
            }
            _ => {}
        }
        out
    }
}

fn give_back(card: &CardRef, why: &str) -> Decision {
    Decision::Act {
        card: card.clone(),
        action: Action::Undrain { target: card.to_string(), force: false },
        why: why.into(),
        window_start: None,
    }
}

/// The decisions at `now` for every unattended schedule.
pub fn decide(
    schedules: &[Schedule],
    fleet: &Fleet,
    now: DateTime<Utc>,
    min_runtime: std::time::Duration,
    state: &mut State,
) -> Vec<Decision> {
    let mut out = Vec::new();
    let unattended: Vec<&Schedule> = schedules.iter().filter(|s| s.unattended).collect();
    for (k, s) in unattended.iter().enumerate() {
        let t = &super::timelines(std::slice::from_ref(*s), fleet, now, min_runtime, 24)[0];
        let start = s.active_since(now).map(|(_, at)| at);
        for c in &t.cards {
            let Some(card) = fleet.card(&c.card) else { continue };
            let node = fleet.nodes.iter().find(|n| n.name == c.card.node);
            if let Some(first) = unattended[..k].iter().find(|o| node.is_some_and(|n| o.covers(n, card))) {
                let text =
                    format!("{}: covered by schedules {} and {}; only {} acts", c.card, first.name, s.name, first.name);
                state.report(text, &mut out);
                continue;
            }
            let at = CardAt { s, plan: c, card, now, ours: state.drained.contains(&c.card) };
            let due = c.steps.iter().find(|st| st.due && !st.no_op && st.skipped.is_none());
            if let (Some(st), Some(start)) = (due, start)
                && state.skipped.get(&c.card) != Some(&start)
            {
                at.change_due(st, start, state, &mut out);
                continue;
            }
            at.ahead_of_change(&mut out);
        }
    }
    out
}

/// One card of an unattended schedule at `now`: what its decision reads.
struct CardAt<'a> {
    s: &'a Schedule,
    plan: &'a CardPlan,
    card: &'a Card,
    now: DateTime<Utc>,
    /// tessera drained it ahead of a change.
    ours: bool,
}

impl CardAt<'_> {
    /// Step `st` is due in the window that began at `start`: change an idle card (and give it
    /// back if ours); skip a window it cannot be changed in; wait out `min_hold`; or keep a
    /// busy card from new work until it is idle.
    fn change_due(&self, st: &Step, start: DateTime<Utc>, state: &mut State, out: &mut Vec<Decision>) {
        let (s, c, card, ours) = (self.s, self.plan, self.card, self.ours);
        let target = c.card.to_string();
        let held = s.held(state.changed.get(&c.card).copied(), self.now);
        if st.readiness.starts_with("ready") && !held {
            out.push(Decision::Act {
                card: c.card.clone(),
                action: Action::Repartition { target: target.clone(), layout: st.layout.clone() },
                why: format!("schedule {}: window {} began", s.name, st.window),
                window_start: Some(start),
            });
            if ours {
                out.push(give_back(&c.card, "drained for the change"));
            }
        } else if st.readiness.starts_with("cannot") {
            // Not changeable here: skip this window, give it back.
            state.skipped.insert(c.card.clone(), start);
            if ours {
                out.push(give_back(&c.card, "the change was skipped"));
            }
            let text = format!(
                "schedule {}: {target} skipped for window {} ({}); tried again at the next window",
                s.name, st.window, st.readiness
            );
            state.report(text, out);
        } else if held {
            // Within min_hold of its last change: changed once the hold ends (if idle
            // then); not kept from work meanwhile.
            if ours {
                out.push(give_back(&c.card, "held by min_hold"));
            }
            let text = format!(
                "schedule {}: {target} due for window {} but within min_hold of its last change: changed when \
                 the hold ends",
                s.name, st.window
            );
            state.report(text, out);
        } else {
            // Busy at the change (running = wait): changed once it is idle, kept from new
            // work meanwhile (it was skipped for the whole window, idle or not).
            if !card.draining && !ours && card.health.fault().is_none() {
                out.push(Decision::Act {
                    card: c.card.clone(),
                    action: Action::Drain { target: target.clone(), evict: false },
                    why: format!("schedule {}: window {} is due ({})", s.name, st.window, st.readiness),
                    window_start: None,
                });
            }
            let text = format!(
                "schedule {}: {target} due for window {} ({}): changed when it is idle, no new work lands \
                 meanwhile",
                s.name, st.window, st.readiness
            );
            state.report(text, out);
        }
    }

    /// Nothing due: ahead of the next real change that can happen, drain from `lead` before
    /// it; with none coming, give back a card tessera drained.
    fn ahead_of_change(&self, out: &mut Vec<Decision>) {
        let (s, c, card, ours) = (self.s, self.plan, self.card, self.ours);
        let target = c.card.to_string();
        let next = c.steps.iter().find(|st| !st.due && !st.no_op && st.skipped.is_none());
        let within = next.filter(|st| !st.readiness.starts_with("cannot") && self.now >= st.drain_at);
        match within {
            Some(st) if !card.draining && !ours && card.health.fault().is_none() => out.push(Decision::Act {
                card: c.card.clone(),
                action: Action::Drain { target: target.clone(), evict: false },
                why: format!("schedule {}: {} begins at {}", s.name, st.window, st.at.format("%H:%M UTC")),
                window_start: None,
            }),
            Some(_) => {}
            // No change within `lead` (it became a no-op, or cannot happen): give it back.
            None if ours => out.push(give_back(&c.card, "no change is coming")),
            None => {}
        }
    }
}

#[cfg(test)]
#[path = "unattended_tests.rs"]
mod tests;
