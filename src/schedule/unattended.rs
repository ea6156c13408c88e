//! Unattended schedules (`unattended = true` on a `[[schedule]]`, run by `tessera schedule
//! run`): what to do at an instant, as actions for the one runner. `lead` before a change the
//! card is drained (no new work lands); at the change an idle card is repartitioned and, if
//! tessera drained it, undrained; a card still busy at the change is skipped for that window,
//! undrained, reported, and tried again at the next one. Never a preemption, never a card with
//! holders. Pure: the caller executes the actions and keeps the `State`.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use crate::actions::Action;
use crate::model::schedule::Schedule;
use crate::model::{CardRef, Fleet};

/// What the loop remembers between ticks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// Cards tessera drained ahead of a change (it undrains only these).
    pub drained: BTreeSet<CardRef>,
    /// Per card, the window start it gave up on (busy at the change).
    pub skipped: BTreeMap<CardRef, DateTime<Utc>>,
}

/// One thing to do now.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Act {
        action: Action,
        why: String,
    },
    /// Something an operator should read (a skipped change).
    Report(String),
}

/// The decisions at `now` for every unattended schedule, updating `state` as if they succeed
/// (the caller reverts nothing: a failed action is reported by the runner and retried next tick).
pub fn decide(
    schedules: &[Schedule],
    fleet: &Fleet,
    now: DateTime<Utc>,
    min_runtime: std::time::Duration,
    state: &mut State,
) -> Vec<Decision> {
    let mut out = Vec::new();
    for s in schedules.iter().filter(|s| s.unattended) {
        let t = &super::timelines(std::slice::from_ref(s), fleet, now, min_runtime, 24)[0];
        let start = s.active_since(now).map(|(_, at)| at);
        for c in &t.cards {
            let Some(card) = fleet.card(&c.card) else { continue };
            let target = c.card.to_string();
            let ours = state.drained.contains(&c.card);
            let due = c.steps.iter().find(|st| st.due && !st.no_op && st.skipped.is_none());
            if let (Some(st), Some(start)) = (due, start) {
                if state.skipped.get(&c.card) == Some(&start) {
                    continue;
                }
                if st.readiness.starts_with("ready") {
                    out.push(Decision::Act {
                        action: Action::Repartition { target: target.clone(), layout: st.layout.clone() },
                        why: format!("schedule {}: window {} began", s.name, st.window),
                    });
                    if ours {
                        out.push(Decision::Act {
                            action: Action::Undrain { target: target.clone(), force: false },
                            why: format!("schedule {}: drained for the change, which is done", s.name),
                        });
                        state.drained.remove(&c.card);
                    }
                } else {
                    // Busy (or unchangeable) at the change: skip this window, give the card back.
                    state.skipped.insert(c.card.clone(), start);
                    if ours {
                        out.push(Decision::Act {
                            action: Action::Undrain { target: target.clone(), force: false },
                            why: format!("schedule {}: the change to {} was skipped", s.name, st.window),
                        });
                        state.drained.remove(&c.card);
                    }
                    out.push(Decision::Report(format!(
                        "schedule {}: {target} skipped for window {} ({}); tried again at the next window",
                        s.name, st.window, st.readiness
                    )));
                }
                continue;
            }
            // Ahead of the next real change: drain from `lead` before it.
            let next = c.steps.iter().find(|st| !st.due && !st.no_op && st.skipped.is_none());
            if let Some(st) = next
                && now >= st.drain_at
                && !card.draining
                && !ours
                && card.health.fault().is_none()
            {
                out.push(Decision::Act {
                    action: Action::Drain { target: target.clone() },
                    why: format!("schedule {}: {} begins at {}", s.name, st.window, st.at.format("%H:%M UTC")),
                });
                state.drained.insert(c.card.clone());
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "unattended_tests.rs"]
mod tests;
