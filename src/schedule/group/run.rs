//! A confirmed group change running card by card through the one action runner: every drain
//! first, then per card wait for its time, preempt only the plan's holders still on it, wait
//! for it to empty, repartition (the runner verifies the result); a node's cards are undrained
//! once the run is done with all of them. The first failure stops the run, gives back what it
//! drained and says where it stood. Pure: the console's loop drives it, feeding it the fleet,
//! the clock and how each action went.

use chrono::{DateTime, Utc};

use super::{EMPTY_WITHIN_S, GroupPlan};
use crate::act::{Action, Plan};
use crate::model::{CardRef, Fleet};
use crate::schedule::unattended::Went;

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
                    return Next::Run(Action::Drain { target: self.plan.cards[i].card.to_string(), evict: false });
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
        let mut out = format!(
            "schedule {} window {}: {changed} of {} changed",
            self.plan.schedule,
            self.plan.window,
            crate::units::count(n as u64, "card", "cards")
        );
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
