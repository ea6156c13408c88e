//! A schedule's change for its whole group of cards as one plan, confirmed once, and its run
//! card by card through the one action runner: drain ahead (by `lead`, or before a
//! preemption), wait for the work to end or preempt eligible training, repartition with
//! placements (the runner verifies the result), undrain what it drained. The first failure
//! stops the run, gives back what it drained and says where it stood. Pure: the console's loop
//! drives it, feeding it the fleet, the clock and how each action went.

use chrono::{DateTime, Utc};

use super::unattended::Went;
use super::{Need, Step, Timeline};
use crate::actions::{Action, Plan};
use crate::model::schedule::Running;
use crate::model::{CardRef, Fleet};

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
            "schedule {}: window {} {when} on {} cards, {} idle{more}{note}",
            self.schedule, self.window, self.cards, self.ready
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
        let steps: Vec<&Step> = t.cards.iter().filter_map(|c| live(&c.steps, now)).collect();
        let Some(first) = steps.iter().min_by_key(|s| s.at) else { continue };
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
    propose: &dyn Fn(&Action) -> Result<Plan, String>,
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
        let target = c.card.to_string();
        let (layout, short) = placed(fleet, &c.card, &st.layout);
        let refused = |a: &Action| match propose(a) {
            Ok(p) if !p.allowed() => Some(crate::actions::guard::joined(&p.blockers)),
            Ok(_) => None,
            Err(e) => Some(e),
        };
        let cannot = !["ready", "waits", "preempts"].iter().any(|r| st.readiness.starts_with(r));
        if cannot {
            g.left.push((c.card.clone(), st.readiness.clone()));
            continue;
        }
        let ahead = st.at > now;
        let preempt: Vec<Need> =
            st.requires.iter().filter(|n| t.running == Running::Preempt && n.preemptible).cloned().collect();
        if !ahead && st.readiness.starts_with("ready") {
            let action = Action::Repartition { target: target.clone(), layout: st.layout.clone() };
            match propose(&action) {
                Ok(p) if p.allowed() && p.nothing_to_do.is_none() => {
                    for w in &p.warnings {
                        if !g.warnings.contains(w) {
                            g.warnings.push(w.clone());
                        }
                    }
                    let steps = vec![
                        format!("repartition to {short}"),
                        format!("{} steps via {}", p.steps.len(), p.backend.as_str()),
                    ];
                    g.cards.push(CardChange {
                        card: c.card.clone(),
                        at: st.at,
                        layout,
                        drain: false,
                        preempt,
                        repartition: Some(p),
                        steps,
                    });
                }
                Ok(p) if !p.allowed() => g.left.push((c.card.clone(), crate::actions::guard::joined(&p.blockers))),
                Ok(p) => g.left.push((c.card.clone(), p.nothing_to_do.unwrap_or_default())),
                Err(e) => g.left.push((c.card.clone(), e)),
            }
            continue;
        }
        if !ahead && !st.readiness.starts_with("preempts") {
            // Due, busy, and nothing may be preempted: it changes once its work ends.
            g.left.push((c.card.clone(), format!("{} (running = {})", st.readiness, t.running.as_str())));
            continue;
        }
        let drain = Action::Drain { target: target.clone() };
        // A preemption ahead of its change is judged then (the minimum runtime may pass).
        let now_preempts = if ahead { &[][..] } else { &preempt[..] };
        let why: Vec<String> = std::iter::once(drain)
            .chain(now_preempts.iter().map(|n| Action::Preempt { workload: n.workload.clone(), force: false }))
            .filter_map(|a| refused(&a))
            .collect();
        if !why.is_empty() {
            g.left.push((c.card.clone(), why.join("; ")));
            continue;
        }
        let mut steps = vec![if ahead {
            format!("drain now ({} ahead)", crate::config::duration::format(std::time::Duration::from_secs(t.lead_s)))
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
        g.cards.push(CardChange {
            card: c.card.clone(),
            at: st.at,
            layout,
            drain: true,
            preempt,
            repartition: None,
            steps,
        });
    }
    // Idle cards first (nothing requeued elsewhere lands on them meanwhile), then the rest;
    // each group in node order, so a node's cards are done together.
    g.cards.sort_by(|a, b| (a.drain, &a.card.node, a.card.index).cmp(&(b.drain, &b.card.node, b.card.index)));
    g.window.clone_from(&first.window);
    g.at = first.at;
    g.ahead = first.at > now;
    Some(g)
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

/// Where one card of a running group stands.
#[derive(Debug, Clone, PartialEq)]
pub enum CardState {
    Waiting,
    Drained,
    /// Preempted; waiting for it to empty until then.
    Emptying(DateTime<Utc>),
    Changed,
    /// Not changed in this run, and why (busy at the change, a holder not in the plan).
    Left(String),
    Failed(String),
}

impl CardState {
    pub fn text(&self) -> String {
        match self {
            Self::Waiting => "waiting".into(),
            Self::Drained => "drained".into(),
            Self::Emptying(until) => format!("preempted: emptying (until {})", until.format("%H:%M")),
            Self::Changed => "changed".into(),
            Self::Left(why) => format!("left for later: {why}"),
            Self::Failed(why) => format!("FAILED: {why}"),
        }
    }
}

/// What the loop must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Plan, approve and run this action, then `record` how it went.
    Run(Action),
    /// The action is the one the operator saw: approve it as shown (`record` after).
    RunShown(Box<Plan>),
    /// Nothing to do until the fleet or the clock moves (this is what it waits for).
    Wait(String),
    /// An action is under way.
    Busy,
    Finished,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Drain(usize),
    Card(usize),
    GiveBack,
    Finished,
}

