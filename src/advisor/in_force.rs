//! Schedules in force: the cards each configured schedule covers whose layout its window in
//! effect sets are the schedule's (no layout plan goes against it), and what that costs when
//! the window's layout keeps idle cards from waiting work: one finding per schedule, priced, with
//! the change to make now (the window's next change is when the schedule would make it).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::planner::{CardChange, Pinned, Plan};
use super::{Context, Finding, Kind, Severity, Subject, Suggestion, minutes};
use crate::act::Action;
use crate::model::schedule::{Schedule, Window};
use crate::model::{CardRef, Fleet};

/// Which schedule and window hold a pinned card.
#[derive(Debug, Clone, Default)]
pub struct InForce {
    pub pinned: Pinned,
    /// Card → (schedule, window) indices into the schedules.
    by_card: BTreeMap<CardRef, (usize, usize)>,
}

/// A change on a pinned card and the waiting work only it starts.
type Starting<'a> = (&'a CardChange, Vec<&'a String>);

/// The cards whose layout a schedule's window in effect at `now` sets.
pub fn in_force(fleet: &Fleet, schedules: &[Schedule], now: DateTime<Utc>) -> InForce {
    let mut f = InForce::default();
    if schedules.is_empty() {
        return f;
    }
    let active: Vec<Option<usize>> = schedules.iter().map(|s| s.active_at(now)).collect();
    for (node, card) in fleet.cards() {
        // The first schedule that covers a card is its own (as the unattended runner does).
        let held = schedules.iter().enumerate().find(|(_, s)| s.covers(node, card));
        if let Some((si, _)) = held
            && let Some(wi) = active[si]
        {
            let r = CardRef::new(node.name.clone(), card.index);
            f.pinned.insert(r.clone());
            f.by_card.insert(r, (si, wi));
        }
    }
    f
}

/// The schedules' cost: changes of the plan without pins (`free`) on pinned cards that start
/// work the plan around the pins (`around`) does not, grouped by schedule. Returns the workloads
/// these changes would start (they are not capacity to add: a layout change gives them).
pub fn findings(
    fleet: &Fleet,
    cx: &Context,
    f: &InForce,
    free: &Plan,
    around: &Plan,
    out: &mut Vec<Finding>,
) -> Vec<String> {
    let mut served = Vec::new();
    for ((si, wi), changes) in by_schedule(f, free, around) {
        let Some(schedule) = cx.schedules.get(si) else { continue };
        let Some(window) = schedule.windows.get(wi) else { continue };
        let starts: Vec<&String> = changes.iter().flat_map(|(_, st)| st.iter().copied()).collect();
        // As a layout plan: work that has just arrived may yet be placed.
        let Some((oldest, severity)) = super::waited_past(fleet, cx, &starts) else { continue };
        let held = Held { key: (si, wi), schedule, window, changes, starts };
        out.push(held.finding(fleet, cx, f, oldest, severity));
        served.extend(held.starts.into_iter().cloned());
    }
    served
}

/// The changes of `free` on pinned cards that start work `around` does not, by the schedule
/// and window that hold each card.
fn by_schedule<'p>(f: &InForce, free: &'p Plan, around: &Plan) -> BTreeMap<(usize, usize), Vec<Starting<'p>>> {
    let mut by_schedule: BTreeMap<(usize, usize), Vec<Starting>> = BTreeMap::new();
    for c in &free.changes {
        let Some(&key) = f.by_card.get(&c.card) else { continue };
        let starts: Vec<&String> = c.serves.iter().filter(|id| !around.served.contains(id)).collect();
        if !starts.is_empty() {
            by_schedule.entry(key).or_default().push((c, starts));
        }
    }
    by_schedule
}

/// The idle cards one schedule's window holds from waiting work: the changes that would start
/// it, and that work.
struct Held<'a> {
    /// The schedule's and window's indices.
    key: (usize, usize),
    schedule: &'a Schedule,
    window: &'a Window,
    changes: Vec<Starting<'a>>,
    starts: Vec<&'a String>,
}

