//! A schedule's change for its whole group of cards as one plan, confirmed once: the banner
//! that says a change is due, and the plan of every card (drain ahead by `lead` or before a
//! preemption, wait or preempt eligible training, repartition with placements, undrain), each
//! action checked with the runner's guards. The run card by card is `group/run.rs`. Pure.

use chrono::{DateTime, Utc};

use super::{Need, Step, Timeline};

mod run;
use crate::act::{Action, Plan};
use crate::model::schedule::Running;
use crate::model::{CardRef, Fleet};
pub use run::{CardState, GroupRun, Next};

/// How long a card preempted for a change may take to empty before it is left for later.
pub const EMPTY_WITHIN_S: i64 = 15 * 60;

/// The change of a schedule to show above the view: due now, or within its `lead`.
#[derive(Debug, Clone, PartialEq)]
pub struct Banner {
    pub schedule: String,
    pub window: String,
    pub at: DateTime<Utc>,
    pub cards: usize,
    /// Of those, idle now.
    pub ready: usize,
    /// Other schedules with a change due.
    pub more: usize,
    /// Who applies it, where not the operator (an unattended schedule).
    pub note: Option<String>,
}

impl Banner {
    pub fn text(&self, now: DateTime<Utc>) -> String {
        let when = if self.at <= now {
            "due now".to_string()
        } else {
            let min = ((self.at - now).num_seconds() + 59) / 60;
            format!("at {} UTC (in {min} min, drain ahead now)", self.at.format("%H:%M"))
        };
        let more = if self.more > 0 { format!(" (+{} more schedules)", self.more) } else { String::new() };
        let note = self.note.as_ref().map(|n| format!(" · {n}")).unwrap_or_default();
        format!(
            "schedule {}: window {} {when} on {}, {} idle{more}{note}",
            self.schedule,
            self.window,
            crate::units::count(self.cards as u64, "card", "cards"),
            self.ready
        )
    }
}

/// The step of a card's plan that can be acted on now: due, or due within its lead.
fn live(steps: &[Step], now: DateTime<Utc>) -> Option<&Step> {
    steps.iter().find(|s| !s.no_op && s.skipped.is_none() && (s.due || s.drain_at <= now))
}

/// The first schedule with a change to act on, for the banner.
pub fn banner(timelines: &[Timeline], now: DateTime<Utc>) -> Option<Banner> {
    let mut found: Vec<Banner> = Vec::new();
    for t in timelines {
        let all: Vec<&Step> = t.cards.iter().filter_map(|c| live(&c.steps, now)).collect();
        let Some(first) = all.iter().min_by_key(|s| s.at) else { continue };
        // One change: the cards of the first window's step, not every card with some step
        // ("window night due now on 16 cards" counted the 14 waiting for the day's).
        let steps: Vec<&&Step> = all.iter().filter(|s| s.window == first.window && s.at == first.at).collect();
        found.push(Banner {
            schedule: t.schedule.clone(),
            window: first.window.clone(),
            at: first.at,
            cards: steps.len(),
            ready: steps.iter().filter(|s| s.readiness.starts_with("ready")).count(),
            more: 0,
            note: None,
        });
    }
    let more = found.len().saturating_sub(1);
    found.into_iter().next().map(|b| Banner { more, ..b })
}

/// One card's part of the group change.
#[derive(Debug, Clone, PartialEq)]
pub struct CardChange {
    pub card: CardRef,
    pub at: DateTime<Utc>,
    /// The layout in `repartition`'s text, placements included.
    pub layout: String,
    /// Drain it first (ahead by `lead`, or before preempting).
    pub drain: bool,
    /// Eligible training to preempt at the change (`running = "preempt"`).
    pub preempt: Vec<Need>,
    /// The runner's repartition plan of a card idle now (the run goes on only if unchanged).
    pub repartition: Option<Plan>,
    /// Every step, in words.
    pub steps: Vec<String>,
}

/// A schedule's change for its group, as the confirmation shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupPlan {
    pub schedule: String,
    pub window: String,
    pub at: DateTime<Utc>,
    pub running: Running,
    pub cards: Vec<CardChange>,
    /// Covered cards not in this run, each with why.
    pub left: Vec<(CardRef, String)>,
    /// Workloads the run would preempt (`id name`), asked about on their own.
    pub preempts: Vec<String>,
    /// The runner's warnings on the cards' plans, each once.
    pub warnings: Vec<String>,
    /// The change is ahead (within `lead`), not due yet.
    pub ahead: bool,
}