#[derive(Debug, Clone, PartialEq)]
enum Pending {
    Drain,
    Preempt(String),
    Repartition,
    Undrain,
}

/// A group change under way.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupRun {
    pub plan: GroupPlan,
    pub state: Vec<CardState>,
    /// Drained by this run and not given back yet.
    ours: Vec<bool>,
    /// Workloads this run preempted (a job on several cards is preempted once).
    preempted: Vec<String>,
    phase: Phase,
    in_flight: Option<(usize, Pending)>,
    /// Why the run stops early (the first failure, or the operator).
    stopping: Option<String>,
    /// Each action with how it went, oldest first.
    pub log: Vec<String>,
    /// What it waits for now.
    pub waiting: Option<String>,
}

impl GroupRun {
    pub fn new(plan: GroupPlan) -> Self {
        let n = plan.cards.len();
        Self {
            plan,
            state: vec![CardState::Waiting; n],
            ours: vec![false; n],
            preempted: Vec::new(),
            phase: Phase::Drain(0),
            in_flight: None,
            stopping: None,
            log: Vec::new(),
            waiting: None,
        }
    }

    pub fn finished(&self) -> bool {
        self.phase == Phase::Finished
    }

    pub fn busy(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Stop after the action under way; what it drained is given back.
    pub fn stop(&mut self, why: &str) {
        if self.stopping.is_none() && !self.finished() {
            self.stopping = Some(why.to_string());
        }
    }

    /// Cards this run drained and has not given back.
    pub fn still_drained(&self) -> Vec<CardRef> {
        self.plan.cards.iter().zip(&self.ours).filter(|(_, o)| **o).map(|(c, _)| c.card.clone()).collect()
    }

    /// The card the run is at, if any.
    pub fn at_card(&self) -> Option<&CardRef> {
        let i = match (self.in_flight.as_ref(), self.phase) {
            (Some((i, _)), _) => *i,
            (None, Phase::Card(i) | Phase::Drain(i)) => i,
            _ => return None,
        };
        self.plan.cards.get(i).map(|c| &c.card)
    }

    /// The next thing to do, given the fleet and the clock now.
    pub fn next(&mut self, fleet: &Fleet, now: DateTime<Utc>) -> Next {
        loop {
            if self.in_flight.is_some() {
                return Next::Busy;
            }
            self.waiting = None;
            match self.phase {
                Phase::Finished => return Next::Finished,
                Phase::Drain(i) if self.stopping.is_some() || i >= self.plan.cards.len() => {
                    self.phase = if self.stopping.is_some() { Phase::GiveBack } else { Phase::Card(0) };
                }
                Phase::Drain(i) => {
                    if !self.plan.cards[i].drain {
                        self.phase = Phase::Drain(i + 1);
                        continue;
                    }
                    self.in_flight = Some((i, Pending::Drain));
                    return Next::Run(Action::Drain { target: self.plan.cards[i].card.to_string() });
                }
                Phase::Card(i) if self.stopping.is_some() || i >= self.plan.cards.len() => self.phase = Phase::GiveBack,
                Phase::Card(i) => {
                    if let Some(n) = self.card_step(i, fleet, now) {
                        return n;
                    }
                }
                Phase::GiveBack => match self.ours.iter().position(|&o| o) {
                    Some(i) => {
                        self.in_flight = Some((i, Pending::Undrain));
                        let target = self.plan.cards[i].card.to_string();
                        return Next::Run(Action::Undrain { target, force: false });
                    }
                    None => self.phase = Phase::Finished,
                },
            }
        }
    }

    /// Card `i`'s next step, or `None` when the phase moved on (look again).
    fn card_step(&mut self, i: usize, fleet: &Fleet, now: DateTime<Utc>) -> Option<Next> {
        let c = &self.plan.cards[i];
        let target = c.card.to_string();
        if matches!(self.state[i], CardState::Changed | CardState::Left(_) | CardState::Failed(_)) {
            // A node's cards are given back once the run is done with all of them: where a
            // drain acts on the whole node (a cordon, a Slurm drain), undraining one card
            // would release the others while they wait.
            let node = &c.card.node;
            let later = self.plan.cards[i + 1..].iter().any(|x| x.card.node == *node);
            if !later && let Some(j) = (0..=i).find(|&j| self.ours[j] && self.plan.cards[j].card.node == *node) {
                self.in_flight = Some((j, Pending::Undrain));
                let target = self.plan.cards[j].card.to_string();
                return Some(Next::Run(Action::Undrain { target, force: false }));
            }
            self.phase = Phase::Card(i + 1);
            return None;
        }
        if now < c.at {
            let w = format!("{target}: waiting for the change at {}", c.at.format("%H:%M UTC"));
            self.waiting = Some(w.clone());
            return Some(Next::Wait(w));
        }
        let Some(card) = fleet.card(&c.card) else {
            self.fail(i, "the card is gone from every source".into());
            return None;
        };
        let planned: Vec<&str> = c.preempt.iter().map(|n| n.workload.as_str()).collect();
        let deadline = match self.state[i] {
            CardState::Emptying(until) => until,
            _ => c.at,
        };
        let outsider = card.holders().any(|h| !planned.contains(&h)) || card.in_use_by_unknown();
        if outsider {
            if now < deadline {
                let w = format!("{target}: waiting for its work to end (until {})", deadline.format("%H:%M UTC"));
                self.waiting = Some(w.clone());
                return Some(Next::Wait(w));
            }
            let n = card.holders().filter(|h| !planned.contains(h)).count();
            self.state[i] = CardState::Left(if n > 0 {
                format!("{n} holders not in the plan are still on it")
            } else {
                "still in use at the change".into()
            });
            return None;
        }
        if let Some(w) = card.holders().find(|h| planned.contains(h) && !self.preempted.iter().any(|p| p == h)) {
            self.in_flight = Some((i, Pending::Preempt(w.to_string())));
            return Some(Next::Run(Action::Preempt { workload: w.to_string(), force: false }));
        }
        if card.holders().next().is_some() || !card.is_idle() || !card.processes.is_empty() {
            if now < deadline {
                let w = format!("{target}: waiting for it to empty (until {})", deadline.format("%H:%M UTC"));
                self.waiting = Some(w.clone());
                return Some(Next::Wait(w));
            }
            self.state[i] = CardState::Left("did not empty in time".into());
            return None;
        }
        self.in_flight = Some((i, Pending::Repartition));
        Some(match &c.repartition {
            Some(p) => Next::RunShown(Box::new(p.clone())),
            None => Next::Run(Action::Repartition { target, layout: c.layout.clone() }),
        })
    }

    fn fail(&mut self, i: usize, why: String) {
        let card = &self.plan.cards[i].card;
        self.stop(&format!("stopped at {card}: {why}"));
        self.state[i] = CardState::Failed(why);
    }

    /// How the action `next` asked for went (`message`: the runner's words).
    pub fn record(&mut self, went: Went, message: &str, now: DateTime<Utc>) {
        let Some((i, pending)) = self.in_flight.take() else { return };
        let card = self.plan.cards[i].card.to_string();
        let verb = match pending {
            Pending::Drain => "drain",
            Pending::Preempt(_) => "preempt",
            Pending::Repartition => "repartition",
            Pending::Undrain => "undrain",
        };
        let how = match went {
            Went::Done => "done",
            Went::NothingToDo => "nothing to do",
            Went::NotDone => "NOT DONE",
        };
        let what = match &pending {
            Pending::Preempt(w) => format!("{w} (on {card})"),
            _ => card.clone(),
        };
        self.log.push(format!("{verb} {what}: {how}: {message}"));
        match (pending, went) {
            (Pending::Drain, Went::Done) => {
                self.ours[i] = true;
                self.state[i] = CardState::Drained;
                self.phase = Phase::Drain(i + 1);
            }
            (Pending::Drain, Went::NothingToDo) => {
                self.state[i] = CardState::Drained;
                self.phase = Phase::Drain(i + 1);
            }
            (Pending::Preempt(w), Went::Done | Went::NothingToDo) => {
                self.preempted.push(w);
                self.state[i] = CardState::Emptying(now + chrono::Duration::seconds(EMPTY_WITHIN_S));
            }
            (Pending::Repartition, Went::Done | Went::NothingToDo) => self.state[i] = CardState::Changed,
            (Pending::Undrain, Went::Done | Went::NothingToDo) => self.ours[i] = false,
            (Pending::Undrain, Went::NotDone) => {
                // Not tried again: the summary names it, for the operator to undrain by hand.
                self.ours[i] = false;
                self.log.push(format!("{card} is still drained: tessera undrain {card}"));
                self.stop(&format!("stopped at {card}: the undrain did not happen"));
            }
            (_, Went::NotDone) => self.fail(i, format!("the {verb} did not happen: {message}")),
        }
    }

    /// Where the run stands, in one line.
    pub fn summary(&self) -> String {
        let n = self.plan.cards.len();
        let changed = self.state.iter().filter(|s| **s == CardState::Changed).count();
        let left = self.state.iter().filter(|s| matches!(s, CardState::Left(_))).count();
        let mut out =
            format!("schedule {} window {}: {changed} of {n} cards changed", self.plan.schedule, self.plan.window);
        if left > 0 {
            out.push_str(&format!(", {left} left for later"));
        }
        if let Some(s) = &self.stopping {
            out.push_str(&format!("; {s}"));
        }
        if !self.finished() {
            out.push_str(" (running)");
        }
        out
    }
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
