//! A simulated day under an unattended two-window schedule: changes happen on time on the
//! cards that are idle and once idle on those busy at the change, no change touches a card
//! with holders, nothing is preempted, drains come `lead` ahead and are given back.

use super::*;
use crate::sources::SourceUpdate;
use crate::sources::sim::{Sim, SimConfig, SimOp};
use chrono::TimeZone;

/// The shared day/night schedule, unattended, drained ten minutes ahead.
fn schedule() -> String {
    include_str!("../../tests/fixtures/schedules/h100-day-night.toml")
        .replace("lead = \"15m\"", "lead = \"10m\"")
        .replace("running = \"preempt\"", "unattended = true")
}

fn op(a: &Action) -> SimOp {
    assert!(!matches!(a, Action::Preempt { .. }), "an unattended schedule preempted: {a:?}");
    super::super::test_sim::sim_op(a)
}

#[test]
fn a_simulated_day_under_an_unattended_schedule() {
    let cfg = crate::config::parse(&schedule(), "t.toml").unwrap_or_else(|e| panic!("{e}"));
    let start = Utc.with_ymd_and_hms(2026, 3, 2, 14, 0, 0).single().unwrap_or_default();
    let mut sim = Sim::new(SimConfig::new(42, start));
    let mut store = crate::store::Store::new();
    store.register("sim", crate::model::SourceKind::Simulated, std::time::Duration::from_secs(1));
    let mut state = State::default();
    let (mut changes, mut drains, mut undrains, mut reports) = (Vec::new(), 0, 0, 0);
    let step = std::time::Duration::from_secs(120);
    for _ in 0..(24 * 30) {
        sim.advance(step);
        let at = sim.now();
        store.apply(
            SourceUpdate {
                source: "sim".into(),
                kind: crate::model::SourceKind::Simulated,
                at,
                result: Ok(sim.snapshot()),
            },
            at,
        );
        let fleet = store.fleet().clone();
        let mut todo = decide(&cfg.schedules, &fleet, at, std::time::Duration::from_secs(1800), &mut state);
        let mut i = 0;
        while i < todo.len() {
            let d = todo[i].clone();
            i += 1;
            let Decision::Act { action, .. } = &d else {
                reports += 1;
                continue;
            };
            if let Action::Repartition { target, .. } = action {
                let (n, idx) = target.rsplit_once('/').unwrap_or_default();
                let card = fleet.card(&CardRef::new(n, idx.parse().unwrap_or(0))).unwrap_or_else(|| panic!("{target}"));
                assert!(card.holders().next().is_none(), "a change touched {target} with holders at {at}");
                changes.push((at, target.clone()));
            }
            drains += usize::from(matches!(action, Action::Drain { .. }));
            undrains += usize::from(matches!(action, Action::Undrain { .. }));
            let went = match sim.apply(&op(action)) {
                Ok(_) => Went::Done,
                Err(_) => Went::NotDone,
            };
            todo.extend(state.record(&d, went, at));
        }
    }
    // Changes land within a tick of 20:00 and of 08:00 (or at the start, for the day window
    // already in effect at 14:00) on the cards idle then, and later on cards busy at the start,
    // once they are idle (they were skipped for the whole window), on idle cards only.
    let hours: std::collections::BTreeSet<u32> = changes.iter().map(|(t, _)| chrono::Timelike::hour(t)).collect();
    assert!(hours.contains(&20) && hours.contains(&8), "changes at {hours:?}");
    assert!(
        changes.iter().any(|(t, _)| ![14, 20, 8].contains(&chrono::Timelike::hour(t))),
        "no card busy at a change was changed once idle: {changes:?}"
    );
    assert!(drains > 0 && undrains > 0, "drains {drains}, undrains {undrains}");
    // One change per card per window at most (a night window belongs to the day it began).
    let occurrence = |t: &DateTime<Utc>| {
        let h = chrono::Timelike::hour(t);
        let day = if h < 8 { t.date_naive().pred_opt().unwrap_or_default() } else { t.date_naive() };
        (day, (8..20).contains(&h))
    };
    let mut per: std::collections::BTreeMap<(String, chrono::NaiveDate, bool), usize> = Default::default();
    for (t, card) in &changes {
        let (d, w) = occurrence(t);
        *per.entry((card.clone(), d, w)).or_default() += 1;
    }
    assert!(per.values().all(|&n| n == 1), "{per:?}");
    // What tessera still keeps drained at the end waits for its work to end.
    let fleet = store.fleet();
    for c in &state.drained {
        assert!(fleet.card(c).is_some_and(|k| k.holders().next().is_some()), "{c} kept drained while idle");
    }
    // Cards busy at a change are reported.
    assert!(reports > 0, "no busy card was ever reported");
}

#[test]
fn what_the_loop_learns_from_each_result() {
    let now = Utc.with_ymd_and_hms(2026, 3, 2, 20, 0, 0).single().unwrap_or_default();
    let card = CardRef::new("n", 0);
    let act = |action: Action, start: Option<DateTime<Utc>>| Decision::Act {
        card: card.clone(),
        action,
        why: String::new(),
        window_start: start,
    };
    let mut s = State::default();
    // A drain the runner found done already (an operator's) is not ours to undo.
    assert!(
        s.record(&act(Action::Drain { target: "n/0".into(), evict: false }, None), Went::NothingToDo, now).is_empty()
    );
    assert!(s.drained.is_empty());
    s.record(&act(Action::Drain { target: "n/0".into(), evict: false }, None), Went::Done, now);
    assert!(s.drained.contains(&card));
    // A refused change skips the window, says so once, and gives the card back.
    let change = act(Action::Repartition { target: "n/0".into(), layout: "whole".into() }, Some(now));
    let next = s.record(&change, Went::NotDone, now);
    assert_eq!(s.skipped.get(&card), Some(&now));
    assert!(
        matches!(next.as_slice(), [Decision::Report(_), Decision::Act { action: Action::Undrain { .. }, .. }]),
        "{next:?}"
    );
    let again = s.record(&change, Went::NotDone, now);
    assert!(again.iter().all(|d| !matches!(d, Decision::Report(_))), "reported once: {again:?}");
    s.record(&act(Action::Undrain { target: "n/0".into(), force: false }, None), Went::Done, now);
    assert!(s.drained.is_empty());
    // A change made starts min_hold.
    s.record(&change, Went::Done, now);
    assert_eq!(s.changed.get(&card), Some(&now));
}