/// The layout with each instance's placement (`1g.10gb@0,1g.10gb@1,…`) and the same in short
/// for the dialog (`1g.10gb@0,1,…`), as far as it parses.
fn placed(fleet: &Fleet, card: &CardRef, layout: &str) -> (String, String) {
    use crate::model::mig::{LayoutSpec, parse_layout};
    let Some(m) = fleet.card(card).and_then(|c| c.gpu_model()) else { return (layout.to_string(), layout.to_string()) };
    match parse_layout(m, layout) {
        Ok(LayoutSpec::Mig(mut v)) => {
            v.sort_by_key(|p| p.start);
            let full = v.iter().map(|p| format!("{}@{}", p.profile, p.start)).collect::<Vec<_>>().join(",");
            let mut short: Vec<(String, Vec<String>)> = Vec::new();
            for p in &v {
                match short.last_mut() {
                    Some((prof, starts)) if *prof == p.profile => starts.push(p.start.to_string()),
                    _ => short.push((p.profile.clone(), vec![p.start.to_string()])),
                }
            }
            let short = short.iter().map(|(p, s)| format!("{p}@{}", s.join(","))).collect::<Vec<_>>().join(" ");
            (full, short)
        }
        Ok(LayoutSpec::Whole) => ("whole".into(), "whole (MIG off)".into()),
        Err(_) => (layout.to_string(), layout.to_string()),
    }
}

/// The group change of timeline `t` at `now`: every card with a change due (or within its
/// lead) that can take part, with its steps; the rest with why. Every action is checked with
/// `propose` (the runner's plan and guards) before anything is asked.
pub fn plan(
    t: &Timeline,
    fleet: &Fleet,
    now: DateTime<Utc>,
    propose: &dyn Fn(&Action) -> Result<Plan, crate::act::plan::PlanError>,
) -> Option<GroupPlan> {
    let mut g = GroupPlan {
        schedule: t.schedule.clone(),
        window: String::new(),
        at: now,
        running: t.running,
        cards: Vec::new(),
        left: Vec::new(),
        preempts: Vec::new(),
        warnings: Vec::new(),
        ahead: false,
    };
    // One change per run: the earliest; a card whose next change is another comes later.
    let first = t.cards.iter().filter_map(|c| live(&c.steps, now)).min_by_key(|s| s.at)?;
    for c in &t.cards {
        let Some(st) = live(&c.steps, now) else { continue };
        if st.window != first.window || st.at != first.at {
            let when = st.at.format("%H:%M UTC");
            g.left.push((c.card.clone(), format!("its next change is another: window {} at {when}", st.window)));
            continue;
        }
        let (layout, short) = placed(fleet, &c.card, &st.layout);
        let refused = |a: &Action| match propose(a) {
            Ok(p) if !p.allowed() => Some(crate::act::guard::joined(&p.blockers)),
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        };
        let cannot = !["ready", "waits", "preempts"].iter().any(|r| st.readiness.starts_with(r));
        if cannot {
            g.left.push((c.card.clone(), st.readiness.clone()));
            continue;
        }
        let ahead = st.at > now;
        if !ahead && st.readiness.starts_with("ready") {
            match ready_change(&mut g, c, st, propose, layout, &short, preemptible(t, st)) {
                Ok(change) => g.cards.push(change),
                Err(why) => g.left.push((c.card.clone(), why)),
            }
            continue;
        }
        if !ahead && !st.readiness.starts_with("preempts") {
            // Due, busy, and nothing may be preempted: it changes once its work ends.
            g.left.push((c.card.clone(), format!("{} (running = {})", st.readiness, t.running.as_str())));
            continue;
        }
        match drained_change(&mut g, t, c, st, &refused, layout, &short) {
            Ok(change) => g.cards.push(change),
            Err(why) => g.left.push((c.card.clone(), why)),
        }
    }
    // Idle cards first (nothing requeued elsewhere lands on them meanwhile), then the rest;
    // each group in node order, so a node's cards are done together.
    g.cards.sort_by(|a, b| (a.drain, &a.card.node, a.card.index).cmp(&(b.drain, &b.card.node, b.card.index)));
    g.window.clone_from(&first.window);
    g.at = first.at;
    g.ahead = first.at > now;
    Some(g)
}

/// The holders of a card the run may preempt for its change (`running = "preempt"`).
fn preemptible(t: &Timeline, st: &super::Step) -> Vec<Need> {
    st.requires.iter().filter(|n| t.running == Running::Preempt && n.preemptible).cloned().collect()
}