impl Held<'_> {
    /// The finding: what the window holds until its next change, priced, with the first change
    /// to make now; the oldest of the work has waited `oldest` seconds.
    fn finding(&self, fleet: &Fleet, cx: &Context, f: &InForce, oldest: u64, severity: Severity) -> Finding {
        let (s, w, changes) = (self.schedule, self.window, &self.changes);
        let until = s.changes(cx.now, 48).first().map(|c| c.at);
        let hours_left = until.map_or(24.0, |u| ((u - cx.now).num_seconds().max(0) as f64 / 3600.0).min(24.0));
        let until_text = until.map_or_else(|| "its end".into(), |u| local_hhmm(s, u));
        let model = changes.first().map(|(c, _)| c.model.clone()).unwrap_or_default();
        let n = changes.len();
        let holds = holds_as(fleet, changes);
        let gpus: u64 = self
            .starts
            .iter()
            .filter_map(|id| fleet.workload(id))
            .map(|w| u64::from(w.request.gpus.unwrap_or(1).max(1)))
            .sum();
        let title = format!(
            "schedule {} (window {}) holds {n} idle {model} {} as {holds} until {until_text} while {} waiting \
             ({}) could start on {}: change now, or shorten the window",
            s.name,
            w.name,
            if n == 1 { "card" } else { "cards" },
            crate::units::count(self.starts.len() as u64, "job", "jobs"),
            crate::units::count(gpus, "GPU", "GPUs"),
            if n == 1 { "it" } else { "them" },
        );
        let evidence = self.evidence(f, oldest, &until_text);
        let first = changes[0].0;
        let why = format!(
            "schedule {}'s window {} holds it until {until_text}; {} start",
            s.name,
            w.name,
            crate::units::count(first.serves.len() as u64, "waiting job", "waiting jobs")
        );
        let gpu_hours = n as f64 * hours_left;
        Finding {
            kind: Kind::ScheduleCost,
            severity,
            subject: Subject::Pool { model: model.clone() },
            title,
            evidence,
            gpu_hours_per_day: gpu_hours,
            cost_per_day: cx.money(Some(&model), gpu_hours),
            suggestion: Suggestion::Action {
                action: Action::Repartition { target: first.card.to_string(), layout: first.to.clone() },
                why,
            },
            cards: changes.iter().map(|(c, _)| c.card.clone()).collect(),
        }
    }

    /// Each change and the work it would start, how long the oldest has waited, and what the
    /// window sets on how many cards until `until_text`.
    fn evidence(&self, f: &InForce, oldest: u64, until_text: &str) -> Vec<String> {
        let w = self.window;
        let mut evidence: Vec<String> = self
            .changes
            .iter()
            .map(|(c, st)| {
                let ids: Vec<&str> = st.iter().take(4).map(|s| s.as_str()).collect();
                format!("{}: {} → {} would start {}", c.card, c.from, c.to, ids.join(", "))
            })
            .collect();
        evidence.push(format!("the oldest of them has waited {}", minutes(oldest)));
        evidence.push(format!(
            "window {} sets {} on {} cards until {until_text}; the schedule changes them back at its next window",
            w.name,
            w.mig_config.as_deref().unwrap_or(&w.layout),
            f.by_card.values().filter(|&&k| k == self.key).count()
        ));
        evidence
    }
}

/// What the idle cards hold now, as one text: "35 unused 1g.10gb" or "whole cards".
fn holds_as(fleet: &Fleet, changes: &[Starting]) -> String {
    let mut by_profile: BTreeMap<String, usize> = BTreeMap::new();
    let mut whole = 0u64;
    for (c, _) in changes {
        match fleet.card(&c.card) {
            Some(k) if k.mig.enabled => {
                for i in &k.mig.instances {
                    *by_profile.entry(i.profile.clone()).or_default() += 1;
                }
            }
            _ => whole += 1,
        }
    }
    let mut parts: Vec<String> = by_profile.into_iter().map(|(p, n)| format!("{n} unused {p}")).collect();
    if whole > 0 {
        parts.push(crate::units::count(whole, "whole card", "whole cards"));
    }
    parts.join(" and ")
}

/// `t` on the schedule's clock, HH:MM.
fn local_hhmm(s: &Schedule, t: DateTime<Utc>) -> String {
    jiff::Timestamp::from_second(t.timestamp())
        .map(|ts| ts.to_zoned(s.tz.clone()).strftime("%H:%M").to_string())
        .unwrap_or_else(|_| t.format("%H:%M UTC").to_string())
}
