//! The group change on the simulated cluster: the plan (who is changed, preempted, left), a
//! run card by card against the simulator (no change on a card with holders, no inference
//! preempted, drains given back), drains ahead by `lead`, and a failure that stops the run.

use super::*;
use crate::actions::Env;
use crate::actions::run::Runner;
use crate::schedule::unattended::Went;
use crate::sources::SourceUpdate;
use crate::sources::sim::{Sim, SimConfig};
use chrono::TimeZone;

/// The shared day/night schedule, with a one-hour `min_hold`.
fn schedule() -> String {
    include_str!("../../tests/fixtures/schedules/h100-day-night.toml").replace("min_hold = \"4h\"", "min_hold = \"1h\"")
}

/// One window only: before 20:00 no window holds, so nothing is overdue.
const NIGHT_ONLY: &str = r#"
[[schedule]]
name = "nightly"
nodes = ["gpu-h100-*"]
model = "H100-80GB"
lead = "15m"
running = "wait"
[[schedule.window]]
name = "night"
hours = "20:00-08:00"
mig_config = "all-1g.10gb"
"#;

const MIN_RUNTIME: std::time::Duration = std::time::Duration::from_secs(1800);

struct World {
    sim: Sim,
    store: crate::store::Store,
    cfg: crate::config::Config,
    runner: Runner,
}

impl World {
    fn new(schedule: &str, start: DateTime<Utc>) -> Self {
        let cfg = crate::config::parse(schedule, "t.toml").unwrap_or_else(|e| panic!("{e}"));
        let mut store = crate::store::Store::new();
        store.register("sim", crate::model::SourceKind::Simulated, std::time::Duration::from_secs(1));
        let runner = Runner::new(&cfg, Env::default()).with_audit(None);
        let mut w = Self { sim: Sim::new(SimConfig::new(42, start)), store, cfg, runner };
        w.refresh();
        w
    }

    fn refresh(&mut self) {
        let at = self.sim.now();
        let update = SourceUpdate {
            source: "sim".into(),
            kind: crate::model::SourceKind::Simulated,
            at,
            result: Ok(self.sim.snapshot()),
        };
        self.store.apply(update, at);
    }

    fn fleet(&self) -> &Fleet {
        self.store.fleet()
    }

    fn now(&self) -> DateTime<Utc> {
        self.sim.now()
    }

    fn group(&self) -> Option<GroupPlan> {
        let t = super::super::timelines(&self.cfg.schedules, self.fleet(), self.now(), MIN_RUNTIME, 24);
        plan(&t[0], self.fleet(), self.now(), &|a| self.runner.check(a, self.fleet()))
    }

    /// Run `action` on the simulator as the runner's executor would.
    fn act(&mut self, action: &Action) -> (Went, String) {
        let op = super::super::test_sim::sim_op(action);
        let went = match self.sim.apply(&op) {
            Ok(m) => (Went::Done, m),
            Err(e) => (Went::NotDone, e.to_string()),
        };
        self.refresh();
        went
    }
}

fn at(h: u32, m: u32) -> DateTime<Utc> {
    // A Monday.
    Utc.with_ymd_and_hms(2026, 3, 2, h, m, 0).single().unwrap_or_default()
}