/// An idle card due now: its repartition as the runner plans it (the plan's warnings said once
/// for the group), or why it is not in the run.
fn ready_change(
    g: &mut GroupPlan,
    c: &super::CardPlan,
    st: &super::Step,
    propose: &dyn Fn(&Action) -> Result<Plan, crate::act::plan::PlanError>,
    layout: String,
    short: &str,
    preempt: Vec<Need>,
) -> Result<CardChange, String> {
    let action = Action::Repartition { target: c.card.to_string(), layout: st.layout.clone() };
    match propose(&action) {
        Ok(p) if p.allowed() && p.nothing_to_do.is_none() => {
            for w in &p.warnings {
                if !g.warnings.contains(w) {
                    g.warnings.push(w.clone());
                }
            }
            let steps =
                vec![format!("repartition to {short}"), format!("{} steps via {}", p.steps.len(), p.backend.as_str())];
            Ok(CardChange {
                card: c.card.clone(),
                at: st.at,
                layout,
                drain: false,
                preempt,
                repartition: Some(p),
                steps,
            })
        }
        Ok(p) if !p.allowed() => Err(crate::act::guard::joined(&p.blockers)),
        Ok(p) => Err(p.nothing_to_do.unwrap_or_default()),
        Err(e) => Err(e.to_string()),
    }
}

/// A card to drain (its change ahead within `lead`, or due with training to preempt): its
/// steps, or why it is not in the run (the runner would refuse its drain or a preemption).
fn drained_change(
    g: &mut GroupPlan,
    t: &Timeline,
    c: &super::CardPlan,
    st: &super::Step,
    refused: &dyn Fn(&Action) -> Option<String>,
    layout: String,
    short: &str,
) -> Result<CardChange, String> {
    // The group is planned at `g.at`: a change after it is ahead, within `lead`.
    let ahead = st.at > g.at;
    let preempt = preemptible(t, st);
    let drain = Action::Drain { target: c.card.to_string(), evict: false };
    // A preemption ahead of its change is judged then (the minimum runtime may pass).
    let now_preempts = if ahead { &[][..] } else { &preempt[..] };
    let why: Vec<String> = std::iter::once(drain)
        .chain(now_preempts.iter().map(|n| Action::Preempt { workload: n.workload.clone(), force: false }))
        .filter_map(|a| refused(&a))
        .collect();
    if !why.is_empty() {
        return Err(why.join("; "));
    }
    let mut steps = vec![if ahead {
        format!("drain now ({} ahead)", crate::units::duration::format(std::time::Duration::from_secs(t.lead_s)))
    } else {
        "drain".to_string()
    }];
    if ahead {
        steps.push(format!("at {}:", st.at.format("%H:%M")));
    }
    for n in &preempt {
        steps.push(format!("preempt {} {}", n.workload, n.name));
    }
    let others = st.requires.len() - preempt.len();
    if !preempt.is_empty() {
        steps.push(format!("wait until empty (at most {} min)", EMPTY_WITHIN_S / 60));
    } else if others > 0 || ahead {
        steps.push("its work must have ended by then (else left for later)".into());
    }
    steps.push(format!("repartition to {short}"));
    steps.push("undrain".into());
    for n in &preempt {
        let who = format!("{} {}", n.workload, n.name);
        if !g.preempts.contains(&who) {
            g.preempts.push(who);
        }
    }
    Ok(CardChange { card: c.card.clone(), at: st.at, layout, drain: true, preempt, repartition: None, steps })
}

/// The same run: the same change on the same cards with the same steps (a plan confirmed a
/// while ago is run only if planning it now gives this).
pub fn same_run(a: &GroupPlan, b: &GroupPlan) -> bool {
    let key = |g: &GroupPlan| {
        g.cards
            .iter()
            .map(|c| {
                let ids: Vec<&str> = c.preempt.iter().map(|n| n.workload.as_str()).collect();
                // A change due now is due at every instant; one ahead, at its time.
                let at = (c.at > g.at || g.ahead).then_some(c.at);
                (
                    c.card.clone(),
                    c.layout.clone(),
                    c.drain,
                    at,
                    ids.join(","),
                    c.repartition.as_ref().map(|p| p.steps.clone()),
                )
            })
            .collect::<Vec<_>>()
    };
    a.schedule == b.schedule
        && a.window == b.window
        && a.ahead == b.ahead
        && (!a.ahead || a.at == b.at)
        && key(a) == key(b)
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
