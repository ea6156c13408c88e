//! Schedules against the fleet: for each `[[schedule]]` and each card it covers, the layout
//! now, the window in effect, and every change over the next hours with what it requires (the
//! workloads that must end or be preempted, each with the guard's verdict), whether the card
//! can be changed by a backend, and what the new layout does for the waiting work. Pure: the
//! `schedule` command prints it; the mig-parted export is in `schedule/export.rs`.

pub mod demo;
pub mod export;
pub mod group;
#[cfg(test)]
mod test_sim;
pub mod unattended;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::act::guard;
use crate::model::capacity::card_would_serve;
use crate::model::mig::{LayoutSpec, lookup, parse_layout};
use crate::model::schedule::{Running, Schedule};
use crate::model::{Card, CardRef, Fleet, Node, WorkloadState};

/// A workload on a card when its change is due, and what happens to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Need {
    pub workload: String,
    pub name: String,
    pub kind: &'static str,
    /// `must end first` (running = wait), `preempt after confirmation`, or the guard's refusal.
    pub verdict: String,
    pub preemptible: bool,
}

/// One change of one card.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub at: DateTime<Utc>,
    /// When new work stops landing on the card (`at` minus `lead`).
    pub drain_at: DateTime<Utc>,
    pub window: String,
    pub layout: String,
    /// The card already has this layout: nothing to do.
    pub no_op: bool,
    /// Due now: the window holds already and the card does not have its layout.
    pub due: bool,
    /// Why it will not happen (`min_hold`), if so.
    pub skipped: Option<String>,
    pub requires: Vec<Need>,
    /// `ready` (idle now), `waits for N workloads`, `preempts N, then ready`, or why it cannot
    /// be changed here (no backend, unusable card, a MIG mode change NVML refuses).
    pub readiness: String,
    /// Waiting workloads the emptied card would start with the current and the new layout.
    pub serves_now: u64,
    pub serves_after: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CardPlan {
    #[serde(serialize_with = "as_text")]
    pub card: CardRef,
    pub model: String,
    pub layout_now: String,
    /// The window in effect now, if any.
    pub window_now: Option<String>,
    pub steps: Vec<Step>,
}

fn as_text<S: serde::Serializer>(r: &CardRef, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&r.to_string())
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    pub schedule: String,
    pub timezone: String,
    pub lead_s: u64,
    pub min_hold_s: u64,
    pub running: Running,
    /// The window in effect now, if any.
    pub window_now: Option<String>,
    pub cards: Vec<CardPlan>,
    /// Cards an earlier schedule also covers: two schedules would fight over them.
    pub conflicts: Vec<String>,
}

/// Every schedule's timeline over `hours` from `now`.
pub fn timelines(
    schedules: &[Schedule],
    fleet: &Fleet,
    now: DateTime<Utc>,
    min_runtime: std::time::Duration,
    hours: i64,
) -> Vec<Timeline> {
    let mut out: Vec<Timeline> = Vec::new();
    for (i, s) in schedules.iter().enumerate() {
        let mut t = timeline(s, fleet, now, min_runtime, hours);
        for (n, c) in fleet.cards().filter(|(n, c)| s.covers(n, c)) {
            if let Some(first) = schedules[..i].iter().find(|o| o.covers(n, c)) {
                t.conflicts.push(format!("{}/{} is also covered by schedule {}", n.name, c.index, first.name));
            }
        }
        out.push(t);
    }
    out
}