#[test]
fn the_plan_changes_idle_cards_preempts_only_eligible_training_and_says_why_others_wait() {
    let w = World::new(&schedule(), at(14, 30));
    let g = w.group().unwrap_or_else(|| panic!("a change is due"));
    assert_eq!((g.schedule.as_str(), g.window.as_str(), g.at), ("h100", "day", at(14, 30)));
    assert!(!g.cards.is_empty());
    for c in &g.cards {
        let card = w.fleet().card(&c.card).unwrap_or_else(|| panic!("{}", c.card));
        if c.drain {
            // A busy card: drained, its eligible training preempted, then changed.
            assert!(!c.preempt.is_empty() && c.repartition.is_none(), "{c:?}");
            assert!(c.steps.iter().any(|s| s.starts_with("preempt ")), "{:?}", c.steps);
        } else {
            assert!(card.holders().next().is_none(), "an idle card: {c:?}");
            let p = c.repartition.as_ref().unwrap_or_else(|| panic!("the runner's plan"));
            assert!(p.allowed());
        }
        assert_eq!(c.layout, (0..7).map(|s| format!("1g.10gb@{s}")).collect::<Vec<_>>().join(","));
        assert_eq!(c.steps.iter().filter(|s| *s == "repartition to 1g.10gb@0,1,2,3,4,5,6").count(), 1, "{:?}", c.steps);
    }
    for n in g.cards.iter().flat_map(|c| &c.preempt) {
        let wl = w.fleet().workload(&n.workload).unwrap_or_else(|| panic!("{}", n.workload));
        assert_eq!(wl.kind, crate::model::WorkloadKind::Training, "only training is preempted: {n:?}");
    }
    assert_eq!(g.preempts.len(), {
        let mut ids: Vec<&str> = g.cards.iter().flat_map(|c| c.preempt.iter().map(|n| n.workload.as_str())).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    });
    // Every covered card with a change is in the run or left with a reason.
    let due = super::super::timelines(&w.cfg.schedules, w.fleet(), w.now(), MIN_RUNTIME, 24)[0]
        .cards
        .iter()
        .filter(|c| c.steps.first().is_some_and(|s| s.due))
        .count();
    assert_eq!(g.cards.len() + g.left.len(), due);
    assert!(g.left.iter().all(|(_, why)| !why.is_empty()));
}

#[test]
fn a_run_changes_card_by_card_never_with_holders_and_gives_back_its_drains() {
    let mut w = World::new(&schedule(), at(14, 30));
    let g = w.group().unwrap_or_else(|| panic!("a change is due"));
    let planned = g.cards.len();
    let mut run = GroupRun::new(g);
    let (mut drained, mut undrained) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    for _ in 0..2000 {
        let fleet = w.fleet().clone();
        let action = match run.next(&fleet, w.now()) {
            Next::Finished => break,
            Next::Busy => panic!("nothing is in flight between records"),
            Next::Wait(_) => {
                w.sim.advance(std::time::Duration::from_secs(30));
                w.refresh();
                continue;
            }
            Next::Run(a) => a,
            Next::RunShown(p) => p.action.clone(),
        };
        match &action {
            Action::Repartition { target, .. } => {
                let r = crate::act::Target::parse(target);
                let crate::act::Target::Card(r) = r else { panic!("{target}") };
                let card = fleet.card(&r).unwrap_or_else(|| panic!("{target}"));
                assert!(card.holders().next().is_none(), "changed {target} with holders");
            }
            Action::Preempt { workload, .. } => {
                let wl = fleet.workload(workload).unwrap_or_else(|| panic!("{workload}"));
                assert_eq!(wl.kind, crate::model::WorkloadKind::Training, "preempted {workload}");
            }
            Action::Drain { target, .. } => {
                drained.insert(target.clone());
            }
            Action::Undrain { target, .. } => {
                undrained.insert(target.clone());
                // A node's cards are given back only when the run is done with all of them.
                let node = target.rsplit_once('/').map_or("", |(n, _)| n);
                for (c, s) in run.plan.cards.iter().zip(&run.state) {
                    if c.card.node == node {
                        assert!(
                            matches!(s, CardState::Changed | CardState::Left(_) | CardState::Failed(_)),
                            "undrained {target} while {} is {s:?}",
                            c.card
                        );
                    }
                }
            }
        }
        let (went, msg) = w.act(&action);
        run.record(went, &msg, w.now());
    }
    assert!(run.finished(), "{} / {:?} / {:?}", run.summary(), run.waiting, run.state);
    // Each workload preempted once, however many of its cards wait for it.
    let preempted: Vec<&str> =
        run.log.iter().filter_map(|l| l.strip_prefix("preempt ")).filter_map(|l| l.split(' ').next()).collect();
    let once: std::collections::BTreeSet<&str> = preempted.iter().copied().collect();
    assert!(!preempted.is_empty() && preempted.len() == once.len(), "{:?}", run.log);
    assert_eq!(drained, undrained, "every drain is given back");
    let changed = run.state.iter().filter(|s| **s == CardState::Changed).count();
    assert!(changed > 0 && changed <= planned, "{}", run.summary());
    assert!(run.summary().contains(&format!("{changed} of {planned} cards changed")), "{}", run.summary());
    for (c, s) in run.plan.cards.iter().zip(&run.state) {
        let card = w.fleet().card(&c.card).unwrap_or_else(|| panic!("{}", c.card));
        if *s == CardState::Changed {
            assert_eq!(card.layout_text(), c.layout, "{}", c.card);
        }
        assert!(!card.draining, "{} is still drained", c.card);
    }
}