fn timeline(s: &Schedule, fleet: &Fleet, now: DateTime<Utc>, min_runtime: std::time::Duration, hours: i64) -> Timeline {
    let changes = s.changes(now, hours);
    let active = s.active_since(now);
    let window_now = active.map(|(i, _)| s.windows[i].name.clone());
    let pending: Vec<&crate::model::Workload> =
        fleet.workloads.iter().filter(|w| w.state == WorkloadState::Pending).collect();
    let memo = Memo::default();
    let cards = fleet
        .cards()
        .filter(|(n, c)| s.covers(n, c))
        .map(|(node, card)| {
            let model = card.gpu_model().map_or_else(|| card.model.clone(), |m| m.name.clone());
            let mut layout = card.layout_text();
            let mut steps = Vec::new();
            // When the card last changed: the start of the window in effect, where the card
            // has its layout (an earlier change tessera cannot know); unknown otherwise.
            let has = |i: usize, l: &str| same_layout(card, l, &s.windows[i].layout, &memo);
            let mut last = active.filter(|(i, _)| has(*i, &layout)).map(|(_, at)| at);
            // Overdue: a window holds now whose layout the card does not have.
            let due = active
                .filter(|(i, _)| !has(*i, &layout))
                .map(|(i, _)| crate::model::schedule::Change { at: now, window: i });
            for ch in due.iter().chain(&changes) {
                let w = &s.windows[ch.window];
                let mut st = step(s, fleet, node, card, &layout, w, ch, &pending, min_runtime, &memo);
                st.due = ch.at <= now;
                // A change due now is not made when the card's next change to another layout
                // comes within min_hold: it would be held past it (`schedule run` at 19:30 made
                // the day's change, then skipped the night's within min_hold). A window that
                // starts again with the same layout, or no next change at all, holds nothing.
                let next = changes
                    .iter()
                    .find(|n| n.at > now && !same_layout(card, &st.layout, &s.windows[n.window].layout, &memo));
                if !st.no_op && st.due && next.is_some_and(|n| s.held(Some(now), n.at)) {
                    let (at, name) = next
                        .map(|n| (n.at.format("%H:%M UTC").to_string(), s.windows[n.window].name.clone()))
                        .unwrap_or_default();
                    st.skipped = Some(format!(
                        "window {name} changes the card at {at}, within min_hold ({}): that change is made instead",
                        crate::units::duration::format(s.min_hold)
                    ));
                    st.requires.clear();
                    st.readiness = "skipped".into();
                    steps.push(st);
                    continue;
                }
                if !st.no_op && s.held(last, ch.at) {
                    st.skipped = Some(format!(
                        "within min_hold ({}) of the card's last change",
                        crate::units::duration::format(s.min_hold)
                    ));
                    st.requires.clear();
                    st.readiness = "skipped".into();
                } else if !st.no_op {
                    last = Some(ch.at);
                    // Later steps start from the layout this one leaves.
                    layout.clone_from(&st.layout);
                }
                steps.push(st);
            }
            CardPlan {
                card: CardRef::new(node.name.clone(), card.index),
                model,
                layout_now: card.layout_text(),
                window_now: window_now.clone(),
                steps,
            }
        })
        .collect();
    Timeline {
        schedule: s.name.clone(),
        timezone: s.tz_name.clone(),
        lead_s: s.lead.as_secs(),
        min_hold_s: s.min_hold.as_secs(),
        running: s.running,
        window_now,
        cards,
        conflicts: Vec::new(),
    }
}

/// The same layout, whatever the order or placement notation: compare the placed instances.
/// Each (model, text) is read once per timeline: thousands of cards share a few layouts.
fn same_layout(card: &Card, a: &str, b: &str, memo: &Memo) -> bool {
    let Some(m) = card.gpu_model() else { return a == b };
    let norm = |t: &str| {
        if let Some(hit) = memo.layouts.borrow().get(m.name.as_str()).and_then(|by| by.get(t)) {
            return hit.clone();
        }
        let read = match parse_layout(m, t) {
            Ok(LayoutSpec::Whole) => Some(Vec::new()),
            Ok(LayoutSpec::Mig(mut v)) => {
                v.sort_by_key(|p| p.start);
                Some(v.into_iter().map(|p| (p.profile, p.start)).collect::<Vec<_>>())
            }
            Err(_) => None,
        };
        memo.layouts.borrow_mut().entry(m.name.as_str()).or_default().insert(t.to_string(), read.clone());
        read
    };
    norm(a).is_some_and(|x| Some(x) == norm(b))
}

/// Placed instances by model, then by layout text.
type Layouts = std::collections::HashMap<&'static str, std::collections::HashMap<String, Option<Vec<(String, u8)>>>>;

/// What one timeline works out once for all its cards.
#[derive(Default)]
struct Memo {
    /// Waiting workloads a layout would start, by (model, layout, MIG on with no instance).
    served: std::cell::RefCell<std::collections::HashMap<(String, String, bool), u64>>,
    /// A layout's placed instances; `None`: it does not read.
    layouts: std::cell::RefCell<Layouts>,
}