#[test]
fn ahead_of_a_change_it_drains_first_and_waits_for_the_window() {
    let mut w = World::new(NIGHT_ONLY, at(19, 50));
    let g = w.group().unwrap_or_else(|| panic!("night is within lead"));
    assert_eq!((g.window.as_str(), g.at), ("night", at(20, 0)));
    assert!(g.preempts.is_empty(), "running = wait preempts nothing");
    assert!(!g.cards.is_empty() && g.cards.iter().all(|c| c.drain && c.preempt.is_empty()), "{:?}", g.cards);
    assert!(g.cards.iter().all(|c| c.steps[0] == "drain now (15m ahead)"), "{:?}", g.cards[0].steps);
    let n = g.cards.len();
    let mut run = GroupRun::new(g);
    for _ in 0..n {
        let Next::Run(a @ Action::Drain { .. }) = run.next(w.fleet(), w.now()) else { panic!("drains come first") };
        let (went, msg) = w.act(&a);
        run.record(went, &msg, w.now());
    }
    assert!(matches!(run.next(w.fleet(), w.now()), Next::Wait(ref why) if why.contains("20:00 UTC")));
}

#[test]
fn the_first_failure_stops_the_run_and_gives_back_the_drains() {
    let mut w = World::new(&schedule(), at(14, 30));
    let g = w.group().unwrap_or_else(|| panic!("due"));
    let mut run = GroupRun::new(g);
    let mut undrains = 0;
    let mut failed_at = None;
    for _ in 0..2000 {
        let fleet = w.fleet().clone();
        let a = match run.next(&fleet, w.now()) {
            Next::Finished => break,
            Next::Wait(_) => {
                w.sim.advance(std::time::Duration::from_secs(30));
                w.refresh();
                continue;
            }
            Next::Run(a) => a,
            Next::RunShown(p) => p.action.clone(),
            Next::Busy => panic!("busy"),
        };
        if let (Action::Repartition { target, .. }, None) = (&a, &failed_at) {
            failed_at = Some(target.clone());
            run.record(Went::NotDone, "the backend said no", w.now());
            continue;
        }
        assert!(failed_at.is_none() || matches!(a, Action::Undrain { .. }), "after the failure only give-backs: {a:?}");
        undrains += usize::from(matches!(a, Action::Undrain { .. }));
        let (went, msg) = w.act(&a);
        run.record(went, &msg, w.now());
    }
    let at_card = failed_at.unwrap_or_else(|| panic!("a repartition was asked for"));
    assert!(run.finished());
    let s = run.summary();
    assert!(s.contains(&format!("stopped at {at_card}: the repartition did not happen: the backend said no")), "{s}");
    let drains = run.plan.cards.iter().filter(|c| c.drain).count();
    assert_eq!(undrains, drains, "{s}");
    assert!(run.log.iter().any(|l| l.contains("NOT DONE")));
}

#[test]
fn the_operator_stops_it_after_the_action_under_way() {
    let mut w = World::new(&schedule(), at(14, 30));
    let mut run = GroupRun::new(w.group().unwrap_or_else(|| panic!("due")));
    let first = match run.next(w.fleet(), w.now()) {
        Next::Run(a) => a,
        Next::RunShown(p) => p.action.clone(),
        other => panic!("{other:?}"),
    };
    run.stop("stopped by the operator");
    assert_eq!(run.next(w.fleet(), w.now()), Next::Busy, "the action under way finishes first");
    let (went, msg) = w.act(&first);
    run.record(went, &msg, w.now());
    // Only give-backs follow.
    loop {
        match run.next(w.fleet(), w.now()) {
            Next::Finished => break,
            Next::Run(a @ Action::Undrain { .. }) => {
                let (went, msg) = w.act(&a);
                run.record(went, &msg, w.now());
            }
            other => panic!("after stop: {other:?}"),
        }
    }
    assert!(run.summary().contains("stopped by the operator"), "{}", run.summary());
}