#[allow(clippy::too_many_arguments)]
fn step(
    s: &Schedule,
    fleet: &Fleet,
    node: &Node,
    card: &Card,
    layout_before: &str,
    w: &crate::model::schedule::Window,
    ch: &crate::model::schedule::Change,
    pending: &[&crate::model::Workload],
    min_runtime: std::time::Duration,
    memo: &Memo,
) -> Step {
    let no_op = same_layout(card, layout_before, &w.layout, memo);
    let ctx = guard::Context { read_only: false, force: false, min_runtime, now: ch.at };
    let requires: Vec<Need> = if no_op {
        Vec::new()
    } else {
        let mut ids: Vec<&str> = card.holders().collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
            .filter_map(|id| fleet.workload(id))
            .map(|wl| {
                let refusals = guard::preempt(wl, &ctx);
                let preemptible = refusals.is_empty();
                let verdict = match (s.running, preemptible) {
                    (Running::Wait, _) => "must end first (running = wait)".to_string(),
                    (Running::Preempt, true) => "preempt after confirmation (checkpoint, requeue)".to_string(),
                    (Running::Preempt, false) => format!("must end first: {}", guard::joined(&refusals)),
                };
                Need { workload: wl.id.clone(), name: wl.name.clone(), kind: wl.kind.as_str(), verdict, preemptible }
            })
            .collect()
    };
    let readiness = readiness(s, fleet, node, card, &w.layout, &requires, no_op);
    let model = card.gpu_model().map(|m| m.name.clone()).unwrap_or_default();
    let placed = |t: &str| match card.gpu_model().map(|m| parse_layout(m, t)) {
        Some(Ok(LayoutSpec::Mig(v))) => Some(v),
        // MIG on with no instance yet: an empty layout, not a whole card.
        _ if t.is_empty() && card.mig.enabled => Some(Vec::new()),
        _ => None,
    };
    // What a layout serves depends on the model and the layout only: counted once per call.
    let serves = |t: &str| {
        let key = (model.clone(), t.to_string(), t.is_empty() && card.mig.enabled);
        if let Some(&n) = memo.served.borrow().get(&key) {
            return n;
        }
        let p = placed(t);
        let n = card_would_serve(&model, p.as_deref(), pending);
        memo.served.borrow_mut().insert(key, n);
        n
    };
    Step {
        at: ch.at,
        drain_at: ch.at - chrono::Duration::seconds(i64::try_from(s.lead.as_secs()).unwrap_or(0)),
        window: w.name.clone(),
        layout: w.layout.clone(),
        no_op,
        due: false,
        skipped: None,
        requires,
        readiness,
        serves_now: serves(layout_before),
        serves_after: serves(&w.layout),
    }
}

fn readiness(
    s: &Schedule,
    fleet: &Fleet,
    node: &Node,
    card: &Card,
    layout: &str,
    requires: &[Need],
    no_op: bool,
) -> String {
    if no_op {
        return "nothing to do: the card has this layout".into();
    }
    if let Some(e) = &card.mig.error {
        return format!("cannot plan: the card's MIG instances are unknown ({e})");
    }
    if let Some(f) = card.health.fault() {
        return format!("cannot change: the card is unhealthy ({f})");
    }
    if lookup(&card.model).is_none() {
        return "cannot change: no MIG profiles known for this model".into();
    }
    if card.dra.as_ref().is_some_and(|d| d.dynamic) {
        return "cannot change: the DRA driver lays this card out per claim (DynamicMIG)".into();
    }
    let to_whole = layout.trim().eq_ignore_ascii_case("whole");
    match crate::act::plan::repartition_backend(fleet, node) {
        None => {
            return "cannot change here: no source that can repartition this node (export it for mig-parted)".into();
        }
        Some(crate::act::Backend::Nvml) if to_whole == card.mig.enabled => {
            return "cannot change through NVML: switching MIG mode needs a GPU reset (export it for mig-parted)"
                .into();
        }
        _ => {}
    }
    let blocking = requires.iter().filter(|n| !(s.running == Running::Preempt && n.preemptible)).count();
    let preempts = requires.len() - blocking;
    match (blocking, preempts) {
        // Activity, memory or a holder no source names: the card may never empty.
        (0, _) if card.in_use_by_unknown() || card.holders().count() > requires.len() => {
            "waits: in use by an unknown holder".into()
        }
        (0, 0) => "ready: idle now".into(),
        (0, p) => format!("preempts {p} after confirmation, then ready"),
        (b, _) => format!("waits for {b} workload{} to end", if b == 1 { "" } else { "s" }),
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