#[test]
fn the_banner_names_the_first_change_and_counts_idle_cards() {
    let w = World::new(&schedule(), at(14, 30));
    let t = super::super::timelines(&w.cfg.schedules, w.fleet(), w.now(), MIN_RUNTIME, 24);
    let b = banner(&t, w.now()).unwrap_or_else(|| panic!("due"));
    assert_eq!((b.schedule.as_str(), b.window.as_str(), b.more), ("h100", "day", 0));
    assert!(b.ready <= b.cards && b.cards <= 16);
    assert!(b.text(w.now()).starts_with("schedule h100: window day due now on "), "{}", b.text(w.now()));
    // Within lead of a change: when, and that drains start now; before the lead, nothing.
    let w = World::new(NIGHT_ONLY, at(19, 50));
    let t = super::super::timelines(&w.cfg.schedules, w.fleet(), w.now(), MIN_RUNTIME, 24);
    let b = banner(&t, w.now()).unwrap_or_else(|| panic!("night within lead"));
    assert!(b.text(w.now()).contains("window night at 20:00 UTC (in 10 min, drain ahead now)"), "{}", b.text(w.now()));
    let early = at(19, 40);
    let t = super::super::timelines(&w.cfg.schedules, w.fleet(), early, MIN_RUNTIME, 24);
    assert_eq!(banner(&t, early), None);
}

#[test]
fn a_plan_is_the_same_run_only_while_nothing_changed() {
    let w = World::new(&schedule(), at(14, 30));
    let a = w.group().unwrap_or_else(|| panic!("due"));
    let b = w.group().unwrap_or_else(|| panic!("due"));
    assert!(same_run(&a, &b));
    let mut fewer = b.clone();
    fewer.cards.pop();
    assert!(!same_run(&a, &fewer), "a card less is another run");
    let mut other = b;
    other.window = "night".into();
    assert!(!same_run(&a, &other));
    // Idle cards come first, each group in node order.
    let drains: Vec<bool> = a.cards.iter().map(|c| c.drain).collect();
    assert!(drains.windows(2).all(|x| x[0] <= x[1]), "{drains:?}");
}

#[test]
fn a_plan_holds_one_change_and_leaves_cards_due_for_another() {
    // Day overdue on some cards at 19:50 while night is within lead on others: one run each.
    let w = World::new(&schedule(), at(19, 50));
    let g = w.group().unwrap_or_else(|| panic!("a change"));
    assert!(g.cards.iter().all(|c| c.at == g.at), "{:?}", g.cards);
    if g.window == "day" {
        assert!(g.left.iter().all(|(_, why)| !why.contains("window day")), "{:?}", g.left);
    }
}

/// Two changes live at once (the night's due now on 2 cards, the day's drains started on 14
/// more): the banner names one change and counts its cards only. ("window night due now on 16
/// cards" while the night change had 2.)
#[test]
fn the_banner_counts_the_cards_of_the_change_it_names() {
    use crate::model::CardRef;
    use crate::schedule::{CardPlan, Step, Timeline};
    let now = at(7, 55);
    let step = |window: &str, at: chrono::DateTime<chrono::Utc>| Step {
        at,
        drain_at: at - chrono::Duration::minutes(15),
        window: window.into(),
        layout: "whole".into(),
        no_op: false,
        due: at <= now,
        skipped: None,
        requires: Vec::new(),
        readiness: "ready".into(),
        serves_now: 0,
        serves_after: 0,
    };
    let card = |i: u32, s: Step| CardPlan {
        card: CardRef::new("gpu-h100-01", i),
        model: "H100-80GB".into(),
        layout_now: "whole".into(),
        window_now: Some("night".into()),
        steps: vec![s],
    };
    let mut cards: Vec<CardPlan> = (0..2).map(|i| card(i, step("night", now))).collect();
    cards.extend((2..16).map(|i| card(i, step("day", at(8, 0)))));
    let t = Timeline {
        schedule: "s".into(),
        timezone: "UTC".into(),
        lead_s: 900,
        min_hold_s: 0,
        running: crate::model::schedule::Running::Wait,
        window_now: Some("night".into()),
        cards,
        conflicts: Vec::new(),
    };
    let b = banner(&[t], now).unwrap_or_else(|| panic!("a banner"));
    assert_eq!((b.window.as_str(), b.cards), ("night", 2), "{}", b.text(now));
}
